"""Has the group re-converged? A `group_view` judged by the same rule the lab and the tests use
(rebalance/convergence.py: the owner nodes are what the strategy prescribes for the registrations), plus the
campaign's own condition: the registrations are exactly the live members.

Used twice on purpose with one definition: by the campaign, to wait for recovery between faults, and by the
checkers, to time the re-convergence afterwards from the history.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from rebalance.assignment import TopicPartition
from rebalance.assignors import get_assignor
from rebalance.convergence import GroupSnapshot, check_convergence
from zkconsumer.zookeeper import codecs, layout


def consumer_id(group: str, member: str) -> str:
    """A member's registered id: 0.8.2's consumerIdString is `<group.id>_<consumer.id>` when consumer.id is set."""
    return f"{group}_{member}"


def member_of_thread(group: str, thread_id: str) -> str | None:
    """The member name in an owner node's thread id `<group>_<name>-<n>`, or None if it is not one of ours."""
    prefix = f"{group}_"
    if not thread_id.startswith(prefix) or "-" not in thread_id:
        return None
    return thread_id[len(prefix):].rsplit("-", 1)[0]


def snapshot_of(view: Mapping[str, Any], group: str) -> GroupSnapshot | None:
    """The view as a GroupSnapshot, or None when a registration in it is malformed (no member can compute an
    assignment from it either: its rebalance attempts fail until the node is gone)."""
    registrations = {}
    for cid, data in view["ids"].items():
        if data is None:
            return None
        try:
            registrations[cid] = codecs.decode_registration(layout.registration_path(group, cid),
                                                            json.dumps(data).encode())
        except codecs.ZnodeDataError:
            return None
    partitions = {topic: tuple(range(n)) for topic, n in view["partitions"].items()}
    owners = {}
    for key, thread in view["owners"].items():
        topic, _, partition = key.rpartition("/")
        if partition.isdigit():
            owners[TopicPartition(topic, int(partition))] = thread
    return GroupSnapshot(group, registrations, tuple(sorted(partitions)), partitions, owners)


def converged(view: Mapping[str, Any], group: str, live: Iterable[str], strategy: str) -> bool:
    """The registrations are exactly the live members and the owners exactly what `strategy` prescribes."""
    if set(view["ids"]) != {consumer_id(group, name) for name in live}:
        return False
    snapshot = snapshot_of(view, group)
    return snapshot is not None and bool(snapshot.registrations) and check_convergence(
        snapshot, get_assignor(strategy)).settled
