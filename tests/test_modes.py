"""The opt-in modes beyond 0.8.2 (docs/modes.md) against the real ZooKeeper and Kafka broker of the harness: what
each changes, that groups mixing them with faithful members converge, and the barrier's refusal."""

from __future__ import annotations

import threading

import pytest
from helpers import EventRecorder, mode_overrides, unique, wait_for
from test_connector import converged

from zkconsumer import ConsumerRebalanceFailedError
from zkconsumer.zookeeper import layout

pytestmark = pytest.mark.slow

WAIT_S = 30.0


def start(members, group: str, name: str, topic: str, mode: str = "faithful", **extra):
    connector = members(group, name, **mode_overrides(mode, **extra))
    recorder = EventRecorder()
    connector.add_event_listener(recorder)
    connector.create_message_streams({topic: 1})
    return connector, recorder


def kinds_after(recorder: EventRecorder, seq: int, kind: str) -> list:
    return [e for e in recorder.of(kind) if e.seq > seq]


def test_incremental_keeps_what_stays_and_reads_only_new_registrations(cluster, zk, members):
    topic = cluster.create_topic(partitions=8)
    group = unique("inc")
    a, rec_a = start(members, group, "a", topic, "incremental")
    b, rec_b = start(members, group, "b", topic, "incremental")
    wait_for(lambda: converged(zk, group, {topic: 8}), WAIT_S, message="two members settled")
    before = {name: dict(c.owned_partitions()) for name, c in (("a", a), ("b", b))}
    marks = {name: max(e.seq for e in r.events) for name, r in (("a", rec_a), ("b", rec_b))}
    reads_before = a.zk.op_counts().get("get_data", 0)
    start(members, group, "c", topic, "incremental")
    wait_for(lambda: converged(zk, group, {topic: 8}), WAIT_S, message="three members settled")
    for name, connector, recorder in (("a", a, rec_a), ("b", b, rec_b)):
        had = len(before[name])
        wait_for(lambda c=connector, had=had: len(c.owned_partitions()) < had, WAIT_S, message=f"{name} gave some")
        kept = {tp for tp in connector.owned_partitions() if tp in before[name]}
        released = {(e.data["topic"], e.data["partition"]) for e in kinds_after(recorder, marks[name], "release")}
        assert kept and not kept & released, f"{name} released partitions it kept: {kept & released}"
        assert released == set(before[name]) - kept
        stopped = {p for e in kinds_after(recorder, marks[name], "fetchers_stopped") for p in e.data["partitions"]}
        assert stopped == {f"{t}/{p}" for t, p in released}, "the fetchers of kept partitions stopped"
    # a's rebalance read one registration, the newcomer's, not all three (and its topic and brokers as before)
    registration_reads = a.zk.op_counts().get("get_data", 0) - reads_before
    assert registration_reads <= 1 + 3, registration_reads


def test_claim_on_deletion_joins_a_live_group_without_a_conflict(cluster, zk, members):
    topic = cluster.create_topic(partitions=6)
    group = unique("cod")
    # auto-commit on, as the default: each incumbent commits before it releases, the race a joiner loses in 0.8.2
    backoff = {"rebalance_backoff_ms": 5000, "auto_commit_enable": True}
    for name in ("a", "b"):
        start(members, group, name, topic, "claim-on-deletion", **backoff)
    wait_for(lambda: converged(zk, group, {topic: 6}), WAIT_S, message="incumbents settled")
    joiner, recorder = start(members, group, "j", topic, "claim-on-deletion", **backoff)
    wait_for(lambda: converged(zk, group, {topic: 6}), WAIT_S, message="joined")
    ends = recorder.of("attempt_end")
    assert [e.data["result"] for e in ends] == ["ok"], "the joiner's first attempt conflicted or failed"
    assert joiner.rebalance_stats.failed_attempts == 0
    assert len(joiner.owned_partitions()) == 2


def test_patience_turns_a_burst_of_joins_into_one_rebalance(cluster, zk, members):
    topic = cluster.create_topic(partitions=8)
    group = unique("pat")
    # the quiet time the incumbent waits for after the last trigger: each join below comes once the one before
    # reached it, about a ZooKeeper round trip later, far inside 3 s even under load
    window = {"zkconsumer.patient.membership.ms": 3000}
    incumbent, recorder = start(members, group, "a", topic, "patient", **window)
    wait_for(lambda: converged(zk, group, {topic: 8}), WAIT_S, message="one member settled")
    mark = max(e.seq for e in recorder.events)
    # connected, not yet registered: registering is the join
    joiners = [members(group, f"j{i}", **mode_overrides("patient", **window)) for i in range(3)]
    threads = [threading.Thread(target=j.create_message_streams, args=({topic: 1},), name=f"join-{i}")
               for i, j in enumerate(joiners)]
    for joined, thread in enumerate(threads, start=1):
        thread.start()
        # The next join only after this one's trigger: ZooKeeper folds the notifications of joins that land before
        # the watch is set again, and a burst folded into one trigger would show nothing about patience.
        wait_for(lambda n=joined: len(kinds_after(recorder, mark, "trigger")) >= n, WAIT_S,
                 message=f"the incumbent's trigger for join {joined}")
    for thread in threads:
        thread.join(WAIT_S)
    wait_for(lambda: converged(zk, group, {topic: 8}), WAIT_S, message="four members settled")
    wait_for(lambda: incumbent.state == "owning", WAIT_S, message="incumbent owning")
    assert len(kinds_after(recorder, mark, "rebalance_begin")) == 1, "three triggers, one rebalance"


def test_barrier_group_converges_without_conflicts(cluster, zk, members):
    topic = cluster.create_topic(partitions=8)
    group = unique("bar")
    started = [start(members, group, name, topic, "barrier") for name in ("a", "b", "c")]
    wait_for(lambda: converged(zk, group, {topic: 8}), WAIT_S, message="barrier group settled")
    registration = zk.text(layout.registration_path(group, f"{group}_a"))
    assert registration.endswith(',"zkconsumer.modes":["barrier"]}'), registration
    for connector, recorder in started:
        assert connector.rebalance_stats.conflicts == 0
        last = max(recorder.of("barrier"), key=lambda e: e.seq)  # the wait that let it claim: everyone had acked
        assert last.data["acked"] == last.data["view_members"] == 3


def test_a_barrier_member_refuses_a_group_of_faithful_members(cluster, zk, members):
    topic = cluster.create_topic(partitions=4)
    group = unique("ref")
    start(members, group, "old", topic)
    wait_for(lambda: converged(zk, group, {topic: 4}), WAIT_S, message="faithful member settled")
    with pytest.raises(ConsumerRebalanceFailedError, match=r"zkconsumer\.consensus\.barrier=true needs every member"):
        start(members, group, "new", topic, "barrier")
    # it left: the faithful member owns everything again and is not waiting for a member that never claims
    wait_for(lambda: zk.children(layout.ids_dir(group)) == [f"{group}_old"], WAIT_S, message="the refuser deregistered")
    wait_for(lambda: converged(zk, group, {topic: 4}), WAIT_S, message="group intact")


def test_a_mixed_group_converges(cluster, zk, members):
    """A barrier member first (it stands aside once faithful members are there), then a member of every other mode
    and faithful ones; then one more faithful member joins."""
    topic = cluster.create_topic(partitions=9)
    group = unique("mix")
    for name, mode in (("b1", "barrier"), ("f1", "faithful"), ("i1", "incremental"), ("c1", "claim-on-deletion"),
                       ("p1", "patient")):
        start(members, group, name, topic, mode)
    wait_for(lambda: converged(zk, group, {topic: 9}), WAIT_S, message="mixed group settled")
    start(members, group, "late", topic)
    wait_for(lambda: converged(zk, group, {topic: 9}), WAIT_S, message="mixed group settled after a join")


def sticky_settled(zk, group: str, partitions: int) -> dict:
    """The owners once the group settled on the sticky assignor's fixed point, owning all `partitions`; else {}."""
    from rebalance.assignors import StickyAssignor
    from rebalance.convergence import check_convergence
    from zkconsumer.zookeeper.group import read_group_snapshot

    snapshot = read_group_snapshot(zk.zk_client, group)
    result = check_convergence(snapshot, StickyAssignor())
    return dict(snapshot.owners) if result.settled and len(result.expected) == partitions else {}


def test_a_sticky_group_moves_only_what_must_move_and_refuses_a_faithful_newcomer(cluster, zk, members):
    """Incremental sticky members on the real servers: one join into three over 12 partitions moves 3 (range: 6);
    a faithful member joining later makes them compute range with it; a sticky newcomer refuses a faithful group."""
    topic = cluster.create_topic(partitions=12)
    group = unique("stk")
    started = [start(members, group, name, topic, "incremental+sticky") for name in ("a", "b", "c")]
    before = wait_for(lambda: sticky_settled(zk, group, 12), WAIT_S, message="sticky group settled")
    registration = zk.text(layout.registration_path(group, f"{group}_a"))
    assert registration.endswith(',"zkconsumer.modes":["sticky"]}'), registration
    start(members, group, "d", topic, "incremental+sticky")
    after = wait_for(lambda: len({o.rpartition("-")[0] for o in sticky_settled(zk, group, 12).values()}) == 4
                     and sticky_settled(zk, group, 12), WAIT_S, message="sticky group settled after the join")
    assert sum(1 for tp, owner in after.items() if before[tp] != owner) == 3
    assert all(connector.rebalance_stats.failures == 0 for connector, _ in started)
    start(members, group, "f", topic)  # faithful: the sticky members compute range with it
    wait_for(lambda: converged(zk, group, {topic: 12}), WAIT_S, message="range with a faithful member")
    assert all(recorder.of("sticky_skipped") for _, recorder in started)
    other = unique("stkref")
    start(members, other, "old", topic)
    wait_for(lambda: converged(zk, other, {topic: 12}), WAIT_S, message="faithful member settled")
    with pytest.raises(ConsumerRebalanceFailedError, match=r"assignment\.strategy=sticky needs every member"):
        start(members, other, "new", topic, "sticky")
    wait_for(lambda: zk.children(layout.ids_dir(other)) == [f"{other}_old"], WAIT_S, message="the refuser deregistered")
