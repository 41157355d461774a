"""Members with the sticky assignor (rebalance/sticky_agreement.py, docs/modes.md) over the in-memory ZooKeeper: they
agree on one record per view whatever previous assignment each starts from, a group of them rebalances through joins
and leaves moving only the partitions that must move, and they stay safe beside faithful members: a new one refuses
a group of range members in one line naming the setting, one already in a group computes range while a range member
is there.
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
from helpers import wait_for

from rebalance import sticky_agreement
from rebalance.assignment import AssignmentContext, ConsumerThreadId, TopicPartition
from rebalance.assignors import StickyAssignor
from rebalance.events import EventBus
from rebalance.listener_types import ModeRefusedError, RebalanceStats
from rebalance.opt_in import view_id
from rebalance.subscription import Registration
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.group import ZkGroupStore, read_group_snapshot
from zkconsumer.zookeeper.memory import MemoryZkClient

STICKY = {"partition_assignment_strategy": "sticky"}
STICKY_INCREMENTAL = {**STICKY, "zkconsumer_incremental_ownership": True, "zkconsumer_claim_on_deletion": True}
STICKY_BARRIER = {**STICKY, "zkconsumer_consensus_barrier": True, "zkconsumer_incremental_ownership": True}
WAIT_S = 15.0


def minimum_moves(before: dict, members: int, partitions: int) -> int:
    """The fewest partitions a balanced assignment of one topic over `members` one-thread members can move from
    `before` (partition -> owner), counting only owners still in the group."""
    q, r = divmod(partitions, members)
    counts = list(Counter(before.values()).values())
    counts += [0] * (members - len(counts))
    return partitions - (sum(min(k, q) for k in counts) + min(r, sum(1 for k in counts if k > q)))


def moved(before: dict, after: dict) -> int:
    return sum(1 for tp, owner in after.items() if before.get(tp) != owner)


def settle(memory_group, members, strategy: str = "sticky") -> dict:
    """Settled owners, every member owning and idle, and every member's last view made of the members registered
    now. Owners alone are not enough: a member whose partitions the new view leaves with it owns them before it has
    read that view, and its listener can still have that rebalance ahead of it (seen once, among three test
    workers). Members, not registrations: a writer back under a new session registers anew with the same
    subscription, which the others need not read again."""
    def read_by_all() -> bool:
        registered = set(read_group_snapshot(memory_group.admin, "g").registrations)
        return all(set(m.listener.last_registrations) == registered for m in members)

    wait_for(lambda: memory_group.settled("g", strategy) and all(m.state == "owning" for m in members)
             and all(m.zk.wait_idle(1) for m in members) and read_by_all(), timeout=WAIT_S,
             message=f"settled on {strategy}")
    return memory_group.owners("g")


def owners_by_member(owners: dict) -> dict:
    return {tp: owner.rpartition("-")[0] for tp, owner in owners.items()}


# --- the agreement itself: two members, two different previous assignments, one record ----------------------------

def fake_listener(memory_group, consumer_id: str, previous, registrations) -> SimpleNamespace:
    client = MemoryZkClient(memory_group.server, log_id=consumer_id).start()
    events = EventBus(consumer_id)
    recorded: list = []
    events.subscribe(recorded.append)
    return SimpleNamespace(consumer_id=consumer_id, store=ZkGroupStore(client, "g"), assignor=StickyAssignor(),
                           sticky_previous=previous, sticky_view=None, last_registrations=registrations, events=events,
                           ownership=SimpleNamespace(owners=dict), stats=RebalanceStats(rebalances=1),
                           recorded=recorded, client=client)


def test_members_that_start_from_different_previous_assignments_install_the_one_record_of_the_view(memory_group):
    registrations = {m: Registration.static({"t": 1}, "1") for m in ("a", "b", "c")}
    registrations = {m: Registration(r.pattern, r.subscription, r.timestamp, modes=("sticky",))
                     for m, r in registrations.items()}
    ctx = AssignmentContext.build("", {m: {"t": 1} for m in registrations}, {"t": range(6)})
    one = {TopicPartition("t", p): ConsumerThreadId("a", 0) for p in range(6)}
    other = {TopicPartition("t", p): ConsumerThreadId("c", 0) for p in range(6)}
    first = fake_listener(memory_group, "a", one, registrations)
    second = fake_listener(memory_group, "c", other, registrations)
    try:
        mine = sticky_agreement.assign(first, ctx)
        theirs = sticky_agreement.assign(second, ctx)
        # alone, the second would have kept c's partitions; it installs the record the first wrote instead
        alone = StickyAssignor().assign_group_from(ctx, other)
        assert alone != mine and theirs == mine
        assert first.sticky_previous == second.sticky_previous
        view = view_id(ctx)
        assert [dict(e.data) for e in first.recorded] == [{"view": view, "created": True, "moved": 4}]
        assert [dict(e.data) for e in second.recorded] == [{"view": view, "created": False, "moved": 4}]
        # the record is the writer's ephemeral node; the directory keeps the latest one as a hint
        path = layout.assignment_path("g", view)
        assert memory_group.admin.ephemeral_owner(path) == first.client.session_id
        assert first.store.latest_assignment() == first.sticky_previous
        # the writer's session ends: its record goes with it (its registration would go at the same moment)
        first.client.close()
        assert memory_group.admin.get(path) is None
        fresh = fake_listener(memory_group, "b", None, registrations)  # no previous: starts from the hint
        assert sticky_agreement.assign(fresh, ctx) == mine and fresh.recorded[0].data["created"]
        fresh.client.close()
    finally:
        second.client.close()


def test_every_member_creates_a_new_views_record_first_so_each_spends_two_requests_whatever_the_order(memory_group):
    """Create first (rebalance/sticky_agreement.py): on a new view each member creates the record; the first create
    makes it (then the hint's set), every later one finds it and reads it: two requests each, in any order, where
    reading first cost a late member one and an early one three (the race that gave a join into 16 2 to 13 creates).
    A retry on the view a member installed last reads it: one request."""
    registrations = {m: Registration(r.pattern, r.subscription, r.timestamp, modes=("sticky",))
                     for m, r in {m: Registration.static({"t": 1}, "1") for m in ("a", "b", "c")}.items()}
    ctx = AssignmentContext.build("", {m: {"t": 1} for m in registrations}, {"t": range(6)})
    before = {TopicPartition("t", p): ConsumerThreadId("a", 0) for p in range(6)}
    memory_group.admin.ensure_path(layout.assignment_dir("g"))  # as after the group's first record
    members = [fake_listener(memory_group, name, dict(before), registrations) for name in ("c", "a", "b")]
    try:
        results = [sticky_agreement.assign(m, ctx) for m in members]
        assert results[0] == results[1] == results[2]
        counts = [{k: v for k, v in m.client.op_counts().items() if ":" not in k} for m in members]
        assert counts == [{"create": 1, "set_data": 1}, {"create": 1, "get_data": 1}, {"create": 1, "get_data": 1}]
        assert [e.data["created"] for m in members for e in m.recorded] == [True, False, False]
        retry = members[1]
        sticky_agreement.assign(retry, ctx)
        assert {k: v for k, v in retry.client.op_counts().items() if ":" not in k} == {"create": 1, "get_data": 2}
    finally:
        for m in members:
            m.client.close()


# --- a group of sticky members -----------------------------------------------------------------------------------

def test_a_sticky_group_rebalances_through_joins_and_leaves_moving_the_fewest_partitions(memory_group):
    partitions = 32
    topic = memory_group.topic("t", partitions)
    members = []
    for i in range(4):
        members.append(memory_group.member("g", f"c{i}", **STICKY_BARRIER))
        members[-1].create_message_streams({topic: 1})
    owners = settle(memory_group, members)
    for i in range(4, 8):  # joins, one at a time
        before = owners_by_member(owners)
        releases = sum(m.zk.op_counts().get("delete", 0) for m in members)
        members.append(memory_group.member("g", f"c{i}", **STICKY_BARRIER))
        members[-1].create_message_streams({topic: 1})
        owners = settle(memory_group, members)
        after = owners_by_member(owners)
        assert moved(before, after) == minimum_moves(before, len(members), partitions) == partitions // len(members)
        # each moved partition's owner node was deleted once, by its previous owner (barrier acks are deletes too)
        owner_deletes = sum(m.zk.op_counts().get("delete", 0) for m in members[:-1]) - releases
        assert owner_deletes >= moved(before, after)
    for leaving in (members[2], members[5]):  # leaves: only the leaver's partitions move
        before = owners_by_member(owners)
        leaving.shutdown()
        members.remove(leaving)
        owners = settle(memory_group, members)
        after = owners_by_member(owners)
        gone = leaving.consumer_id
        assert moved(before, after) == sum(1 for owner in before.values() if owner == gone)
        assert all(after[tp] == owner for tp, owner in before.items() if owner != gone)
    # every member installed the same record: the one of the group's view
    records = [m.listener.sticky_previous for m in members]
    assert all(r == records[0] for r in records)
    assert {tp: str(thread) for tp, thread in records[0].items()} == {TopicPartition(*k): v for k, v in owners.items()}
    counts = Counter(owners_by_member(owners).values())
    assert sorted(counts.values()) == [5, 5, 5, 5, 6, 6]


def test_one_join_releases_and_claims_only_the_partitions_that_move(memory_group):
    """Incremental sticky members that claim on deletion (so a claim racing a release waits instead of rolling back
    and claiming again): the join of an eighth member into seven over 28 partitions (4 each) moves 3 (the
    joiner's ⌊28/8⌋, one from each of three incumbents), so the group deletes and creates 3 owner nodes; range over
    the same group moves 6 (the joiner's id sorting last)."""
    topic = memory_group.topic("t", 28)
    members = []
    for i in range(7):
        members.append(memory_group.member("g", f"c{i}", **STICKY_INCREMENTAL))
        members[-1].create_message_streams({topic: 1})
    settle(memory_group, members)
    events: list[dict] = []
    for m in members:
        m.add_event_listener(lambda e: events.append(e.to_dict()))
    joiner = memory_group.member("g", "c7", **STICKY_INCREMENTAL)
    joiner.add_event_listener(lambda e: events.append(e.to_dict()))
    joiner.create_message_streams({topic: 1})
    settle(memory_group, [*members, joiner])
    releases = [e for e in events if e["kind"] == "release"]
    claims = [e for e in events if e["kind"] == "claim" and e["ok"]]
    assert len(releases) == len(claims) == 3 == 28 // 8
    assert {e["consumer_id"] for e in claims} == {"g_c7"} and len({e["consumer_id"] for e in releases}) == 3
    stickies = [e for e in events if e["kind"] == "sticky"]
    assert sum(e["created"] for e in stickies) >= 1 and len({e["view"] for e in stickies}) >= 1


def test_a_member_that_starts_from_another_previous_assignment_still_agrees_with_the_group(memory_group):
    """One member's idea of the previous assignment is wrong (as a member's is after it missed views: it starts from
    its own last record): every partition its own. Alone it would compute another assignment than the others and
    keep conflicting with them; through the view's record the group settles on one assignment at once."""
    topic = memory_group.topic("t", 12)
    members = []
    for i in range(3):
        members.append(memory_group.member("g", f"c{i}", **STICKY_INCREMENTAL))
        members[-1].create_message_streams({topic: 1})
    settle(memory_group, members)
    odd = members[1].listener
    odd.sticky_previous = {tp: ConsumerThreadId(odd.consumer_id, 0) for tp in odd.sticky_previous}
    joiner = memory_group.member("g", "c3", **STICKY_INCREMENTAL)
    joiner.create_message_streams({topic: 1})
    members.append(joiner)
    owners = settle(memory_group, members)
    assert all(m.listener.sticky_previous == members[0].listener.sticky_previous for m in members)
    assert sorted(Counter(owners_by_member(owners).values()).values()) == [3, 3, 3, 3]
    assert all(m.listener.stats.failures == 0 for m in members)


@pytest.mark.parametrize("modes", [STICKY_INCREMENTAL, STICKY_BARRIER], ids=["incremental", "barrier"])
def test_the_group_agrees_again_after_the_writer_of_its_record_loses_its_session(memory_group, modes):
    """The record of the group's view goes with its writer's session, and the writer's registration with it; the
    writer comes back under a new session (the same view as before) and the group settles on one record again."""
    topic = memory_group.topic("t", 10)
    members = []
    for i in range(4):
        members.append(memory_group.member("g", f"c{i}", **modes))
        members[-1].create_message_streams({topic: 1})
    settle(memory_group, members)
    for _ in range(2):
        view = members[0].listener.sticky_view
        assert all(m.listener.sticky_view == view for m in members)
        writer_session = memory_group.admin.ephemeral_owner(layout.assignment_path("g", view))
        writer = next(m for m in members if m.zk.session_id == writer_session)
        memory_group.server.expire_session(writer_session)
        path = layout.registration_path("g", writer.consumer_id)
        wait_for(lambda writer=writer, old=writer_session, path=path: writer.zk.session_id != old
                 and memory_group.admin.ephemeral_owner(path) == writer.zk.session_id, timeout=WAIT_S,
                 message="the writer registered again under a new session")
        owners = settle(memory_group, members)
        assert all(m.listener.sticky_previous == members[0].listener.sticky_previous for m in members)
        assert sorted(Counter(owners_by_member(owners).values()).values()) == [2, 2, 3, 3]


# --- beside faithful members ---------------------------------------------------------------------------------------

def test_a_new_sticky_member_refuses_a_group_of_range_members_in_one_line(memory_group):
    topic = memory_group.topic("t", 4)
    faithful = memory_group.member("g", "f")
    faithful.create_message_streams({topic: 1})
    settle(memory_group, [faithful], "range")
    newcomer = memory_group.member("g", "s", **STICKY)
    with pytest.raises(ModeRefusedError) as refused:
        newcomer.create_message_streams({topic: 1})
    message = str(refused.value)
    assert "\n" not in message
    assert "partition.assignment.strategy=sticky needs every member of group g" in message and "(g_f)" in message
    assert "set it on every member, or use range on this one" in message
    assert memory_group.admin.get(layout.registration_path("g", "g_s")) is None, "it stayed registered"
    assert newcomer.listener.sticky_previous is None
    settle(memory_group, [faithful], "range")


def test_sticky_members_compute_range_while_a_range_member_is_in_the_group(memory_group):
    topic = memory_group.topic("t", 6)
    stickies = []
    for name in ("s1", "s2"):
        stickies.append(memory_group.member("g", name, **STICKY_BARRIER))
        stickies[-1].create_message_streams({topic: 1})
    settle(memory_group, stickies)
    skipped: list[dict] = []
    for m in stickies:
        m.add_event_listener(lambda e: skipped.append(e.to_dict()) if e.kind == "sticky_skipped" else None)
    faithful = memory_group.member("g", "f")
    faithful.create_message_streams({topic: 1})
    settle(memory_group, [*stickies, faithful], "range")
    assert skipped and all(e["members"] == ["g_f"] for e in skipped)
    faithful.shutdown()
    settle(memory_group, stickies, "sticky")


def test_the_record_round_trips_and_bad_data_names_the_node():
    from zkconsumer.zookeeper import codecs

    owners = {TopicPartition("t", 10): ConsumerThreadId("g_a-b", 1), TopicPartition("t", 2): ConsumerThreadId("g_c", 0)}
    raw = codecs.encode_assignment_record("v1", owners)
    assert raw == b'{"version":1,"view":"v1","assignment":{"t":{"2":"g_c-0","10":"g_a-b-1"}}}'
    assert codecs.decode_assignment_record("/p", raw) == ("v1", owners)
    with pytest.raises(codecs.ZnodeDataError, match=r"bad data in /p: t/2 -> 'g_c' is not partition -> thread id"):
        codecs.decode_assignment_record("/p", b'{"view":"v1","assignment":{"t":{"2":"g_c"}}}')
