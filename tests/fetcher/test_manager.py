"""ConsumerFetcherManager end to end on the real (session-wide) Kafka broker: leader finding, fetching,
offset resets, restarts from consumed offsets, partitions without a leader, and clean shutdown."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

import pytest
from fetch_helpers import broker_of, create_topic, keyed, produce, settings
from helpers import unique, wait_for

from fetcher_manager.broker import Broker
from fetcher_manager.kafka_wire import OFFSET_OUT_OF_RANGE, FetchResult, KafkaWire, WireError
from fetcher_manager.manager import ConsumerFetcherManager
from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.records import MessageAndMetadata
from fetcher_manager.stream import ChunkQueue, ConsumerTimeoutError, KafkaStream
from fetcher_manager.topic_partition import TopicPartition
from zkconsumer.embedded.kafka import KafkaBroker

pytestmark = pytest.mark.slow


def consume(streams: Sequence[KafkaStream], count: int, timeout: float = 20.0) -> list[MessageAndMetadata]:
    """Take ``count`` messages from the streams (round robin, each built with a short consumer timeout)."""
    got: list[MessageAndMetadata] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} messages arrived"
        for stream in streams:
            try:
                while len(got) < count:
                    got.append(next(iter(stream)))
            except ConsumerTimeoutError:
                pass
    return got


def fetcher_threads(consumer_id: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if consumer_id in t.name]


def test_each_message_once_across_a_restart_from_consumed_offsets(kafka: KafkaBroker) -> None:
    topic = create_topic(kafka.bootstrap, 4)
    total = produce(kafka.bootstrap, topic, keyed(4, 40))
    s = settings(auto_offset_reset="smallest")
    queues = [ChunkQueue(2) for _ in range(2)]
    streams = [KafkaStream(q, consumer_timeout_ms=20) for q in queues]
    infos = [PartitionTopicInfo(topic, p, queues[p % 2], -1, -1) for p in range(4)]
    manager = ConsumerFetcherManager(s, lambda: [broker_of(kafka)])
    try:
        manager.start_connections(infos)
        first = consume(streams, 70)
        assert wait_for(lambda: manager.fetching() == {(topic, p): kafka.broker_id for p in range(4)},
                        10, message="all four partitions held by a fetcher")
        names = {t.name for t in fetcher_threads(s.consumer_id)}
        assert f"{s.consumer_id}-leader-finder-thread" in names
        assert f"ConsumerFetcherThread-{s.consumer_id}-0-{kafka.broker_id}" in names
        assert all(t.daemon for t in fetcher_threads(s.consumer_id))

        manager.stop_connections()  # what a rebalance does, then clear queues and current chunks
        assert manager.fetching() == {}
        assert [t.name for t in fetcher_threads(s.consumer_id)] == []
        for queue, stream in zip(queues, streams, strict=True):
            queue.clear()
            stream.clear()
        restarted = [PartitionTopicInfo(topic, i.partition, i.chunk_queue, i.consumed_offset, i.consumed_offset)
                     for i in infos]
        manager.start_connections(restarted)
        second = consume(streams, total - len(first))
    finally:
        manager.shutdown()
    seen = [(m.partition, m.offset) for m in first + second]
    assert len(seen) == len(set(seen)) == total
    assert sorted(seen) == [(p, o) for p in range(4) for o in range(40)]
    assert all(m.key == f"m-{m.partition}-{m.offset}".encode() for m in first + second)
    assert {i.partition: i.consumed_offset for i in restarted} == dict.fromkeys(range(4), 40)
    with pytest.raises(StopIteration):
        queues[0].put_shutdown_sentinel()
        next(iter(streams[0]))


def test_largest_starts_at_the_log_end(kafka: KafkaBroker) -> None:
    topic = create_topic(kafka.bootstrap, 2)
    produce(kafka.bootstrap, topic, keyed(2, 5, prefix="old"))
    s = settings(auto_offset_reset="largest")
    queue = ChunkQueue(2)
    infos = [PartitionTopicInfo(topic, p, queue, -1, -1) for p in range(2)]
    manager = ConsumerFetcherManager(s, lambda: [broker_of(kafka)])
    try:
        manager.start_connections(infos)
        wait_for(lambda: all(i.fetched_offset == 5 and i.consumed_offset == 5 for i in infos), 10,
                 message="both partitions reset to their end offset 5")
        produce(kafka.bootstrap, topic, keyed(2, 3, prefix="new"))
        got = consume([KafkaStream(queue, 20)], 6)
    finally:
        manager.shutdown()
    assert sorted((m.partition, m.offset) for m in got) == [(p, o) for p in range(2) for o in range(5, 8)]
    assert all(m.key.startswith(b"new-") for m in got)


def test_partition_of_a_missing_topic_waits_for_its_leader(kafka: KafkaBroker) -> None:
    present = create_topic(kafka.bootstrap, 1)
    missing = unique("not-yet")
    produce(kafka.bootstrap, present, [(0, b"k", b"here")])
    s = settings(auto_offset_reset="smallest")
    queue = ChunkQueue(2)
    stream = KafkaStream(queue, 20)
    manager = ConsumerFetcherManager(s, lambda: [broker_of(kafka)])
    try:
        manager.start_connections([PartitionTopicInfo(present, 0, queue, -1, -1),
                                   PartitionTopicInfo(missing, 0, queue, -1, -1)])
        assert [m.value for m in consume([stream], 1)] == [b"here"]
        assert manager.no_leader_partitions() == {(missing, 0)}
        assert set(manager.fetching()) == {(present, 0)}
        finder = f"{s.consumer_id}-leader-finder-thread"
        assert finder in [t.name for t in threading.enumerate()]

        create_topic(kafka.bootstrap, 1, name=missing)
        produce(kafka.bootstrap, missing, [(0, b"k", b"late")])
        assert [m.value for m in consume([stream], 1)] == [b"late"]
        assert manager.no_leader_partitions() == set()
        assert set(manager.fetching()) == {(present, 0), (missing, 0)}
    finally:
        manager.shutdown()


class FirstFetchFailsWire(KafkaWire):
    """Fails the first fetch outright; past the log end the real broker answers OffsetOutOfRange itself."""

    fail_first_fetch = False
    errors_seen: set[int] = set()

    def fetch(self, broker: Broker, offsets: Mapping[TopicPartition, int], max_wait_ms: int, min_bytes: int,
              partition_max_bytes: int, *, max_bytes: int | None = None) -> FetchResult:
        if type(self).fail_first_fetch:
            type(self).fail_first_fetch = False
            raise WireError("injected failure")
        result = super().fetch(broker, offsets, max_wait_ms, min_bytes, partition_max_bytes, max_bytes=max_bytes)
        type(self).errors_seen.update(p.error_code for p in result.partitions.values())
        return result


def test_offset_out_of_range_resets_and_a_failed_fetch_is_retried(kafka: KafkaBroker) -> None:
    topic = create_topic(kafka.bootstrap, 2)
    total = produce(kafka.bootstrap, topic, keyed(2, 10))
    s = settings(auto_offset_reset="smallest")
    queue = ChunkQueue(2)
    infos = [PartitionTopicInfo(topic, p, queue, 1000, 1000) for p in range(2)]
    FirstFetchFailsWire.fail_first_fetch = True
    FirstFetchFailsWire.errors_seen = set()
    manager = ConsumerFetcherManager(s, lambda: [broker_of(kafka)], wire_factory=FirstFetchFailsWire.from_settings)
    try:
        manager.start_connections(infos)
        got = consume([KafkaStream(queue, 20)], total)
    finally:
        manager.shutdown()
    assert sorted((m.partition, m.offset) for m in got) == [(p, o) for p in range(2) for o in range(10)]
    assert [i.consumed_offset for i in infos] == [10, 10]
    assert OFFSET_OUT_OF_RANGE in FirstFetchFailsWire.errors_seen  # the broker's own answer to offset 1000


def test_shutdown_leaves_no_thread_and_is_final(kafka: KafkaBroker) -> None:
    topic = create_topic(kafka.bootstrap, 3)
    s = settings(num_consumer_fetchers=3)
    queue = ChunkQueue(2)
    manager = ConsumerFetcherManager(s, lambda: [broker_of(kafka)])
    manager.start_connections([PartitionTopicInfo(topic, p, queue, -1, -1) for p in range(3)])
    wait_for(lambda: len(manager.fetching()) == 3, 10, message="three partitions fetched")
    wait_for(lambda: manager.lags() == {(topic, p): 0 for p in range(3)}, 10, message="a lag for each partition")
    running = fetcher_threads(s.consumer_id)
    assert len(running) >= 2  # the leader finder and at least one fetcher
    manager.shutdown()
    manager.shutdown()  # idempotent
    manager.stop_connections()
    assert [t.name for t in fetcher_threads(s.consumer_id)] == []
    assert not any(t.is_alive() for t in running)
    with pytest.raises(RuntimeError):
        manager.start_connections([])
