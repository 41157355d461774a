"""The opt-in modes' mechanisms (rebalance/opt_in.py, docs/modes.md), not only their outcomes: each test drives a
`ZKRebalancerListener` over the in-memory ZooKeeper and asserts the events and requests that show the mechanism ran,
beside the same case run faithfully (Kafka 0.8.2's `ZKRebalancerListener.rebalance`) where the mode changes it.

- claim on deletion: a claim that finds the owner node taken waits for its deletion (OWNER_GONE, heard as a watch
  notification) and the attempt succeeds; faithful, the same case is a conflict and a backoff;
- the barrier stands aside (BARRIER_SKIPPED) for a member already in the group when a faithful member joins, and
  refuses a group of faithful members to a newcomer;
- a wait of claim on deletion or of the barrier ends the attempt VIEW_CHANGED on a newer trigger, and the next
  attempt starts at once (no backoff) from the new view;
- incremental ownership: the exact requests of one rebalance after a join, per operation, against faithful;
- the bounds and outcomes of the waits (docs/modes.md): a claim on deletion waits the backoff in all, across its
  rounds, and a failed one rolls back every claim of the attempt; a barrier nobody acknowledges is a conflict
  after 10 backoffs; a fetcher that does not let go of a lost partition makes incremental ownership stop every
  fetcher as 0.8.2 does, without holding the rebalance up; incremental alone never waits for an owner node;
- what a mode leaves behind: the barrier's acknowledgement of a view the member left, the requests of claim on
  deletion without a conflict, the fetchers of kept partitions under incremental ownership;
- the barrier's refusal, word for word, and that a member already in the group owning nothing stands aside.

The other members are registrations only (written by the admin session): they never rebalance, so each case is
exactly the one written here.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest
from helpers import wait_for

from fetcher_manager.stream import ChunkQueue, KafkaStream
from rebalance.assignment import ConsumerThreadId
from rebalance.assignors import RangeAssignor
from rebalance.bindings import StreamBindings
from rebalance.events import EventBus
from rebalance.listener import RebalanceSettings, ZKRebalancerListener
from rebalance.listener_types import ModeRefusedError, ModeSettings
from rebalance.offsets import OffsetCheckpoints
from rebalance.ownership import Ownership
from rebalance.subscription import Registration
from zkconsumer.members import NoFetchers
from zkconsumer.registration import register
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.group import ZkGroupStore
from zkconsumer.zookeeper.memory import MemoryZkClient

FAITHFUL = ModeSettings()
CLAIM_ON_DELETION = ModeSettings(claim_on_deletion=True)
BARRIER = ModeSettings(barrier=True)
INCREMENTAL = ModeSettings(incremental=True)
WAIT_S = 10.0
# The bound of an opt-in wait (claim on deletion: rebalance.backoff.ms; the barrier: 10 of them), far beyond WAIT_S:
# the test ends each wait (deletes the node, triggers) as soon as the member is in it, so a wait that does not wake
# on that runs to its bound and the rebalance does not end within WAIT_S.
LONG_BACKOFF_MS = 20_000


def registration(topics: dict[str, int], modes: ModeSettings = FAITHFUL) -> Registration:
    return replace(Registration.static(topics), modes=("barrier",) if modes.barrier else ())


class Member:
    """One listener, driven on a named thread of the test (`start_rebalance`) or on the test thread, with its own
    ZooKeeper session, one stream per subscribed topic and every event recorded."""

    def __init__(self, memory_group, group: str, consumer_id: str, *, topics: dict[str, int] | None = None,
                 modes: ModeSettings = FAITHFUL, backoff_ms: int = 20, max_retries: int = 4,
                 fetchers: NoFetchers | None = None) -> None:
        topics = topics or {"t": 1}
        self.client = MemoryZkClient(memory_group.server, log_id=consumer_id).start()
        self.store = ZkGroupStore(self.client, group)
        register(self.client, group, consumer_id, registration(topics, modes), 1.0)
        bindings = StreamBindings()
        for topic, streams in topics.items():
            for i in range(streams):
                queue = ChunkQueue(4)
                bindings.bind(topic, ConsumerThreadId(consumer_id, i), queue, KafkaStream(queue, -1))
        events = EventBus(consumer_id)
        self.recorded: list = []
        events.subscribe(self.recorded.append)
        self.listener = ZKRebalancerListener(
            RebalanceSettings(consumer_id, max_retries=max_retries, backoff_ms=backoff_ms, auto_commit=False,
                              modes=modes),
            self.store, RangeAssignor(), fetchers or NoFetchers(), bindings, Ownership(self.store, consumer_id, events),
            OffsetCheckpoints(self.store, consumer_id, events=events), events=events)
        self.waiting = threading.Event()  # set when an opt-in wait (claim on deletion, barrier) begins
        wait_until = self.listener.wait_until

        def spying_wait_until(predicate, timeout_s):
            self.waiting.set()
            return wait_until(predicate, timeout_s)

        self.listener.wait_until = spying_wait_until
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def of(self, kind: str, since: int = 0) -> list[dict]:
        return [dict(e.data) for e in self.recorded[since:] if e.kind == kind]

    def kinds(self, since: int = 0) -> list[str]:
        return [str(e.kind) for e in self.recorded[since:]]

    def results(self, since: int = 0) -> list[str]:
        return [e["result"] for e in self.of("attempt_end", since)]

    def failed_claims(self) -> list[dict]:
        return [c for c in self.of("claim") if not c["ok"]]

    def start_rebalance(self) -> None:
        def run() -> None:
            try:
                self.listener.synced_rebalance()
            except BaseException as error:  # reported to the test by `finish_rebalance`
                self.error = error

        self._thread = threading.Thread(target=run, name=f"{self.listener.consumer_id}-rebalance", daemon=True)
        self._thread.start()

    def finish_rebalance(self) -> None:
        assert self._thread is not None
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "the rebalance did not end"
        if self.error is not None:
            raise self.error

    def owned(self) -> list[tuple[str, int]]:
        return sorted((tp.topic, tp.partition) for tp in self.listener.ownership.owners())

    def close(self) -> None:
        self.listener.stop()
        if self._thread is not None:
            self._thread.join(WAIT_S)
        self.client.close()


@pytest.fixture
def members(memory_group):
    made: list[Member] = []

    def make(*args, **kwargs) -> Member:
        member = Member(memory_group, *args, **kwargs)
        made.append(member)
        return member

    yield make
    for member in made:
        member.close()


def join_the_race(memory_group, members, modes: ModeSettings, backoff_ms: int) -> Member:
    """A member joins a live group and loses the release race (docs/modes.md): the incumbent g_o owns both
    partitions of t from its earlier view; in the new view t/0 is the joiner's. The joiner's claim finds t/0 taken;
    only then does g_o commit t/0's offset (42) and delete its owner node, as 0.8.2 commits before it releases."""
    admin = memory_group.admin
    memory_group.topic("t", 2)
    register(admin, "g", "g_o", registration({"t": 1}), 1.0)
    for partition in (0, 1):
        admin.create(layout.owner_path("g", "t", partition), b"g_o-0", ephemeral=True)
    joiner = members("g", "g_m", modes=modes, backoff_ms=backoff_ms)
    joiner.start_rebalance()
    wait_for(joiner.failed_claims, WAIT_S, message="the joiner's claim found t/0 taken")
    if modes.claim_on_deletion:
        wait_for(joiner.waiting.is_set, WAIT_S, message="the joiner waits for the owner node")
    admin.set(layout.offset_path("g", "t", 0), codecs.encode_offset(42))
    admin.delete(layout.owner_path("g", "t", 0))
    joiner.finish_rebalance()
    return joiner


def test_claim_on_deletion_waits_for_the_owner_node_to_go_then_claims(memory_group, members):
    joiner = join_the_race(memory_group, members, CLAIM_ON_DELETION, LONG_BACKOFF_MS)
    assert joiner.failed_claims() == [{"topic": "t", "partition": 0, "thread": "g_m-0", "ok": False,
                                       "owner": "g_o-0"}]
    # the wait ended on the deletion, heard as one notification of the owner node's watch, not on a timeout
    assert joiner.client.op_counts().get("watch:data") == 1
    kinds = joiner.kinds()
    assert kinds.count("attempt_begin") == 1 and joiner.results() == ["ok"]
    assert joiner.of("attempt_end")[0]["duration_ms"] < LONG_BACKOFF_MS / 2, "the wait ran to its bound"
    claims = [i for i, kind in enumerate(kinds) if kind == "claim"]
    assert claims[0] < kinds.index("owner_gone") < claims[1]
    assert joiner.of("owner_gone") == [{"topic": "t", "partition": 0}]
    assert joiner.of("claim")[1]["ok"] and "rollback" not in kinds
    stats = joiner.listener.stats
    assert (stats.attempts, stats.failed_attempts, stats.conflicts) == (1, 0, 0)
    # the offset is read after the claim, so the last commit before the release is seen
    assert joiner.of("fetchers_started") == [{"offsets": {"t/0": 42}}]
    assert joiner.owned() == [("t", 0)]


def test_faithful_the_same_race_is_a_conflict_then_a_backoff(memory_group, members):
    backoff_ms = 200
    joiner = join_the_race(memory_group, members, FAITHFUL, backoff_ms)
    assert not joiner.waiting.is_set() and joiner.of("owner_gone") == []
    assert joiner.results() == ["conflict", "ok"]
    stats = joiner.listener.stats
    assert (stats.attempts, stats.failed_attempts, stats.conflicts) == (2, 1, 1)
    ended, began = (next(e for e in joiner.recorded if e.kind == kind and e.data["attempt"] == attempt)
                    for kind, attempt in (("attempt_end", 0), ("attempt_begin", 1)))
    assert began.monotonic - ended.monotonic >= 0.9 * backoff_ms / 1000.0, "no backoff between the attempts"
    assert joiner.owned() == [("t", 0)]


def test_the_barrier_stands_aside_when_a_faithful_member_joins_a_barrier_member(memory_group, members):
    memory_group.topic("t", 2)
    m = members("g", "g_m", modes=BARRIER, max_retries=2)
    m.listener.synced_rebalance()  # alone: the barrier runs, on a view of one member
    assert m.of("barrier") == [{"view": m.listener.attempt.barrier_view.id, "view_members": 1, "acked": 1}]
    assert m.of("barrier_skipped") == [] and m.owned() == [("t", 0), ("t", 1)]
    since = len(m.recorded)
    register(memory_group.admin, "g", "g_f", registration({"t": 1}), 1.0)  # a faithful member joins
    m.listener.synced_rebalance()
    assert m.of("barrier_skipped", since) == [{"members": ["g_f"]}]
    assert m.of("barrier", since) == [], "it waited at a barrier a faithful member never acknowledges"
    assert m.results(since) == ["ok"] and m.owned() == [("t", 1)]  # g_f sorts first: t/0 is its share


def test_a_new_barrier_member_refuses_a_group_of_faithful_members_instead_of_standing_aside(memory_group, members):
    memory_group.topic("t", 2)
    register(memory_group.admin, "g", "g_f", registration({"t": 1}), 1.0)
    m = members("g", "g_m", modes=BARRIER)
    with pytest.raises(ModeRefusedError, match=r"needs every member of group g.*\(g_f\)"):
        m.listener.synced_rebalance()
    assert m.of("barrier_skipped") == [] and m.of("claim") == []
    assert m.of("rebalance_failed") and m.listener.state == "failed"


def assert_retried_at_once_from_the_new_view(m: Member, wait_bound_ms: int) -> None:
    """The first attempt ended view_changed on the trigger (well before its wait's bound, where it would also end
    view_changed, only later) and the second began next, without the failure path's backoff (which stops the
    fetchers first)."""
    assert m.results() == ["view_changed", "ok"]
    assert m.of("attempt_end")[0]["duration_ms"] < wait_bound_ms / 2, "the wait ran to its bound"
    kinds = m.kinds()
    end = next(i for i, e in enumerate(m.recorded) if e.kind == "attempt_end")
    assert kinds[end + 1:end + 3] == ["state", "attempt_begin"], kinds[end:]
    stats = m.listener.stats
    assert (stats.attempts, stats.failed_attempts, stats.conflicts) == (2, 1, 0)


def test_a_claim_waiting_for_deletion_ends_view_changed_when_the_group_changes(memory_group, members):
    admin = memory_group.admin
    memory_group.topic("t", 2)
    admin.create(layout.owner_path("g", "t", 1), b"g_z-0", ephemeral=True)  # held by a member not in the view
    m = members("g", "g_m", modes=CLAIM_ON_DELETION, backoff_ms=LONG_BACKOFF_MS)
    m.start_rebalance()
    wait_for(m.waiting.is_set, WAIT_S, message="g_m waits for t/1's owner node")
    register(admin, "g", "g_o", registration({"t": 1}), 1.0)
    m.listener.trigger("member change")  # as the watch of the ids directory does
    m.finish_rebalance()
    assert_retried_at_once_from_the_new_view(m, LONG_BACKOFF_MS)
    assert m.of("owner_gone") == [], "the node was never deleted: the trigger ended the wait"
    first_end = m.kinds().index("attempt_end")
    assert m.of("rollback")[:1] == [{"topic": "t", "partition": 0}]
    assert "rollback" in m.kinds()[:first_end]  # this attempt's claim of t/0 was undone before it ended
    # the next attempt read the new view (t/1 is g_o's) and never met the stale node
    assert [(c["partition"], c["ok"]) for c in m.of("claim")] == [(0, True), (1, False), (0, True)]
    assert m.owned() == [("t", 0)]


def test_the_barrier_wait_ends_view_changed_when_the_group_changes(memory_group, members):
    admin = memory_group.admin
    memory_group.topic("t", 2)
    register(admin, "g", "g_b", registration({"t": 1}, BARRIER), 1.0)  # a barrier member that never acknowledges
    backoff_ms = LONG_BACKOFF_MS // 10  # the barrier waits at most 10 backoffs
    m = members("g", "g_m", modes=BARRIER, backoff_ms=backoff_ms)
    m.start_rebalance()
    wait_for(m.waiting.is_set, WAIT_S, message="g_m waits at the barrier")
    admin.delete(layout.registration_path("g", "g_b"))  # it leaves
    m.listener.trigger("member change")
    m.finish_rebalance()
    assert_retried_at_once_from_the_new_view(m, 10 * backoff_ms)
    first, second = m.of("barrier")
    assert (first["view_members"], first["acked"]) == (2, 1)
    assert (second["view_members"], second["acked"]) == (1, 1) and second["view"] != first["view"]
    assert m.kinds().index("claim") > m.kinds().index("attempt_end"), "it claimed before everyone acknowledged"
    assert m.owned() == [("t", 0), ("t", 1)]


def requests(member: Member) -> dict[str, int]:
    return {k: v for k, v in member.client.op_counts().items() if ":" not in k}  # watch:* are not requests


def test_incremental_rebalance_after_a_join_sends_exactly_these_requests_against_faithful(memory_group, members):
    """m and o are in the group (6 partitions of t: m owns t/0-2), then p joins (m keeps t/0-1, loses t/2). Only
    m rebalances, on the test thread; its requests for that rebalance, per operation, in each mode."""
    memory_group.topic("t", 6)
    spent = {}
    for name, modes in (("faithful", FAITHFUL), ("incremental", INCREMENTAL)):
        register(memory_group.admin, name, "o", registration({"t": 1}), 1.0)
        m = members(name, "m", modes=modes)
        m.listener.synced_rebalance()
        assert m.owned() == [("t", 0), ("t", 1), ("t", 2)]
        register(memory_group.admin, name, "p", registration({"t": 1}), 1.0)
        before, since = requests(m), len(m.recorded)
        m.listener.synced_rebalance()
        assert m.results(since) == ["ok"] and m.owned() == [("t", 0), ("t", 1)]
        spent[name] = {k: v - before.get(k, 0) for k, v in requests(m).items() if v != before.get(k, 0)}
        stopped = m.of("fetchers_stopped", since)
        assert stopped == [{"partitions": ["t/0", "t/1", "t/2"] if name == "faithful" else ["t/2"]}]
    # Both: own registration, broker registration, topic (get_data); broker ids, member ids, topics (get_children).
    listings, fixed_reads = 3, 3
    assert spent["faithful"] == {
        "get_children": listings,
        "get_data": fixed_reads + 3 + 2,  # every member's registration; the offsets of the 2 partitions it claims
        "delete": 3,  # it releases all it owned...
        "create": 2,  # ...and claims its new share
    }
    assert spent["incremental"] == {
        "get_children": listings,
        "get_data": fixed_reads + 1,  # the newcomer's registration only; no offset: it gains nothing
        "delete": 1,  # only what it loses; kept partitions are neither released nor claimed
    }


def test_a_claim_that_meets_its_owner_node_again_rolls_back_every_claim_of_the_attempt_within_the_backoff(
        memory_group, members):
    """Claim on deletion: t/0 is claimed in the first round; t/1's stale owner node goes, but comes back before the
    second round claims it. The attempt waits no longer than the backoff in all, then is a conflict (nothing
    changed in the group) that leaves no owner node of ours behind, t/0's included, so nobody waits for it."""
    admin = memory_group.admin
    memory_group.topic("t", 2)
    stale = layout.owner_path("g", "t", 1)
    admin.create(stale, b"g_z-0", ephemeral=True)
    backoff_ms = 300
    m = members("g", "g_m", topics={"t": 2}, modes=CLAIM_ON_DELETION, backoff_ms=backoff_ms)
    t0_owner_after_conflict: list = []

    def owner_node_comes_back(event) -> None:
        # on the member's thread, between its wait for the deletion and its next round of claims
        if event.kind == "owner_gone" and len(m.of("owner_gone")) == 1:  # recorded already: subscribed first
            admin.create(stale, b"g_z-0", ephemeral=True)
        elif event.kind == "attempt_end" and event.data["result"] == "conflict":
            t0_owner_after_conflict.append(admin.exists(layout.owner_path("g", "t", 0)))
            admin.delete(stale)  # the next attempt finds t/1 free

    m.listener.events.subscribe(owner_node_comes_back)
    m.start_rebalance()
    wait_for(m.waiting.is_set, WAIT_S, message="g_m waits for t/1's owner node")
    admin.delete(stale)
    m.finish_rebalance()
    assert m.results() == ["conflict", "ok"]
    assert m.of("owner_gone") == [{"topic": "t", "partition": 1}]
    assert [(c["partition"], c["ok"]) for c in m.of("claim")] == [(0, True), (1, False), (1, False),
                                                                   (0, True), (1, True)]
    assert m.of("rollback") == [{"topic": "t", "partition": 0}]
    assert t0_owner_after_conflict == [False], "the failed attempt left its claim of t/0 behind"
    stats = m.listener.stats
    assert (stats.attempts, stats.failed_attempts, stats.conflicts) == (2, 1, 1)
    # the second wait had only what was left of the one backoff (docs/modes.md), not a wait of its own
    assert m.of("attempt_end")[0]["duration_ms"] < 3 * backoff_ms
    assert m.owned() == [("t", 0), ("t", 1)]


def test_a_barrier_nobody_else_acknowledges_is_a_conflict_after_ten_backoffs(memory_group, members):
    """docs/modes.md: the barrier waits at most 10 backoffs for the others, then the attempt fails as a conflict
    would (the view did not change), and the next attempt comes after the backoff."""
    admin = memory_group.admin
    memory_group.topic("t", 2)
    register(admin, "g", "g_b", registration({"t": 1}, BARRIER), 1.0)  # a barrier member that never acknowledges
    backoff_ms = 50
    m = members("g", "g_m", modes=BARRIER, backoff_ms=backoff_ms)

    def it_leaves_after_the_first_attempt(event) -> None:
        if event.kind == "attempt_end" and event.data["attempt"] == 0:
            admin.delete(layout.registration_path("g", "g_b"))

    m.listener.events.subscribe(it_leaves_after_the_first_attempt)
    m.start_rebalance()
    m.finish_rebalance()
    assert m.results() == ["conflict", "ok"]
    assert 0.9 * 10 * backoff_ms <= m.of("attempt_end")[0]["duration_ms"] < WAIT_S * 1000 / 2
    stats = m.listener.stats
    assert (stats.attempts, stats.failed_attempts, stats.conflicts) == (2, 1, 1)
    assert [(b["view_members"], b["acked"]) for b in m.of("barrier")] == [(2, 1), (1, 1)]
    assert m.owned() == [("t", 0), ("t", 1)]


def test_a_barrier_member_withdraws_its_acknowledgement_of_the_view_it_left(memory_group, members):
    """The barrier's nodes do not pile up in ZooKeeper, one per view: acknowledging a new view deletes our
    acknowledgement of the previous one, and that view's node once nobody else's is left in it."""
    admin = memory_group.admin
    memory_group.topic("t", 2)
    m = members("g", "g_m", modes=BARRIER)
    m.listener.synced_rebalance()
    first = m.listener.attempt.barrier_view.id
    assert admin.exists(layout.barrier_ack_path("g", first, "g_m"))
    admin.set(layout.topic_path("t"), codecs.encode_topic({p: [1] for p in range(3)}))  # a new view
    m.listener.synced_rebalance()
    second = m.listener.attempt.barrier_view.id
    assert second != first and m.owned() == [("t", 0), ("t", 1), ("t", 2)]
    assert admin.exists(layout.barrier_ack_path("g", second, "g_m"))
    assert not admin.exists(layout.barrier_dir("g", first)), "the acknowledgement of the old view stayed"


def test_incremental_gains_are_fetched_beside_the_kept_partitions(memory_group, members):
    """Incremental ownership (docs/modes.md): the fetchers of kept partitions never stop, and what the member
    gains is fetched as well, not instead."""
    memory_group.topic("t", 4)
    register(memory_group.admin, "g", "o", registration({"t": 1}), 1.0)
    m = members("g", "m", modes=INCREMENTAL)
    m.listener.synced_rebalance()
    assert m.listener.fetchers.fetching() == m.owned() == [("t", 0), ("t", 1)]
    memory_group.admin.delete(layout.registration_path("g", "o"))  # o leaves: m gains t/2 and t/3
    since = len(m.recorded)
    m.listener.synced_rebalance()
    assert m.of("fetchers_stopped", since) == [] and m.of("release", since) == []
    assert m.listener.fetchers.fetching() == m.owned() == [("t", 0), ("t", 1), ("t", 2), ("t", 3)]


def test_incremental_alone_does_not_wait_for_an_owner_node_to_go(memory_group, members):
    """Waiting for a taken partition's owner node is claim on deletion's; incremental ownership alone meets a
    taken one as 0.8.2 does: a conflict, then a backoff."""
    joiner = join_the_race(memory_group, members, INCREMENTAL, 200)
    assert not joiner.waiting.is_set() and joiner.of("owner_gone") == []
    assert joiner.results() == ["conflict", "ok"]
    assert joiner.owned() == [("t", 0)]


class StuckFetchers(NoFetchers):
    """A fetcher that never lets go of a partition it is told to drop (blocked on a full queue the app does not
    drain): each `remove_partitions` takes its whole bound and fails."""

    def __init__(self) -> None:
        super().__init__()
        self.never = threading.Event()
        self.bounds: list[float] = []

    def remove_partitions(self, tps, timeout_s: float) -> bool:
        self.bounds.append(timeout_s)
        self.never.wait(timeout_s)
        return False


def test_incremental_falls_back_to_stopping_every_fetcher_when_one_does_not_let_go(memory_group, members):
    """docs/modes.md: a fetcher that does not let go of a lost partition within a second does not hold the
    rebalance up; the member stops every fetcher and releases everything, as 0.8.2 does, then claims its share."""
    memory_group.topic("t", 6)
    register(memory_group.admin, "g", "o", registration({"t": 1}), 1.0)
    fetchers = StuckFetchers()
    m = members("g", "m", modes=INCREMENTAL, fetchers=fetchers)
    m.start_rebalance()
    m.finish_rebalance()
    assert m.owned() == [("t", 0), ("t", 1), ("t", 2)]
    register(memory_group.admin, "g", "p", registration({"t": 1}), 1.0)  # m loses t/2
    since = len(m.recorded)
    m.start_rebalance()
    m.finish_rebalance()
    assert m.results(since) == ["ok"]
    assert m.of("fetchers_stopped", since) == [{"partitions": ["t/0", "t/1", "t/2"]}]
    assert [r["partition"] for r in m.of("release", since)] == [0, 1, 2]
    assert m.owned() == [("t", 0), ("t", 1)] and fetchers.fetching() == [("t", 0), ("t", 1)]


@pytest.mark.parametrize(("faithful", "named"), [
    (["g_a", "g_b", "g_c"], "g_a, g_b, g_c"),
    (["g_a", "g_b", "g_c", "g_d"], "g_a, g_b, g_c, ..."),
])
def test_a_barrier_newcomer_refuses_in_one_line_naming_the_setting_and_who_lacks_it(memory_group, members,
                                                                                     faithful, named):
    memory_group.topic("t", 2)
    for name in faithful:
        register(memory_group.admin, "g", name, registration({"t": 1}), 1.0)
    m = members("g", "g_m", modes=BARRIER)
    with pytest.raises(ModeRefusedError) as refused:
        m.listener.synced_rebalance()
    assert str(refused.value) == (
        f"g_m: zkconsumer.consensus.barrier=true needs every member of group g to set it, and {len(faithful)} "
        f"member(s) do not ({named}): set it on every member, or leave it off on this one")


def test_a_barrier_member_owning_nothing_stands_aside_when_a_faithful_member_joins(memory_group, members):
    """Only a newcomer (owning nothing in its first rebalance) refuses a group with faithful members: one already
    in the group goes on without the barrier, even when it happens to own nothing (docs/modes.md)."""
    m = members("g", "g_m", topics={"t": 1}, modes=BARRIER)  # t does not exist yet: nothing to own
    m.listener.synced_rebalance()
    assert m.results() == ["ok"] and m.owned() == [] and len(m.of("barrier")) == 1
    register(memory_group.admin, "g", "g_f", registration({"t": 1}), 1.0)
    since = len(m.recorded)
    m.listener.synced_rebalance()
    assert m.of("barrier_skipped", since) == [{"members": ["g_f"]}]
    assert m.results(since) == ["ok"] and m.listener.state != "failed"


def test_claim_on_deletion_without_a_conflict_sends_the_requests_of_faithful(memory_group, members):
    """Claim on deletion reads the gained offsets after the claim instead of before it (docs/modes.md), not as
    well: without a conflict its rebalances, a first one and one after a join, cost what 0.8.2's do."""
    memory_group.topic("t", 6)
    spent = {}
    for name, modes in (("faithful", FAITHFUL), ("claim_on_deletion", CLAIM_ON_DELETION)):
        m = members(name, "m", modes=modes)
        before = requests(m)  # the first member's registration also created the parent nodes the second finds
        m.listener.synced_rebalance()
        register(memory_group.admin, name, "p", registration({"t": 1}), 1.0)
        m.listener.synced_rebalance()
        assert m.results() == ["ok", "ok"] and m.owned() == [("t", 0), ("t", 1), ("t", 2)]
        assert m.of("owner_gone") == [] and not m.waiting.is_set()
        spent[name] = {k: v - before.get(k, 0) for k, v in requests(m).items()}
    assert spent["claim_on_deletion"] == spent["faithful"]
