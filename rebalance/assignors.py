"""Partition assignors of Kafka's ZooKeeper high-level consumer, as pure functions of a snapshot.

Every member of a ZooKeeper-balanced group runs the assignor independently on its own view of the group and
only claims its own result; correctness therefore depends on every member computing *the same* global answer.
That is why these classes are deterministic functions of an :class:`AssignmentContext` and why each one can
produce the whole group's assignment (``assign_group``), which tests compare against each member's ``assign``.

Three strategies are provided:

* ``range`` - Kafka's ``RangeAssignor`` (per topic, contiguous blocks).
* ``roundrobin`` - the 0.8.2 ``RoundRobinAssignor``, including its precondition that all topics have identical
  thread sets.
* ``roundrobin-0.10.2`` - the KAFKA-2434 rewrite that accepts heterogeneous subscriptions.

and one that is not Kafka's: ``sticky`` (opt-in, docs/modes.md), balanced per topic as range is, moving the fewest
partitions from the group's previous assignment (rebalance/sticky.py); every member reads that previous assignment
from one record per view (rebalance/sticky_agreement.py).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from typing import ClassVar

# The roundrobin order and the fetcher id use the same JVM hash; it lives in the lowest layer.
from fetcher_manager.fetcher_id import java_string_hashcode
from rebalance.assignment import Assignment, AssignmentContext, ConsumerThreadId, TopicPartition
from rebalance.sticky import StickySnapshot, sticky_assignment

__all__ = [
    "ASSIGNORS",
    "AssignmentError",
    "PartitionAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "RoundRobinAssignorV0102",
    "StickyAssignor",
    "get_assignor",
    "java_string_hashcode",
]


class AssignmentError(ValueError):
    """The snapshot cannot be assigned by this strategy (Kafka fails the rebalance attempt in this case)."""


def _fmt_threads(threads: Iterable[ConsumerThreadId]) -> str:
    return "[" + ", ".join(str(t) for t in threads) + "]"


def _hash_ordered_pairs(ctx: AssignmentContext, topics: Iterable[str]) -> list[TopicPartition]:
    """All pairs of ``topics`` in ascending Java hash order of ``"[topic,partition]"``.

    Kafka sorts stably but feeds the pairs in ``HashMap`` iteration order, so hash ties are JVM-specific.
    We break ties deterministically by ``(topic, partition)`` so every member of a Python group agrees.
    """
    pairs = [TopicPartition(t, p) for t in topics for p in ctx.partitions_for_topic[t]]
    return sorted(pairs, key=lambda tp: (java_string_hashcode(str(tp)), tp))


class PartitionAssignor(abc.ABC):
    """Common interface: compute the group's assignment from one member's snapshot.

    The context comes from ``AssignmentContext.build``: every topic in ``consumers_for_topic`` has at least one
    thread and an entry in ``partitions_for_topic``, and every thread's consumer is in ``consumers``; the
    assignors index by those facts instead of guarding against their absence.
    """

    name: ClassVar[str]
    # True for an assignor whose answer depends on the group's previous assignment (sticky): it is given one with
    # ``assign_group_from``, and the convergence check takes the owner nodes as that previous assignment.
    uses_previous: ClassVar[bool] = False

    @abc.abstractmethod
    def assign_group(self, ctx: AssignmentContext) -> dict[str, Assignment]:
        """Return every member's assignment; each id in ``ctx.consumers`` has an entry, possibly empty."""

    def assign_group_from(self, ctx: AssignmentContext,
                          previous: Mapping[TopicPartition, ConsumerThreadId]) -> dict[str, Assignment]:
        """``assign_group`` given the group's previous assignment, which only an assignor that ``uses_previous``
        reads (the others' answer does not depend on it)."""
        return self.assign_group(ctx)

    def assign(self, ctx: AssignmentContext) -> Assignment:
        """Return only the partitions owned by threads of ``ctx.consumer_id`` (Kafka's ``assign``)."""
        mine = self.assign_group(ctx).get(ctx.consumer_id, {})
        return {tp: th for tp, th in mine.items() if th.consumer == ctx.consumer_id}

    @staticmethod
    def _empty_result(ctx: AssignmentContext) -> dict[str, Assignment]:
        return {consumer: {} for consumer in ctx.consumers}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class RangeAssignor(PartitionAssignor):
    """Per topic, split the sorted partitions into contiguous blocks over the string-sorted threads.

    Topics are independent, so lexicographically small thread ids (``c-0``, ``c-1``, ``c-10``...) get the
    extra partitions of every topic; that skew is Kafka's behaviour and is reproduced on purpose.
    """

    name = "range"

    def assign_group(self, ctx: AssignmentContext) -> dict[str, Assignment]:
        result = self._empty_result(ctx)
        for topic, topic_threads in ctx.consumers_for_topic.items():
            threads = sorted(topic_threads)
            partitions = ctx.partitions_for_topic[topic]
            per_thread, extra = divmod(len(partitions), len(threads))
            for i, thread in enumerate(threads):
                start = per_thread * i + min(i, extra)
                count = per_thread + (1 if i < extra else 0)
                owned = result[thread.consumer]
                for p in partitions[start : start + count]:
                    owned[TopicPartition(topic, p)] = thread
        return result


class RoundRobinAssignor(PartitionAssignor):
    """Kafka 0.8.2's roundrobin: deal hash-ordered pairs to one common, string-sorted thread list.

    It is only well-defined when every topic has the same thread set (same topics for every member and one
    stream count per member), so it refuses anything else - and, like Kafka, a group with no topic at all.
    """

    name = "roundrobin"

    def assign_group(self, ctx: AssignmentContext) -> dict[str, Assignment]:
        topics = sorted(ctx.consumers_for_topic)
        if not topics:
            raise AssignmentError("roundrobin requires at least one subscribed topic; the group has none")
        first = topics[0]
        common = frozenset(ctx.consumers_for_topic[first])
        for topic in topics[1:]:
            other = frozenset(ctx.consumers_for_topic[topic])
            if other != common:
                raise AssignmentError(
                    "roundrobin requires every topic to have the same consumer threads; "
                    f"topic {first!r} has {_fmt_threads(sorted(common))} "
                    f"but {topic!r} has {_fmt_threads(sorted(other))}"
                )
        threads = sorted(common)
        result = self._empty_result(ctx)
        for k, tp in enumerate(_hash_ordered_pairs(ctx, topics)):
            thread = threads[k % len(threads)]
            result[thread.consumer][tp] = thread
        return result


class RoundRobinAssignorV0102(PartitionAssignor):
    """Kafka 0.10.2's roundrobin (KAFKA-2434): one circular cursor over the union of all threads.

    For each hash-ordered pair the cursor skips threads not subscribed to the pair's topic, so heterogeneous
    subscriptions work; with homogeneous ones it reduces exactly to the 0.8.2 dealing order.
    """

    name = "roundrobin-0.10.2"

    def assign_group(self, ctx: AssignmentContext) -> dict[str, Assignment]:
        subscribers = {t: frozenset(ths) for t, ths in ctx.consumers_for_topic.items() if ths}
        threads = sorted(set().union(*subscribers.values()))
        result = self._empty_result(ctx)
        cursor = 0
        # Topics nobody has a thread for are skipped: Kafka would spin forever looking for a subscriber.
        for tp in _hash_ordered_pairs(ctx, sorted(subscribers)):
            wanted = subscribers[tp.topic]
            while threads[cursor] not in wanted:
                cursor = (cursor + 1) % len(threads)
            thread = threads[cursor]
            cursor = (cursor + 1) % len(threads)
            result[thread.consumer][tp] = thread
        return result


class StickyAssignor(PartitionAssignor):
    """Balanced per topic (each subscribed thread owns ⌊P/T⌋ or ⌈P/T⌉ of a topic's P partitions), moving the fewest
    partitions from the previous assignment (rebalance/sticky.py). Its answer depends on that previous assignment,
    so a member must take it from where every member reads the same one (``uses_previous``; the listener does,
    rebalance/sticky_agreement.py); ``assign_group`` alone assumes no previous owner."""

    name = "sticky"
    uses_previous: ClassVar[bool] = True

    def assign_group(self, ctx: AssignmentContext) -> dict[str, Assignment]:
        return self.assign_group_from(ctx, {})

    def assign_group_from(self, ctx: AssignmentContext,
                          previous: Mapping[TopicPartition, ConsumerThreadId]) -> dict[str, Assignment]:
        return sticky_assignment(StickySnapshot(ctx, previous))


ASSIGNORS: dict[str, type[PartitionAssignor]] = {
    cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor, RoundRobinAssignorV0102, StickyAssignor)
}


def get_assignor(name: str) -> PartitionAssignor:
    """Instantiate the assignor called ``name``.

    Kafka silently falls back to range for any unknown ``partition.assignment.strategy``; here a typo is an
    error, and a config layer that wants Kafka's leniency can map unknown values to ``"range"`` itself.
    """
    try:
        return ASSIGNORS[name]()
    except KeyError:
        allowed = ", ".join(repr(n) for n in ASSIGNORS)
        raise ValueError(f"unknown partition assignment strategy {name!r}; allowed: {allowed}") from None
