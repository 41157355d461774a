"""`ZookeeperConsumerConnector`: wires config, ZooKeeper, registration, streams, the rebalance listener,
offsets and the fetcher manager together, in the Scala 0.8.2 order. The behaviour lives in the modules it
wires; this file only owns lifecycle (streams creation, session renewal, shutdown). As in 0.8.2, the wildcard
topics (`WildcardStreamsHandler`, zkconsumer/wildcard.py) and the periodic commit (`AutoCommitter`,
zkconsumer/auto_commit.py) are classes of their own, which the connector starts and stops.

Threads (see docs/DESIGN.md, "Threads and locks"): the caller's thread runs the first rebalance; the
listener's watcher thread runs every later one and all work that follows a ZooKeeper notification; kazoo's
event thread only records and signals; the auto-commit thread commits under the rebalance lock.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from fetcher_manager.broker import Broker
from fetcher_manager.manager import ConsumerFetcherManager
from fetcher_manager.metrics import MetricsRegistry, metric_name, tag_matcher
from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.settings import FetchSettings
from fetcher_manager.stream import ChunkQueue, KafkaStream
from rebalance import opt_in, sticky_agreement
from rebalance.assignment import ConsumerThreadId
from rebalance.assignors import get_assignor
from rebalance.bindings import StreamBindings
from rebalance.events import EventBus, EventKind, EventListener, MemberEvent, MemberState
from rebalance.listener import ConsumerRebalanceListener, RebalanceSettings, RebalanceStats, ZKRebalancerListener
from rebalance.listener_types import ModeRefusedError
from rebalance.offsets import OffsetCheckpoints
from rebalance.ownership import Ownership
from rebalance.subscription import Registration, TopicFilter
from rebalance.sync import THREADING, SyncPrimitives
from zkconsumer.auto_commit import AutoCommitter
from zkconsumer.config import ConsumerConfig
from zkconsumer.kafka_offsets import KafkaOffsetsError, OffsetChannelSettings
from zkconsumer.modes import mode_settings
from zkconsumer.offset_storage import ZOOKEEPER, kafka_storage, storage_mode
from zkconsumer.registration import make_consumer_id, register
from zkconsumer.wildcard import WildcardStreamsHandler
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.client import WatchHandle, ZkClient, ZkUnavailableError
from zkconsumer.zookeeper.group import ZkGroupStore, read_brokers

log = logging.getLogger(__name__)
Decoder = Callable[[bytes | None], Any]
_JOIN_S = 5.0  # every thread of ours is joined this long at most at shutdown (they stop in milliseconds)


class MessageStreamsExistError(RuntimeError):
    """`create_message_streams*` may be called once per connector (Kafka's MessageStreamsExistException)."""


class Fetchers(Protocol):
    """What the connector needs of a fetcher manager (`ConsumerFetcherManager`, or `NoFetchers`)."""

    def start_connections(self, partition_infos: list[PartitionTopicInfo]) -> None: ...

    def stop_connections(self) -> None: ...

    def shutdown(self) -> None: ...

    def join(self, timeout: float) -> bool: ...


ZkFactory = Callable[[ConsumerConfig, str], ZkClient]
FetcherFactory = Callable[[FetchSettings, Callable[[], Sequence[Broker]], MetricsRegistry], Fetchers]


def default_zk_factory(config: ConsumerConfig, consumer_id: str) -> ZkClient:
    return ZkClient(config.zookeeper_connect, session_timeout_ms=config.zookeeper_session_timeout_ms,
                    connection_timeout_ms=config.zookeeper_connection_timeout_ms, log_id=consumer_id,
                    auth=config.zk_auth, tls=config.zk_tls)


class ZookeeperConsumerConnector:
    """The 0.8.2 high-level consumer. `zk_factory`, `fetcher_factory` and `sync` replace its ZooKeeper client (e.g.
    an in-memory one), its fetcher manager (`NoFetchers`) and the locks, events and threads it and its listener use."""

    def __init__(self, config: ConsumerConfig, metrics: MetricsRegistry | None = None, *,
                 zk_factory: ZkFactory | None = None, fetcher_factory: FetcherFactory | None = None,
                 sync: SyncPrimitives = THREADING) -> None:
        self.config = config
        self.consumer_id = make_consumer_id(config.group_id, config.consumer_id)
        self.client_id = config.client_id or config.group_id
        self.registry = metrics or MetricsRegistry()
        self.events = EventBus(self.consumer_id)
        self._tags = {"clientId": self.client_id}
        self._shutdown_lock = sync.lock()
        self._closing = sync.event()  # set first thing in shutdown(): interrupts registration waits
        self._streams_created = False
        self._registration: Registration | None = None
        self._watch_lock = sync.lock()  # guards the watch handles against shutdown()
        self._topic_watches: dict[str, WatchHandle] = {}
        self._sync = sync
        self._wildcard: WildcardStreamsHandler | None = None  # made by create_message_streams_by_filter
        self._auto_committer: AutoCommitter | None = None

        self.zk = (zk_factory or default_zk_factory)(config, self.consumer_id)
        self.zk.on_state_change(self._on_connection_state)
        self.zk.start()
        self.store = ZkGroupStore(self.zk, config.group_id)
        self.bindings = StreamBindings()
        self.ownership = Ownership(self.store, self.consumer_id, self.events)
        zk_commits = self.registry.meter(self._name("ZooKeeperCommitsPerSec"))
        kafka_commits = self.registry.meter(self._name("KafkaCommitsPerSec"))  # registered whatever the storage
        self.offset_storage = None if config.offsets_storage == ZOOKEEPER else kafka_storage(
            storage_mode(config.offsets_storage, config.dual_commit_enabled), self.store, OffsetChannelSettings(
                config.group_id, self.client_id, self.consumer_id, config.offsets_channel_backoff_ms,
                config.offsets_channel_socket_timeout_ms, config.offsets_commit_max_retries),
            functools.partial(read_brokers, self.zk, skip_bad=True), zk_commits, kafka_commits)
        self.offsets = OffsetCheckpoints(self.offset_storage or self.store, self.consumer_id, zk_commits, self.events)
        self.fetcher_manager = (fetcher_factory or ConsumerFetcherManager)(
            self._fetch_settings(), functools.partial(read_brokers, self.zk, skip_bad=True), self.registry)
        self.listener = ZKRebalancerListener(
            RebalanceSettings(self.consumer_id, config.rebalance_max_retries, config.rebalance_backoff_ms,
                              config.auto_commit_enable, config.exclude_internal_topics, modes=mode_settings(config)),
            self.store, get_assignor(config.partition_assignment_strategy), self.fetcher_manager, self.bindings,
            self.ownership, self.offsets, events=self.events,
            timer=self.registry.timer(self._name("RebalanceRateAndTime")), register=self._reregister, sync=sync,
        )
        self.registry.gauge(self._name("OwnedPartitionsCount", groupId=config.group_id),
                            lambda: len(self.ownership.owners()))
        self.events.subscribe(self._track_owned_topics)
        if config.auto_commit_enable:
            self._auto_committer = AutoCommitter(
                self.consumer_id, config.auto_commit_interval_ms, lambda: self.offsets.commit(self.ownership.infos()),
                lock=self.listener.rebalance_lock, connected=lambda: self.zk.connected, sync=sync)
            self._auto_committer.start()
        log.info("%s: connected to ZooKeeper at %s", self.consumer_id, config.zookeeper_connect)

    # --- public API --------------------------------------------------------------------------------

    def create_message_streams(self, topic_count_map: dict[str, int], key_decoder: Decoder | None = None,
                               value_decoder: Decoder | None = None) -> dict[str, list[KafkaStream]]:
        """One stream per (topic, thread); blocks until the first rebalance succeeds (or raises)."""
        for topic, count in topic_count_map.items():
            if not isinstance(topic, str) or not topic:
                raise ValueError(f"topic names must be non-empty strings, got {topic!r}")
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise ValueError(f"stream count for topic {topic!r} must be an integer >= 1, got {count!r}")
        self._claim_streams_once()
        result: dict[str, list[KafkaStream]] = {}
        for topic, count in topic_count_map.items():
            for i in range(count):
                queue, stream = self._new_stream(key_decoder, value_decoder)
                self._bind(topic, i, queue, stream)
                result.setdefault(topic, []).append(stream)
        self._registration = self._with_modes(Registration.static(topic_count_map))
        self.listener.mark_registering()
        self._register()
        self._reinitialize(set(topic_count_map))
        return result

    def create_message_streams_by_filter(self, topic_filter: TopicFilter, num_streams: int = 1,
                                         key_decoder: Decoder | None = None,
                                         value_decoder: Decoder | None = None) -> list[KafkaStream]:
        """`num_streams` streams shared by every topic the whitelist/blacklist allows, now and later."""
        if not isinstance(num_streams, int) or isinstance(num_streams, bool) or num_streams < 1:
            raise ValueError(f"num_streams must be an integer >= 1, got {num_streams!r}")
        self._claim_streams_once()
        pairs = [self._new_stream(key_decoder, value_decoder) for _ in range(num_streams)]
        self._wildcard = WildcardStreamsHandler(
            self.consumer_id, topic_filter, pairs, zk=self.zk, watcher=self.listener, bind=self._bind,
            watch_topics=self._watch_topic_data, closing=self._closing,
            exclude_internal_topics=self.config.exclude_internal_topics, sync=self._sync)
        self._registration = self._with_modes(Registration.wildcard(topic_filter, num_streams))
        self.listener.mark_registering()
        self._register()
        self._reinitialize(self._wildcard.start())
        return self._wildcard.streams

    def set_rebalance_listener(self, listener: ConsumerRebalanceListener) -> None:
        if self._streams_created:
            raise RuntimeError("set the rebalance listener before creating message streams")
        self.listener.set_user_listener(listener)

    def add_event_listener(self, listener: EventListener) -> Callable[[], None]:
        """Subscribe to this member's `MemberEvent`s (quick, non-blocking callbacks); returns an unsubscribe."""
        return self.events.subscribe(listener)

    @property
    def state(self) -> MemberState:
        return self.listener.state

    @property
    def last_rebalance_error(self) -> Exception | None:
        """Why the last background rebalance (or re-registration) failed; None once one succeeds again."""
        return self.listener.last_error

    def commit_offsets(self) -> int:
        """Write every owned partition's consumed offset that changed; returns how many were written."""
        with self.listener.rebalance_lock:  # never write a partition a concurrent rebalance just released
            return self.offsets.commit(self.ownership.infos())

    def owned_partitions(self) -> dict[tuple[str, int], str]:
        return {(tp.topic, tp.partition): str(t) for tp, t in sorted(self.ownership.owners().items())}

    def metrics(self) -> dict[str, dict[str, Any]]:
        snapshot = self.registry.snapshot()
        for kind, count in sorted(self.zk.op_counts().items()):
            name = "WatchNotifications" if kind.startswith("watch:") else "SessionEvents" if kind.startswith(
                "state:") else "Requests"
            snapshot[metric_name("zkconsumer", "ZooKeeperClient", name, clientId=self.client_id,
                                 kind=kind.split(":")[-1])] = {"count": count}
        return snapshot

    @property
    def rebalance_stats(self) -> RebalanceStats:
        return self.listener.stats

    def __enter__(self) -> ZookeeperConsumerConnector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """0.8.2 order: stop the watcher, then under the rebalance lock stop committing and fetching, end every
        stream, commit, and close ZooKeeper (our ephemeral nodes vanish with the session). Every thread this
        connector started has ended when it returns."""
        with self._shutdown_lock:
            if self._closing.is_set():
                return
            self._closing.set()
        if self._auto_committer is not None:
            self._auto_committer.stop()
        log.info("%s: shutting down", self.consumer_id)
        self.listener.stop()
        with self.listener.rebalance_lock:
            with self._watch_lock:
                handles = list(self._topic_watches.values())
            if self._wildcard is not None:
                self._wildcard.stop()
            for handle in handles:
                handle.stop()
            try:
                self.fetcher_manager.shutdown()
                log.info("%s: fetching stopped", self.consumer_id)
                self.listener.fetchers_stopped(self.ownership.owners())
                for queue in self.bindings.queues():
                    queue.clear()
                    queue.put_shutdown_sentinel()
                if self.config.auto_commit_enable:
                    self._final_commit()
            except Exception:
                log.exception("%s: error during shutdown", self.consumer_id)
            finally:
                self.zk.close()  # also fails at once any call still waiting on ZooKeeper in our threads
                if self.offset_storage is not None:
                    self.offset_storage.close()  # 0.8.2 disconnects the offsets channel last
        stragglers = [name for name, stopped in (
            ("watcher", self.listener.join(_JOIN_S)), ("fetchers", self.fetcher_manager.join(_JOIN_S)),
            ("auto-commit", self._auto_committer is None or self._auto_committer.join(_JOIN_S))) if not stopped]
        if stragglers:
            log.error("%s: threads still running after shutdown: %s", self.consumer_id, ", ".join(stragglers))
        self.listener.mark_closed()
        self.registry.remove_matching(tag_matcher("clientId", self.client_id))
        log.info("%s: shut down completed", self.consumer_id)

    # --- wiring ------------------------------------------------------------------------------------

    def _name(self, name: str, **tags: str) -> str:
        return metric_name("kafka.consumer", "ZookeeperConsumerConnector", name, **self._tags, **tags)

    def _fetch_settings(self) -> FetchSettings:
        c = self.config
        return FetchSettings(
            client_id=self.client_id, consumer_id=self.consumer_id, fetch_message_max_bytes=c.fetch_message_max_bytes,
            fetch_min_bytes=c.fetch_min_bytes, fetch_wait_max_ms=c.fetch_wait_max_ms,
            num_consumer_fetchers=c.num_consumer_fetchers, refresh_leader_backoff_ms=c.refresh_leader_backoff_ms,
            socket_timeout_ms=c.socket_timeout_ms, socket_receive_buffer_bytes=c.socket_receive_buffer_bytes,
            auto_offset_reset=c.auto_offset_reset,
        )

    def _claim_streams_once(self) -> None:
        if self._closing.is_set():
            raise RuntimeError(f"{self.consumer_id} is shut down")
        if self._streams_created:
            raise MessageStreamsExistError(f"{self.consumer_id}: message streams can be created only once")
        self._streams_created = True

    def _new_stream(self, key_decoder: Decoder | None, value_decoder: Decoder | None) -> tuple[ChunkQueue, KafkaStream]:
        queue = ChunkQueue(self.config.queued_max_message_chunks)
        stream = KafkaStream(queue, self.config.consumer_timeout_ms, self.client_id, key_decoder, value_decoder,
                             metrics=self.registry)
        return queue, stream

    def _bind(self, topic: str, index: int, queue: ChunkQueue, stream: KafkaStream) -> None:
        self.bindings.bind(topic, ConsumerThreadId(self.consumer_id, index), queue, stream)
        self.registry.gauge(self._name("FetchQueueSize", topic=topic, threadId=str(index)), queue.qsize)

    def _with_modes(self, registration: Registration) -> Registration:
        """A member running the consensus barrier or the sticky assignor says so in its registration (each needs
        every member); every other member's registration stays 0.8.2's, byte for byte."""
        modes = ((opt_in.BARRIER,) if self.listener.settings.modes.barrier else ()) + (
            (sticky_agreement.STICKY,) if self.listener.assignor.uses_previous else ())
        return dataclasses.replace(registration, modes=modes) if modes else registration

    def _register(self) -> None:
        assert self._registration is not None
        wait = 2 * self.config.zookeeper_session_timeout_ms / 1000.0 + 5.0
        register(self.zk, self.config.group_id, self.consumer_id, self._registration, wait, self._closing)

    def _reregister(self) -> None:
        if self._registration is not None:
            self._register()

    def _final_commit(self) -> None:
        """Shutdown's commit. With ZooKeeper unreachable it is skipped at once instead of holding the exit for the
        request timeout: the next owner re-reads from the last commit (at-least-once), and the log says from where."""
        infos = list(self.ownership.infos())
        if not self.zk.connected:
            log.warning("%s: ZooKeeper unreachable at shutdown; not committed: %s", self.consumer_id,
                        ", ".join(f"{i.topic}/{i.partition}={i.consumed_offset}" for i in infos) or "nothing")
            return
        try:
            self.offsets.commit(infos)
        except (ZkUnavailableError, KafkaOffsetsError) as exc:
            log.warning("%s: final commit failed: %s", self.consumer_id, exc)

    def _on_connection_state(self, state: str) -> None:
        # kazoo's thread: emit, signal and log one line per change (nothing else is logged while it lasts). The one
        # lock of ours it takes is OffsetCheckpoints' (in `fence`, a flag write) on an expiry.
        self.events.emit(EventKind.CONNECTION, state=state)
        if state == "suspended":
            log.warning("%s: connection to ZooKeeper lost; keeping its partitions until the session expires",
                        self.consumer_id)
        elif state == "lost" and not self._closing.is_set():
            log.warning("%s: ZooKeeper session expired; it will re-register and rebalance", self.consumer_id)
        elif state == "connected":
            log.info("%s: connected to ZooKeeper", self.consumer_id)
        if state == "lost":
            self.offsets.fence()  # nothing claimed under the dead session is committed any more (offsets.py)
            if not self._closing.is_set():
                self.events.emit(EventKind.SESSION_EXPIRED)

    def _on_new_session(self) -> None:
        self.events.emit(EventKind.SESSION_RENEWED, session=self.zk.session_id)
        self.listener.session_renewed()

    def _reinitialize(self, topics: set[str]) -> None:
        """Install watches (once each) and run the first rebalance in the caller's thread."""
        if not self.listener.started:
            self.zk.on_new_session(self._on_new_session)
            self.zk.watch_children(layout.ids_dir(self.config.group_id),
                                   lambda _children: self.listener.trigger("group membership changed"), initial=False)
            self.listener.start()
        self._watch_topic_data(topics)
        try:
            self.listener.synced_rebalance()
        except ModeRefusedError:
            # It must not stay registered: the others would assign it partitions it never claims.
            log.error("%s: refusing to join group %s; shutting down", self.consumer_id, self.config.group_id)
            self.shutdown()
            raise

    def _watch_topic_data(self, topics: set[str]) -> None:
        """Watch each topic's node once (a change of its partitions triggers a rebalance). Runs on the caller's
        thread (`_reinitialize`) or the watcher thread (a wildcard apply), never under the rebalance lock. It holds
        `_watch_lock` across each `watch_data`, a ZooKeeper round trip that takes ZkClient's counter lock, so
        shutdown(), which takes `_watch_lock` under the rebalance lock, waits for it (up to the request timeout if
        ZooKeeper is unreachable); after that, `_closing` keeps any later call from adding a watch."""
        with self._watch_lock:
            if self._closing.is_set():
                return
            for topic in sorted(topics - set(self._topic_watches)):

                def on_data(data: bytes | None, topic: str = topic) -> None:
                    if data is None:
                        log.warning("%s: topic %s was deleted", self.consumer_id, topic)
                    else:
                        self.listener.trigger(f"topic {topic} changed")

                self._topic_watches[topic] = self.zk.watch_data(layout.topic_path(topic), on_data, initial=False)

    def _track_owned_topics(self, event: MemberEvent) -> None:
        """Per-topic OwnedPartitionsCount gauges follow ownership as it changes (removed on release)."""
        if event.kind not in (EventKind.STATE, EventKind.ATTEMPT_END):
            return
        owned = self.ownership.partitions_by_topic()
        prefix = self._name("OwnedPartitionsCount", groupId=self.config.group_id) + ",topic="
        for name in self.registry.names():
            if name.startswith(prefix) and name[len(prefix):] not in owned:
                self.registry.remove(name)
        for topic in owned:
            self.registry.gauge(prefix + topic, lambda t=topic: len(self.ownership.partitions_by_topic().get(t, ())))
