"""The exact ZooKeeper cost of one join, derived from this project's algorithm (docs/join-cost.md).

`join_requests(M, P, B)` is the closed form for the textbook case: one topic of P partitions, one stream per
member, B brokers, M members after the join, every member rebalancing once without a conflict, no commits.
`accounted_requests(...)` is the same accounting for any run, from what the members report as events
(attempts, releases, claims, conflicts, rollbacks), so a run with conflicts can be checked exactly too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# What a member sends before its first rebalance: the registration create, the ids-dir ensure (a create that
# finds the node), the initial read of the ids children watch and of the topic data watch.
JOINER_SETUP = 4
# What a member connecting with a chroot adds: kazoo's check of the chroot at start, and ours.
CHROOT_SETUP = 2
# Per attempt, fixed: its own registration, /brokers/ids children, ids children, /brokers/topics children,
# the topic's partition map. (Plus one read per broker and per member registration: + B + M.)
ATTEMPT_FIXED = 5


def join_requests(members: int, partitions: int, brokers: int = 1) -> int:
    """M² + (6 + B)·M + 3·P + 3: every member re-reads every registration (the M²), each existing member
    re-reads the ids children after its notification, releases what it owned, and everyone reads the offset
    of and claims each partition it now owns (3·P over the group)."""
    m, p, b = members, partitions, brokers
    return m * m + (6 + b) * m + 3 * p + 3


def join_notifications(members: int) -> int:
    """Every member but the joiner is notified once that the ids children changed."""
    return members - 1


def attempt_cost(members_seen: int, brokers: int = 1) -> int:
    return ATTEMPT_FIXED + brokers + members_seen


def accounted_requests(events: Iterable[Mapping[str, Any]], *, members_seen: int, joiners: int,
                       notified: int, brokers: int = 1, chroot: bool = False) -> int:
    """Requests implied by the members' events of one join: setup of the joiners, one re-read per
    notification, and per attempt its fixed reads, releases, offset reads, claims, conflict reads and
    rollbacks. `events` are `MemberEvent.to_dict()`s (or trace `member_event` records) of every member."""
    total = joiners * (JOINER_SETUP + (CHROOT_SETUP if chroot else 0)) + notified
    for event in events:
        kind = event.get("kind")
        if kind == "attempt_begin":
            total += attempt_cost(members_seen, brokers)
        elif kind == "release":
            total += 1
        elif kind == "claim":
            total += 2 + (0 if event.get("ok") else 1)  # offset read + create (+ the read of a taken node)
        elif kind == "rollback":
            total += 1
    return total
