"""The rebalance listener and connector over the in-memory ZooKeeper: each step of the 0.8.2 algorithm must
fail a test when it breaks (claims rolled back after a conflict, local state reset on a new session,
re-registration retried, the first failure raised and later ones only reported, triggers coalesced)."""

from __future__ import annotations

import pytest
from helpers import EventRecorder, wait_for

from fetcher_manager.stream import ChunkQueue, KafkaStream
from rebalance.assignment import ConsumerThreadId
from rebalance.assignors import RangeAssignor
from rebalance.bindings import StreamBindings
from rebalance.events import EventBus, EventKind, MemberState
from rebalance.listener import ConsumerRebalanceFailedError, RebalanceSettings, ZKRebalancerListener
from rebalance.offsets import OffsetCheckpoints
from rebalance.ownership import Ownership
from rebalance.subscription import Registration
from zkconsumer.members import NoFetchers
from zkconsumer.registration import register
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.group import ZkGroupStore
from zkconsumer.zookeeper.memory import MemoryZkClient


class Recorder(EventRecorder):
    def between(self, first_kind: str, last_kind: str) -> list:
        """Events after the first `first_kind` up to and including the first `last_kind` after it."""
        with self.lock:
            events = list(self.events)
        start = next(i for i, e in enumerate(events) if e.kind == first_kind)
        end = next(i for i in range(start, len(events)) if events[i].kind == last_kind)
        return events[start:end + 1]


def test_members_joining_one_by_one_converge_on_the_range_assignment(memory_group):
    topic = memory_group.topic("t", 7)
    for name in ("c1", "c2", "c3"):
        memory_group.member("g", name).create_message_streams({topic: 2})
        wait_for(lambda: memory_group.settled("g"), timeout=10, message=f"settled with {name}")
    owners = memory_group.owners("g")
    assert sorted(owners.values()).count("g_c1-0") == 2 and len(owners) == 7
    assert all(m.state == MemberState.OWNING for m in memory_group.members)


def test_claims_of_a_failed_attempt_are_rolled_back(memory_group):
    topic = memory_group.topic("t", 3)
    stale = f"/consumers/g/owners/{topic}/2"
    memory_group.admin.create(stale, b"someone-else-0", ephemeral=True)
    member = memory_group.member("g", "m", rebalance_max_retries=2)
    recorder = Recorder()
    member.add_event_listener(recorder)
    trees: list[dict] = []
    member.add_event_listener(lambda e: trees.append(memory_group.server.dump())
                              if e.kind == EventKind.ATTEMPT_END else None)
    with pytest.raises(ConsumerRebalanceFailedError):
        member.create_message_streams({topic: 1})
    claims = recorder.of("claim")
    assert [(c.data["partition"], c.data["ok"]) for c in claims[:3]] == [(0, True), (1, True), (2, False)]
    assert claims[2].data["owner"] == "someone-else-0"
    assert [(r.data["topic"], r.data["partition"]) for r in recorder.of("rollback")][:2] == [(topic, 0), (topic, 1)]
    for tree in trees:  # at the end of every attempt, only the stale owner node is left
        owners = {path for path in tree if path.startswith(f"/consumers/g/owners/{topic}/")}
        assert owners == {stale}
    assert member.owned_partitions() == {}
    assert member.state == MemberState.FAILED and isinstance(member.last_rebalance_error, ConsumerRebalanceFailedError)


def test_a_new_session_forgets_ownership_without_releasing_or_committing(memory_group):
    topic = memory_group.topic("t", 2)
    member = memory_group.member("g", "m", auto_commit_enable=True, auto_commit_interval_ms=3_600_000)
    recorder = Recorder()
    member.add_event_listener(recorder)
    member.create_message_streams({topic: 1})
    for info in member.ownership.infos():
        info.set_consumed_offset(7)  # consumed but not yet committed when the session expires
    old_session = member.zk.session_id
    rebalances = member.rebalance_stats.rebalances
    memory_group.server.expire_session(old_session)
    wait_for(lambda: member.rebalance_stats.rebalances > rebalances and member.state == MemberState.OWNING,
             timeout=10, message="rebalanced under the new session")
    after_expiry = recorder.between("session_renewed", "rebalance_end")
    kinds = [str(e.kind) for e in after_expiry]
    assert "release" not in kinds, "owner nodes died with the old session: nothing to release"
    assert "commit" not in kinds, "offsets consumed under the old session must not be committed after it"
    assert kinds.index("fetchers_stopped") < kinds.index("registered") < kinds.index("claim")
    assert memory_group.admin.get(layout.offset_path("g", topic, 0)) is None
    owner = memory_group.admin.ephemeral_owner(layout.owner_path("g", topic, 0))
    assert owner == member.zk.session_id != old_session
    assert {i.consumed_offset for i in member.ownership.infos()} == {-1}  # restarted from the stored offsets


def test_reregistration_is_retried_with_backoff_until_it_works(memory_group):
    topic = memory_group.topic("t", 1)
    client = MemoryZkClient(memory_group.server, log_id="g_m").start()
    store = ZkGroupStore(client, "g")
    events = EventBus("g_m")
    recorder = Recorder()
    events.subscribe(recorder)
    failures = iter([RuntimeError("ZooKeeper said no"), RuntimeError("still no")])

    def flaky_register() -> None:
        error = next(failures, None)
        if error is not None:
            raise error
        register(client, "g", "g_m", Registration.static({topic: 1}), 1.0)

    bindings = StreamBindings()
    queue = ChunkQueue(2)
    bindings.bind(topic, ConsumerThreadId("g_m", 0), queue, KafkaStream(queue, -1))
    listener = ZKRebalancerListener(
        RebalanceSettings("g_m", max_retries=2, backoff_ms=10, auto_commit=False), store, RangeAssignor(),
        NoFetchers(), bindings, Ownership(store, "g_m", events), OffsetCheckpoints(store, "g_m", events=events),
        events=events, register=flaky_register)
    listener.handle_new_session()
    assert listener.state == MemberState.OWNING
    kinds = [str(e.kind) for e in recorder.events]
    assert kinds.count("registration_failed") == 2
    assert kinds.index("registration_failed") < kinds.index("registered") < kinds.index("rebalance_begin")
    delays = [e.data["retry_in_s"] for e in recorder.of("registration_failed")]
    assert delays[1] > delays[0]  # exponential backoff
    assert client.exists(layout.registration_path("g", "g_m"))
    client.close()


def test_reregistration_stops_retrying_when_the_member_shuts_down(memory_group):
    client = MemoryZkClient(memory_group.server, log_id="g_x").start()
    store = ZkGroupStore(client, "g")
    calls = []

    def never_works() -> None:
        calls.append(1)
        if len(calls) == 2:
            listener.stop()
        raise RuntimeError("no")

    listener = ZKRebalancerListener(
        RebalanceSettings("g_x", backoff_ms=10, auto_commit=False), store, RangeAssignor(), NoFetchers(),
        StreamBindings(), Ownership(store, "g_x"), OffsetCheckpoints(store, "g_x"), register=never_works)
    listener.handle_new_session()
    assert len(calls) == 2
    assert listener.stats.rebalances == 0
    client.close()


def test_later_rebalance_failures_are_reported_not_raised(memory_group):
    topic = memory_group.topic("t", 1)
    member = memory_group.member("g", "m", rebalance_max_retries=2)
    recorder = Recorder()
    member.add_event_listener(recorder)
    member.create_message_streams({topic: 1})
    memory_group.admin.create(layout.registration_path("g", "broken"), b"{not json", ephemeral=True)
    wait_for(lambda: recorder.of("rebalance_failed"), timeout=10, message="background rebalance fails")
    assert member.listener.watcher_alive
    assert member.state == MemberState.FAILED
    assert "can't rebalance after 2 retries" in str(member.last_rebalance_error)
    results = [e.data["result"] for e in recorder.of("attempt_end")]
    assert results[-2:] == ["error", "error"]
    memory_group.admin.delete(layout.registration_path("g", "broken"))
    wait_for(lambda: member.state == MemberState.OWNING, timeout=10, message="recovers on the next trigger")
    assert member.last_rebalance_error is None


def test_triggers_during_a_rebalance_give_one_follow_up(memory_group):
    topic = memory_group.topic("t", 2)
    member = memory_group.member("g", "m")
    member.create_message_streams({topic: 1})
    before = member.rebalance_stats.rebalances
    with member.listener.rebalance_lock:  # a rebalance in progress: the watcher cannot start another
        for i in range(25):
            member.listener.trigger(f"burst {i}")
    wait_for(lambda: member.rebalance_stats.rebalances == before + 1, timeout=10, message="one follow-up")
    member.listener.trigger("settle")
    wait_for(lambda: member.rebalance_stats.rebalances == before + 2, timeout=10, message="and one more")


def test_a_closing_member_claims_nothing(memory_group):
    topic = memory_group.topic("t", 2)
    member = memory_group.member("g", "m")
    member.listener.stop()
    member.create_message_streams({topic: 1})  # the first rebalance sees the shutdown and does nothing
    assert memory_group.owners("g") == {}
    assert member.rebalance_stats.attempts == 0


def test_wildcard_members_follow_topic_creation(memory_group):
    from rebalance.subscription import Whitelist

    memory_group.topic("clicks.a", 2)
    member = memory_group.member("g", "w")
    member.create_message_streams_by_filter(Whitelist("clicks\\..*"), 1)
    assert set(memory_group.owners("g")) == {("clicks.a", 0), ("clicks.a", 1)}
    memory_group.topic("clicks.b", 1)
    memory_group.topic("views", 1)
    wait_for(lambda: set(memory_group.owners("g")) == {("clicks.a", 0), ("clicks.a", 1), ("clicks.b", 0)},
             timeout=10, message="new matching topic owned, others ignored")
