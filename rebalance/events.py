"""Member state and structured events: what a program (the lab, a test, an application) reads about a member.

Log lines are for people; these events are the API. Every step of the rebalance that matters emits one
event, in the order it happens on the member, with a wall-clock and a monotonic timestamp. Subscribers are
called synchronously on the thread that did the step (the watcher thread, the auto-commit thread, kazoo's
event thread for connection states), so they must be quick and must not block; an exception in a subscriber
is logged and never disturbs the member.
"""

from __future__ import annotations

import enum
import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rebalance.state_graph import checked_move

log = logging.getLogger(__name__)


class MemberState(enum.StrEnum):
    """Where a member is in its life. ``TRANSITIONS`` below is this graph as data, with a comment on every edge;
    ``check_transition`` refuses any other move, and the listener's ``_transition`` (rebalance/listener.py) is the
    only writer, under its ``rebalance_lock``:

                                         ┌─────────────┐
                                         ▼ next trigger│
        CREATED ──▶ REGISTERING ──▶ REBALANCING ──▶ OWNING
                     ▲ ↺ │  ▲        ↺  │  ▲           │
                     │   ▼  │           │  │           │
                     │  FAILED ◀────────┘  │           │
                     │     └───────────────┘           │
                     └──────── session expired ────────┘

        ↺ by REGISTERING: a new session while registering; ↺ by REBALANCING: the next attempt.
        REGISTERING → FAILED → REGISTERING: a failed registration and its retry (FAILED → REGISTERING is also a
        new session after a failed rebalance). REBALANCING → FAILED: retries exhausted or a mode refused.
        FAILED → REBALANCING: the next trigger after a failed rebalance.
        every state ──▶ CLOSED (shutdown); CLOSED is final.

    Not drawn, each for a reason given in ``TRANSITIONS``: CREATED → REBALANCING (a listener without a connector),
    REBALANCING → REGISTERING (a new session after a rebalance that stopped), OWNING → FAILED and FAILED ↺ (a
    re-registration on the watcher thread next to the caller's first rebalance).
    """

    CREATED = "created"  # connected to ZooKeeper, no streams yet
    REGISTERING = "registering"  # writing /consumers/<g>/ids/<id> (first time or after a session expiry)
    REBALANCING = "rebalancing"  # inside syncedRebalance; the event carries the attempt number
    OWNING = "owning"  # the last rebalance succeeded: owns (and fetches) its share
    FAILED = "failed"  # the last rebalance exhausted its retries, or registration is failing and being retried
    CLOSED = "closed"  # shut down

    @property
    def terminal(self) -> bool:
        return not TRANSITIONS[self]


_S = MemberState
TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    _S.CREATED: frozenset({
        _S.REGISTERING,  # the connector's streams were created: the first registration
        _S.REBALANCING,  # a listener driven without a connector (no `register`): tests drive it so
        _S.CLOSED,  # shut down before any streams
    }),
    _S.REGISTERING: frozenset({
        _S.REGISTERING,  # a new session while (re-)registering: the watcher registers again
        _S.REBALANCING,  # registered: the first (or the post-expiry) rebalance begins
        _S.FAILED,  # a registration failed; FAILED → REGISTERING follows at once, under the same lock hold
        _S.CLOSED,
    }),
    _S.REBALANCING: frozenset({
        _S.REBALANCING,  # the next attempt
        _S.OWNING,  # an attempt succeeded (or found no brokers)
        _S.FAILED,  # retries exhausted, or an opt-in mode refused the group
        # a new session handled after a rebalance that stopped (shutdown) or raised before its end: the watcher
        # re-registers from wherever the last rebalance left the member
        _S.REGISTERING,
        _S.CLOSED,
    }),
    _S.OWNING: frozenset({
        _S.REBALANCING,  # a trigger: the next rebalance
        _S.REGISTERING,  # the session expired: re-register under the new one
        # The session renewed between the caller's registration and its first rebalance: the watcher re-registers
        # (outside the rebalance lock, as registration waits must be) while that rebalance runs, and a failure of
        # it lands after the rebalance's end. The member owns, unregistered, until the watcher registers and
        # rebalances again. (The rebalance holds the lock throughout, so nothing lands inside it.)
        _S.FAILED,
        _S.CLOSED,
    }),
    _S.FAILED: frozenset({
        _S.REGISTERING,  # the registration's retry (after a failed one), or a new session after a failed rebalance
        _S.REBALANCING,  # the next trigger after retries were exhausted
        _S.FAILED,  # as OWNING → FAILED, when the caller's first rebalance failed: the registration's failure lands
        _S.CLOSED,  # shut down after a failure (a mode refusal shuts the member down at once)
    }),
    _S.CLOSED: frozenset(),  # final: nothing moves a shut-down member
}
del _S


class IllegalTransition(RuntimeError):
    """The member was asked to move where ``TRANSITIONS`` has no edge: a bug in the listener or its caller."""


def check_transition(consumer_id: str, current: MemberState, to: MemberState) -> MemberState:
    """``to`` if ``TRANSITIONS`` allows it from ``current``, else ``IllegalTransition`` naming both states and what
    is allowed (rebalance/state_graph.py)."""
    return checked_move(TRANSITIONS, consumer_id, current, to, IllegalTransition, "it is closed")


class EventKind(enum.StrEnum):
    STATE = "state"  # state, previous, attempt?
    TRIGGER = "trigger"  # reason
    REBALANCE_BEGIN = "rebalance_begin"  # rebalance (this member's count)
    REBALANCE_END = "rebalance_end"  # rebalance, result (ok | failed | stopped), attempts, duration_ms, error?
    ATTEMPT_BEGIN = "attempt_begin"  # rebalance, attempt
    # rebalance, attempt, result (ok | conflict | no_brokers | stopped | error | view_changed: an opt-in mode), ...
    ATTEMPT_END = "attempt_end"
    RELEASE = "release"  # topic, partition
    CLAIM = "claim"  # topic, partition, thread, ok, owner (the current owner's thread id on a conflict)
    ROLLBACK = "rollback"  # topic, partition: a claim of this attempt deleted after a conflict
    FETCHERS_STOPPED = "fetchers_stopped"  # partitions: ["t/p", ...] this member had been fetching
    FETCHERS_STARTED = "fetchers_started"  # offsets: {"t/p": start offset}
    COMMIT = "commit"  # topic, partition, offset, sent (when the write went out: the event's time is its answer)
    SESSION_EXPIRED = "session_expired"  # the ZooKeeper session was lost; a new one is being set up
    SESSION_RENEWED = "session_renewed"  # session: the new session id
    REGISTERED = "registered"  # session
    REGISTRATION_FAILED = "registration_failed"  # error, retry_in_s
    CONNECTION = "connection"  # state: connected | suspended | lost
    REBALANCE_FAILED = "rebalance_failed"  # error: retries exhausted
    # Opt-in modes only (docs/modes.md); a faithful member never emits these.
    OWNER_GONE = "owner_gone"  # topic, partition: a conflicting owner node was deleted while we waited for it
    BARRIER = "barrier"  # view (the hash acknowledged), view_members, acked: the barrier's wait ended
    BARRIER_SKIPPED = "barrier_skipped"  # members: those without the barrier, so this attempt went without it
    # view, created (this member wrote the view's record) or read it, moved (partitions whose owner differs from
    # this member's previous record; null without one): the sticky assignor's agreed assignment (docs/modes.md)
    STICKY = "sticky"
    STICKY_SKIPPED = "sticky_skipped"  # members: those without the sticky assignor, so this attempt used range


@dataclass(frozen=True)
class MemberEvent:
    kind: EventKind
    consumer_id: str
    seq: int  # per-member sequence number: total order of one member's events
    time: float  # time.time(): comparable across processes on one host
    monotonic: float  # time.monotonic(): durations within one process
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": str(self.kind), "consumer_id": self.consumer_id, "seq": self.seq, "time": self.time,
                **dict(self.data)}


EventListener = Callable[[MemberEvent], None]


class EventBus:
    """Fans a member's events out to its subscribers; cheap when nobody listens."""

    def __init__(self, consumer_id: str, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.consumer_id = consumer_id
        self._clock = clock
        self._monotonic = monotonic
        self._listeners: list[EventListener] = []
        self._lock = threading.Lock()
        self._seq = itertools.count()

    def now(self) -> float:
        """The bus's wall clock (its events' `time`): for a step to stamp when it began, not only when it ended."""
        return self._clock()

    def subscribe(self, listener: EventListener) -> Callable[[], None]:
        """Add a subscriber; returns a function that removes it."""
        with self._lock:
            self._listeners = [*self._listeners, listener]

        def unsubscribe() -> None:
            with self._lock:
                self._listeners = [x for x in self._listeners if x is not listener]

        return unsubscribe

    def emit(self, kind: EventKind, **data: Any) -> MemberEvent:
        event = MemberEvent(kind, self.consumer_id, next(self._seq), self._clock(), self._monotonic(), data)
        for listener in self._listeners:  # a copy-on-write list: safe to iterate without the lock
            try:
                listener(event)
            except Exception:
                log.exception("%s: event listener %r failed on %s", self.consumer_id, listener, kind)
        return event


def format_partition_key(topic: str, partition: int) -> str:
    """`topic/partition`: how events name a partition (JSON objects need string keys)."""
    return f"{topic}/{partition}"


def parse_partition_key(key: str) -> tuple[str, int]:
    """`topic/partition` back to (topic, partition); '/' cannot occur in a topic name, so the last one splits."""
    topic, _, partition = key.rpartition("/")
    return topic, int(partition)
