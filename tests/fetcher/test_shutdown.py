"""Stopping the fetcher manager: it returns quickly, no thread it started outlives ``join``, and a leader finder
stuck in the broker source (a ZooKeeper read that nothing can interrupt) does nothing when it comes back."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Sequence

import pytest
from fetch_helpers import broker_of, create_topic, keyed, produce, settings
from helpers import wait_for

from fetcher_manager.broker import Broker
from fetcher_manager.chunks import ChunkQueue
from fetcher_manager.kafka_wire import ClusterMetadata, KafkaWire
from fetcher_manager.manager import ConsumerFetcherManager
from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.settings import FetchSettings
from zkconsumer.embedded.kafka import KafkaBroker

pytestmark = pytest.mark.slow

RELEASE_BOUND_S = 30.0  # how long a blocked broker source waits at most, so a failing test cannot hang


def ours(consumer_id: str) -> list[str]:
    """Names of live threads of this consumer (fetcher threads carry the id after a prefix, as in Kafka)."""
    return sorted(t.name for t in threading.enumerate() if consumer_id in t.name)


class _CountingWire(KafkaWire):
    """Counts wires built and metadata requests sent, per test (reset ``built`` and ``metadata_calls``)."""

    built: list[_CountingWire] = []
    metadata_calls = 0

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.metadata_requests = 0
        type(self).built.append(self)

    def metadata(self, brokers: Sequence[Broker], topics: Collection[str]) -> ClusterMetadata:
        self.metadata_requests += 1
        return super().metadata(brokers, topics)


def _counting(s: FetchSettings) -> KafkaWire:
    return _CountingWire.from_settings(s)


class _BlockingSource:
    """A broker source whose first ``block_calls`` calls wait for ``release`` (a ZooKeeper read that hangs)."""

    def __init__(self, broker: Broker, block_calls: int = 1) -> None:
        self.broker = broker
        self.entered = threading.Event()
        self.release = threading.Event()
        self._to_block = block_calls
        self._lock = threading.Lock()

    def __call__(self) -> list[Broker]:
        with self._lock:
            block, self._to_block = self._to_block > 0, self._to_block - 1
        if block:
            self.entered.set()
            self.release.wait(RELEASE_BOUND_S)
        return [self.broker]


def test_shutdown_does_not_wait_for_a_finder_blocked_in_the_broker_source(kafka: KafkaBroker) -> None:
    topic = create_topic(kafka.bootstrap, 1)
    s = settings()
    before = ours(s.consumer_id)
    source = _BlockingSource(broker_of(kafka))
    _CountingWire.built = []
    manager = ConsumerFetcherManager(s, source, wire_factory=_counting)
    manager.start_connections([PartitionTopicInfo(topic, 0, ChunkQueue(1), -1, -1)])
    assert source.entered.wait(10), "the leader finder never asked for brokers"

    started = time.monotonic()
    manager.shutdown()
    elapsed = time.monotonic() - started
    finder = f"{s.consumer_id}-leader-finder-thread"
    try:
        # the finder stays blocked until the `finally` below: a shutdown that waited for it would never end
        assert elapsed < 5.0, f"shutdown took {elapsed:.2f} s"
        assert [t.name for t in manager.threads()] == [finder]  # still inside the broker source
        assert ours(s.consumer_id) == [*before, finder]
    finally:
        source.release.set()  # what closing the connector's ZooKeeper client does to the pending read
    assert manager.join(2)
    assert manager.threads() == []
    assert ours(s.consumer_id) == before == []
    # Coming back after shutdown, the finder sent no request and started no fetcher (no second wire).
    assert len(_CountingWire.built) == 1
    assert _CountingWire.built[0].metadata_requests == 0


def test_a_finder_stopped_by_a_rebalance_leaves_the_next_generation_alone(kafka: KafkaBroker) -> None:
    topic = create_topic(kafka.bootstrap, 2)
    total = produce(kafka.bootstrap, topic, keyed(2, 5))
    s = settings(auto_offset_reset="smallest")
    source = _BlockingSource(broker_of(kafka))
    _CountingWire.built = []
    manager = ConsumerFetcherManager(s, source, wire_factory=_counting)
    try:
        manager.start_connections([PartitionTopicInfo(topic, 0, ChunkQueue(10), -1, -1)])
        assert source.entered.wait(10)
        manager.stop_connections()  # a rebalance while the first finder is stuck in the broker source
        stale_finder = _CountingWire.built[0]
        infos = [PartitionTopicInfo(topic, p, ChunkQueue(10), -1, -1) for p in range(2)]
        manager.start_connections(infos)
        wait_for(lambda: sum(i.fetched_offset for i in infos) == total, 10, message="the second generation fetching")
        generation = manager.threads()  # both finders (they share a name, as in Kafka) and the new fetcher
        assert len(generation) == 3
        source.release.set()
        wait_for(lambda: len(manager.threads()) == 2, 10, message="the stale finder ending")
        assert stale_finder.metadata_requests == 0
        assert manager.threads() == generation[1:]  # its return did not stop or replace the new threads
        assert len(manager.fetching()) == 2
    finally:
        source.release.set()
        manager.shutdown()
    assert manager.join(5)
    assert ours(s.consumer_id) == []


def test_no_thread_of_ours_survives_shutdown_and_join(kafka: KafkaBroker) -> None:
    topic = create_topic(kafka.bootstrap, 4)
    produce(kafka.bootstrap, topic, keyed(4, 10))
    s = settings(auto_offset_reset="smallest", num_consumer_fetchers=2)
    before = ours(s.consumer_id)
    infos = [PartitionTopicInfo(topic, p, ChunkQueue(1), -1, -1) for p in range(4)]
    manager = ConsumerFetcherManager(s, lambda: [broker_of(kafka)])
    manager.start_connections(infos)
    wait_for(lambda: len(manager.fetching()) == 4, 10, message="all partitions fetched")
    running = manager.threads()
    assert {t.name for t in running} == set(ours(s.consumer_id)) - set(before)
    assert f"{s.consumer_id}-leader-finder-thread" in {t.name for t in running} and len(running) >= 2
    manager.shutdown()
    assert manager.join(5)
    assert manager.threads() == []
    assert not any(t.is_alive() for t in running)
    assert ours(s.consumer_id) == before == []


def test_shutdown_within_a_second_while_fetching(kafka: KafkaBroker) -> None:
    # Many fetchers, each blocked on a full queue (a slow application), plus idle ones long-polling the broker
    # for fetch.wait.max.ms: stopping them one after another took about 0.04 s per blocked fetcher.
    blocked, idle = 32, 4
    topic = create_topic(kafka.bootstrap, blocked + idle)
    produce(kafka.bootstrap, topic, [(p, b"k", b"v" * 50) for p in range(blocked) for _ in range(3)],
            flush_each=True)
    # fetch.message.max.bytes this small makes the broker answer with one batch (= one record here) per fetch
    s = settings(auto_offset_reset="smallest", num_consumer_fetchers=blocked + idle, fetch_message_max_bytes=100)
    assert s.fetch_wait_max_ms == 100  # Kafka 0.8's default
    queues = [ChunkQueue(1) for _ in range(blocked + idle)]
    infos = [PartitionTopicInfo(topic, p, queues[p], -1, -1) for p in range(blocked + idle)]
    manager = ConsumerFetcherManager(s, lambda: [broker_of(kafka)])
    try:
        manager.start_connections(infos)
        wait_for(lambda: len(manager.fetching()) == blocked + idle and all(q.qsize() == 1 for q in queues[:blocked])
                 and all(i.fetched_offset == 0 for i in infos[blocked:]), 20, message="every fetcher busy")
        assert len(manager.threads()) > blocked  # (nearly) one fetcher per partition, plus the finder
    finally:
        started = time.monotonic()
        manager.shutdown()
        elapsed = time.monotonic() - started
    # The blocked fetchers wait on full queues until interrupted, so a shutdown that did not interrupt them would not
    # end at all; 5 s tells the two apart on a loaded machine, where 1 s was its scheduling away from failing.
    assert elapsed < 5.0, f"shutdown took {elapsed:.2f} s"
    assert manager.join(5)
