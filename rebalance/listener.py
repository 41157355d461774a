"""The rebalance listener (Kafka 0.8.2 `ZKRebalancerListener`): a watcher thread that coalesces triggers
and runs `synced_rebalance`, whose attempts run the named steps below: in the Scala order (`FaithfulAttempt`,
rebalance/attempts.py), or in the opt-in modes' (`ModalAttempt`, rebalance/opt_in.py), chosen once, from the modes.

Every member runs this same algorithm on its own snapshot of ZooKeeper; that is where the herd effect
(everyone reacts to every change) and split brain (different snapshots, conflicting claims) come from.
The lab counts both; this module reproduces them faithfully, and reports every step as a `MemberEvent`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext

from tenacity import RetryCallState, RetryError, Retrying, wait_exponential

from fetcher_manager.partition_info import PartitionTopicInfo
from rebalance import sticky_agreement
from rebalance.assignment import Assignment, AssignmentContext, ConsumerThreadId, TopicPartition
from rebalance.assignors import PartitionAssignor
from rebalance.attempts import Attempt, FaithfulAttempt
from rebalance.bindings import StreamBindings
from rebalance.events import EventBus, EventKind, MemberState, check_transition, format_partition_key
from rebalance.listener_types import (
    AttemptResult,
    ConsumerRebalanceFailedError,
    ConsumerRebalanceListener,
    FetcherControl,
    ModeRefusedError,
    RebalanceSettings,
    RebalanceStats,
    Timer,
)
from rebalance.offsets import OffsetCheckpoints
from rebalance.opt_in import ModalAttempt
from rebalance.ownership import Ownership
from rebalance.store import GroupStore
from rebalance.subscription import Registration
from rebalance.sync import THREADING, SyncPrimitives, Thread

log = logging.getLogger(__name__)


class ZKRebalancerListener:
    def __init__(
        self, settings: RebalanceSettings, store: GroupStore, assignor: PartitionAssignor,
        fetchers: FetcherControl, bindings: StreamBindings, ownership: Ownership, offsets: OffsetCheckpoints,
        *, events: EventBus | None = None, user_listener: ConsumerRebalanceListener | None = None,
        timer: Timer | None = None, register: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic, sync: SyncPrimitives = THREADING,
    ) -> None:
        self.settings = settings
        self.consumer_id = settings.consumer_id
        # Chosen once, from the modes (docs/modes.md); patience changes only when attempts begin, not what they do.
        self.attempt: Attempt = ModalAttempt(settings.modes) if settings.modes.any_attempt_mode else FaithfulAttempt()
        self.store = store
        self.assignor = assignor
        self.fetchers = fetchers
        self.bindings = bindings
        self.ownership = ownership
        self.offsets = offsets
        self.events = events or EventBus(settings.consumer_id)
        self._user_listener = user_listener  # read by the attempts, under rebalance_lock; set by set_user_listener
        self.timer = timer
        self.register = register  # (re-)writes our registration node; called after a session expiry
        self.clock = clock  # for the duration_ms of the rebalance and attempt events
        self._sync = sync  # where its lock, condition, event and watcher thread come from (rebalance/sync.py)
        # Held for a whole rebalance; shared with the connector's shutdown and commits. It is also the member
        # state's lock: `_transition`, the one writer of `_state`, takes it.
        self.rebalance_lock = sync.rlock()
        self.stats = RebalanceStats()
        self._state = MemberState.CREATED
        self.last_error: Exception | None = None  # why the last rebalance or registration failed; None after success
        self._cond = sync.condition()
        self._triggered = False
        # Opt-in modes (rebalance/opt_in.py, docs/modes.md): triggers are numbered so a wait can wake on a newer one,
        # and a patient member can tell a trigger its last successful view already covered.
        self.trigger_seq = 0
        self._last_trigger_at = clock()
        self._covered_seq = -1
        self.last_registrations: dict[str, Registration] = {}  # of the last view read
        self._registration_cache: dict[str, Registration] = {}  # incremental: registrations do not change
        # The sticky assignor (rebalance/sticky_agreement.py): the last view's record this member installed, the
        # previous assignment it computes the next record from if it is the first of a view.
        self.sticky_previous: dict[TopicPartition, ConsumerThreadId] | None = None
        self.sticky_view: str | None = None  # the view of that record
        self._session_renewed = False
        self._tasks: list[Callable[[], None]] = []
        self._shutting_down = sync.event()
        self._thread: Thread | None = None

    # --- state ---------------------------------------------------------------------------------------

    # The lock rule: the member state changes only in `_transition`, on whatever thread asks (the caller's, the
    # watcher, shutdown's), always under `rebalance_lock`, and only along MemberState's TRANSITIONS. The connector
    # asks through `mark_registering` and `mark_closed`; nothing else writes it. The STATE event is emitted under
    # the lock too, so the events give the transitions in the order they were made.

    @property
    def state(self) -> MemberState:
        """Where the member is (rebalance/events.py draws the graph); read without the lock: one reference."""
        return self._state

    def _transition(self, to: MemberState, **data: object) -> None:
        """Move to `to`, checked against MemberState's TRANSITIONS (IllegalTransition names both states), and emit
        the STATE event, all under `rebalance_lock`."""
        with self.rebalance_lock:
            previous = self._state
            self._state = check_transition(self.consumer_id, previous, to)
            self.events.emit(EventKind.STATE, state=str(to), previous=str(previous), **data)

    def mark_registering(self) -> None:
        """The connector is writing the member's first registration (its streams were just created)."""
        self._transition(MemberState.REGISTERING)

    def mark_closed(self) -> None:
        """The connector has shut down (every thread it started has been joined or given up on): final."""
        self._transition(MemberState.CLOSED)

    # --- the user's callbacks ------------------------------------------------------------------------

    @property
    def user_listener(self) -> ConsumerRebalanceListener | None:
        """The user's rebalance callbacks; read-only here: `set_user_listener` sets them."""
        return self._user_listener

    def set_user_listener(self, listener: ConsumerRebalanceListener | None) -> None:
        """Call `listener`'s callbacks from the next attempt on (0.9's `setConsumerRebalanceListener`). Set under
        `rebalance_lock`, which an attempt holds while it reads them: one attempt calls one listener throughout."""
        with self.rebalance_lock:
            self._user_listener = listener

    # --- triggers and the watcher thread -----------------------------------------------------------

    def start(self) -> None:
        self._thread = self._sync.thread(self._watch, name=f"{self.consumer_id}_watcher_executor")
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
        self.events.emit(EventKind.TRIGGER, reason=reason)
        with self._cond:
            self._triggered = True
            self.trigger_seq += 1
            self._last_trigger_at = self.clock()
            self._cond.notify_all()

    @property
    def sync(self) -> SyncPrimitives:
        return self._sync

    def wake(self) -> None:
        """Wake `wait_until` (a watch of an opt-in mode saw what it waited for)."""
        with self._cond:
            self._cond.notify_all()

    def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Wait, up to `timeout_s`, until `predicate` holds; re-checked on every trigger, `wake` and `stop`."""
        with self._cond:
            return bool(self._cond.wait_for(predicate, timeout_s))

    def settle(self) -> int:
        """Patient membership (kazoo's PatientChildrenWatch): wait until no trigger came for the settle window,
        at most ten windows in all, so a burst of joins or a rolling start becomes one rebalance. Returns the
        trigger number the coming view covers."""
        window = self.settings.modes.patience_ms / 1000.0
        if window <= 0:
            return self.trigger_seq
        give_up_at = self.clock() + 10 * window
        with self._cond:
            while not self._shutting_down.is_set():
                quiet_at = min(self._last_trigger_at + window, give_up_at)
                if self.clock() >= quiet_at:
                    break
                self._cond.wait(quiet_at - self.clock())
            self._triggered = False  # what came while settling is in the view read next
            return self.trigger_seq

    def submit(self, task: Callable[[], None]) -> None:
        """Run `task` on the watcher thread before its next rebalance; for work that must not run on kazoo's
        event thread (ZooKeeper I/O) or race the rebalance (changing stream bindings). The task triggers a
        rebalance itself if it needs one."""
        with self._cond:
            self._tasks.append(task)
            self._cond.notify_all()

    def session_renewed(self) -> None:
        """Called (without blocking) from the ZooKeeper client when it came back with a new session."""
        with self._cond:
            self._session_renewed = True
            self._cond.notify_all()

    def _watch(self) -> None:
        while True:
            with self._cond:
                # 0.8.2's watcher wakes every second to look at its shutdown flag (`cond.await(1000, ...)` in
                # ZookeeperConsumerConnector.scala); here stop() sets the flag and notifies, so it just waits.
                self._cond.wait_for(lambda: self._shutting_down.is_set() or self._triggered or self._session_renewed
                                    or self._tasks)
                if self._shutting_down.is_set():
                    return
                fire, renewed, tasks = self._triggered, self._session_renewed, self._tasks
                self._triggered = self._session_renewed = False
                self._tasks = []
                # A patient member's last successful view may already cover this trigger (read after it came).
                fire = fire and not (self.settings.modes.patience_ms > 0 and self.trigger_seq <= self._covered_seq)
            try:
                for task in tasks:
                    task()
                if renewed:
                    self.handle_new_session()
                elif fire:
                    self.synced_rebalance()
            except Exception:  # the watcher must survive anything; the member then owns nothing
                log.exception("%s: error during synced rebalance", self.consumer_id)

    def handle_new_session(self) -> None:
        """Session expired (0.8.2 `ZKSessionExpireListener.handleNewSession`): forget local state *without*
        committing (our owner nodes died with the old session and a new owner may already have moved on),
        re-register the same id until that succeeds, then rebalance."""
        with self.rebalance_lock:
            log.info("%s: new ZooKeeper session: re-registering and rebalancing", self.consumer_id)
            # 0.8.2 keeps fetching until the rebalance; stopping now avoids consuming partitions that the
            # group may already have given to somebody else while registration is retried.
            self.close_fetchers(self.bindings.topics(), commit=False)
            self.ownership.forget()
            self.offsets.reset()
            self._registration_cache.clear()
        self._register()
        self.synced_rebalance()  # returns at once if the member shut down while re-registering

    def _register(self) -> None:
        """Re-register until it works or the member shuts down.

        0.8.2 retries `registerConsumerInZK` through zkclient until ZooKeeper answers; a member that stayed
        unregistered would fail every later rebalance on reading its own registration, for good."""
        if self.register is None:
            return
        self._transition(MemberState.REGISTERING)
        retrying = Retrying(
            stop=self._registration_stopped,
            # backoff_ms, then twice the wait before, up to the cap (tenacity: multiplier * 2 ** (attempt - 1))
            wait=wait_exponential(multiplier=self.settings.backoff_ms / 1000.0,
                                  max=self.settings.max_registration_backoff_ms / 1000.0),
            sleep=self._registration_backoff, before_sleep=self._registration_failed,
        )
        try:
            retrying(self.register)
        except RetryError:  # raised only by the stop condition: the member is shutting down
            return
        self.last_error = None
        self.events.emit(EventKind.REGISTERED)

    # tenacity's own stop_when_event_set and a bare `Event.wait` as its sleep are typed for threading's Event only;
    # these two do the same with the member's (rebalance/sync.py), which may be the simulation's (docs/simulation.md).
    def _registration_stopped(self, _retry: RetryCallState) -> bool:
        return self._shutting_down.is_set()

    def _registration_backoff(self, seconds: float) -> None:
        self._shutting_down.wait(seconds)

    def _registration_failed(self, retry: RetryCallState) -> None:
        # tenacity calls before_sleep only after a failed call (the default retry condition is an Exception
        # raised), with the outcome and the coming wait set.
        assert retry.outcome is not None
        error = retry.outcome.exception()
        assert isinstance(error, Exception)
        delay = retry.upcoming_sleep
        log.error("%s: re-registration failed (attempt %d); retrying in %.1f s", self.consumer_id,
                  retry.attempt_number, delay, exc_info=error)
        self.last_error = error
        with self.rebalance_lock:  # FAILED and back to REGISTERING with nothing between (held only for the writes)
            self._transition(MemberState.FAILED, reason="registration")
            self.events.emit(EventKind.REGISTRATION_FAILED, error=repr(error), retry_in_s=delay)
            self._transition(MemberState.REGISTERING)

    def stop(self) -> None:
        """Ask the watcher thread to end; a rebalance in progress stops at its next step or backoff."""
        self._shutting_down.set()
        with self._cond:
            self._cond.notify_all()

    def join(self, timeout: float = 10.0) -> bool:
        """Wait for the watcher thread; True if it has ended (or never started)."""
        current = self._sync.current_thread()
        if self._thread is not None and self._thread is not current:
            self._thread.join(timeout)
        return not self.watcher_alive or self._thread is current

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down.is_set()

    # --- synced rebalance --------------------------------------------------------------------------

    def synced_rebalance(self) -> None:
        """Up to `rebalance.max.retries` attempts with backoff; raises `ConsumerRebalanceFailedError` after them."""
        covers = self.settle()  # outside the lock: a commit or a shutdown need not wait for a settling member
        with self.rebalance_lock:
            if self.shutting_down:
                return
            self.stats.rebalances += 1
            number = self.stats.rebalances
            began = self.clock()
            self.events.emit(EventKind.REBALANCE_BEGIN, rebalance=number)
            try:
                with self.timer.time() if self.timer is not None else nullcontext():
                    result, attempts = self._attempts(number)
            except ModeRefusedError as refused:
                self._failed(refused, "mode refused")
                raise
            self.events.emit(EventKind.REBALANCE_END, rebalance=number, result=result, attempts=attempts,
                             duration_ms=round((self.clock() - began) * 1000.0, 3))
            if result == "ok":
                self._covered_seq = covers
                self.last_error = None
                self._transition(MemberState.OWNING, partitions=len(self.ownership.owners()))
                return
            if result == "stopped":
                return
            self.stats.failures += 1
            error = ConsumerRebalanceFailedError(
                f"{self.consumer_id} can't rebalance after {self.settings.max_retries} retries"
            )
            self._failed(error, "rebalance")
            raise error

    def _failed(self, error: ConsumerRebalanceFailedError, reason: str) -> None:
        self.last_error = error
        self._transition(MemberState.FAILED, reason=reason)
        self.events.emit(EventKind.REBALANCE_FAILED, error=str(error))

    def _attempts(self, number: int) -> tuple[str, int]:
        for attempt in range(self.settings.max_retries):
            if self.shutting_down:  # 0.9 checks at every attempt; a closing member must not claim
                return "stopped", attempt
            self._transition(MemberState.REBALANCING, attempt=attempt)
            self.events.emit(EventKind.ATTEMPT_BEGIN, rebalance=number, attempt=attempt)
            log.info("%s: begin rebalancing attempt %d", self.consumer_id, attempt)
            self.stats.attempts += 1
            began = self.clock()
            error = None
            try:
                result = self.rebalance()
            except ModeRefusedError:
                raise
            except Exception as exc:
                # As 0.8.2: ZooKeeper may change under a snapshot (a node vanishes between list and read);
                # the attempt fails and the next one starts from a fresh snapshot.
                log.info("%s: exception during rebalance attempt %d", self.consumer_id, attempt, exc_info=True)
                result, error = AttemptResult.ERROR, repr(exc)
            self.events.emit(EventKind.ATTEMPT_END, rebalance=number, attempt=attempt, result=str(result),
                             duration_ms=round((self.clock() - began) * 1000.0, 3), error=error)
            if result in (AttemptResult.OK, AttemptResult.NO_BROKERS):
                log.info("%s: end rebalancing attempt %d: succeeded", self.consumer_id, attempt)
                return "ok", attempt + 1
            if result == AttemptResult.STOPPED:
                return "stopped", attempt + 1
            self.stats.failed_attempts += 1
            if result == AttemptResult.CONFLICT:
                self.stats.conflicts += 1
            log.info("%s: end rebalancing attempt %d: failed (%s)", self.consumer_id, attempt, result)
            if result == AttemptResult.VIEW_CHANGED:
                continue  # an opt-in mode's wait saw the group change: the next view is already there to read
            # 0.8.2's `syncedRebalance` stops every fetcher and clears every queue after a failed attempt, so that
            # nothing is delivered of a partition another member may own by now (ZookeeperConsumerConnector.scala).
            if self.attempt.closes_fetchers_after_failure:
                self.close_fetchers(self.bindings.topics())
            if self._shutting_down.wait(self.settings.backoff_ms / 1000.0):
                return "stopped", attempt + 1
        return "failed", self.settings.max_retries

    def rebalance(self) -> AttemptResult:
        """One attempt (0.8.2's `ZKRebalancerListener.rebalance`): the attempt chosen when the listener was built,
        run on this member's steps below."""
        return self.attempt.run(self)

    def no_brokers(self) -> AttemptResult:
        log.warning("%s: no broker partitions consumed by consumer thread; waiting for brokers", self.consumer_id)
        self.store.watch_brokers(lambda: self.trigger("broker change after a no-broker rebalance"))
        return AttemptResult.NO_BROKERS

    # --- the steps, in order -----------------------------------------------------------------------

    def read_own_subscription(self) -> set[str]:
        registration = self.store.registration(self.consumer_id)
        topics = self.store.all_topics() if registration.is_wildcard else ()
        return set(registration.topic_streams(topics, self.settings.exclude_internal_topics))

    def close_fetchers(self, topics: set[str], *, commit: bool = True) -> None:
        """Stop fetching, empty the topics' queues and every stream's current chunk, then commit."""
        self.fetchers.stop_connections()
        log.info("%s: fetching stopped", self.consumer_id)
        self.fetchers_stopped(self.ownership.owners())
        self.bindings.clear(topics)
        if commit and self.settings.auto_commit:
            self.offsets.commit(self.ownership.infos())

    def remove_fetchers(self, partitions: list[TopicPartition], timeout_s: float) -> bool:
        """Incremental ownership (docs/modes.md): stop fetching only `partitions`, drop their queued chunks and a
        stream's current chunk of them, then commit them. False, with nothing dropped or committed, if a fetcher did
        not let go of them within `timeout_s`."""
        if not self.fetchers.remove_partitions(partitions, timeout_s):
            return False
        gone = set(partitions)
        self.bindings.drop_partitions(gone)
        infos = [info for info in self.ownership.infos() if TopicPartition(info.topic, info.partition) in gone]
        self.fetchers_stopped(partitions)
        if self.settings.auto_commit:
            self.offsets.commit(infos)
        return True

    def fetchers_stopped(self, partitions: Iterable[TopicPartition]) -> None:
        """Report that this member stopped fetching `partitions` (the FETCHERS_STOPPED event, emitted only here)."""
        self.events.emit(EventKind.FETCHERS_STOPPED,
                         partitions=[format_partition_key(tp.topic, tp.partition) for tp in sorted(partitions)])

    def before_releasing_partitions(self, partitions: list[TopicPartition] | None = None) -> None:
        """The user's callback, with `partitions` by topic (all that this member owns unless given)."""
        user = self._user_listener
        if user is None:
            return
        if partitions is None:
            user.before_releasing_partitions(self.ownership.partitions_by_topic())
            return
        by_topic: dict[str, set[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, set()).add(tp.partition)
        user.before_releasing_partitions(by_topic)

    def release_partitions(self) -> None:
        self.ownership.release_all()

    def build_assignment_context(self) -> AssignmentContext:
        """A fresh snapshot: every member's registration, evaluated against this member's topic view."""
        members = self.store.member_ids()
        all_topics = self.store.all_topics()
        # 0.8.2 reads the registrations one after another (ZkUtils.getConsumersPerTopic); the same reads are sent
        # here as one pipelined batch: M round trips become one, which is most of an attempt's wait at large M.
        self.last_registrations = self._read_registrations(members)
        subscriptions = {
            member: registration.topic_streams(all_topics, self.settings.exclude_internal_topics)
            for member, registration in self.last_registrations.items()
        }
        topics = {t for subscription in subscriptions.values() for t in subscription}
        return AssignmentContext.build(self.consumer_id, subscriptions, self.store.partitions_for_topics(topics))

    def _read_registrations(self, members: list[str]) -> dict[str, Registration]:
        """Every member's registration. Incremental ownership reads only those of members it has not seen: a
        member writes its registration once per session and re-registers under a new id only by leaving first,
        so a cached one is current while its id stays in the list (docs/modes.md)."""
        if not self.settings.modes.incremental:
            return self.store.registrations(members)
        cache = self._registration_cache
        for gone in set(cache) - set(members):
            del cache[gone]
        unseen = [m for m in members if m not in cache]
        if unseen:
            cache.update(self.store.registrations(unseen))
        return {m: cache[m] for m in members}

    def assign(self, context: AssignmentContext) -> dict[str, Assignment]:
        if self.assignor.uses_previous:  # sticky: the view's agreed record (rebalance/sticky_agreement.py)
            return sticky_agreement.assign(self, context)
        return self.assignor.assign_group(context)

    def fetch_offsets(self, mine: Assignment) -> dict[TopicPartition, int]:
        return self.offsets.fetch(mine)

    def build_partition_infos(
        self, mine: Assignment, offsets: dict[TopicPartition, int]
    ) -> dict[TopicPartition, PartitionTopicInfo]:
        infos = {}
        for tp, thread_id in sorted(mine.items()):
            offset = offsets[tp]  # fetch_offsets gives every partition of `mine` (-1 where none is stored)
            queue = self.bindings.queue_for(tp.topic, thread_id)
            infos[tp] = PartitionTopicInfo(tp.topic, tp.partition, queue, offset, offset)
        return infos

    def claim_partitions(self, mine: Assignment) -> bool:
        return self.ownership.claim(mine)

    def before_starting_fetchers(self, group_assignment: dict[str, Assignment]) -> None:
        user = self._user_listener
        if user is None:
            return
        global_view: dict[str, dict[int, ConsumerThreadId]] = {}
        for assignment in group_assignment.values():
            for tp, thread_id in assignment.items():
                global_view.setdefault(tp.topic, {})[tp.partition] = thread_id
        user.before_starting_fetchers(self.consumer_id, global_view)

    def start_fetchers(self, infos: dict[TopicPartition, PartitionTopicInfo], *, more: bool = False) -> None:
        """Fetch these; `more` (incremental ownership): as well as those kept, whose fetchers never stopped."""
        log.info("%s: fetching started for %d %spartitions", self.consumer_id, len(infos), "more " if more else "")
        self.events.emit(EventKind.FETCHERS_STARTED, offsets={
            format_partition_key(tp.topic, tp.partition): info.consumed_offset for tp, info in sorted(infos.items())})
        if infos:
            (self.fetchers.add_partitions if more else self.fetchers.start_connections)(list(infos.values()))
