"""Assignor tests: the spec's worked examples exactly, then Kafka's PartitionAssignorTest properties.

Exact examples pin down the orderings a JVM member would use (string-ordered thread ids, Java hash order),
because a Python member that disagrees with a JVM member on either would double-claim or orphan partitions.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalance.assignment import AssignmentContext, ConsumerThreadId, TopicPartition
from rebalance.assignors import (
    ASSIGNORS,
    AssignmentError,
    PartitionAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    RoundRobinAssignorV0102,
    get_assignor,
    java_string_hashcode,
)

RANGE, RR, RR102 = RangeAssignor(), RoundRobinAssignor(), RoundRobinAssignorV0102()
ALL = (RANGE, RR, RR102)
PROPS = settings(max_examples=100, deadline=None)


def thread(spec: str) -> ConsumerThreadId:
    consumer, _, index = spec.rpartition("-")
    return ConsumerThreadId(consumer, int(index))


def flat(assignor: PartitionAssignor, subs, parts) -> dict[tuple[str, int], str]:
    """Whole-group assignment as {(topic, partition): "thread-id"}, computed from the first member's view.

    Refuses a partition given to two members (folding into a dict would hide it) and a thread given a
    partition of a topic it does not subscribe to."""
    ctx = AssignmentContext.build(next(iter(subs)), subs, parts)
    group = assignor.assign_group(ctx)
    items = group_items(group)
    owners = Counter(tp for tp, _ in items)
    assert all(n == 1 for n in owners.values()), f"partitions owned twice: {[tp for tp, n in owners.items() if n > 1]}"
    for member, assignment in group.items():
        assert all(th.consumer == member and th.thread < subs[member].get(tp.topic, 0) for tp, th in assignment.items())
    return {(tp.topic, tp.partition): str(th) for tp, th in items}


# --- records -------------------------------------------------------------------------------------------


def test_thread_id_string_order() -> None:
    assert thread("x-10") < thread("x-2")
    assert thread("g_c10-0") < thread("g_c2-0")
    expected = [thread(s) for s in ("c-1", "c-10", "c-2")]
    assert sorted([thread("c-2"), thread("c-10"), thread("c-1")]) == expected
    assert str(ConsumerThreadId("group1_consumer1", 0)) == "group1_consumer1-0"
    assert ConsumerThreadId("a", 1) == ConsumerThreadId("a", 1)
    assert len({ConsumerThreadId("a", 1), ConsumerThreadId("a", 1)}) == 1
    with pytest.raises(ValueError, match="-1"):
        ConsumerThreadId("a", -1)


def test_topic_partition_str_and_order() -> None:
    assert str(TopicPartition("orders", 3)) == "[orders,3]"
    assert TopicPartition("a", 10) < TopicPartition("b", 0) < TopicPartition("b", 1)


def test_context_build_derives_threads_sorting_and_partitions() -> None:
    ctx = AssignmentContext.build(
        "g_c2", {"g_c2": {"t": 2, "u": 1, "z": 0}, "g_c10": {"t": 1}}, {"t": [2, 0, 1, 1], "x": [0]}
    )
    assert ctx.consumers == ("g_c10", "g_c2")
    assert ctx.consumers_for_topic == {
        "t": (thread("g_c10-0"), thread("g_c2-0"), thread("g_c2-1")),
        "u": (thread("g_c2-0"),),
    }
    assert ctx.my_topic_thread_ids == {"t": (thread("g_c2-0"), thread("g_c2-1")), "u": (thread("g_c2-0"),)}
    assert ctx.partitions_for_topic == {"t": (0, 1, 2), "u": ()}
    with pytest.raises(ValueError, match="-1"):
        AssignmentContext.build("a", {"a": {"t": -1}}, {})


# --- hashing -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[t,0]", 87540032),
        ("[orders,0]", -1093576615),
        ("[payments,0]", 1617066449),
        ("[t,10]", -1581226645),
        ("[t,11]", -1581226614),
        ("", 0),
        ("a", 97),
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # non-BMP: hashed as its UTF-16 surrogate pair
    ],
)
def test_java_string_hashcode(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


# --- worked examples -----------------------------------------------------------------------------------


def test_r1_doc_example() -> None:
    got = flat(RANGE, {"C1": {"t": 2}, "C2": {"t": 2}}, {"t": range(5)})
    assert got == {("t", 0): "C1-0", ("t", 1): "C1-0", ("t", 2): "C1-1", ("t", 3): "C2-0", ("t", 4): "C2-1"}


def test_r2_threads_beyond_partitions_get_nothing() -> None:
    subs = {"group1_a": {"t": 1}, "group1_b": {"t": 3}}
    got = flat(RANGE, subs, {"t": range(3)})
    assert got == {("t", 0): "group1_a-0", ("t", 1): "group1_b-0", ("t", 2): "group1_b-1"}
    assert "group1_b-2" not in got.values()


def test_r3_string_order_trap() -> None:
    got = flat(RANGE, {"g_c": {"t": 12}}, {"t": range(12)})
    order = ["g_c-0", "g_c-1", "g_c-10", "g_c-11"] + [f"g_c-{i}" for i in range(2, 10)]
    assert got == {("t", p): order[p] for p in range(12)}


def test_r4_topics_are_independent() -> None:
    subs = {"g_A": {"orders": 1, "clicks": 2}, "g_B": {"orders": 2}}
    got = flat(RANGE, subs, {"orders": range(4), "clicks": range(3)})
    assert got == {
        ("orders", 0): "g_A-0", ("orders", 1): "g_A-0", ("orders", 2): "g_B-0", ("orders", 3): "g_B-1",
        ("clicks", 0): "g_A-0", ("clicks", 1): "g_A-0", ("clicks", 2): "g_A-1",
    }  # fmt: skip


@pytest.mark.parametrize("assignor", [RR, RR102], ids=lambda a: a.name)
def test_rr1(assignor: PartitionAssignor) -> None:
    got = flat(assignor, {"g_c1": {"t": 1}, "g_c2": {"t": 1}}, {"t": range(4)})
    assert got == {("t", 0): "g_c1-0", ("t", 1): "g_c2-0", ("t", 2): "g_c1-0", ("t", 3): "g_c2-0"}


@pytest.mark.parametrize("assignor", [RR, RR102], ids=lambda a: a.name)
def test_rr2(assignor: PartitionAssignor) -> None:
    sub = {"orders": 2, "payments": 2}
    got = flat(assignor, {"g_c1": sub, "g_c2": sub}, {"orders": range(3), "payments": range(3)})
    assert got == {
        ("orders", 0): "g_c1-0", ("orders", 1): "g_c1-1", ("orders", 2): "g_c2-0",
        ("payments", 0): "g_c2-1", ("payments", 1): "g_c1-0", ("payments", 2): "g_c1-1",
    }  # fmt: skip


@pytest.mark.parametrize("assignor", [RR, RR102], ids=lambda a: a.name)
def test_rr3_hash_overflow(assignor: PartitionAssignor) -> None:
    got = flat(assignor, {"g_c1": {"t": 1}, "g_c2": {"t": 1}}, {"t": range(12)})
    assert got == {("t", p): "g_c1-0" if p % 2 == 0 else "g_c2-0" for p in range(12)}


RR4_SUBS = {"g_c1": {"a": 1}, "g_c2": {"a": 1, "b": 1}}
RR4_PARTS = {"a": range(2), "b": range(2)}


def test_rr4_v0102() -> None:
    got = flat(RR102, RR4_SUBS, RR4_PARTS)
    assert got == {("a", 0): "g_c1-0", ("a", 1): "g_c2-0", ("b", 0): "g_c2-0", ("b", 1): "g_c2-0"}


def test_rr4_rejected_by_082() -> None:
    with pytest.raises(AssignmentError, match=r"'a' has \[g_c1-0, g_c2-0\] but 'b' has \[g_c2-0\]"):
        flat(RR, RR4_SUBS, RR4_PARTS)


def test_roundrobin_082_rejects_group_without_topics() -> None:
    with pytest.raises(AssignmentError, match="no"):
        RR.assign_group(AssignmentContext.build("a", {"a": {}, "b": {}}, {}))
    assert RR102.assign_group(AssignmentContext.build("a", {"a": {}}, {})) == {"a": {}}


@pytest.mark.parametrize("assignor", [RR, RR102], ids=lambda a: a.name)
def test_hash_ties_break_by_topic_then_partition(assignor: PartitionAssignor) -> None:
    # "Aa" and "BB" share a Java hash, so "[Aa,0]"/"[BB,0]" tie; Kafka's order there is HashMap-dependent.
    assert java_string_hashcode("[Aa,0]") == java_string_hashcode("[BB,0]")
    got = flat(assignor, {"g_c1": {"BB": 1, "Aa": 1}, "g_c2": {"BB": 1, "Aa": 1}}, {"Aa": [0], "BB": [0]})
    assert got == {("Aa", 0): "g_c1-0", ("BB", 0): "g_c2-0"}


@pytest.mark.parametrize("assignor", ALL, ids=lambda a: a.name)
def test_empty_subscription_member_owns_nothing(assignor: PartitionAssignor) -> None:
    subs = {"g_a": {"t": 1}, "g_b": {}}
    group = assignor.assign_group(AssignmentContext.build("g_b", subs, {"t": range(3)}))
    assert group["g_b"] == {}
    assert assignor.assign(AssignmentContext.build("g_b", subs, {"t": range(3)})) == {}
    assert len(group["g_a"]) == 3


@pytest.mark.parametrize("assignor", ALL, ids=lambda a: a.name)
def test_topic_without_partitions_and_sparse_ids(assignor: PartitionAssignor) -> None:
    subs = {"g_a": {"t": 1, "gone": 1}, "g_b": {"t": 1, "gone": 1}}
    got = flat(assignor, subs, {"t": [7, 3, 5]})
    assert sorted(got) == [("t", 3), ("t", 5), ("t", 7)]


def test_get_assignor() -> None:
    assert set(ASSIGNORS) == {"range", "roundrobin", "roundrobin-0.10.2", "sticky"}
    for name, cls in ASSIGNORS.items():
        assert isinstance(get_assignor(name), cls)
        assert get_assignor(name).name == name
    with pytest.raises(ValueError, match=r"'cooperative-sticky'.*'range', 'roundrobin', 'roundrobin-0.10.2', 'sticky'"):
        get_assignor("cooperative-sticky")


# --- properties (PartitionAssignorTest) ----------------------------------------------------------------


@st.composite
def groups(draw, homogeneous: bool = False):
    """(subscriptions, partitions): 1-10 consumers, 1-8 streams, 1-20 topics, 1-60 partitions each.

    ``homogeneous`` gives every member all topics with one stream count per member (roundrobin's domain).
    """
    topics = [f"topic{i}" for i in range(draw(st.integers(1, 20)))]
    parts = {t: range(draw(st.integers(1, 60))) for t in topics}
    subs = {}
    for c in range(draw(st.integers(1, 10))):
        if homogeneous:
            n = draw(st.integers(1, 8))
            subs[f"g_c{c + 1}"] = dict.fromkeys(topics, n)
        else:
            mine = draw(st.lists(st.sampled_from(topics), unique=True, max_size=len(topics)))
            subs[f"g_c{c + 1}"] = {t: draw(st.integers(1, 8)) for t in mine}
    return subs, parts


def check_group(assignor: PartitionAssignor, subs, parts) -> dict[str, dict]:
    """Uniqueness, coverage, and per-member ``assign`` agreeing with ``assign_group`` from any viewpoint."""
    ctx = AssignmentContext.build(next(iter(subs)), subs, parts)
    group = assignor.assign_group(ctx)
    assert set(group) == set(subs)
    owned = Counter(tp for a in group.values() for tp in a)
    assert all(n == 1 for n in owned.values()), "partition owned twice"
    subscribed = {t for s in subs.values() for t in s}
    assert set(owned) == {TopicPartition(t, p) for t in subscribed for p in parts[t]}, "coverage"
    for member, assignment in group.items():
        assert all(th.consumer == member and tp.topic in subs[member] for tp, th in assignment.items())
        assert all(th.thread < subs[member][tp.topic] for tp, th in assignment.items())
        assert assignor.assign(AssignmentContext.build(member, subs, parts)) == assignment
    return group


def group_items(group: dict[str, dict]) -> list[tuple[TopicPartition, ConsumerThreadId]]:
    return [item for a in group.values() for item in a.items()]


def per_thread_counts(subs, group) -> Counter:
    threads = {ConsumerThreadId(c, i) for c, s in subs.items() for n in s.values() for i in range(n)}
    counts = Counter(dict.fromkeys(threads, 0))
    counts.update(th for a in group.values() for th in a.values())
    return counts


@PROPS
@given(groups())
def test_range_properties(case) -> None:
    subs, parts = case
    group = check_group(RANGE, subs, parts)
    for topic in {t for s in subs.values() for t in s}:
        threads = sorted(ConsumerThreadId(c, i) for c, s in subs.items() for i in range(s.get(topic, 0)))
        owned: dict[ConsumerThreadId, list[int]] = {th: [] for th in threads}
        for tp, th in group_items(group):
            if tp.topic == topic:
                owned[th].append(tp.partition)
        counts = [len(owned[th]) for th in threads]
        assert max(counts) - min(counts) <= 1
        blocks = [p for th in threads for p in sorted(owned[th])]
        assert blocks == list(parts[topic]), "each thread's block is contiguous and in thread order"


@PROPS
@given(groups(homogeneous=True))
def test_roundrobin_uniform_for_homogeneous_groups(case) -> None:
    subs, parts = case
    group = check_group(RR, subs, parts)
    counts = per_thread_counts(subs, group).values()
    assert max(counts) - min(counts) <= 1
    assert check_group(RR102, subs, parts) == group, "0.10.2 reduces to 0.8.2 on homogeneous groups"


@PROPS
@given(groups())
def test_roundrobin_v0102_any_subscription(case) -> None:
    check_group(RR102, *case)


@PROPS
@given(st.integers(5, 10), st.integers(1, 8), st.integers(1, 20), st.integers(1, 60))
def test_roundrobin_v0102_unbalanced_static(n_consumers: int, streams: int, n_topics: int, n_parts: int) -> None:
    topics = [f"topic{i}" for i in range(n_topics)]
    subs = {f"g_c{k}": dict.fromkeys(topics[: max(0, n_topics - k % 5)], streams) for k in range(n_consumers)}
    parts = {t: range(n_parts) for t in topics}
    group = check_group(RR102, subs, parts)
    for assignment in group.values():
        for tp, th in assignment.items():
            assert tp.topic in subs[th.consumer], "only subscribed threads own a topic's partitions"
    if any(len(s) != n_topics for s in subs.values() if s):
        with pytest.raises(AssignmentError):
            RR.assign_group(AssignmentContext.build("g_c0", subs, parts))
