"""The exact ZooKeeper cost of one join, derived from this project's algorithm (docs/join-cost.md).

`join_requests(M, P, B)` is the closed form for the textbook case: one topic of P partitions, one stream per
member, B brokers, M members after the join, every member rebalancing once without a conflict, no commits.
`accounted_requests(...)` is the same accounting for any run, from what the members report as events
(attempts, releases, claims, conflicts, rollbacks), so a run with conflicts can be checked exactly too.
`original_join_requests` and `original_accounted_requests` are the same for Kafka 0.8.2.2's own connector (the
lab's design "original"), derived below from its source.
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


# --- the original: Kafka 0.8.2.2's ZookeeperConsumerConnector over zkclient 0.3 --------------------------------------
#
# Source lines are at tag 0.8.2.2 of apache/kafka (core/src/main/scala/kafka/...) and zkclient 0.3's ZkClient.java.
#
# The joiner, before its first attempt (consumer/ZookeeperConsumerConnector.scala `consume`, `reinitializeConsumer`):
#   registerConsumerInZK: createEphemeralPathExpectConflictHandleZKBug, one create (the ids dir exists)      1
#   zkClient.subscribeChildChanges(ids dir): zkclient's watchForChilds = exists(path, true) + getChildren      2
#   zkClient.subscribeDataChanges(/brokers/topics/<t>): zkclient's watchForData = exists(path, true)          1
#   (subscribeStateChanges sends nothing)
ORIGINAL_JOINER_SETUP = 4
# An existing member, per ids-children notification: zkclient's event thread re-subscribes before it calls the
# listener (ZkClient.fireChildChangedEvents: exists(path) to reinstall the watch, then getChildren(path)).
ORIGINAL_PER_NOTIFICATION = 2
# One attempt (`syncedRebalance` then `rebalance(cluster)`), fixed part:
#   getCluster(zkClient) (utils/ZkUtils.scala): /brokers/ids children + each broker         1 + B
#   TopicCount.constructTopicCount: its own registration                                   1
#   getAllBrokersInCluster: /brokers/ids children + each broker, again                     1 + B
#   AssignmentContext (consumer/PartitionAssignor.scala): its own registration again        1
#     ZkUtils.getPartitionsForTopics: the topic's partition map                             1
#     ZkUtils.getConsumersPerTopic: ids children + every member's registration              1 + M
#     ZkUtils.getConsumersInGroup: ids children, again                                      1
# = 7 + 2·B + M. Then one delete per partition it owned (releasePartitionOwnership), one offset read per partition
# it is assigned (fetchOffsets, offsets.storage=zookeeper), one create per claim (reflectPartitionOwnershipDecision
# tries every partition, also after a conflict) plus the owner read of a taken node (createEphemeralPathExpectConflict
# reads it on ZkNodeExistsException), and one delete per claim rolled back.
ORIGINAL_ATTEMPT_FIXED = 7


def original_attempt_cost(members_seen: int, brokers: int = 1) -> int:
    return ORIGINAL_ATTEMPT_FIXED + 2 * brokers + members_seen


def original_join_requests(members: int, partitions: int, brokers: int = 1, fetchers: bool = False) -> int:
    """M² + (9 + 2·B)·M + 3·P + 2 for the original, in the same textbook case as `join_requests`.

        joiner:    4 + (7 + 2·B + M) + 2·p₀
        existing:  (M - 1) · (2 + 7 + 2·B + M) + P + 2·(P - p₀)
        total:     M² + (9 + 2·B)·M + 3·P + 2

    With fetchers (members that consume, not the rebalance-only members of `--members threads`, which the original
    runs as `new ZookeeperConsumerConnector(config, enableFetcher = false)`), each member's leader finder thread reads
    /brokers/ids and every broker once after its rebalance (ConsumerFetcherManager's LeaderFinderThread:
    getAllBrokersInCluster): + (1 + B)·M. Auto-commit adds writes when an offset moved (each member commits before
    it releases, `closeFetchersForQueues`); the textbook case has none.
    """
    m, p, b = members, partitions, brokers
    return m * m + (9 + 2 * b) * m + 3 * p + 2 + ((1 + b) * m if fetchers else 0)


def original_accounted_requests(events: Iterable[Mapping[str, Any]], *, members_seen: int, joiners: int,
                                notified: int, brokers: int = 1) -> int:
    """`accounted_requests` for the original: its member events (from its log lines, LabRebalanceTracker.java) are
    the same kinds, and a claim costs the same (offset read + create, + the owner read on a conflict)."""
    total = joiners * ORIGINAL_JOINER_SETUP + notified * ORIGINAL_PER_NOTIFICATION
    for event in events:
        kind = event.get("kind")
        if kind == "attempt_begin":
            total += original_attempt_cost(members_seen, brokers)
        elif kind in ("release", "rollback"):
            total += 1
        elif kind == "claim":
            total += 2 + (0 if event.get("ok") else 1)
    return total
