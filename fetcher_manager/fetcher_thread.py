"""One fetcher thread per (leader broker, fetcher id): fetch, enqueue chunks, advance offsets.

Follows Kafka 0.8.2's ``ConsumerFetcherThread.scala`` and ``AbstractFetcherThread.scala``; stopping is split
into ``initiate_shutdown`` and ``await_shutdown`` as in ``ShutdownableThread.scala``, so that a manager can
signal all its fetchers before waiting for any.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import NamedTuple

from fetcher_manager.broker import Broker
from fetcher_manager.chunks import FetchedDataChunk
from fetcher_manager.kafka_wire import (
    NO_ERROR,
    OFFSET_OUT_OF_RANGE,
    BrokerError,
    KafkaWire,
    WireError,
    WireFactory,
    error_name,
)
from fetcher_manager.metrics import Histogram, Meter, MetricsRegistry, Timer, metric_name
from fetcher_manager.partition_info import ChunkSink, PartitionTopicInfo
from fetcher_manager.records import scan_record_set
from fetcher_manager.settings import FetchSettings
from fetcher_manager.topic_partition import TopicPartition

log = logging.getLogger(__name__)

_IDLE_WAIT_S = 0.2  # AbstractFetcherThread waits this long when it holds no partition
_PUT_POLL_S = 0.1  # how often a fetcher blocked on a full queue checks whether it was asked to stop


class ConsumerFetcherThread(threading.Thread):
    """Sends one Fetch for all its partitions per loop and feeds each partition's chunk queue.

    Partitions with an error (other than OffsetOutOfRange) or all partitions of a failed request are
    removed and handed to ``on_partition_errors`` (the manager's no-leader set).
    """

    def __init__(self, fetcher_id: int, broker: Broker, settings: FetchSettings,
                 on_partition_errors: Callable[[Iterable[TopicPartition]], None], *,
                 metrics: MetricsRegistry | None = None, wire_factory: WireFactory | None = None) -> None:
        super().__init__(name=f"ConsumerFetcherThread-{settings.consumer_id}-{fetcher_id}-{broker.id}", daemon=True)
        self.fetcher_id = fetcher_id
        self.broker = broker
        self._settings = settings
        self._on_errors = on_partition_errors
        self._metrics = metrics
        self._wire = (wire_factory or KafkaWire.from_settings)(settings)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._partitions: dict[TopicPartition, PartitionTopicInfo] = {}
        self._high_watermarks: dict[TopicPartition, int] = {}
        self._stopping = threading.Event()
        self._blocked_on: ChunkSink | None = None  # the chunk queue a put of ours waits on, so a stop can wake it
        self._rounds = 0  # loops of run() ended; `await_round` waits for the next to end
        self._rotation = 0
        self._broker_metrics = _BrokerMetrics.create(metrics, settings.client_id, broker)

    # --- called by the manager -----------------------------------------------------------------------

    def add_partitions(self, infos: Mapping[TopicPartition, PartitionTopicInfo]) -> None:
        """Start fetching these partitions; one already held keeps its current info and offset."""
        with self._changed:
            for tp, info in infos.items():
                if tp not in self._partitions:
                    self._partitions[tp] = info
                    self._register_lag_gauge(tp)
            self._changed.notify_all()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                if self._partitions.pop(tp, None) is not None:
                    self._high_watermarks.pop(tp, None)
                    self._remove_lag_gauge(tp)

    def await_round(self, timeout_s: float) -> bool:
        """Wait until a loop that began after this call has ended, or the thread is gone; False on timeout.

        After `remove_partitions`, a fetch already under way may still queue a chunk of a removed partition; once
        the next loop has ended, nothing of a partition removed before the call can be queued any more
        (incremental ownership, docs/modes.md)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            # The first loop to end after this call either was under way (and is now done) or began after the
            # removal (and never held the removed partitions).
            target = self._rounds + 1
            self._changed.notify_all()  # an idle loop wakes at once instead of after _IDLE_WAIT_S
            while self._rounds < target and self.is_alive() and not self._stopping.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, _IDLE_WAIT_S))
        return True

    def partitions(self) -> list[TopicPartition]:
        with self._lock:
            return list(self._partitions)

    def partition_count(self) -> int:
        with self._lock:
            return len(self._partitions)

    def lags(self) -> dict[TopicPartition, int]:
        """High watermark minus fetched offset, for partitions that have seen at least one response."""
        with self._lock:
            return {tp: max(0, hw - self._partitions[tp].fetched_offset)
                    for tp, hw in self._high_watermarks.items() if tp in self._partitions}

    def initiate_shutdown(self) -> None:
        """Ask the thread to stop and fail its pending request at once; returns without waiting. Idempotent.

        A put blocked on a full queue is woken at once, as the original's `interrupt()` of its fetcher thread
        wakes its `put` (``_PUT_POLL_S`` only bounds a wake-up that is missed). Only a connect in progress is not
        interrupted (``KafkaWire.abort`` reaches established connections only).
        """
        self._stopping.set()
        self._wire.abort()
        blocked = self._blocked_on
        if blocked is not None:
            blocked.wake_putters()
        with self._changed:
            self._changed.notify_all()

    def await_shutdown(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the thread to end, then drop its partitions; True if it has ended."""
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout_s)
        stopped = not self.is_alive()
        if stopped:
            self._wire.close()  # the thread closed it on its way out too; this covers a thread never started
        else:
            # Its sockets stay open (but shut down) until it ends: closing them under a blocked recv could
            # hand the descriptor number to another socket while the recv still uses it.
            log.error("[%s] %s did not stop within %.1f s", self._settings.consumer_id, self.name, timeout_s)
        self.remove_partitions(self.partitions())
        return stopped

    def shutdown(self, timeout_s: float = 10.0) -> bool:
        """``initiate_shutdown`` then ``await_shutdown``: stop one fetcher (the manager stops many in parallel)."""
        self.initiate_shutdown()
        return self.await_shutdown(timeout_s)

    # --- the thread ----------------------------------------------------------------------------------

    def run(self) -> None:
        log.info("[%s] %s starting for broker %s", self._settings.consumer_id, self.name, self.broker)
        try:
            while not self._stopping.is_set():
                self._do_work()
                with self._changed:
                    self._rounds += 1
                    self._changed.notify_all()
        except Exception:
            log.exception("[%s] %s died", self._settings.consumer_id, self.name)
            self._hand_back(self.partitions())
        finally:
            self._wire.close()
            log.info("[%s] %s stopped", self._settings.consumer_id, self.name)

    def _do_work(self) -> None:
        with self._changed:
            if not self._partitions:
                self._changed.wait(_IDLE_WAIT_S)
                return
            held = list(self._partitions.items())
        # Rotate the order every request: a broker fills the response in request order up to the response's
        # max_bytes, so a fixed order would favour the first partitions whenever the response is full.
        self._rotation = (self._rotation + 1) % len(held)
        held = held[self._rotation:] + held[:self._rotation]
        failed = [tp for tp, info in held if info.fetched_offset < 0 and not self._reset_offset(tp, info)]
        offsets = {tp: info.fetched_offset for tp, info in held if info.fetched_offset >= 0}
        if offsets:
            failed += self._fetch(offsets)
        if failed:
            self._hand_back(failed)

    def _fetch(self, offsets: dict[TopicPartition, int]) -> list[TopicPartition]:
        s = self._settings
        try:
            with self._timed_request():
                response = self._wire.fetch(self.broker, offsets, s.fetch_wait_max_ms, s.fetch_min_bytes,
                                            s.fetch_message_max_bytes)
        except (WireError, BrokerError) as exc:
            if not self._stopping.is_set():
                log.warning("[%s] %s: fetch from broker %s failed (%s); returning %d partitions to the leader finder",
                            s.consumer_id, self.name, self.broker, exc, len(offsets))
                self._wire.disconnect(self.broker)
            return list(offsets)
        metrics = self._broker_metrics
        if metrics is not None:
            metrics.response_size.update(response.size_bytes)
            metrics.all_brokers_response_size.update(response.size_bytes)
        failed = []
        fetched_bytes = 0
        for tp, requested in offsets.items():
            part = response.partitions.get(tp)
            info = self._partitions.get(tp)
            # Only act if the partition is still ours at the offset we asked for (it may have moved since).
            if part is None or info is None or info.fetched_offset != requested or self._stopping.is_set():
                continue
            if part.error_code == NO_ERROR:
                with self._lock:
                    if tp in self._partitions:
                        self._high_watermarks[tp] = part.high_watermark
                if part.records:
                    fetched_bytes += self._enqueue(info, requested, part.records)
            elif part.error_code == OFFSET_OUT_OF_RANGE:
                if not self._reset_offset(tp, info):
                    failed.append(tp)
            else:
                log.warning("[%s] %s: error %s for %s:%d; returning it to the leader finder",
                            s.consumer_id, self.name, error_name(part.error_code), tp.topic, tp.partition)
                failed.append(tp)
        if metrics is not None:
            metrics.requests.mark()
            metrics.fetched_bytes.mark(fetched_bytes)
        return failed

    @contextmanager
    def _timed_request(self) -> Iterator[None]:
        metrics = self._broker_metrics
        if metrics is None:
            yield
            return
        # SimpleConsumer.scala's fetch times the all-brokers timer around the per-broker one; failures count too.
        with metrics.all_brokers_request_time.time(), metrics.request_time.time():
            yield

    def _enqueue(self, info: PartitionTopicInfo, fetch_offset: int, records: bytes) -> int:
        """Queue one chunk (blocking while the stream's queue is full) and advance the fetched offset."""
        scan = scan_record_set(records, fetch_offset)
        chunk = FetchedDataChunk(records, scan.valid_bytes, info, fetch_offset)
        self._blocked_on = info.chunk_queue
        try:
            while not info.chunk_queue.put(chunk, timeout=_PUT_POLL_S, interrupted=self._stopping.is_set):
                if self._stopping.is_set():
                    return 0
        finally:
            self._blocked_on = None
        if scan.valid_bytes:
            # A chunk with bytes but no complete batch is still queued (the iterator reports
            # MessageSizeTooLarge) and the offset stays put, as in Kafka.
            info.reset_fetch_offset(scan.next_offset)
        if self._metrics is not None and scan.valid_bytes:
            for topic in (info.topic, None):
                self._metrics.meter(metric_name("kafka.consumer", "ConsumerTopicMetrics", "BytesPerSec",
                                                clientId=self._settings.client_id, topic=topic)).mark(scan.valid_bytes)
        return scan.valid_bytes

    def _reset_offset(self, tp: TopicPartition, info: PartitionTopicInfo) -> bool:
        """auto.offset.reset: move both offsets to the log start (smallest) or end (largest)."""
        earliest = self._settings.auto_offset_reset == "smallest"
        try:
            offset = self._wire.offset_for(self.broker, tp, earliest)
        except (WireError, BrokerError) as exc:
            if not self._stopping.is_set():
                log.warning("[%s] %s: cannot reset offset of %s:%d (%s)", self._settings.consumer_id, self.name,
                            tp.topic, tp.partition, exc)
            return False
        info.reset_fetch_offset(offset)
        info.set_consumed_offset(offset)
        log.info("[%s] %s: reset fetch offset of %s:%d to %s offset %d", self._settings.consumer_id, self.name,
                 tp.topic, tp.partition, "earliest" if earliest else "latest", offset)
        return True

    def _hand_back(self, tps: list[TopicPartition]) -> None:
        self.remove_partitions(tps)
        if not self._stopping.is_set():
            self._on_errors(tps)

    # --- metrics (all optional) ----------------------------------------------------------------------

    def _lag_name(self, tp: TopicPartition) -> str:
        return metric_name("kafka.server", "FetcherLagMetrics", "ConsumerLag", clientId=self._settings.client_id,
                           topic=tp.topic, partition=tp.partition)

    def _register_lag_gauge(self, tp: TopicPartition) -> None:
        if self._metrics is not None:
            self._metrics.gauge(self._lag_name(tp), lambda: self.lags().get(tp, 0))

    def _remove_lag_gauge(self, tp: TopicPartition) -> None:
        if self._metrics is not None:
            self._metrics.remove(self._lag_name(tp))


class _BrokerMetrics(NamedTuple):
    """The per-broker metrics of a fetcher: AbstractFetcherThread.scala's FetcherStats, and
    FetchRequestAndResponseStats.scala's per-broker and all-brokers (tagged by clientId only) metrics."""

    requests: Meter
    fetched_bytes: Meter
    request_time: Timer
    all_brokers_request_time: Timer
    response_size: Histogram
    all_brokers_response_size: Histogram

    @classmethod
    def create(cls, metrics: MetricsRegistry | None, client_id: str, broker: Broker) -> _BrokerMetrics | None:
        if metrics is None:
            return None
        tags = {"clientId": client_id, "brokerHost": broker.host, "brokerPort": broker.port}

        def stats(name: str, **labels: object) -> str:
            return metric_name("kafka.consumer", "FetchRequestAndResponseMetrics", name, **labels)

        return cls(metrics.meter(metric_name("kafka.server", "FetcherStats", "RequestsPerSec", **tags)),
                   metrics.meter(metric_name("kafka.server", "FetcherStats", "BytesPerSec", **tags)),
                   metrics.timer(stats("FetchRequestRateAndTimeMs", **tags)),
                   metrics.timer(stats("FetchRequestRateAndTimeMs", clientId=client_id)),
                   metrics.histogram(stats("FetchResponseSize", **tags)),
                   metrics.histogram(stats("FetchResponseSize", clientId=client_id)))
