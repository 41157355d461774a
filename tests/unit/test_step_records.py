"""What the pieces of a rebalance record and decide, each on its own: the events of ownership changes and commits
(the member API of rebalance/events.py), the event bus itself, the convergence check the lab and the tests rely
on, and the assignors' orders that only show with more than two threads or with topics whose Java hash order
differs from their name order (Kafka 0.8.2's RoundRobinAssignor in PartitionAssignor.scala)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rebalance.assignment import AssignmentContext, ConsumerThreadId, TopicPartition
from rebalance.assignors import RangeAssignor, RoundRobinAssignor, RoundRobinAssignorV0102
from rebalance.convergence import GroupSnapshot, check_convergence, expected_owners
from rebalance.events import EventBus, EventKind, MemberEvent
from rebalance.offsets import OffsetCheckpoints
from rebalance.ownership import Ownership
from rebalance.store import Claim
from rebalance.subscription import Registration, Whitelist
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.group import ZkGroupStore
from zkconsumer.zookeeper.memory import MemoryZkClient


@dataclass
class Position:
    topic: str
    partition: int
    consumed_offset: int


@pytest.fixture
def store(memory_group):
    client = MemoryZkClient(memory_group.server, log_id="records").start()
    yield ZkGroupStore(client, "g")
    client.close()


class Recorder:
    def __init__(self, bus: EventBus) -> None:
        self.events: list[MemberEvent] = []
        bus.subscribe(self.events.append)

    def of(self, kind: str) -> list[dict]:
        return [dict(e.data) for e in self.events if e.kind == kind]


# --- ownership and offsets -------------------------------------------------------------------------------


def test_releasing_reports_every_partition_and_deletes_its_node(store):
    ownership = Ownership(store, "g_m")  # no bus given: it makes one that names the member
    record = Recorder(ownership.events)
    me = ConsumerThreadId("g_m", 0)
    decision = {TopicPartition("u", 0): me, TopicPartition("t", 2): me}
    assert ownership.claim(decision)
    ownership.install(decision, {})
    ownership.release_all()
    assert record.of("release") == [{"topic": "t", "partition": 2}, {"topic": "u", "partition": 0}]
    assert {e.consumer_id for e in record.events} == {"g_m"}
    assert store.zk.get(layout.owner_path("g", "t", 2)) is None and store.zk.get(layout.owner_path("g", "u", 0)) is None
    assert ownership.owners() == {}


class OwnerlessClaims:
    """A GroupStore whose successful claims name no owner (the protocol only promises one on a conflict)."""

    def __init__(self, store: ZkGroupStore) -> None:
        self.store = store

    def claim(self, topic: str, partition: int, thread_id: str) -> Claim:
        outcome = self.store.claim(topic, partition, thread_id)
        return Claim(True) if outcome.ok else outcome

    def release(self, topic: str, partition: int) -> None:
        self.store.release(topic, partition)


def test_a_claim_event_names_the_claiming_thread_as_owner(store):
    events = EventBus("g_m")
    record = Recorder(events)
    ownership = Ownership(OwnerlessClaims(store), "g_m", events)
    assert ownership.claim({TopicPartition("t", 0): ConsumerThreadId("g_m", 1)})
    assert record.of("claim") == [{"topic": "t", "partition": 0, "thread": "g_m-1", "ok": True, "owner": "g_m-1"}]


def test_commit_events_name_topic_partition_and_offset(store):
    ticks = iter([10.0, 11.0])  # the write goes out at 10, its event is stamped when the answer came, at 11
    offsets = OffsetCheckpoints(store, "g_m", events=EventBus("g_m", clock=lambda: next(ticks)))
    record = Recorder(offsets.events)
    assert offsets.commit([Position("clicks", 3, 12)]) == 1
    assert record.of("commit") == [{"topic": "clicks", "partition": 3, "offset": 12, "sent": 10.0}]
    assert [e.time for e in record.events] == [11.0]
    assert [e.consumer_id for e in record.events] == ["g_m"]


# --- the event bus ---------------------------------------------------------------------------------------


def test_events_carry_member_sequence_and_both_clocks():
    ticks = iter(range(100, 200))
    bus = EventBus("g_m", clock=lambda: float(next(ticks)), monotonic=lambda: -float(next(ticks)))
    first = bus.emit(EventKind.TRIGGER, reason="a")
    second = bus.emit(EventKind.COMMIT, topic="t", partition=0, offset=3)
    assert (first.consumer_id, first.seq, first.time, first.monotonic) == ("g_m", 0, 100.0, -101.0)
    assert (second.seq, second.time, second.monotonic) == (1, 102.0, -103.0)
    assert second.to_dict() == {"kind": "commit", "consumer_id": "g_m", "seq": 1, "time": 102.0, "topic": "t",
                                "partition": 0, "offset": 3}


def test_unsubscribing_removes_only_that_subscriber():
    bus = EventBus("g_m")
    kept: list = []
    dropped: list = []
    bus.subscribe(kept.append)
    unsubscribe = bus.subscribe(dropped.append)
    bus.emit(EventKind.TRIGGER, reason="both")
    unsubscribe()
    bus.emit(EventKind.TRIGGER, reason="one")
    assert [e.data["reason"] for e in kept] == ["both", "one"]
    assert [e.data["reason"] for e in dropped] == ["both"]


# --- convergence -----------------------------------------------------------------------------------------


def snapshot(owners: dict[tuple[str, int], str], registrations=None, topics=("t",)) -> GroupSnapshot:
    return GroupSnapshot(
        group="g",
        registrations=registrations or {"g_a": Registration.static({"t": 1}), "g_b": Registration.static({"t": 1})},
        all_topics=tuple(topics),
        partitions={t: (0, 1) for t in topics},
        owners={TopicPartition(t, p): owner for (t, p), owner in owners.items()},
    )


def test_convergence_names_what_is_missing_wrong_and_unexpected():
    good = {("t", 0): "g_a-0", ("t", 1): "g_b-0"}
    assert check_convergence(snapshot(good), RangeAssignor()).settled
    for owners, field, partition in (
        ({("t", 0): "g_a-0"}, "missing", 1),
        ({("t", 0): "g_a-0", ("t", 1): "g_a-0"}, "wrong", 1),
        ({**good, ("t", 7): "g_b-0"}, "unexpected", 7),
    ):
        result = check_convergence(snapshot(owners), RangeAssignor())
        assert not result.settled, field
        found = {name: getattr(result, name) for name in ("missing", "wrong", "unexpected")}
        assert found == {name: (TopicPartition("t", partition),) if name == field else () for name in found}


def test_convergence_leaves_internal_topics_out_unless_told_otherwise():
    everything = {"g_a": Registration.wildcard(Whitelist(".*"), 1)}
    view = snapshot({}, everything, topics=("t", "__consumer_offsets"))
    assert {tp.topic for tp in expected_owners(view, RangeAssignor())} == {"t"}
    assert {tp.topic for tp in check_convergence(view, RangeAssignor()).expected} == {"t"}
    assert {tp.topic for tp in expected_owners(view, RangeAssignor(), False)} == {"t", "__consumer_offsets"}
    assert {tp.topic for tp in check_convergence(view, RangeAssignor(), False).expected} == {
        "t", "__consumer_offsets"}


# --- assignors -------------------------------------------------------------------------------------------


def test_roundrobin_deals_pairs_in_java_hash_order_not_name_order():
    # Java's "[bb,0]".hashCode() is -1596246114 and "[a,0]".hashCode() 86974003: bb/0 is dealt first.
    ctx = AssignmentContext.build("c1", {"c1": {"a": 1, "bb": 1}, "c2": {"a": 1, "bb": 1}}, {"a": [0], "bb": [0]})
    expected = {"c1": {TopicPartition("bb", 0): ConsumerThreadId("c1", 0)},
                "c2": {TopicPartition("a", 0): ConsumerThreadId("c2", 0)}}
    assert RoundRobinAssignor().assign_group(ctx) == expected
    assert RoundRobinAssignorV0102().assign_group(ctx) == expected


def test_roundrobin_0_10_2_moves_its_cursor_forward_over_three_threads():
    ctx = AssignmentContext.build("c1", {"c1": {"t": 1}, "c2": {"t": 1}, "c3": {"t": 1}}, {"t": [0, 1, 2]})
    group = RoundRobinAssignorV0102().assign_group(ctx)
    assert group == RoundRobinAssignor().assign_group(ctx)  # homogeneous: the 0.8.2 dealing order
    assert [sorted(tp.partition for tp in group[c]) for c in ("c1", "c2", "c3")] == [[0], [1], [2]]


def test_a_consumer_outside_the_group_is_assigned_nothing():
    ctx = AssignmentContext.build("stranger", {"c1": {"t": 1}}, {"t": [0]})
    for assignor in (RangeAssignor(), RoundRobinAssignor(), RoundRobinAssignorV0102()):
        assert assignor.assign(ctx) == {}



def test_roundrobin_0_10_2_skips_forward_to_the_next_subscribed_thread():
    # Kafka 0.10.2: `while (!subscribed(assigner.peek())) assigner.next()` on a circular iterator of the sorted
    # threads. b does not read t, so after a takes t/0 the cursor skips b to c for t/1, then wraps to a for t/2.
    ctx = AssignmentContext.build("a", {"a": {"t": 1}, "b": {"u": 1}, "c": {"t": 1}}, {"t": [0, 1, 2], "u": [0]})
    group = RoundRobinAssignorV0102().assign_group(ctx)
    assert {c: sorted((tp.topic, tp.partition) for tp in owned) for c, owned in group.items()} == {
        "a": [("t", 0), ("t", 2)], "b": [("u", 0)], "c": [("t", 1)]}
