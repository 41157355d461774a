"""Groups of the original 0.8.2.2 consumer, of ours, and mixed, on the same topics: the same owners, the same
registration bytes (timestamp aside), the same persistent znodes; and a member of one kind joining a settled group
of the other kind.

The target each group must settle on is computed by the original's own assignor on the live group
(`oracle_expectation`); our assignor must prescribe the same on the same znodes (`our_expectation`). Then every
group's owner nodes must reach it, and the three groups must agree once their group prefix is removed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import unique, wait_for
from interop_support import group_nodes, normalised, settle, without_timestamp

from rebalance.subscription import Registration
from zkconsumer.registration import as_stored_by_0_8_2
from zkconsumer.zookeeper import layout

pytestmark = pytest.mark.interop

# consumer id -> {topic index: streams}. Range: uneven stream counts and topics (string order: c1-0 < c1-1 ...).
RANGE_MEMBERS = {"c1": {0: 2, 1: 1}, "c2": {0: 1}, "c3": {0: 1, 1: 3}}
# Roundrobin 0.8.2: identical topics for everyone, one stream count per member.
ROUNDROBIN_MEMBERS = {"c1": {0: 2, 1: 2}, "c2": {0: 1, 1: 1}, "c3": {0: 3, 1: 3}}
PARTITIONS = (5, 4)


def subscription(spec: dict[int, int], topics: list[str]) -> dict[str, int]:
    return {topics[i]: n for i, n in spec.items()}


def run_three_groups(cluster, members, originals, zk, tmp_path: Path, strategy: str, spec: dict) -> None:
    topics = [cluster.create_topic(partitions=n) for n in PARTITIONS]
    groups = {kind: unique(f"{kind}-{strategy}") for kind in ("orig", "ours", "mixed")}
    started = []
    for i, (consumer, streams) in enumerate(spec.items()):
        sub = subscription(streams, topics)
        started.append(originals(groups["orig"], consumer, topics=sub, wait=False,
                                 partition_assignment_strategy=strategy))
        if i % 2 == 0:  # mixed: original, ours, original, ...
            started.append(originals(groups["mixed"], consumer, topics=sub, wait=False,
                                     partition_assignment_strategy=strategy))
    for i, (consumer, streams) in enumerate(spec.items()):
        sub = subscription(streams, topics)
        members(groups["ours"], consumer, partition_assignment_strategy=strategy).create_message_streams(sub)
        if i % 2 == 1:
            members(groups["mixed"], consumer, partition_assignment_strategy=strategy).create_message_streams(sub)
    for member in started:
        member.wait_ready()

    expected = settle(zk, tmp_path, dict.fromkeys(groups.values(), strategy))
    reference = normalised(expected[groups["orig"]], groups["orig"])
    for kind in ("ours", "mixed"):
        assert normalised(zk.owners(groups[kind]), groups[kind]) == reference, kind
    # Each original's own view (its owner nodes, polled by the driver) agrees with the group's.
    for member in started:
        group = member.properties["group.id"]
        wait_for(lambda m=member, g=group: m.owned() == {tp: t for tp, t in zk.owners(g).items()
                                                         if t.rsplit("-", 1)[0] == m.consumer_id}, 10,
                 message=f"{member.name}'s owned events")

    for consumer in spec:
        theirs = zk.get(layout.registration_path(groups["orig"], f"{groups['orig']}_{consumer}"))
        ours = zk.get(layout.registration_path(groups["ours"], f"{groups['ours']}_{consumer}"))
        assert without_timestamp(theirs) == without_timestamp(ours), consumer
    trees = {kind: group_nodes(zk, group) for kind, group in groups.items()}
    assert trees["ours"] == trees["orig"]
    assert trees["mixed"] == trees["orig"]
    persistent, _ = trees["orig"]
    assert persistent["/"] is None and persistent["/ids"] is None  # zkclient's createPersistent: null data


def test_range_groups_of_original_ours_and_mixed_agree(cluster, members, originals, zk, tmp_path):
    run_three_groups(cluster, members, originals, zk, tmp_path, "range", RANGE_MEMBERS)


@pytest.mark.slow
def test_roundrobin_groups_of_original_ours_and_mixed_agree(cluster, members, originals, zk, tmp_path):
    run_three_groups(cluster, members, originals, zk, tmp_path, "roundrobin", ROUNDROBIN_MEMBERS)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
@pytest.mark.parametrize("incumbents, joiner", [("original", "ours"), ("ours", "original")])
def test_member_joins_a_settled_group_of_the_other_kind(cluster, members, originals, zk, tmp_path, strategy,
                                                        incumbents, joiner):
    topics = [cluster.create_topic(partitions=n) for n in PARTITIONS]
    spec = RANGE_MEMBERS if strategy == "range" else ROUNDROBIN_MEMBERS
    group = unique(f"join-{strategy}")

    def start(kind: str, consumer: str) -> None:
        sub = subscription(spec[consumer], topics)
        if kind == "original":
            originals(group, consumer, topics=sub, partition_assignment_strategy=strategy)
        else:
            members(group, consumer, partition_assignment_strategy=strategy).create_message_streams(sub)

    for consumer in ("c1", "c3"):
        start(incumbents, consumer)
    before = settle(zk, tmp_path / "before", {group: strategy})[group]
    start(joiner, "c2")  # sorts between the incumbents: both of them lose partitions to it
    after = settle(zk, tmp_path / "after", {group: strategy})[group]
    assert after != before
    assert {t.rsplit("-", 1)[0] for t in after.values()} == {f"{group}_{c}" for c in ("c1", "c2", "c3")}


# Orders printed by Scala 2.11.12's own `immutable.Map` (`Map.empty` then `updated` per topic, as javaapi's
# `Map.empty ++ topicCountMap` builds it), to check the emulation without starting a JVM.
SCALA_MAP_ORDERS = [
    (["orders", "clicks", "payments", "views"], ["orders", "clicks", "payments", "views"]),
    (["orders", "clicks", "payments", "views", "carts"], ["payments", "clicks", "views", "orders", "carts"]),
    ([f"t{i}" for i in range(12)], ["t4", "t5", "t0", "t9", "t3", "t6", "t2", "t7", "t10", "t8", "t1", "t11"]),
    (["Aa", "BB", "x", "y", "z"], ["x", "y", "Aa", "BB", "z"]),  # equal hashes keep the caller's order
]


@pytest.mark.parametrize("given, stored", SCALA_MAP_ORDERS)
def test_static_subscription_order_is_scalas(given, stored):
    registration = Registration.static({t: 1 for t in given})
    assert list(as_stored_by_0_8_2(registration).subscription) == stored


def test_registration_of_many_topics_is_byte_identical(cluster, members, originals, zk):
    """Six topics: past Scala's Map4, the original stores its subscription in hash-trie order."""
    topics = [f"{unique('reg')}-{i}" for i in range(6)]
    subscription_ = {t: i % 3 + 1 for i, t in enumerate(topics)}
    theirs, ours = unique("reg-orig"), unique("reg-ours")
    originals(theirs, "c1", topics=subscription_)
    members(ours, "c1").create_message_streams(subscription_)
    original = zk.get(layout.registration_path(theirs, f"{theirs}_c1"))
    assert without_timestamp(original) == without_timestamp(zk.get(layout.registration_path(ours, f"{ours}_c1")))
    assert list(json.loads(original)["subscription"]) != topics  # the order really is not the caller's
