"""ConsumerFetcherManager: a leader-finder thread plus fetcher threads keyed by (leader, fetcher id) (spec §5).

Usage: after every successful rebalance the connector calls ``start_connections`` with the partitions it
now owns; before the next one (and at shutdown) ``stop_connections``. All partitions start in the
no-leader set; the leader finder resolves their leaders with one Metadata request per round and hands
them to fetcher threads, which return any partition that errors to the set.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterable, Sequence

from fetcher_manager.broker import Broker
from fetcher_manager.fetcher_id import fetcher_id
from fetcher_manager.fetcher_thread import ConsumerFetcherThread
from fetcher_manager.kafka_wire import BrokerError, KafkaWire, WireError
from fetcher_manager.metrics import MetricsRegistry, metric_name
from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.settings import FetchSettings

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
FetcherKey = tuple[Broker, int]  # (leader, fetcher id)
_JOIN_TIMEOUT_S = 10.0


class ConsumerFetcherManager:
    def __init__(self, settings: FetchSettings, broker_source: Callable[[], Sequence[Broker]],
                 metrics: MetricsRegistry | None = None,
                 wire_factory: Callable[[FetchSettings], KafkaWire] | None = None) -> None:
        self._settings = settings
        self._broker_source = broker_source
        self._metrics = metrics
        self._wire_factory = wire_factory or (lambda s: KafkaWire(s.client_id, s.socket_timeout_ms,
                                                                  s.socket_receive_buffer_bytes))
        self._lock = threading.Lock()
        self._no_leader_changed = threading.Condition(self._lock)
        self._partition_map: dict[TopicPartition, PartitionTopicInfo] = {}
        self._no_leader: set[TopicPartition] = set()
        self._fetchers: dict[FetcherKey, ConsumerFetcherThread] = {}
        self._finder: _LeaderFinderThread | None = None
        self._shut_down = False
        self._register_manager_gauges()

    # --- the connector's interface -------------------------------------------------------------------

    def start_connections(self, partition_infos: Iterable[PartitionTopicInfo]) -> None:
        """Own these partitions and start a leader finder that assigns them to fetcher threads."""
        infos = list(partition_infos)
        with self._lock:
            running = self._finder is not None
        if running:
            log.warning("[%s] start_connections while fetching: stopping the current fetchers first",
                        self._settings.consumer_id)
            self.stop_connections()
        with self._lock:
            if self._shut_down:
                raise RuntimeError(f"[{self._settings.consumer_id}] fetcher manager already shut down")
            self._partition_map = {info.key: info for info in infos}
            self._no_leader.update(self._partition_map)
            self._finder = _LeaderFinderThread(self)
            self._no_leader_changed.notify_all()
        log.info("[%s] starting fetchers for %d partitions", self._settings.consumer_id, len(infos))
        self._finder.start()

    def stop_connections(self) -> None:
        """Stop the leader finder, then every fetcher thread (joined, sockets closed); forget all partitions.

        Idempotent: a second call (or one before any start) does nothing.
        """
        with self._lock:
            finder, self._finder = self._finder, None
            self._no_leader.clear()
        if finder is not None:
            finder.shutdown()
        with self._lock:
            fetchers = list(self._fetchers.values())
            self._fetchers.clear()
        for fetcher in fetchers:
            fetcher.shutdown(_JOIN_TIMEOUT_S)
        with self._lock:
            self._partition_map = {}
            self._no_leader.clear()
        if finder is not None or fetchers:
            log.info("[%s] all fetchers stopped", self._settings.consumer_id)

    def shutdown(self) -> None:
        """``stop_connections`` for good: later ``start_connections`` calls fail."""
        with self._lock:
            self._shut_down = True
        self.stop_connections()
        if self._metrics is not None:
            for name in ("MaxLag", "MinFetchRate"):
                self._metrics.remove(self._manager_metric(name))

    def fetching(self) -> dict[TopicPartition, int]:
        """(topic, partition) -> leader broker id, for every partition a fetcher thread holds right now."""
        with self._lock:
            fetchers = list(self._fetchers.values())
        return {tp: fetcher.broker.id for fetcher in fetchers for tp in fetcher.partitions()}

    def lags(self) -> dict[TopicPartition, int]:
        """High watermark minus fetched offset, per fetched partition that has had a response."""
        with self._lock:
            fetchers = list(self._fetchers.values())
        result: dict[TopicPartition, int] = {}
        for fetcher in fetchers:
            result.update(fetcher.lags())
        return result

    def no_leader_partitions(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._no_leader)

    # --- called by fetcher threads and the leader finder ---------------------------------------------

    def add_partitions_with_error(self, tps: Iterable[TopicPartition]) -> None:
        """Give partitions back to the leader finder (ignored once connections are stopped)."""
        with self._lock:
            owned = [tp for tp in tps if tp in self._partition_map]
            if owned and self._finder is not None:
                self._no_leader.update(owned)
                self._no_leader_changed.notify_all()

    def _wait_for_no_leader(self, stopping: threading.Event) -> set[TopicPartition]:
        with self._no_leader_changed:
            while not self._no_leader and not stopping.is_set():
                self._no_leader_changed.wait()
            return set(self._no_leader)

    def _assign(self, leaders: dict[TopicPartition, Broker], stopping: threading.Event) -> None:
        """Move partitions that now have a leader from the no-leader set to fetcher threads."""
        batches: dict[FetcherKey, dict[TopicPartition, PartitionTopicInfo]] = {}
        with self._lock:
            if stopping.is_set():
                return
            for tp, leader in leaders.items():
                info = self._partition_map.get(tp)
                if info is None or tp not in self._no_leader:
                    continue
                self._no_leader.discard(tp)
                key = (leader, fetcher_id(tp[0], tp[1], self._settings.num_consumer_fetchers))
                batches.setdefault(key, {})[tp] = info
            for key, infos in batches.items():
                fetcher = self._fetchers.get(key)
                if fetcher is None or not fetcher.is_alive():
                    fetcher = ConsumerFetcherThread(key[1], key[0], self._settings, self.add_partitions_with_error,
                                                    metrics=self._metrics, wire_factory=self._wire_factory)
                    self._fetchers[key] = fetcher
                    fetcher.start()
                fetcher.add_partitions(infos)
                log.info("[%s] %s now fetches %s", self._settings.consumer_id, fetcher.name,
                         ", ".join(f"{t}:{p}" for t, p in sorted(infos)))

    def _shutdown_idle_fetchers(self) -> None:
        with self._lock:
            idle = [key for key, fetcher in self._fetchers.items() if fetcher.partition_count() == 0]
            doomed = [self._fetchers.pop(key) for key in idle]
        for fetcher in doomed:
            fetcher.shutdown(_JOIN_TIMEOUT_S)

    # --- metrics -------------------------------------------------------------------------------------

    def _manager_metric(self, name: str) -> str:
        return metric_name("kafka.consumer", "ConsumerFetcherManager", name, clientId=self._settings.client_id)

    def _register_manager_gauges(self) -> None:
        if self._metrics is None:
            return
        self._metrics.gauge(self._manager_metric("MaxLag"), lambda: max(self.lags().values(), default=0))
        self._metrics.gauge(self._manager_metric("MinFetchRate"), self._min_fetch_rate)

    def _min_fetch_rate(self) -> float:
        assert self._metrics is not None
        with self._lock:
            brokers = {key[0] for key in self._fetchers}
        rates = [self._metrics.meter(metric_name("kafka.server", "FetcherStats", "RequestsPerSec",
                                                 clientId=self._settings.client_id, brokerHost=b.host,
                                                 brokerPort=b.port)).one_minute_rate for b in brokers]
        return min(rates, default=0.0)


class _LeaderFinderThread(threading.Thread):
    """Waits for leaderless partitions, looks their leaders up, hands them over, then backs off."""

    def __init__(self, manager: ConsumerFetcherManager) -> None:
        super().__init__(name=f"{manager._settings.consumer_id}-leader-finder-thread", daemon=True)
        self._manager = manager
        self._settings = manager._settings
        self._stopping = threading.Event()
        self._wire = manager._wire_factory(manager._settings)

    def run(self) -> None:
        log.info("[%s] %s starting", self._settings.consumer_id, self.name)
        try:
            while not self._stopping.is_set():
                try:
                    self._round()
                except Exception:
                    if not self._stopping.is_set():
                        log.exception("[%s] error in %s", self._settings.consumer_id, self.name)
                self._manager._shutdown_idle_fetchers()
                # An Event wait rather than a sleep, so shutdown() does not wait out the backoff.
                self._stopping.wait(self._settings.refresh_leader_backoff_ms / 1000.0)
        finally:
            self._wire.close()
            log.info("[%s] %s stopped", self._settings.consumer_id, self.name)

    def _round(self) -> None:
        wanted = self._manager._wait_for_no_leader(self._stopping)
        if self._stopping.is_set() or not wanted:
            return
        brokers = list(self._manager._broker_source())
        random.shuffle(brokers)  # as ClientUtils.fetchTopicMetadata: spread the load, no favourite broker
        try:
            metadata = self._wire.metadata(brokers, {topic for topic, _ in wanted})
        except (WireError, BrokerError) as exc:
            if not self._stopping.is_set():
                log.warning("[%s] cannot find leaders for %d partitions: %s", self._settings.consumer_id,
                            len(wanted), exc)
            return
        leaders: dict[TopicPartition, Broker] = {}
        for tp in wanted:
            leader_id = metadata.leaders.get(tp)
            broker = metadata.brokers.get(leader_id) if leader_id is not None else None
            if broker is not None:
                leaders[tp] = broker
        missing = len(wanted) - len(leaders)
        if missing:
            log.debug("[%s] %d partitions still have no leader", self._settings.consumer_id, missing)
        self._manager._assign(leaders, self._stopping)

    def shutdown(self) -> None:
        self._stopping.set()
        self._wire.abort()
        with self._manager._no_leader_changed:
            self._manager._no_leader_changed.notify_all()
        if self.is_alive():
            self.join(_JOIN_TIMEOUT_S)
            if self.is_alive():
                log.error("[%s] %s did not stop within %.0f s", self._settings.consumer_id, self.name,
                          _JOIN_TIMEOUT_S)
