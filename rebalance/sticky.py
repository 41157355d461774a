"""The sticky assignor (`partition.assignment.strategy=sticky`, opt-in, docs/modes.md), as a pure function of a
`StickySnapshot`: the previous assignment plus the view every member reads (`AssignmentContext`).

Balance, as `range` defines it: for every topic, each consumer thread subscribed to it owns ⌊P/T⌋ or ⌈P/T⌉ of its
P partitions (T threads), so the counts of any two threads differ by at most one. Exactly P mod T threads own the
larger share.

Minimal movement: a partition *moves* when its owner after differs from its owner before (a partition that had no
valid owner before moves too). With previous counts k_i of valid owners (a thread still subscribed to the topic), a
balanced outcome keeps at most Σ min(k_i, f_i) partitions for shares f_i ∈ {q, q+1} (q = ⌊P/T⌋), which is largest
when the r = P mod T larger shares go to threads that already hold more than q: Σ min(k_i, q) + min(r, #{k_i > q}).
This assignor keeps exactly that many, so it moves the fewest partitions any balanced assignment can. Only these
move: the partitions of departed owners (or threads no longer subscribed), unowned ones, and the excess of
over-share owners.

Deterministic: every choice is made over sorted thread ids (Java string order, as the other assignors) and sorted
partition numbers, never over dict or set order, so the same snapshot gives the same assignment on every member.
Ties are broken so that the larger shares spread over threads across topics (fewest partitions so far, topics in
sorted order), and a thread keeps its lowest-numbered partitions when it must shed some.

Why the snapshot is the same on every member is not this module's business: rebalance/sticky_agreement.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from rebalance.assignment import Assignment, AssignmentContext, ConsumerThreadId, TopicPartition

__all__ = ["StickySnapshot", "moved_partitions", "sticky_assignment"]


@dataclass(frozen=True)
class StickySnapshot:
    """The input of one sticky assignment: the view (members, subscriptions, partitions) and the assignment the
    group had before (partition -> owning thread; owners that are gone or partitions that no longer exist are
    ignored)."""

    context: AssignmentContext
    previous: Mapping[TopicPartition, ConsumerThreadId] = field(default_factory=lambda: MappingProxyType({}))


def sticky_assignment(snapshot: StickySnapshot) -> dict[str, Assignment]:
    """Every member's assignment (as `PartitionAssignor.assign_group`): balanced per topic, moving the fewest
    partitions from `snapshot.previous`."""
    ctx, previous = snapshot.context, snapshot.previous
    result: dict[str, Assignment] = {consumer: {} for consumer in ctx.consumers}
    totals: dict[ConsumerThreadId, int] = {}  # partitions given so far to each thread, over the topics done
    for topic in sorted(ctx.consumers_for_topic):
        threads = sorted(ctx.consumers_for_topic[topic])
        partitions = sorted(ctx.partitions_for_topic.get(topic, ()))
        if not threads or not partitions:
            continue
        share, larger = divmod(len(partitions), len(threads))
        subscribed = set(threads)
        held: dict[ConsumerThreadId, list[int]] = {thread: [] for thread in threads}
        pool: list[int] = []
        for p in partitions:
            owner = previous.get(TopicPartition(topic, p))
            if owner in subscribed:
                held[owner].append(p)  # ascending, as partitions are
            else:
                pool.append(p)
        quota = _quotas(threads, held, share, larger, totals)
        for thread in threads:
            keep = quota[thread]
            pool.extend(held[thread][keep:])
            del held[thread][keep:]
        pool.sort()
        cursor = 0
        for thread in threads:
            need = quota[thread] - len(held[thread])
            held[thread].extend(pool[cursor:cursor + need])
            cursor += need
            totals[thread] = totals.get(thread, 0) + quota[thread]
            owned = result[thread.consumer]
            for p in sorted(held[thread]):
                owned[TopicPartition(topic, p)] = thread
    return result


def _quotas(threads: list[ConsumerThreadId], held: Mapping[ConsumerThreadId, list[int]], share: int, larger: int,
            totals: Mapping[ConsumerThreadId, int]) -> dict[ConsumerThreadId, int]:
    """Each thread's share of one topic: `larger` threads get share + 1, first those already holding more than
    `share` (each keeps one more partition that way), then the rest; within each group the threads with the fewest
    partitions so far, then by thread id."""

    def spread(thread: ConsumerThreadId) -> tuple[int, ConsumerThreadId]:
        return totals.get(thread, 0), thread

    over = sorted((t for t in threads if len(held[t]) > share), key=spread)
    rest = sorted((t for t in threads if len(held[t]) <= share), key=spread)
    bigger = set((over + rest)[:larger])
    return {t: share + (1 if t in bigger else 0) for t in threads}


def moved_partitions(before: Mapping[TopicPartition, object], after: Mapping[TopicPartition, object]) -> int:
    """Partitions of `after` whose owner differs from `before` (unowned before counts as a move)."""
    return sum(1 for tp, owner in after.items() if before.get(tp) != owner)
