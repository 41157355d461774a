"""The rebalance listener driven directly on the test thread, over the in-memory ZooKeeper: the exact events of
each step (the member API, rebalance/events.py), the stats, the user callbacks, how an attempt or a rebalance
ends when the member stops at each point of it, re-registration backoff, and the watcher thread's wake-ups and
join. The order of the steps follows `ZKRebalancerListener.rebalance` in 0.8.2's ZookeeperConsumerConnector.scala.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager

import pytest
from conftest import BROKER
from helpers import wait_for

from fetcher_manager.stream import ChunkQueue, KafkaStream
from rebalance.assignment import ConsumerThreadId
from rebalance.assignors import RangeAssignor
from rebalance.bindings import StreamBindings
from rebalance.events import EventBus, EventKind, MemberState
from rebalance.listener import ConsumerRebalanceFailedError, RebalanceSettings, ZKRebalancerListener
from rebalance.offsets import OffsetCheckpoints
from rebalance.ownership import Ownership
from rebalance.subscription import Registration, Whitelist
from zkconsumer.members import NoFetchers
from zkconsumer.registration import register
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.group import ZkGroupStore
from zkconsumer.zookeeper.memory import MemoryZkClient

TIMING = ("duration_ms",)
STEP = 2.0 ** -7  # seconds per clock reading: exact in binary, so the rounded durations are exact too


class Ticks:
    """A monotonic clock that advances STEP seconds at every reading."""

    def __init__(self) -> None:
        self.now = 128.0

    def __call__(self) -> float:
        self.now += STEP
        return self.now


class Timer:
    """A metrics timer: counts the rebalances it timed."""

    def __init__(self) -> None:
        self.entered = self.exited = 0

    @contextmanager
    def time(self):
        self.entered += 1
        try:
            yield
        finally:
            self.exited += 1


class UserListener:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def before_releasing_partitions(self, partition_ownership):
        self.calls.append(("release", partition_ownership))

    def before_starting_fetchers(self, consumer_id, global_partition_assignment):
        self.calls.append(("start", consumer_id, global_partition_assignment))


class Member:
    """One listener (not started unless a test starts it) with its own ZooKeeper session and event record."""

    def __init__(self, memory_group, consumer_id: str = "g_m", registration: Registration | None = None,
                 bind: dict[str, int] | None = None, *, with_events: bool = True, **settings) -> None:
        self.client = MemoryZkClient(memory_group.server, log_id=consumer_id).start()
        self.store = ZkGroupStore(self.client, "g")
        self.registration = registration or Registration.static(bind or {"t": 1})
        register(self.client, "g", consumer_id, self.registration, 1.0)
        self.bindings = StreamBindings()
        self.queues: dict[tuple[str, int], ChunkQueue] = {}
        for topic, count in (bind or {}).items():
            for i in range(count):
                queue = ChunkQueue(4)
                self.queues[(topic, i)] = queue
                self.bindings.bind(topic, ConsumerThreadId(consumer_id, i), queue, KafkaStream(queue, -1))
        self.events = EventBus(consumer_id) if with_events else None
        self.fetchers = NoFetchers()
        self.timer = Timer()
        self.user = UserListener()
        self.clock = Ticks()
        settings = {"backoff_ms": 1, "auto_commit": False, **settings}
        self.listener = ZKRebalancerListener(
            RebalanceSettings(consumer_id, **settings), self.store, RangeAssignor(), self.fetchers, self.bindings,
            Ownership(self.store, consumer_id, self.events), OffsetCheckpoints(self.store, consumer_id,
                                                                               events=self.events),
            events=self.events, user_listener=self.user, timer=self.timer, clock=self.clock,
            register=self.reregister)
        self.recorded: list = []
        self.listener.events.subscribe(self.recorded.append)
        self.register_calls = 0

    def reregister(self) -> None:
        self.register_calls += 1
        register(self.client, "g", self.listener.consumer_id, self.registration, 1.0)

    def steps(self, since: int = 0) -> list[tuple[str, dict]]:
        """(kind, data without timings) of every event recorded from index `since` on."""
        return [(str(e.kind), {k: v for k, v in e.data.items() if k not in TIMING}) for e in self.recorded[since:]]

    def of(self, kind: str) -> list[dict]:
        return [dict(e.data) for e in self.recorded if e.kind == kind]

    def close(self) -> None:
        self.listener.stop()
        self.listener.join(5)
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


def test_a_rebalance_reports_every_step_with_its_data(memory_group, members):
    memory_group.topic("t", 2)
    memory_group.topic("u", 1)
    members("g_o", Registration.static({"t": 1, "u": 1}))  # registered only: sorts after g_m, takes t/1 and u/0
    m = members("g_m", bind={"t": 1})
    memory_group.admin.create(layout.offset_path("g", "t", 0), b"5")
    first = m.listener
    assert first.state == MemberState.CREATED and first.last_error is None
    first.synced_rebalance()
    assert m.steps()[:2] == [("rebalance_begin", {"rebalance": 1}),
                             ("state", {"state": "rebalancing", "previous": "created", "attempt": 0})]
    since = len(m.recorded)
    first.synced_rebalance()  # a second time: now there is something to stop fetching and to release
    me, other = ConsumerThreadId("g_m", 0), ConsumerThreadId("g_o", 0)
    assert m.steps(since) == [
        ("rebalance_begin", {"rebalance": 2}),
        ("state", {"state": "rebalancing", "previous": "owning", "attempt": 0}),
        ("attempt_begin", {"rebalance": 2, "attempt": 0}),
        ("fetchers_stopped", {"partitions": ["t/0"]}),
        ("release", {"topic": "t", "partition": 0}),
        ("claim", {"topic": "t", "partition": 0, "thread": "g_m-0", "ok": True, "owner": "g_m-0"}),
        ("fetchers_started", {"offsets": {"t/0": 5}}),
        ("attempt_end", {"rebalance": 2, "attempt": 0, "result": "ok", "error": None}),
        ("rebalance_end", {"rebalance": 2, "result": "ok", "attempts": 1}),
        ("state", {"state": "owning", "previous": "rebalancing", "partitions": 1}),
    ]
    # durations come from the listener's clock: one reading at each begin and end
    assert m.of("attempt_end")[-1]["duration_ms"] == round(STEP * 1000.0, 3)
    assert m.of("rebalance_end")[-1]["duration_ms"] == round(3 * STEP * 1000.0, 3)
    assert m.timer.entered == m.timer.exited == 2
    assert m.user.calls[2:] == [
        ("release", {"t": {0}}),
        ("start", "g_m", {"t": {0: me, 1: other}, "u": {0: other}}),
    ]
    assert m.user.calls[0] == ("release", {})  # the first rebalance had nothing to release
    [info] = first.ownership.infos()
    assert (info.topic, info.partition, info.consumed_offset, info.fetched_offset) == ("t", 0, 5, 5)
    assert info.chunk_queue is m.queues[("t", 0)]
    assert m.fetchers.fetching() == [("t", 0)]
    assert first.stats.rebalances == 2 and first.stats.attempts == 2 and first.stats.failures == 0


def test_events_of_a_listener_without_a_bus_name_the_member(memory_group, members):
    memory_group.topic("t", 1)
    m = members("g_m", bind={"t": 1}, with_events=False)
    m.listener.trigger()
    m.listener.synced_rebalance()
    assert {e.consumer_id for e in m.recorded} == {"g_m"}
    assert m.of("trigger") == [{"reason": ""}]


def test_failed_attempts_conflicts_and_failures_are_counted(memory_group, members):
    memory_group.topic("t", 1)
    memory_group.admin.create(layout.owner_path("g", "t", 0), b"g_z-0", ephemeral=True)
    m = members("g_m", bind={"t": 1}, max_retries=2)
    for rebalance in (1, 2):
        with pytest.raises(ConsumerRebalanceFailedError) as raised:
            m.listener.synced_rebalance()
        assert m.listener.last_error is raised.value
        assert m.of("rebalance_failed")[-1] == {"error": str(raised.value)}
        assert m.of("rebalance_end")[-1]["result"] == "failed"
        assert m.of("rebalance_end")[-1]["attempts"] == 2
        assert m.steps()[-2:] == [("state", {"state": "failed", "previous": "rebalancing", "reason": "rebalance"}),
                                  ("rebalance_failed", {"error": str(raised.value)})]
        stats = m.listener.stats
        assert (stats.rebalances, stats.attempts, stats.failed_attempts, stats.conflicts, stats.failures) == (
            rebalance, 2 * rebalance, 2 * rebalance, 2 * rebalance, rebalance)
    assert [e["result"] for e in m.of("attempt_end")] == ["conflict"] * 4
    assert m.listener.state == MemberState.FAILED


def test_an_attempt_that_raises_reports_the_error(memory_group, members):
    memory_group.topic("t", 1)
    memory_group.admin.create(layout.registration_path("g", "broken"), b"{not json", ephemeral=True)
    m = members("g_m", bind={"t": 1}, max_retries=1)
    with pytest.raises(ConsumerRebalanceFailedError):
        m.listener.synced_rebalance()
    [end] = m.of("attempt_end")
    assert end["result"] == "error" and end["error"].startswith("ZnodeDataError(") and "/ids/broken" in end["error"]


def test_stopping_before_the_first_attempt_ends_the_rebalance_quietly(memory_group, members):
    memory_group.topic("t", 1)
    m = members("g_m", bind={"t": 1})
    m.listener.events.subscribe(lambda e: m.listener.stop() if e.kind == EventKind.REBALANCE_BEGIN else None)
    m.listener.synced_rebalance()  # no exception: a stopped rebalance is not a failure
    assert m.steps() == [("rebalance_begin", {"rebalance": 1}),
                         ("rebalance_end", {"rebalance": 1, "result": "stopped", "attempts": 0})]
    assert m.listener.stats.failures == 0 and m.listener.state == MemberState.CREATED


def test_stopping_inside_an_attempt_claims_nothing(memory_group, members):
    memory_group.topic("t", 1)
    m = members("g_m", bind={"t": 1})
    m.listener.events.subscribe(lambda e: m.listener.stop() if e.kind == EventKind.FETCHERS_STOPPED else None)
    m.listener.synced_rebalance()
    assert m.of("claim") == [] and memory_group.owners("g") == {}
    assert m.of("attempt_end")[-1]["result"] == "stopped"
    assert m.of("rebalance_end") == [{"rebalance": 1, "result": "stopped", "attempts": 1,
                                      "duration_ms": round(3 * STEP * 1000.0, 3)}]
    assert m.listener.stats.failures == 0 and m.listener.state == MemberState.REBALANCING


def test_stopping_during_the_backoff_ends_the_rebalance_quietly(memory_group, members):
    memory_group.topic("t", 1)
    memory_group.admin.create(layout.owner_path("g", "t", 0), b"g_z-0", ephemeral=True)
    m = members("g_m", bind={"t": 1}, backoff_ms=600_000)  # only a stop can end this backoff in time
    m.listener.events.subscribe(lambda e: m.listener.stop() if e.kind == EventKind.ATTEMPT_END else None)
    m.listener.synced_rebalance()
    assert m.of("rebalance_end")[-1]["result"] == "stopped"
    assert m.of("rebalance_end")[-1]["attempts"] == 1
    assert m.listener.stats.failures == 0 and m.listener.last_error is None
    assert memory_group.owners("g") == {("t", 0): "g_z-0"}


def test_no_brokers_counts_as_success_and_waits_for_a_broker(memory_group, members):
    memory_group.admin.delete(layout.broker_path(1))
    memory_group.topic("t", 1)
    m = members("g_m", bind={"t": 1})
    m.listener.synced_rebalance()
    assert m.of("rebalance_end")[-1]["result"] == "ok" and m.of("claim") == []
    memory_group.admin.create(layout.broker_path(1), BROKER, ephemeral=True)
    reasons = wait_for(lambda: m.of("trigger"), timeout=5, message="the broker watch triggers a rebalance")
    assert isinstance(reasons[0]["reason"], str) and "broker" in reasons[0]["reason"]


def test_own_subscription_and_the_group_snapshot_follow_the_internal_topics_setting(memory_group, members):
    for topic in ("clicks", "views", "__consumer_offsets"):
        memory_group.topic(topic, 1)
    everything = Registration.wildcard(Whitelist(".*"), 1)
    members("g_s", Registration.static({"clicks": 1}))
    for exclude, internal in ((True, set()), (False, {"__consumer_offsets"})):
        m = members(f"g_w{int(exclude)}", everything, exclude_internal_topics=exclude)
        assert m.listener.read_own_subscription() == {"clicks", "views"} | internal
        context = m.listener.build_assignment_context()
        assert context.consumer_id == m.listener.consumer_id
        assert set(context.consumers_for_topic) == {"clicks", "views"} | internal
    static = members("g_t", Registration.static({"views": 2}))
    assert static.listener.read_own_subscription() == {"views"}


def test_a_rebalance_empties_the_queues_of_its_wildcard_topics(memory_group, members):
    memory_group.topic("clicks", 1)
    m = members("g_m", Registration.wildcard(Whitelist("clicks"), 1), bind={"clicks": 1, "other": 1})
    for queue in m.queues.values():
        queue.put(object())
    m.listener.synced_rebalance()
    assert m.queues[("clicks", 0)].qsize() == 0
    assert m.queues[("other", 0)].qsize() == 1  # not subscribed: Kafka's closeFetchers clears only its topics


def test_reregistration_backs_off_exponentially_up_to_the_cap(memory_group, members):
    memory_group.topic("t", 1)
    m = members("g_m", bind={"t": 1}, backoff_ms=10, max_registration_backoff_ms=25)
    errors = [RuntimeError(f"refused {i}") for i in range(3)]
    seen_errors: list = []

    def flaky() -> None:
        m.register_calls += 1
        if m.register_calls <= len(errors):
            raise errors[m.register_calls - 1]
        register(m.client, "g", "g_m", m.registration, 1.0)

    m.listener.register = flaky
    m.listener.events.subscribe(lambda e: seen_errors.append(m.listener.last_error)
                                if e.kind in (EventKind.REGISTRATION_FAILED, EventKind.REGISTERED) else None)
    m.client.delete(layout.registration_path("g", "g_m"))
    m.listener.handle_new_session()
    failures = m.of("registration_failed")
    assert [f["retry_in_s"] for f in failures] == pytest.approx([0.010, 0.020, 0.025], rel=1e-9)
    assert [f["error"] for f in failures] == [repr(e) for e in errors]
    assert seen_errors == [*errors, None]  # each failure is the last error until registration works
    assert m.listener.last_error is None and m.listener.state == MemberState.OWNING
    states = [(d["state"], d.get("reason")) for kind, d in m.steps() if kind == "state"]
    assert states[:8] == [("registering", None)] + [("failed", "registration"), ("registering", None)] * 3 + [
        ("rebalancing", None)]
    kinds = [kind for kind, _ in m.steps()]
    assert kinds.count("registered") == 1
    assert max(i for i, k in enumerate(kinds) if k == "registration_failed") < kinds.index("registered") < kinds.index(
        "rebalance_begin")


def test_a_new_session_without_a_registration_callback_just_rebalances(memory_group, members):
    memory_group.topic("t", 1)
    m = members("g_m", bind={"t": 1})
    m.listener.register = None
    m.listener.handle_new_session()
    assert m.listener.state == MemberState.OWNING and memory_group.owners("g") == {("t", 0): "g_m-0"}
    assert "registered" not in [kind for kind, _ in m.steps()]


def test_a_stop_interrupts_the_registration_backoff(memory_group, members):
    m = members("g_m", bind={"t": 1}, backoff_ms=600_000)

    def refused() -> None:
        raise RuntimeError("refused")

    m.listener.register = refused
    m.listener.events.subscribe(lambda e: m.listener.stop() if e.kind == EventKind.REGISTRATION_FAILED else None)
    runner = threading.Thread(target=m.listener.handle_new_session, name="test-handle-new-session", daemon=True)
    runner.start()
    runner.join(10)
    assert not runner.is_alive(), "a 10-minute backoff must end as soon as the member stops"
    assert m.listener.stats.rebalances == 0 and "registered" not in [kind for kind, _ in m.steps()]


def test_the_watcher_wakes_for_each_kind_of_work_and_ends_on_stop(memory_group, members):
    memory_group.topic("t", 1)
    m = members("g_m", bind={"t": 1})
    listener = m.listener
    assert listener.join() and not listener.started  # never started: nothing to wait for
    listener.start()
    watcher = next(t for t in threading.enumerate() if t.name == "g_m_watcher_executor")
    assert watcher.daemon and listener.watcher_alive
    ran = threading.Event()
    listener.submit(ran.set)
    assert ran.wait(5), "a submitted task alone wakes the watcher"
    listener.trigger("test")
    wait_for(lambda: listener.stats.rebalances == 1, timeout=5, message="a trigger alone wakes the watcher")
    listener.session_renewed()
    wait_for(lambda: listener.stats.rebalances == 2 and m.register_calls == 1, timeout=5,
             message="a new session alone wakes the watcher")
    listener.stop()
    assert listener.join(5) and not watcher.is_alive()


def _inside_thread_join(ident: int) -> bool:
    frame = sys._current_frames().get(ident)
    while frame is not None:
        if frame.f_code.co_filename == threading.__file__ and frame.f_code.co_name == "join":
            return True
        frame = frame.f_back
    return False


def test_join_waits_for_the_watcher_and_a_watcher_may_join_itself(memory_group, members):
    m = members("g_m", bind={"t": 1})
    listener = m.listener
    listener.start()
    from_inside: list[bool] = []
    listener.submit(lambda: from_inside.append(listener.join(5)))
    wait_for(lambda: from_inside, timeout=5, message="the task ran")
    assert from_inside == [True]  # the watcher itself does not wait for itself
    gate = threading.Event()
    busy = threading.Event()
    listener.submit(lambda: (busy.set(), gate.wait(10)))
    assert busy.wait(5)
    assert listener.join(0.01) is False  # still busy: the bounded wait ends, the watcher lives
    listener.stop()
    me = threading.get_ident()
    opener = threading.Thread(
        target=lambda: (wait_for(lambda: gate.is_set() or _inside_thread_join(me), timeout=10), gate.set()),
        name="test-gate-opener", daemon=True)
    opener.start()
    try:
        assert listener.join(10) is True  # opened only once this thread waits in Thread.join
        assert not listener.watcher_alive
    finally:
        gate.set()
        opener.join(10)
