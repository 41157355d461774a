"""What the application iterates: a KafkaStream over one chunk queue, and its single ConsumerIterator."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator
from operator import length_hint
from typing import Any

from fetcher_manager.chunks import SHUTDOWN_COMMAND, ChunkQueue, FetchedDataChunk
from fetcher_manager.errors import (
    ConsumerTimeoutError,
    InvalidMessageError,
    IteratorFailedError,
    MessageDecodeError,
    MessageSizeTooLargeError,
)
from fetcher_manager.metrics import Meter, MetricsRegistry, metric_name
from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.records import MessageAndMetadata, iter_message_batches, make_message
from fetcher_manager.topic_partition import TopicPartition

__all__ = ["ChunkQueue", "ConsumerIterator", "ConsumerTimeoutError", "FetchedDataChunk", "KafkaStream"]

log = logging.getLogger(__name__)

Decoder = Callable[[bytes | None], Any]
_READY, _DONE, _FAILED = "ready", "done", "failed"


_EXHAUSTED: Iterator[MessageAndMetadata] = iter(())  # the fast path's iterator when it must leave all to _next_slow


class ConsumerIterator(Iterator[MessageAndMetadata]):
    """Blocks on the chunk queue and hands out messages one by one (Kafka 0.8's ``ConsumerIterator``).

    Handing a message out sets its partition's consumed offset to ``offset + 1`` (what a commit writes).
    With ``consumer_timeout_ms >= 0`` an empty wait raises ``ConsumerTimeoutError`` and the iterator stays
    usable; the shutdown sentinel ends iteration for good; a size or CRC error fails it for good.
    Records are decoded one batch at a time on this (the application's) thread, as in Kafka.

    Per message, ``__next__`` takes the next one from a list iterator over the current batch *minus its last
    message* (``_fast``, through the builtin ``next``: C code, no exception at its end), checks and moves the
    consumed offset, and returns it: no other Python call and no index kept in Python. Everything else goes through
    ``_next_slow``: a batch's last message (so the meters are marked with it), messages below the consumed offset
    (a refetch: never handed out twice), decoders, loading the next batch or chunk, timeouts, the shutdown sentinel
    and failures.
    """

    def __init__(self, chunk_queue: ChunkQueue, consumer_timeout_ms: int, client_id: str = "",
                 key_decoder: Decoder | None = None, value_decoder: Decoder | None = None, *,
                 metrics: MetricsRegistry | None = None) -> None:
        self._queue = chunk_queue
        self._timeout_s = None if consumer_timeout_ms < 0 else consumer_timeout_ms / 1000.0
        self._client_id = client_id
        self._key_decoder = key_decoder
        self._value_decoder = value_decoder
        self._decoding = key_decoder is not None or value_decoder is not None
        self._metrics = metrics
        self._meters: dict[str, tuple[Meter, Meter]] = {}
        self._state = _READY
        self._failure: BaseException | None = None
        self._info: PartitionTopicInfo | None = None
        self._batches: Iterator[list[MessageAndMetadata]] | None = None
        # The current batch: an iterator over its messages but the last (all of them with decoders), the fast path's
        # iterator (the same one; _EXHAUSTED when everything goes through _next_slow), and the last message.
        self._rest: Iterator[MessageAndMetadata] = iter(())
        self._fast: Iterator[MessageAndMetadata] = self._rest
        self._last: MessageAndMetadata | None = None
        self._batch_size = 0
        self._skipped = 0  # messages of the current batch passed over (below the consumed offset)
        self._metered = 0  # messages of the current batch already in the meters

    def __iter__(self) -> ConsumerIterator:
        return self

    def __next__(self) -> MessageAndMetadata:
        message = next(self._fast, None)
        if message is None:
            return self._next_slow(0)
        info = self._info
        # A batch is set only once its chunk's partition is (_advance): with a message there is a partition. Two
        # bytecodes per message, below what callgrind can tell apart in benchmarks/bench_decode.py's drain.
        assert info is not None
        offset = message.offset
        if offset < info.consumed_offset:
            return self._next_slow(1)
        info.consumed_offset = offset + 1
        return message

    def _next_slow(self, skipped: int) -> MessageAndMetadata:
        """The next message when the fast path has none to give (``skipped``: 1 if it took one below the consumed
        offset, which is passed over: handed out before a refetch, and never twice)."""
        self._skipped += skipped
        while True:
            message = next(self._rest, None)
            if message is None and self._last is not None:
                message, self._last = self._last, None
            if message is None:
                self._advance()
                continue
            info = self._info
            assert info is not None
            offset = message.offset
            if offset < info.consumed_offset:
                self._skipped += 1
                continue
            info.consumed_offset = offset + 1
            if self._last is None and length_hint(self._rest) == 0:
                # Mark the batch with its last message, not when the next one is asked for: an application
                # that has taken everything then sees every message counted.
                self._flush_meters()
            return self._decode(message) if self._decoding else message

    @property
    def current_info(self) -> PartitionTopicInfo | None:
        """The partition of the chunk being iterated (or last iterated)."""
        return self._info

    def clear_current_chunk(self) -> None:
        """Forget the chunk being iterated (rebalance: its partition may now belong to someone else)."""
        log.info("[%s] clearing the current data chunk of this consumer iterator", self._client_id)
        self._flush_meters()
        self._batches = None
        self._set_batch([])

    def _set_batch(self, batch: list[MessageAndMetadata]) -> None:
        if self._decoding or not batch:
            self._rest, self._fast, self._last = iter(batch), _EXHAUSTED, None
        else:
            self._rest = self._fast = iter(batch[:-1])
            self._last = batch[-1]
        self._batch_size, self._skipped, self._metered = len(batch), 0, 0

    def _advance(self) -> None:
        """Load the next batch of the current chunk, or the next chunk; raises when there is none."""
        if self._state is not _READY:
            if self._state is _DONE:
                raise StopIteration
            raise IteratorFailedError(f"[{self._client_id}] iterator failed earlier: {self._failure!r}")
        self._flush_meters()
        self._set_batch([])
        if self._batches is not None:
            try:
                batch = next(self._batches, None)
            except InvalidMessageError as exc:
                self._fail(exc)
                raise
            if batch is not None:
                self._set_batch(batch)
                return
            self._batches = None
        chunk = self._queue.take(self._timeout_s)
        if chunk is None:
            raise ConsumerTimeoutError(f"[{self._client_id}] no message within {self._timeout_s} s")
        if chunk is SHUTDOWN_COMMAND:
            log.debug("[%s] received the shutdown command", self._client_id)
            self._state = _DONE
            raise StopIteration
        assert isinstance(chunk, FetchedDataChunk)
        info = chunk.topic_info
        if chunk.valid_bytes == 0:
            error = MessageSizeTooLargeError(
                f"[{self._client_id}] found a message larger than the maximum fetch size of this consumer on "
                f"topic {info.topic} partition {info.partition} at fetch offset {chunk.fetch_offset}; increase "
                "fetch.message.max.bytes or decrease the maximum message size the broker will allow")
            self._fail(error)
            raise error
        if info.consumed_offset < chunk.fetch_offset:
            log.error("[%s] consumed offset %d is below fetch offset %d for %s:%d; consumer may lose data",
                      self._client_id, info.consumed_offset, chunk.fetch_offset, info.topic, info.partition)
            info.set_consumed_offset(chunk.fetch_offset)
        self._info = info
        self._batches = iter_message_batches(chunk.records, chunk.valid_bytes, info.topic, info.partition)

    def _fail(self, error: BaseException) -> None:
        self._state, self._failure = _FAILED, error
        self._batches = None
        self._set_batch([])

    def _decode(self, message: MessageAndMetadata) -> MessageAndMetadata:
        # Decoders run per handed-out message, after the consumed offset moved: a decoder error surfaces for
        # that message only, and the next call continues with the following one.
        try:
            key = message.key if self._key_decoder is None else self._key_decoder(message.key)
            value = message.value if self._value_decoder is None else self._value_decoder(message.value)
        except Exception as exc:
            raise MessageDecodeError(
                f"[{self._client_id}] cannot decode {message.topic}:{message.partition} offset {message.offset}: {exc}"
            ) from exc
        return make_message(message.topic, message.partition, message.offset, key, value)

    def _flush_meters(self) -> None:
        # MessagesPerSec is marked once per batch (not per message as in Kafka) to keep the hot path lean. What the
        # current batch has handed out: its size less what is still to come, what was skipped and what is marked.
        remaining = length_hint(self._rest) + (self._last is not None)
        handed = self._batch_size - remaining - self._skipped - self._metered
        self._metered += handed
        if self._metrics is None or handed <= 0 or self._info is None:
            return
        topic = self._info.topic
        meters = self._meters.get(topic)
        if meters is None:
            meters = self._meters[topic] = (
                self._metrics.meter(metric_name("kafka.consumer", "ConsumerTopicMetrics", "MessagesPerSec",
                                                clientId=self._client_id, topic=topic)),
                self._metrics.meter(metric_name("kafka.consumer", "ConsumerTopicMetrics", "MessagesPerSec",
                                                clientId=self._client_id)))
        meters[0].mark(handed)
        meters[1].mark(handed)


class KafkaStream:
    """One chunk queue and the one iterator over it: ``iter(stream)`` always returns the same iterator."""

    def __init__(self, chunk_queue: ChunkQueue, consumer_timeout_ms: int, client_id: str = "",
                 key_decoder: Decoder | None = None, value_decoder: Decoder | None = None, *,
                 metrics: MetricsRegistry | None = None) -> None:
        self.chunk_queue = chunk_queue
        self._iterator = ConsumerIterator(chunk_queue, consumer_timeout_ms, client_id, key_decoder, value_decoder,
                                          metrics=metrics)

    def __iter__(self) -> ConsumerIterator:
        return self._iterator

    def clear(self) -> None:
        """Drop the iterator's current chunk (the queue itself is cleared by the connector)."""
        self._iterator.clear_current_chunk()

    def clear_if_partition(self, keys: Collection[TopicPartition]) -> None:
        """Drop the iterator's current chunk if it is of one of these partitions (incremental ownership)."""
        info = self._iterator.current_info
        if info is not None and info.key in keys:
            self._iterator.clear_current_chunk()
