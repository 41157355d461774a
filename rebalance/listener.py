"""The rebalance listener (Kafka 0.8.2 `ZKRebalancerListener`): a watcher thread that coalesces triggers
and runs `synced_rebalance`, whose attempt is a sequence of named steps in the Scala order.

Every member runs this same algorithm on its own snapshot of ZooKeeper; that is where the herd effect
(everyone reacts to every change) and split brain (different snapshots, conflicting claims) come from.
The lab counts both; this module reproduces them faithfully.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from fetcher_manager.partition_info import PartitionTopicInfo
from rebalance.assignment import Assignment, AssignmentContext, ConsumerThreadId, TopicPartition
from rebalance.assignors import PartitionAssignor
from rebalance.bindings import StreamBindings
from rebalance.offsets import OffsetCheckpoints
from rebalance.ownership import Ownership
from rebalance.store import GroupStore

log = logging.getLogger(__name__)


class ConsumerRebalanceFailedError(RuntimeError):
    """Raised to the caller of the first rebalance; later failures are only logged."""


class ConsumerRebalanceListener(Protocol):
    """The 0.9 callback interface; set it before creating streams. An exception fails the attempt."""

    def before_releasing_partitions(self, partition_ownership: dict[str, set[int]]) -> None: ...

    def before_starting_fetchers(
        self, consumer_id: str, global_partition_assignment: dict[str, dict[int, ConsumerThreadId]]
    ) -> None: ...


class FetcherControl(Protocol):
    def stop_connections(self) -> None: ...

    def start_connections(self, partition_infos: list[PartitionTopicInfo]) -> None: ...


class Timer(Protocol):
    def time(self): ...


@dataclass(frozen=True)
class RebalanceSettings:
    consumer_id: str
    max_retries: int = 4
    backoff_ms: int = 2000
    auto_commit: bool = True
    exclude_internal_topics: bool = True


@dataclass
class RebalanceStats:
    """What the lab reads: how often this member rebalanced and how it went."""

    rebalances: int = 0
    attempts: int = 0
    failed_attempts: int = 0
    conflicts: int = 0
    failures: int = 0


class ZKRebalancerListener:
    def __init__(
        self, settings: RebalanceSettings, store: GroupStore, assignor: PartitionAssignor,
        fetchers: FetcherControl, bindings: StreamBindings, ownership: Ownership, offsets: OffsetCheckpoints,
        user_listener: ConsumerRebalanceListener | None = None, timer: Timer | None = None,
        on_new_session: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.consumer_id = settings.consumer_id
        self.store = store
        self.assignor = assignor
        self.fetchers = fetchers
        self.bindings = bindings
        self.ownership = ownership
        self.offsets = offsets
        self.user_listener = user_listener
        self.timer = timer
        self.on_new_session = on_new_session
        self.rebalance_lock = threading.RLock()  # shared with the connector's shutdown and commit
        self.stats = RebalanceStats()
        self.last_global_assignment: dict[str, Assignment] = {}
        self._cond = threading.Condition()
        self._triggered = False
        self._session_renewed = False
        self._shutting_down = threading.Event()
        self._thread: threading.Thread | None = None

    # --- triggers and the watcher thread -----------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name=f"{self.consumer_id}_watcher_executor", daemon=True)
        self._thread.start()

    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def watcher_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def trigger(self, reason: str = "") -> None:
        """`rebalanceEventTriggered`: set a flag; any number of triggers during a rebalance give one follow-up."""
        log.debug("%s: rebalance triggered (%s)", self.consumer_id, reason)
        with self._cond:
            self._triggered = True
            self._cond.notify_all()

    def session_renewed(self) -> None:
        """Called (without blocking) from the ZooKeeper client when it came back with a new session."""
        with self._cond:
            self._session_renewed = True
            self._cond.notify_all()

    def _watch(self) -> None:
        while not self._shutting_down.is_set():
            with self._cond:
                if not (self._triggered or self._session_renewed):
                    self._cond.wait(1.0)
                fire, renewed = self._triggered, self._session_renewed
                self._triggered = self._session_renewed = False
            try:
                if renewed:
                    self.handle_new_session()
                elif fire:
                    self.synced_rebalance()
            except Exception as exc:  # the watcher must survive anything; the member then owns nothing
                log.error("%s: rebalance failed: %s", self.consumer_id, exc)

    def handle_new_session(self) -> None:
        """Session expired: forget local state *without* committing, re-register the same id, rebalance."""
        with self.rebalance_lock:
            log.info("%s: new ZooKeeper session: re-registering and rebalancing", self.consumer_id)
            self.ownership.forget()
            self.offsets.reset()
            if self.on_new_session is not None:
                self.on_new_session()
        self.synced_rebalance()

    def stop(self) -> None:
        """Ask the watcher thread to end; a rebalance in progress stops at its next step or backoff."""
        self._shutting_down.set()
        with self._cond:
            self._cond.notify_all()

    def join(self, timeout: float = 10.0) -> None:
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down.is_set()

    # --- synced rebalance --------------------------------------------------------------------------

    def synced_rebalance(self) -> None:
        with self.rebalance_lock:
            if self.shutting_down:
                return
            self.stats.rebalances += 1
            timer = self.timer.time() if self.timer is not None else _NullContext()
            with timer:
                for attempt in range(self.settings.max_retries):
                    if self.shutting_down:  # 0.9 checks at every attempt; a closing member must not claim
                        return
                    log.info("%s: begin rebalancing attempt %d", self.consumer_id, attempt)
                    self.stats.attempts += 1
                    try:
                        done = self.rebalance()
                    except Exception as exc:
                        log.info("%s: exception during rebalance attempt %d: %s", self.consumer_id, attempt, exc)
                        done = False
                    if done:
                        log.info("%s: end rebalancing attempt %d: succeeded", self.consumer_id, attempt)
                        return
                    self.stats.failed_attempts += 1
                    log.info("%s: end rebalancing attempt %d: failed", self.consumer_id, attempt)
                    self.close_fetchers(self.bindings.topics())
                    if self._shutting_down.wait(self.settings.backoff_ms / 1000.0):
                        return
            self.stats.failures += 1
            raise ConsumerRebalanceFailedError(
                f"{self.consumer_id} can't rebalance after {self.settings.max_retries} retries"
            )

    def rebalance(self) -> bool:
        """One attempt; True when this member ends up owning its share (or there is no broker)."""
        my_topics = self.read_own_subscription()
        if not self.store.live_brokers():
            log.warning("%s: no broker partitions consumed by consumer thread; waiting for brokers", self.consumer_id)
            self.store.watch_brokers(lambda: self.trigger("broker change after a no-broker rebalance"))
            return True
        self.close_fetchers(my_topics)
        self.before_releasing_partitions()
        self.release_partitions()
        context = self.build_assignment_context()
        group_assignment = self.assign(context)
        mine = group_assignment.get(self.consumer_id, {})
        offsets = self.fetch_offsets(mine)
        if self.shutting_down:
            return False
        infos = self.build_partition_infos(mine, offsets)
        if not self.claim_partitions(mine):
            self.stats.conflicts += 1
            return False
        self.ownership.install(mine, infos)
        self.last_global_assignment = group_assignment
        self.before_starting_fetchers(group_assignment)
        self.start_fetchers(infos)
        return True

    # --- the steps, in order -----------------------------------------------------------------------

    def read_own_subscription(self) -> set[str]:
        registration = self.store.registration(self.consumer_id)
        topics = self.store.all_topics() if registration.is_wildcard else ()
        return set(registration.topic_streams(topics, self.settings.exclude_internal_topics))

    def close_fetchers(self, topics: set[str]) -> None:
        """Stop fetching, empty the topics' queues and every stream's current chunk, then commit."""
        self.fetchers.stop_connections()
        log.info("%s: fetching stopped", self.consumer_id)
        self.bindings.clear(topics)
        if self.settings.auto_commit:
            self.offsets.commit(self.ownership.infos())

    def before_releasing_partitions(self) -> None:
        if self.user_listener is not None:
            self.user_listener.before_releasing_partitions(self.ownership.partitions_by_topic())

    def release_partitions(self) -> None:
        self.ownership.release_all()

    def build_assignment_context(self) -> AssignmentContext:
        """A fresh snapshot: every member's registration, evaluated against this member's topic view."""
        members = self.store.member_ids()
        all_topics = self.store.all_topics()
        subscriptions = {
            member: self.store.registration(member).topic_streams(all_topics, self.settings.exclude_internal_topics)
            for member in members
        }
        topics = {t for subscription in subscriptions.values() for t in subscription}
        return AssignmentContext.build(self.consumer_id, subscriptions, self.store.partitions_for_topics(topics))

    def assign(self, context: AssignmentContext) -> dict[str, Assignment]:
        return self.assignor.assign_group(context)

    def fetch_offsets(self, mine: Assignment) -> dict[TopicPartition, int]:
        return self.offsets.fetch(mine)

    def build_partition_infos(
        self, mine: Assignment, offsets: dict[TopicPartition, int]
    ) -> dict[TopicPartition, PartitionTopicInfo]:
        infos = {}
        for tp, thread_id in sorted(mine.items()):
            offset = offsets.get(tp, -1)
            queue = self.bindings.queue_for(tp.topic, thread_id)
            infos[tp] = PartitionTopicInfo(tp.topic, tp.partition, queue, offset, offset)
        return infos

    def claim_partitions(self, mine: Assignment) -> bool:
        return self.ownership.claim(mine)

    def before_starting_fetchers(self, group_assignment: dict[str, Assignment]) -> None:
        if self.user_listener is None:
            return
        global_view: dict[str, dict[int, ConsumerThreadId]] = {}
        for assignment in group_assignment.values():
            for tp, thread_id in assignment.items():
                global_view.setdefault(tp.topic, {})[tp.partition] = thread_id
        self.user_listener.before_starting_fetchers(self.consumer_id, global_view)

    def start_fetchers(self, infos: dict[TopicPartition, PartitionTopicInfo]) -> None:
        # The audit in the end-to-end test parses this line: partition=start offset for every owned partition.
        log.info("%s: fetching started %s", self.consumer_id,
                 " ".join(f"{tp.topic}/{tp.partition}={info.consumed_offset}" for tp, info in sorted(infos.items())))
        if infos:
            self.fetchers.start_connections(list(infos.values()))


class _NullContext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
