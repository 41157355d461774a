"""ConsumerFetcherManager: a leader-finder thread plus fetcher threads keyed by (leader, fetcher id), as in
Kafka 0.8.2's ``ConsumerFetcherManager.scala`` and ``AbstractFetcherManager.scala``.

Usage: after every successful rebalance the connector calls ``start_connections`` with the partitions it
now owns; before the next one ``stop_connections``, and at the end ``shutdown`` and, once its ZooKeeper
client is closed, ``join``. All partitions start in the no-leader set; the leader finder resolves their
leaders with one Metadata request per round and hands them to fetcher threads, which return any partition
that errors to the set.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from fetcher_manager.broker import Broker
from fetcher_manager.fetcher_id import fetcher_id
from fetcher_manager.fetcher_thread import ConsumerFetcherThread
from fetcher_manager.kafka_wire import BrokerError, KafkaWire, WireError, WireFactory
from fetcher_manager.metrics import MetricsRegistry, metric_name
from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.settings import FetchSettings
from fetcher_manager.topic_partition import TopicPartition

log = logging.getLogger(__name__)

FetcherKey = tuple[Broker, int]  # (leader, fetcher id)
# A fetcher's shutdown interrupts its blocking points (abort() fails the request, a blocked put polls its stop
# flag), so it ends at once unless it is still connecting to a host that does not answer. Waiting for it
# matters: once stop_connections returns the connector clears the queues, and no stopped fetcher may put a
# chunk after that.
_FETCHER_JOIN_S = 10.0
# The finder may sit in broker_source(), a ZooKeeper read that abort() cannot interrupt and that can last the
# ZooKeeper request timeout. Nothing depends on it having ended: it checks its stop flag when it returns, and
# _assign checks it under the manager lock. So stopping waits only briefly; join() waits for the rest.
_FINDER_JOIN_S = 0.5


class ConsumerFetcherManager:
    def __init__(self, settings: FetchSettings, broker_source: Callable[[], Sequence[Broker]],
                 metrics: MetricsRegistry | None = None, wire_factory: WireFactory | None = None) -> None:
        self._settings = settings
        self._broker_source = broker_source
        self._metrics = metrics
        self._wire_factory = wire_factory or KafkaWire.from_settings
        self._lock = threading.Lock()
        self._no_leader_changed = threading.Condition(self._lock)
        self._partition_map: dict[TopicPartition, PartitionTopicInfo] = {}
        self._no_leader: set[TopicPartition] = set()
        self._fetchers: dict[FetcherKey, ConsumerFetcherThread] = {}
        self._finder: _LeaderFinderThread | None = None
        self._threads: list[threading.Thread] = []  # everything we started and have not yet seen end
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
            self._start(self._finder)
        log.info("[%s] starting fetchers for %d partitions", self._settings.consumer_id, len(infos))

    def stop_connections(self) -> None:
        """Stop the leader finder and every fetcher thread; forget all partitions.

        Every thread is signalled before any is waited for, so stopping takes as long as the slowest thread,
        not the sum. Fetchers are joined (no stopped fetcher queues a chunk after this returns); the finder
        only for ``_FINDER_JOIN_S``: if it is inside ``broker_source()`` it stays listed by ``threads()`` and
        does nothing more when it returns. Idempotent: a second call (or one before any start) does nothing.
        """
        with self._lock:
            finder, self._finder = self._finder, None
            if finder is not None:
                # Under the lock, which _assign holds while it checks the flag: no fetcher starts after this.
                finder.initiate_shutdown()
                self._no_leader_changed.notify_all()
            fetchers = list(self._fetchers.values())
            self._fetchers.clear()
            self._partition_map = {}
            self._no_leader.clear()
        for fetcher in fetchers:
            fetcher.initiate_shutdown()
        deadline = time.monotonic() + _FETCHER_JOIN_S
        for fetcher in fetchers:
            fetcher.await_shutdown(max(0.0, deadline - time.monotonic()))
        if finder is not None:
            finder.await_shutdown(_FINDER_JOIN_S)
        if finder is not None or fetchers:
            log.info("[%s] all fetchers stopped", self._settings.consumer_id)

    def add_partitions(self, partition_infos: Iterable[PartitionTopicInfo]) -> None:
        """Own these partitions too, without stopping the fetchers of the others (incremental ownership,
        docs/modes.md); the leader finder hands them to fetcher threads. Starts the connections if none run."""
        infos = list(partition_infos)
        with self._lock:
            running = self._finder is not None
            if running:
                for info in infos:
                    self._partition_map[info.key] = info
                    self._no_leader.add(info.key)
                self._no_leader_changed.notify_all()
        if not running:
            self.start_connections(infos)

    def remove_partitions(self, tps: Iterable[TopicPartition], timeout_s: float = _FETCHER_JOIN_S) -> bool:
        """Stop fetching these partitions and keep fetching the others; True once no fetcher can queue a chunk
        of them any more. False if a fetcher did not finish its loop in time (blocked on a full queue): the
        caller then stops every fetcher, as 0.8.2 always does."""
        removed = set(tps)
        with self._lock:
            for tp in removed:
                self._partition_map.pop(tp, None)
                self._no_leader.discard(tp)
            fetchers = list(self._fetchers.values())
        holding = [f for f in fetchers if removed & set(f.partitions())]
        for fetcher in holding:
            fetcher.remove_partitions(removed)
        deadline = time.monotonic() + timeout_s
        return all(f.await_round(max(0.0, deadline - time.monotonic())) for f in holding)

    def shutdown(self) -> None:
        """``stop_connections`` for good: later ``start_connections`` calls fail. Returns within about
        ``_FINDER_JOIN_S`` even if the finder is blocked in ``broker_source()``; ``join`` waits for it."""
        with self._lock:
            self._shut_down = True
        self.stop_connections()
        if self._metrics is not None:
            for name in ("MaxLag", "MinFetchRate"):
                self._metrics.remove(self._manager_metric(name))

    def threads(self) -> list[threading.Thread]:
        """The threads this manager started (leader finders, fetchers) that are still alive."""
        with self._lock:
            self._threads = [thread for thread in self._threads if thread.is_alive()]
            return list(self._threads)

    def join(self, timeout: float | None = None) -> bool:
        """After ``shutdown`` (or ``stop_connections``): wait up to ``timeout`` seconds in all (None: no limit)
        for every thread this manager started to end; True if none is left.

        Call it after whatever ``broker_source()`` blocks on is closed (the connector's ZooKeeper client), so
        a finder still inside it fails at once.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self.threads():
            if thread is threading.current_thread():
                continue
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            thread.join(remaining)
        return not [thread for thread in self.threads() if thread is not threading.current_thread()]

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
            # The map's own keys, so a caller's plain (topic, partition) tuple is stored as a TopicPartition.
            owned = [info.key for tp in tps if (info := self._partition_map.get(tp)) is not None]
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
                key = (leader, fetcher_id(tp.topic, tp.partition, self._settings.num_consumer_fetchers))
                batches.setdefault(key, {})[tp] = info
            for key, infos in batches.items():
                fetcher = self._fetchers.get(key)
                if fetcher is None or not fetcher.is_alive():
                    fetcher = ConsumerFetcherThread(key[1], key[0], self._settings, self.add_partitions_with_error,
                                                    metrics=self._metrics, wire_factory=self._wire_factory)
                    self._fetchers[key] = fetcher
                    self._start(fetcher)
                fetcher.add_partitions(infos)
                log.info("[%s] %s now fetches %s", self._settings.consumer_id, fetcher.name,
                         ", ".join(f"{t}:{p}" for t, p in sorted(infos)))

    def _shutdown_idle_fetchers(self, stopping: threading.Event) -> None:
        with self._lock:
            if stopping.is_set():  # a stopped finder must not touch the fetchers of the next generation
                return
            idle = [key for key, fetcher in self._fetchers.items() if fetcher.partition_count() == 0]
            doomed = [self._fetchers.pop(key) for key in idle]
        for fetcher in doomed:
            fetcher.shutdown(_FETCHER_JOIN_S)

    def _start(self, thread: threading.Thread) -> None:
        """Start a thread of ours and remember it for ``threads()``/``join()``; the caller holds the lock."""
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(thread)
        thread.start()

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
    """Waits for leaderless partitions, looks their leaders up, hands them over, then backs off
    (``ConsumerFetcherManager.scala``'s ``LeaderFinderThread``)."""

    def __init__(self, manager: ConsumerFetcherManager) -> None:
        super().__init__(name=f"{manager._settings.consumer_id}-leader-finder-thread", daemon=True)
        self._manager = manager
        self._settings = manager._settings
        self._stopping = threading.Event()
        self._wire = manager._wire_factory(manager._settings)
        self._source_failing = False

    def run(self) -> None:
        log.info("[%s] %s starting", self._settings.consumer_id, self.name)
        try:
            while not self._stopping.is_set():
                try:
                    self._round()
                except Exception:
                    if not self._stopping.is_set():
                        log.exception("[%s] error in %s", self._settings.consumer_id, self.name)
                self._manager._shutdown_idle_fetchers(self._stopping)
                # An Event wait rather than a sleep, so shutdown() does not wait out the backoff.
                self._stopping.wait(self._settings.refresh_leader_backoff_ms / 1000.0)
        finally:
            self._wire.close()
            log.info("[%s] %s stopped", self._settings.consumer_id, self.name)

    def _round(self) -> None:
        wanted = self._manager._wait_for_no_leader(self._stopping)
        if self._stopping.is_set() or not wanted:
            return
        try:
            brokers = list(self._manager._broker_source())
        except Exception as exc:  # the source is the caller's (ZooKeeper's /brokers/ids): its outage is not ours
            if not self._stopping.is_set():
                # One line when the source starts failing, not one per backoff: its owner logs the outage itself.
                log.log(logging.DEBUG if self._source_failing else logging.WARNING,
                        "[%s] cannot list brokers: %s", self._settings.consumer_id, exc)
            self._source_failing = True
            return
        self._source_failing = False
        if self._stopping.is_set():
            return  # it may have blocked for seconds on ZooKeeper: a finder stopped meanwhile sends nothing
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

    def initiate_shutdown(self) -> None:
        """Set the stop flag and fail a pending Metadata request. The caller wakes ``_wait_for_no_leader``
        (it holds the manager's lock); nothing can wake a ``broker_source()`` call."""
        self._stopping.set()
        self._wire.abort()

    def await_shutdown(self, timeout_s: float) -> bool:
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout_s)
        if self.is_alive():
            log.warning("[%s] %s still running after %.1f s (waiting for the broker list?); it will do nothing "
                        "more when that returns", self._settings.consumer_id, self.name, timeout_s)
            return False
        return True
