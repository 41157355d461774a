"""The opt-in modes as a strategy (rebalance/attempts.py, docs/modes.md): the listener chooses its attempt once, when
it is built, from its settings' modes (0.8.2's `FaithfulAttempt` with every attempt mode off, `ModalAttempt`
otherwise), and whichever attempt runs, each of an attempt's events is emitted once per attempt (the per-partition
ones once per partition; RELEASE from the ownership alone), and each calls the user's callbacks set through the
listener's `set_user_listener`. Each case drives a `ZKRebalancerListener` over the in-memory ZooKeeper, on the test
thread; the other member is a registration only (written by the admin session), so it never rebalances.
"""

from __future__ import annotations

import ast
import threading
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from fetcher_manager.stream import ChunkQueue, KafkaStream
from rebalance.assignment import AssignmentContext, ConsumerThreadId, TopicPartition, View
from rebalance.assignors import RangeAssignor
from rebalance.attempts import AttemptContext, FaithfulAttempt
from rebalance.bindings import StreamBindings
from rebalance.events import EventBus, EventKind, MemberEvent
from rebalance.listener import RebalanceSettings, ZKRebalancerListener
from rebalance.listener_types import ModeSettings
from rebalance.offsets import OffsetCheckpoints
from rebalance.opt_in import ModalAttempt
from rebalance.ownership import Ownership
from rebalance.subscription import Registration
from zkconsumer.members import NoFetchers
from zkconsumer.registration import register
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.group import ZkGroupStore
from zkconsumer.zookeeper.memory import MemoryZkClient

REPO = Path(__file__).resolve().parents[2]
GROUP = "g"
PARTITIONS = 4
MODES = {
    "faithful": ModeSettings(),
    "incremental": ModeSettings(incremental=True),
    "claim-on-deletion": ModeSettings(claim_on_deletion=True),
    "barrier": ModeSettings(barrier=True),
    "all": ModeSettings(incremental=True, claim_on_deletion=True, barrier=True),
}
# The events an attempt emits once, whatever its modes (FETCHERS_STOPPED: when it stops any fetcher; the barrier's:
# with the barrier on); CLAIM and RELEASE are per partition.
ONCE = (EventKind.ATTEMPT_BEGIN, EventKind.ATTEMPT_END, EventKind.FETCHERS_STOPPED, EventKind.FETCHERS_STARTED,
        EventKind.BARRIER)


class RecordingUserListener:
    def __init__(self) -> None:
        self.released: list[dict[str, set[int]]] = []
        self.started: list[str] = []

    def before_releasing_partitions(self, partition_ownership: dict[str, set[int]]) -> None:
        self.released.append(partition_ownership)

    def before_starting_fetchers(self, consumer_id: str, global_partition_assignment: object) -> None:
        self.started.append(consumer_id)


class StuckFetchers(NoFetchers):
    """A fetcher that never lets go of a partition in time (its queue is full and nobody reads it)."""

    def remove_partitions(self, tps, timeout_s: float) -> bool:
        return False


def registration(modes: ModeSettings) -> Registration:
    return replace(Registration.static({"t": 1}), modes=("barrier",) if modes.barrier else ())


def make_listener(client: MemoryZkClient, modes: ModeSettings, fetchers: NoFetchers | None = None,
                  ) -> tuple[ZKRebalancerListener, list[MemberEvent], RecordingUserListener]:
    store = ZkGroupStore(client, GROUP)
    register(client, GROUP, "m", registration(modes), 1.0)
    bindings = StreamBindings()
    queue = ChunkQueue(4)
    bindings.bind("t", ConsumerThreadId("m", 0), queue, KafkaStream(queue, -1))
    events = EventBus("m")
    recorded: list[MemberEvent] = []
    events.subscribe(recorded.append)
    user = RecordingUserListener()
    listener = ZKRebalancerListener(
        RebalanceSettings("m", max_retries=2, backoff_ms=20, auto_commit=False, modes=modes),
        store, RangeAssignor(), fetchers or NoFetchers(), bindings, Ownership(store, "m", events),
        OffsetCheckpoints(store, "m", events=events), events=events, user_listener=user)
    return listener, recorded, user


@pytest.fixture
def client(memory_group):
    made = MemoryZkClient(memory_group.server, log_id="m").start()
    yield made
    made.close()


def per_attempt(recorded: list[MemberEvent]) -> list[list[MemberEvent]]:
    """The events of each attempt, from its ATTEMPT_BEGIN to its ATTEMPT_END."""
    attempts: list[list[MemberEvent]] = []
    current: list[MemberEvent] | None = None
    for event in recorded:
        if event.kind == EventKind.ATTEMPT_BEGIN:
            current = []
            attempts.append(current)
        if current is not None:
            current.append(event)
        if event.kind == EventKind.ATTEMPT_END:
            current = None
    return attempts


def assert_each_event_once(events: list[MemberEvent]) -> Counter:
    kinds = Counter(e.kind for e in events)
    assert {kind: n for kind, n in kinds.items() if kind in ONCE and n != 1} == {}, [str(e.kind) for e in events]
    for kind in (EventKind.CLAIM, EventKind.RELEASE):
        partitions = [(e.data["topic"], e.data["partition"]) for e in events if e.kind == kind]
        assert len(partitions) == len(set(partitions)), (kind, partitions)
    return kinds


@pytest.mark.parametrize(("modes", "chosen"), [
    (ModeSettings(), FaithfulAttempt),
    (ModeSettings(patience_ms=100), FaithfulAttempt),  # patience changes when attempts begin, not the attempt
    (ModeSettings(incremental=True), ModalAttempt),
    (ModeSettings(claim_on_deletion=True), ModalAttempt),
    (ModeSettings(barrier=True), ModalAttempt),
    (ModeSettings(incremental=True, patience_ms=100, claim_on_deletion=True, barrier=True), ModalAttempt),
], ids=["faithful", "patient", "incremental", "claim-on-deletion", "barrier", "all"])
def test_the_listener_chooses_its_attempt_once_from_its_modes(memory_group, client, modes, chosen) -> None:
    listener, _, _ = make_listener(client, modes)
    assert type(listener.attempt) is chosen
    if isinstance(listener.attempt, ModalAttempt):
        assert listener.attempt.modes == modes


@pytest.mark.static
def test_the_listener_is_an_attempt_context(client) -> None:
    """The attempt sees the listener only as an AttemptContext (checked statically by mypy; here at run time)."""
    listener, _, _ = make_listener(client, ModeSettings())
    assert isinstance(listener, AttemptContext)


@pytest.mark.parametrize("name", MODES)
def test_each_event_is_emitted_once_per_attempt_when_a_member_joins(memory_group, client, name) -> None:
    """m owns all of t; o joins (m keeps t/0-1 and loses t/2-3, range's share). One attempt each time, whose events
    each come once: the fetchers stop once (all of m's partitions, or incremental: only those it loses)."""
    modes = MODES[name]
    memory_group.topic("t", PARTITIONS)
    listener, recorded, user = make_listener(client, modes)
    listener.synced_rebalance()
    [first] = per_attempt(recorded)
    kinds = assert_each_event_once(first)
    # incremental stops no fetcher when it loses nothing; every other attempt stops them all, 0.8.2's way
    assert kinds[EventKind.FETCHERS_STOPPED] == (0 if modes.incremental else 1)
    assert kinds[EventKind.BARRIER] == (1 if modes.barrier else 0)
    assert kinds[EventKind.CLAIM] == PARTITIONS

    register(memory_group.admin, GROUP, "o", registration(modes), 1.0)
    if modes.barrier:  # o acknowledges the view both read, as it would after releasing nothing
        joined = AssignmentContext.build("m", {"m": {"t": 1}, "o": {"t": 1}}, {"t": range(PARTITIONS)})
        ZkGroupStore(memory_group.admin, GROUP).barrier_ack(View.of(joined).id, "o", None)
    since = len(recorded)
    listener.synced_rebalance()
    [second] = per_attempt(recorded[since:])
    kinds = assert_each_event_once(second)
    assert [e.data["result"] for e in second if e.kind == EventKind.ATTEMPT_END] == ["ok"]
    [stopped] = [e.data["partitions"] for e in second if e.kind == EventKind.FETCHERS_STOPPED]
    assert stopped == (["t/2", "t/3"] if modes.incremental else ["t/0", "t/1", "t/2", "t/3"])
    assert kinds[EventKind.BARRIER] == (1 if modes.barrier else 0)
    assert kinds[EventKind.RELEASE] == (2 if modes.incremental else PARTITIONS)
    assert user.released[-1] == ({"t": {2, 3}} if modes.incremental else {"t": {0, 1, 2, 3}})
    assert sorted((tp.topic, tp.partition) for tp in listener.ownership.owners()) == [("t", 0), ("t", 1)]


def test_incremental_falls_back_to_stopping_every_fetcher_and_says_so_once(memory_group, client) -> None:
    """A fetcher that does not let go of the lost partitions in time: the attempt stops every fetcher, 0.8.2's way,
    and FETCHERS_STOPPED comes once, naming all of them."""
    memory_group.topic("t", PARTITIONS)
    listener, recorded, _ = make_listener(client, MODES["incremental"], StuckFetchers())
    listener.synced_rebalance()
    register(memory_group.admin, GROUP, "o", registration(MODES["incremental"]), 1.0)
    since = len(recorded)
    listener.synced_rebalance()
    [second] = per_attempt(recorded[since:])
    kinds = assert_each_event_once(second)
    [stopped] = [e.data["partitions"] for e in second if e.kind == EventKind.FETCHERS_STOPPED]
    assert stopped == ["t/0", "t/1", "t/2", "t/3"]
    assert kinds[EventKind.RELEASE] == PARTITIONS


def emitted_kinds(path: Path) -> Counter:
    """The EventKind members named in `path`'s calls of `emit` (its first argument)."""
    tree = ast.parse(path.read_text())
    found: Counter = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "emit":
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name) and first.value.id == "EventKind":
                found[first.attr] += 1
    return found


@pytest.mark.static
def test_the_listener_and_its_attempts_emit_each_event_in_one_place() -> None:
    emitted: Counter = Counter()
    for module in ("listener.py", "attempts.py", "opt_in.py"):
        emitted += emitted_kinds(REPO / "rebalance" / module)
    assert {kind: n for kind, n in emitted.items() if n > 1} == {}


@pytest.mark.static
def test_fetchers_stopped_is_emitted_in_one_place_in_the_product() -> None:
    """Whoever stops the fetchers (an attempt, a failed attempt's backoff, a session expiry, the connector's
    shutdown) reports it through the listener's `fetchers_stopped`."""
    places = {path.relative_to(REPO).as_posix(): n for package in ("rebalance", "fetcher_manager", "zkconsumer")
              for path in sorted((REPO / package).rglob("*.py"))
              if (n := emitted_kinds(path)["FETCHERS_STOPPED"])}
    assert places == {"rebalance/listener.py": 1}


@pytest.mark.static
def test_release_is_emitted_in_one_place_in_the_product() -> None:
    """Whoever gives partitions up (0.8.2's release of everything, the opt-in modes' release of some) reports each
    through the ownership's one RELEASE."""
    places = {path.relative_to(REPO).as_posix(): n for package in ("rebalance", "fetcher_manager", "zkconsumer")
              for path in sorted((REPO / package).rglob("*.py"))
              if (n := emitted_kinds(path)["RELEASE"])}
    assert places == {"rebalance/ownership.py": 1}


@pytest.mark.parametrize("batch", [False, True], ids=["one-by-one", "batch"])
def test_each_released_partition_is_reported_once_whichever_way_it_is_released(memory_group, client, batch) -> None:
    """`release` of some (the opt-in modes), then `release_all` of the rest (0.8.2): one RELEASE per owner node
    deleted, none for a partition kept or never owned."""
    memory_group.topic("t", PARTITIONS)
    store = ZkGroupStore(client, GROUP)
    events = EventBus("m")
    recorded: list[MemberEvent] = []
    events.subscribe(recorded.append)
    ownership = Ownership(store, "m", events)
    mine = {TopicPartition("t", p): ConsumerThreadId("m", 0) for p in range(3)}
    assert ownership.claim(mine)
    ownership.install(mine, {})

    def released() -> list[int]:
        partitions = [e.data["partition"] for e in recorded if e.kind == EventKind.RELEASE]
        recorded.clear()
        return partitions

    ownership.release([TopicPartition("t", 1)], batch=batch)
    assert released() == [1]
    assert sorted(ownership.owners()) == [TopicPartition("t", 0), TopicPartition("t", 2)]
    ownership.release_all()
    assert released() == [0, 2]
    assert ownership.owners() == {}
    assert [memory_group.admin.get(layout.owner_path(GROUP, "t", p)) for p in range(3)] == [None] * 3


@pytest.mark.parametrize("modes", MODES.values(), ids=MODES.keys())
def test_the_user_listener_set_through_the_listener_is_the_one_its_attempts_call(memory_group, client, modes) -> None:
    memory_group.topic("t", PARTITIONS)
    listener, _, first = make_listener(client, modes)
    second = RecordingUserListener()
    listener.set_user_listener(second)
    assert listener.user_listener is second
    listener.synced_rebalance()
    assert second.started == ["m"] and first.started == [] and first.released == []


def test_the_user_listener_is_set_under_the_rebalance_lock(memory_group, client) -> None:
    """An attempt reads the user's callbacks under `rebalance_lock`: setting them waits for the attempt to end, so
    one attempt never calls two listeners."""
    listener, _, first = make_listener(client, MODES["faithful"])
    second = RecordingUserListener()
    held, done = threading.Event(), threading.Event()

    def rebalancing() -> None:
        with listener.rebalance_lock:  # as synced_rebalance holds it for a whole rebalance
            held.set()
            done.wait(10)

    holder = threading.Thread(target=rebalancing)
    holder.start()
    assert held.wait(10)
    setter = threading.Thread(target=listener.set_user_listener, args=(second,))
    setter.start()
    setter.join(0.2)
    try:
        assert setter.is_alive() and listener.user_listener is first
    finally:
        done.set()
        holder.join(10)
        setter.join(10)
    assert listener.user_listener is second


def test_the_connector_sets_the_user_listener_through_the_listener(memory_group) -> None:
    memory_group.topic("t", PARTITIONS)
    member = memory_group.member(GROUP, "c")
    user = RecordingUserListener()
    member.set_rebalance_listener(user)
    with pytest.raises(AttributeError):
        member.listener.user_listener = RecordingUserListener()  # type: ignore[misc]
    member.create_message_streams({"t": 1})
    assert member.listener.user_listener is user and user.started == [member.consumer_id]
