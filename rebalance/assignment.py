"""Immutable records fed to and returned by the partition assignors.

These mirror Kafka 0.8.2's ``TopicAndPartition``, ``ConsumerThreadId`` and ``AssignmentContext`` closely
enough that the assignors can be pure functions of a snapshot: the rebalance loop reads ZooKeeper once,
freezes what it saw into an :class:`AssignmentContext`, and every assignor decision is then reproducible
in tests and in the lab without any I/O.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

from fetcher_manager.topic_partition import TopicPartition

__all__ = ["Assignment", "AssignmentContext", "ConsumerThreadId", "TopicPartition", "View"]


def _java_string_key(s: str) -> bytes:
    """Sort key reproducing Java ``String.compareTo`` (UTF-16 code-unit order).

    Comparing big-endian UTF-16 bytes is the same as comparing unsigned 16-bit code units. It differs from
    Python's code-point order only between supplementary characters and U+E000..U+FFFF, but being exact costs
    nothing and keeps thread order identical to what a JVM member of the same group would compute.
    """
    return s.encode("utf-16-be", "surrogatepass")


@functools.total_ordering
@dataclass(frozen=True, eq=True, slots=True)
class ConsumerThreadId:
    """A consumer stream ("thread") as Kafka names it: ``<consumerIdString>-<i>``.

    Equality and hashing use the fields; ordering is the *string* order of the printed form
    (so ``x-10 < x-2``) because Kafka sorts thread ids with ``String.compareTo`` and both assignors
    depend on that order.
    ``thread`` must be non-negative so that the printed form identifies the pair uniquely, which keeps the
    ordering consistent with equality.
    """

    consumer: str
    thread: int

    def __post_init__(self) -> None:
        if self.thread < 0:
            raise ValueError(f"thread index must be >= 0, got {self.thread} for consumer {self.consumer!r}")

    def __str__(self) -> str:
        return f"{self.consumer}-{self.thread}"

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ConsumerThreadId):
            return NotImplemented
        return _java_string_key(str(self)) < _java_string_key(str(other))


Assignment = dict[TopicPartition, ConsumerThreadId]
"""Partition -> owning thread, as produced by an assignor for one consumer."""


_V = TypeVar("_V")


def _frozen(mapping: Mapping[str, _V]) -> Mapping[str, _V]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class AssignmentContext:
    """What one consumer knows about its group at the moment it rebalances.

    ``consumers_for_topic`` covers every member, so any member can compute the whole group's assignment
    (``assign_group``) and the result is identical on all members as long as their snapshots agree.
    """

    consumer_id: str
    my_topic_thread_ids: Mapping[str, tuple[ConsumerThreadId, ...]]
    consumers_for_topic: Mapping[str, tuple[ConsumerThreadId, ...]]
    partitions_for_topic: Mapping[str, tuple[int, ...]]
    consumers: tuple[str, ...]

    @classmethod
    def build(
        cls,
        consumer_id: str,
        subscriptions: Mapping[str, Mapping[str, int]],
        partitions: Mapping[str, Iterable[int]],
    ) -> AssignmentContext:
        """Derive a context from evaluated registrations, the way ``rebalance()`` reads ZooKeeper.

        ``subscriptions`` maps each member id to ``{topic: n_streams}`` (wildcards already resolved);
        ``partitions`` maps topic to its partition ids (a topic missing here has no partitions, like a missing
        ``/brokers/topics/<t>`` node). A topic with 0 streams yields no threads and is therefore treated as
        not subscribed; a negative stream count is rejected. ``consumer_id`` need not be a member: it then
        has no threads and owns nothing.
        """
        per_topic: dict[str, list[ConsumerThreadId]] = {}
        for member, topic_counts in subscriptions.items():
            for topic, n_streams in topic_counts.items():
                if n_streams < 0:
                    raise ValueError(f"member {member!r} asks for {n_streams} streams of topic {topic!r}")
                if n_streams:
                    threads = per_topic.setdefault(topic, [])
                    threads.extend(ConsumerThreadId(member, i) for i in range(n_streams))
        # A precomputed key sorts in O(n) encodings instead of encoding twice per comparison.
        by_string = {th: _java_string_key(str(th)) for ths in per_topic.values() for th in ths}
        consumers_for_topic = {t: tuple(sorted(ths, key=by_string.__getitem__)) for t, ths in sorted(per_topic.items())}
        mine = {
            topic: tuple(th for th in threads if th.consumer == consumer_id)
            for topic, threads in consumers_for_topic.items()
        }
        my_topic_thread_ids = {topic: threads for topic, threads in mine.items() if threads}
        partitions_for_topic = {t: tuple(sorted(set(partitions.get(t, ())))) for t in consumers_for_topic}
        return cls(
            consumer_id=consumer_id,
            my_topic_thread_ids=_frozen(my_topic_thread_ids),
            consumers_for_topic=_frozen(consumers_for_topic),
            partitions_for_topic=_frozen(partitions_for_topic),
            consumers=tuple(sorted(subscriptions, key=_java_string_key)),
        )


@dataclass(frozen=True, slots=True)
class View:
    """A view of the group: what one member read for one attempt (the members, their subscriptions, the partitions),
    named. It plays the part of kafka-python's ``Generation`` (a frozen value, compared by value), but a group
    without a coordinator has no numbered epoch: members that read the same group agree on the view's name instead.
    The product calls it a view, never a generation (``opt_in.view_id`` is ``View.of(context).id``): in the lab's
    coordinator-design traces ``generation`` is Kafka's generation id. The opt-in modes key their
    ZooKeeper nodes by ``id`` (the barrier's acknowledgements, the sticky assignor's record), and the events carry
    it as ``view``.

    ``id`` must stay equal on every member that read the same members, subscriptions and partitions, whatever its
    version: members of one group compute it on their own, and a rolling upgrade mixes versions.
    """

    id: str
    members: frozenset[str]

    @classmethod
    def of(cls, context: AssignmentContext) -> View:
        text = repr((sorted(context.consumers), sorted((t, tuple(map(str, ids)))
                                                       for t, ids in context.consumers_for_topic.items()),
                     sorted((t, tuple(p)) for t, p in context.partitions_for_topic.items())))
        return cls(hashlib.sha1(text.encode()).hexdigest()[:16], frozenset(context.consumers))

    def __str__(self) -> str:
        return self.id
