"""Has a group settled? The owner nodes compared with what the group's strategy prescribes for the current
registrations and partitions, from one snapshot of the group's znodes (`GroupSnapshot`).

Used by the lab (time to stable), the tests and the simulation. Pure: reading the snapshot from ZooKeeper is
`zkconsumer.zookeeper.group.read_group_snapshot`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rebalance.assignment import AssignmentContext, ConsumerThreadId, TopicPartition
from rebalance.assignors import PartitionAssignor
from rebalance.subscription import Registration


@dataclass(frozen=True)
class GroupSnapshot:
    group: str
    registrations: Mapping[str, Registration]  # consumer id -> its registration
    all_topics: tuple[str, ...]  # children of /brokers/topics (wildcards are evaluated against them)
    partitions: Mapping[str, tuple[int, ...]]  # topic -> partition ids, for every subscribed topic
    owners: Mapping[TopicPartition, str]  # owner node values: the owning thread id


@dataclass(frozen=True)
class Convergence:
    settled: bool
    expected: Mapping[TopicPartition, str]
    missing: tuple[TopicPartition, ...] = field(default=())  # prescribed but not owned by anybody
    wrong: tuple[TopicPartition, ...] = field(default=())  # owned by another thread than prescribed
    unexpected: tuple[TopicPartition, ...] = field(default=())  # owned but not prescribed to anybody


def expected_owners(snapshot: GroupSnapshot, assignor: PartitionAssignor,
                    exclude_internal_topics: bool = True) -> dict[TopicPartition, str]:
    """Partition -> thread id, as every member computes it when all of them see this snapshot."""
    subscriptions = {member: registration.topic_streams(snapshot.all_topics, exclude_internal_topics)
                     for member, registration in snapshot.registrations.items()}
    context = AssignmentContext.build("", subscriptions, snapshot.partitions)
    if assignor.uses_previous:  # sticky: settled when the owners are its fixed point (it would move nothing)
        group_assignment = assignor.assign_group_from(context, _owner_threads(snapshot.owners))
    else:
        group_assignment = assignor.assign_group(context)
    return {tp: str(thread) for assignment in group_assignment.values() for tp, thread in assignment.items()}


def _owner_threads(owners: Mapping[TopicPartition, str]) -> dict[TopicPartition, ConsumerThreadId]:
    """Owner node values (`<consumer id>-<thread>`) as thread ids; a value of another form owns nothing."""
    threads = {}
    for tp, value in owners.items():
        consumer, _, index = value.rpartition("-")
        if consumer and index.isdigit():
            threads[tp] = ConsumerThreadId(consumer, int(index))
    return threads


def check_convergence(snapshot: GroupSnapshot, assignor: PartitionAssignor,
                      exclude_internal_topics: bool = True) -> Convergence:
    """Settled when the owner nodes are exactly the prescribed assignment, and it is not empty while some
    member subscribes to a topic that has partitions."""
    expected = expected_owners(snapshot, assignor, exclude_internal_topics)
    owners = snapshot.owners
    missing = tuple(sorted(tp for tp in expected if tp not in owners))
    wrong = tuple(sorted(tp for tp, thread in expected.items() if tp in owners and owners[tp] != thread))
    unexpected = tuple(sorted(tp for tp in owners if tp not in expected))
    settled = not (missing or wrong or unexpected)
    return Convergence(settled, expected, missing, wrong, unexpected)
