"""KafkaStream / ConsumerIterator semantics (Kafka 0.8.2's KafkaStream.scala and ConsumerIterator.scala) on locally
built chunks: consumed offsets, timeouts, the shutdown sentinel, refetch skipping, clearing, size and decode errors."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from fetch_helpers import record_batch

from fetcher_manager.chunks import FetchedDataChunk
from fetcher_manager.errors import IteratorFailedError, MessageDecodeError, MessageSizeTooLargeError
from fetcher_manager.metrics import MetricsRegistry, metric_name
from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.records import MessageAndMetadata
from fetcher_manager.stream import ChunkQueue, ConsumerTimeoutError, KafkaStream


def chunk(info: PartitionTopicInfo, fetch_offset: int, *batches: bytes) -> FetchedDataChunk:
    records = b"".join(batches)
    return FetchedDataChunk(records, len(records), info, fetch_offset)


def batch(base: int, count: int) -> bytes:
    return record_batch(base, [(b"k%d" % (base + i), b"v%d" % (base + i)) for i in range(count)])


@pytest.fixture
def queue() -> ChunkQueue:
    return ChunkQueue(4)


def test_hand_out_sets_consumed_offset_to_offset_plus_one(queue: ChunkQueue) -> None:
    info = PartitionTopicInfo("t", 0, queue, 0, 0)
    queue.put(chunk(info, 0, batch(0, 2), batch(2, 1)))
    it = iter(KafkaStream(queue, 1000))
    first = next(it)
    assert (first.topic, first.partition, first.offset, first.key, first.value) == ("t", 0, 0, b"k0", b"v0")
    assert info.consumed_offset == 1
    assert [next(it).offset, next(it).offset] == [1, 2]
    assert info.consumed_offset == 3


def test_same_iterator_every_time(queue: ChunkQueue) -> None:
    stream = KafkaStream(queue, -1)
    assert iter(stream) is iter(stream)


def test_timeout_raises_and_iterator_stays_usable(queue: ChunkQueue) -> None:
    info = PartitionTopicInfo("t", 0, queue, 0, 0)
    it = iter(KafkaStream(queue, consumer_timeout_ms=20))
    with pytest.raises(ConsumerTimeoutError):
        next(it)
    queue.put(chunk(info, 0, batch(0, 1)))
    assert next(it).offset == 0
    with pytest.raises(ConsumerTimeoutError):
        next(it)
    queue.put(chunk(info, 1, batch(1, 1)))
    assert [m.offset for m in _take(it, 1)] == [1]


def test_shutdown_sentinel_ends_iteration_for_good(queue: ChunkQueue) -> None:
    info = PartitionTopicInfo("t", 0, queue, 0, 0)
    queue.put(chunk(info, 0, batch(0, 2)))
    queue.put_shutdown_sentinel()
    stream = KafkaStream(queue, consumer_timeout_ms=20)
    assert [m.offset for m in stream] == [0, 1]
    queue.clear()
    queue.put(chunk(info, 2, batch(2, 1)))
    assert list(stream) == []  # still over: no timeout, no new message
    with pytest.raises(StopIteration):
        next(iter(stream))


def test_records_below_the_consumed_offset_are_skipped(queue: ChunkQueue) -> None:
    # The broker returns whole batches, so a chunk fetched at 5 may start at 3; consumed 7 > fetch 5 (a refetch).
    info = PartitionTopicInfo("t", 0, queue, 7, 5)
    queue.put(chunk(info, 5, batch(3, 4), batch(7, 3)))
    assert [m.offset for m in _take(iter(KafkaStream(queue, 20)), 3)] == [7, 8, 9]
    assert info.consumed_offset == 10


def test_a_consumed_offset_moved_forward_mid_batch_skips_the_rest_below_it(queue: ChunkQueue) -> None:
    # The fetcher's auto.offset.reset moves the consumed offset while the application is inside a batch (0.8 does the
    # same): the iterator checks every message, not only a batch's first, so nothing below it is handed out.
    info = PartitionTopicInfo("t", 0, queue, 0, 0)
    queue.put(chunk(info, 0, batch(0, 6), batch(6, 2)))
    it = iter(KafkaStream(queue, 20))
    assert next(it).offset == 0
    info.consumed_offset = 4
    assert [m.offset for m in _take(it, 4)] == [4, 5, 6, 7]
    info.consumed_offset = 100
    with pytest.raises(ConsumerTimeoutError):
        next(it)


def test_consumed_below_fetch_offset_jumps_forward(queue: ChunkQueue, caplog: pytest.LogCaptureFixture) -> None:
    info = PartitionTopicInfo("t", 0, queue, 2, 5)
    queue.put(chunk(info, 5, batch(5, 2)))
    with caplog.at_level(logging.ERROR):
        assert next(iter(KafkaStream(queue, 20, client_id="cid"))).offset == 5
    assert "may lose data" in caplog.text and "cid" in caplog.text
    assert info.consumed_offset == 6


def test_clear_drops_the_current_chunk(queue: ChunkQueue) -> None:
    info = PartitionTopicInfo("t", 0, queue, 0, 0)
    other = PartitionTopicInfo("t", 1, queue, 100, 100)
    queue.put(chunk(info, 0, batch(0, 5), batch(5, 5)))
    stream = KafkaStream(queue, consumer_timeout_ms=20)
    it = iter(stream)
    assert next(it).offset == 0
    stream.clear()
    with pytest.raises(ConsumerTimeoutError):
        next(it)  # offsets 1..9 of the dropped chunk are gone
    queue.put(chunk(other, 100, batch(100, 1)))
    message = next(it)
    assert (message.partition, message.offset) == (1, 100)
    assert info.consumed_offset == 1


def test_chunk_without_a_complete_message_fails_the_iterator(queue: ChunkQueue) -> None:
    info = PartitionTopicInfo("t", 0, queue, 0, 0)
    queue.put(FetchedDataChunk(batch(0, 3)[:40], 0, info, 0))
    queue.put(chunk(info, 0, batch(0, 1)))
    it = iter(KafkaStream(queue, 20))
    with pytest.raises(MessageSizeTooLargeError):
        next(it)
    with pytest.raises(IteratorFailedError):
        next(it)


def test_decoders_apply_per_message_and_a_failure_does_not_stop_iteration(queue: ChunkQueue) -> None:
    info = PartitionTopicInfo("t", 0, queue, 0, 0)
    queue.put(chunk(info, 0, record_batch(0, [(b"a", b"1"), (b"b", b"oops"), (b"c", b"3")])))
    it = iter(KafkaStream(queue, 20, key_decoder=bytes.decode, value_decoder=int))
    first = next(it)
    assert (first.key, first.value) == ("a", 1)
    with pytest.raises(MessageDecodeError):
        next(it)
    assert info.consumed_offset == 2  # the undecodable message counts as consumed
    assert next(it).value == 3


def test_messages_per_sec_counts_a_batch_once_its_last_message_is_handed_out(queue: ChunkQueue) -> None:
    registry = MetricsRegistry()
    info = PartitionTopicInfo("t", 0, queue, 2, 0)  # a refetch: offsets 0 and 1 were handed out before
    queue.put(chunk(info, 0, batch(0, 4), batch(4, 3)))
    it = iter(KafkaStream(queue, 20, client_id="cid", metrics=registry))

    def counts() -> tuple[int, int]:
        names = [metric_name("kafka.consumer", "ConsumerTopicMetrics", "MessagesPerSec", clientId="cid", topic=t)
                 for t in ("t", None)]
        snapshot = registry.snapshot()
        return tuple(snapshot.get(name, {}).get("count", 0) for name in names)  # type: ignore[return-value]

    assert next(it).offset == 2
    assert counts() == (0, 0)  # marked per batch, not per message
    assert next(it).offset == 3
    assert counts() == (2, 2)  # the first batch's last message: its two handed-out messages, not the skipped two
    assert [m.offset for m in _take(it, 3)] == [4, 5, 6]
    assert counts() == (5, 5)  # everything taken, everything counted, without asking for a next message
    with pytest.raises(ConsumerTimeoutError):
        next(it)
    assert counts() == (5, 5)  # and nothing twice


def test_messages_per_sec_counts_what_a_cleared_batch_had_handed_out(queue: ChunkQueue) -> None:
    registry = MetricsRegistry()
    info = PartitionTopicInfo("t", 0, queue, 0, 0)
    queue.put(chunk(info, 0, batch(0, 5)))
    stream = KafkaStream(queue, 20, client_id="cid", metrics=registry)
    it = iter(stream)
    assert [m.offset for m in _take(it, 2)] == [0, 1]
    stream.clear()
    name = metric_name("kafka.consumer", "ConsumerTopicMetrics", "MessagesPerSec", clientId="cid")
    assert registry.snapshot()[name]["count"] == 2
    queue.put(chunk(info, 2, batch(2, 3)))
    assert [m.offset for m in _take(it, 3)] == [2, 3, 4]
    assert registry.snapshot()[name]["count"] == 5


def _take(it: Iterator[MessageAndMetadata], n: int) -> list[MessageAndMetadata]:
    return [next(it) for _ in range(n)]
