"""Kafka's own Java consumer (kafka-clients 4.4, `group.protocol=consumer`) as the reference member of KIP-848,
side by side with librdkafka members in the same group (docs/interop.md, "The reference client of the consumer
protocol").

One KRaft Apache Kafka 4.4 broker (zkconsumer/embedded/kraft.py) with a 500 ms heartbeat; every member reaches it
through the lab's counting proxy (zkconsumer/lab/wire), so the coordinator's answers to each are read off the wire.
A group of 12 partitions grows one member at a time: two librdkafka members, then a Java member, then a second
one. After each change the members' own views (what their rebalance callbacks handed them), the coordinator's
(ConsumerGroupDescribe through confluent-kafka's AdminClient) and the wire (the epoch of every member's last
heartbeat answer) must agree, and records produced then are read by the partitions' owners. With `uniform` the
joins move only what balance requires; with `range` every member, of either client, holds one range of partitions:
neither client computes the assignment, the broker does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from helpers import unique, wait_for

from zkconsumer.embedded.kraft import KRaftBroker
from zkconsumer.embedded.lifeline import Lifeline
from zkconsumer.embedded.process import free_port
from zkconsumer.interop import java_consumer
from zkconsumer.interop.java_consumer import JavaConsumerMember
from zkconsumer.lab.runs.kraft_topics import create_topic
from zkconsumer.lab.runs.server_info import wait_group_coordinator
from zkconsumer.lab.wire import KafkaProxy, KafkaRecord, RecordCollector

pytestmark = pytest.mark.interop
log = logging.getLogger(__name__)

PARTITIONS = 12
HEARTBEAT_MS = 500
SETTLE_S = 60.0
# The classic protocol's group APIs: a member of the consumer protocol sends none of them.
CLASSIC_APIS = {"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"}


@dataclass(frozen=True)
class Broker:
    kraft: KRaftBroker
    proxy: KafkaProxy
    sink: RecordCollector

    @property
    def members_bootstrap(self) -> str:
        return self.proxy.bootstrap


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, session_lifeline: Lifeline) -> Iterator[Broker]:
    """A KRaft Apache Kafka 4.4 node whose MEMBERS listener is advertised at a counting proxy in front of it."""
    proxied_port = free_port()
    kraft = KRaftBroker.plan(tmp_path_factory.mktemp("kip848-java"), 1, proxied_port=proxied_port,
                             settings={"group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
                                       "group.consumer.min.heartbeat.interval.ms": str(HEARTBEAT_MS)})
    sink = RecordCollector()
    proxy = KafkaProxy(None, sink=sink, name="kip848-java-proxy", port=proxied_port)
    try:
        kraft.start()
        if kraft.process is not None:
            session_lifeline.watch(kraft.process)
        kraft.wait_ready()
        # __consumer_offsets exists before the first member asks for its coordinator.
        wait_group_coordinator(kraft.bootstrap)
        proxy.start()
        proxy.forward_to(("127.0.0.1", kraft.listeners[0].port))
        yield Broker(kraft, proxy, sink)
    finally:
        proxy.stop()
        kraft.stop()


# ---- the two clients, seen alike ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Callback:
    """One rebalance callback: `partitions` is what it added or took away, `whole` the assignment after it."""

    ts: float
    kind: str
    partitions: frozenset[int]
    whole: frozenset[int]


class RdMember:
    """A librdkafka consumer (confluent-kafka) with `group.protocol=consumer`, polled by a thread of its own: the
    callbacks run inside poll() and carry incremental partitions, from which it keeps its whole assignment."""

    kind = "librdkafka"

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, assignor: str) -> None:
        self.name = name
        self.topic = topic
        self._config = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                        "group.protocol": "consumer", "group.remote.assignor": assignor,
                        "auto.offset.reset": "earliest", "log_level": 3}
        self._lock = threading.Lock()
        self._callbacks: list[Callback] = []
        self._whole: frozenset[int] = frozenset()
        self._consumed: set[tuple[int, int]] = set()
        self._stop = threading.Event()
        self._subscribed = threading.Event()
        self.failure: BaseException | None = None
        self.started_at: float | None = None
        self.subscribed_at: float | None = None
        self._thread = threading.Thread(target=self._run, name=f"rdkafka-{name}-poll", daemon=True)

    def start(self) -> RdMember:
        self.started_at = time.time()
        self._thread.start()
        if not self._subscribed.wait(30) or self.failure is not None:
            raise AssertionError(f"{self.name} did not subscribe: {self.failure!r}")
        return self

    def stop(self) -> None:
        """close(): revoke, commit, and the leave heartbeat (member epoch -1)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)
        assert not self._thread.is_alive(), f"{self.name}: close() did not return in 30 s"

    def _run(self) -> None:
        consumer = Consumer(self._config)
        try:
            consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                               on_lost=self._on_lost)
            self.subscribed_at = time.time()
            self._subscribed.set()
            while not self._stop.is_set():
                message = consumer.poll(0.1)
                if message is None:
                    continue
                if message.error() is not None:
                    if message.error().fatal():
                        raise KafkaException(message.error())
                    continue
                with self._lock:
                    self._consumed.add((message.partition(), message.offset()))
        except BaseException as exc:
            self.failure = exc
        finally:
            self._subscribed.set()
            consumer.close()

    def _note(self, kind: str, partitions: list) -> None:
        changed = frozenset(tp.partition for tp in partitions if tp.topic == self.topic)
        with self._lock:
            self._whole = self._whole | changed if kind == "assigned" else self._whole - changed
            self._callbacks.append(Callback(time.time(), kind, changed, self._whole))

    def _on_assign(self, _consumer: Consumer, partitions: list) -> None:
        self._note("assigned", partitions)

    def _on_revoke(self, _consumer: Consumer, partitions: list) -> None:
        self._note("revoked", partitions)

    def _on_lost(self, _consumer: Consumer, partitions: list) -> None:
        self._note("lost", partitions)

    def partitions(self) -> frozenset[int]:
        with self._lock:
            return self._whole

    def callbacks(self) -> list[Callback]:
        with self._lock:
            return list(self._callbacks)

    def consumed(self) -> set[tuple[int, int]]:
        with self._lock:
            return set(self._consumed)

    def epoch(self) -> int | None:
        # confluent-kafka does not expose the member epoch: the wire has it.
        return None

    def first_assignment_s(self) -> tuple[float, float] | None:
        """(seconds from the consumer's creation, seconds from subscribe) to its first non-empty assignment."""
        first = next((c for c in self.callbacks() if c.kind == "assigned" and c.partitions), None)
        if first is None or self.started_at is None or self.subscribed_at is None:
            return None
        return first.ts - self.started_at, first.ts - self.subscribed_at


class JavaMember:
    """The Java reference member (zkconsumer/interop/java_consumer.py), seen as the test sees an RdMember."""

    kind = "java"

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, assignor: str, workdir: Path) -> None:
        self.name = name
        self.topic = topic
        self.member = JavaConsumerMember(bootstrap, group, [topic], name, workdir, remote_assignor=assignor,
                                         auto_commit=True)

    def start(self) -> JavaMember:
        self.member.start()
        return self

    def stop(self) -> None:
        self.member.stop()

    def partitions(self) -> frozenset[int]:
        return frozenset(p for t, p in self.member.assignment() if t == self.topic)

    def callbacks(self) -> list[Callback]:
        out = []
        for event in self.member.events:
            if event["event"] in ("assigned", "revoked", "lost"):
                changed = event["added"] if event["event"] == "assigned" else event["partitions"]
                whole = event["partitions"] if event["event"] == "assigned" else event["remaining"]
                out.append(Callback(event["ts"] / 1000, event["event"], frozenset(_numbers(changed, self.topic)),
                                    frozenset(_numbers(whole, self.topic))))
        return out

    def consumed(self) -> set[tuple[int, int]]:
        return {(b.partition, offset) for b in self.member.consumed if b.topic == self.topic for offset in b.offsets()}

    def epoch(self) -> int | None:
        return self.member.epoch()

    def first_assignment_s(self) -> tuple[float, float] | None:
        """(seconds from the JVM's spawn, seconds from subscribe) to its first non-empty assignment."""
        events = self.member.events
        first = next((e for e in events if e["event"] == "assigned" and e["added"]), None)
        subscribed = next((e for e in events if e["event"] == "subscribed"), None)
        if first is None or subscribed is None or self.member.spawned_at is None:
            return None
        return first["ts"] / 1000 - self.member.spawned_at, (first["ts"] - subscribed["ts"]) / 1000


def _numbers(keys: list[str], topic: str) -> list[int]:
    return [int(p) for t, _, p in (k.rpartition("/") for k in keys) if t == topic]


Member = RdMember | JavaMember


@pytest.fixture
def members(broker: Broker, tmp_path: Path) -> Iterator:
    """Start members of either client; every one is stopped at the end of the test, whatever happened."""
    started: list[Member] = []

    def start(kind: str, group: str, topic: str, name: str, assignor: str) -> Member:
        member: Member = (RdMember(broker.members_bootstrap, group, topic, name, assignor) if kind == "librdkafka"
                          else JavaMember(broker.members_bootstrap, group, topic, name, assignor, tmp_path / "java"))
        # Before start: a start that fails half-way is stopped too.
        started.append(member)
        return member.start()

    yield start
    for member in started:
        if isinstance(member, JavaMember):
            # All JVMs leave at once; stop() then waits for each.
            member.member.begin_stop()
    for member in started:
        member.stop()


# ---- what the coordinator, the wire and the members say --------------------------------------------------------


def heartbeats(sink: RecordCollector, link: str, kind: str) -> list[KafkaRecord]:
    return [r for r in sink.records() if r.link == link and r.kind == kind and r.api_name == "ConsumerGroupHeartbeat"]


def wire_epoch(sink: RecordCollector, link: str) -> int | None:
    """The member epoch of the coordinator's last successful heartbeat answer to `link`."""
    answers = [r.epoch_after for r in heartbeats(sink, link, "response") if r.error_code == 0 and r.epoch_after]
    return answers[-1] if answers else None


def left(sink: RecordCollector, member: Member) -> None:
    """The member's last heartbeat is a leave (member epoch -1), and the coordinator accepted it."""
    wait_for(lambda: [r.epoch_after for r in heartbeats(sink, member.name, "response")][-1:] == [-1], timeout=10,
             message=f"the coordinator's answer to {member.name}'s leave")
    assert heartbeats(sink, member.name, "request")[-1].member_epoch == -1, member.name


@dataclass(frozen=True)
class Settled:
    held: dict[str, frozenset[int]]
    epoch: int
    assignor: str


def settle(broker: Broker, admin: AdminClient, group: str, group_members: list[Member]) -> Settled:
    """Wait until the members' own assignments, the coordinator's description and the wire agree: the members
    split all partitions evenly with no overlap, the group is stable with those assignments, and every member's
    last heartbeat answer, and the Java members' own groupMetadata(), carry one and the same member epoch."""
    size = PARTITIONS // len(group_members)
    reason = "nothing checked yet"

    def check() -> Settled | None:
        nonlocal reason
        held = {m.name: m.partitions() for m in group_members}
        taken = [p for partitions in held.values() for p in partitions]
        if sorted(taken) != list(range(PARTITIONS)) or {len(p) for p in held.values()} != {size}:
            reason = f"members hold {held}"
            return None
        described = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
        seen = {m.client_id: frozenset(tp.partition for tp in m.assignment.topic_partitions)
                for m in described.members}
        if described.state != ConsumerGroupState.STABLE or seen != held:
            reason = f"the coordinator says {described.state}, {seen}; members hold {held}"
            return None
        assert described.type == ConsumerGroupType.CONSUMER, described.type
        epochs = {m.name: wire_epoch(broker.sink, m.name) for m in group_members}
        own = {m.name: m.epoch() for m in group_members if m.kind == "java"}
        if len(set(epochs.values())) != 1 or any(epochs[name] != epoch for name, epoch in own.items()):
            reason = f"epochs on the wire {epochs}, the Java members' groupMetadata() {own}"
            return None
        return Settled(held, next(iter(epochs.values())), described.partition_assignor)

    deadline = time.monotonic() + SETTLE_S
    while (settled := check()) is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"no settled group of {len(group_members)} after {SETTLE_S:.0f} s: {reason}")
        time.sleep(0.2)
    return settled


def produce(bootstrap: str, topic: str, per_partition: int) -> set[tuple[int, int]]:
    """`per_partition` records into every partition; the (partition, offset) of each, from the delivery reports."""
    delivered: set[tuple[int, int]] = set()
    failed: list[str] = []

    def report(error, message) -> None:
        if error is not None:
            failed.append(str(error))
        else:
            delivered.add((message.partition(), message.offset()))

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition in range(PARTITIONS):
        for i in range(per_partition):
            producer.produce(topic, value=f"p{partition}-{i}".encode(), partition=partition, on_delivery=report)
    assert producer.flush(30) == 0 and not failed, failed
    return delivered


def read_by_owners(bootstrap: str, topic: str, settled: Settled, group_members: list[Member]) -> set[tuple[int, int]]:
    """Records produced into the settled group are each read by their partition's owner, and by nobody else."""
    fresh = produce(bootstrap, topic, 5)
    wait_for(lambda: fresh <= set().union(*(m.consumed() for m in group_members)), timeout=30,
             message="every record produced into the settled group to be consumed")
    for member in group_members:
        read = {record for record in fresh if record in member.consumed()}
        owned = {record for record in fresh if record[0] in settled.held[member.name]}
        assert read == owned, (member.name, sorted(read ^ owned))
    return fresh


def moved_in_join(before: Settled, after: Settled, joiner: str, since: float,
                  incumbents: list[Member]) -> dict[str, frozenset[int]]:
    """What each incumbent's callbacks revoked during the join, checked against what it then holds."""
    revoked = {}
    for member in incumbents:
        during = [c for c in member.callbacks() if c.ts >= since]
        assert not [c for c in during if c.kind == "lost"], (member.name, during)
        revoked[member.name] = frozenset().union(*(c.partitions for c in during if c.kind == "revoked"))
        # What it revoked is gone, and it never revoked all it had (the consumer protocol's revocations are
        # incremental: an eager member would drop its 12 / N and start over).
        assert not revoked[member.name] & after.held[member.name], (member.name, revoked[member.name])
        assert revoked[member.name] != before.held[member.name], (member.name, "revoked everything")
    log.info("join of %s (%s): revoked %s", joiner, after.assignor, {k: sorted(v) for k, v in revoked.items()})
    return revoked


def contiguous(partitions: frozenset[int]) -> bool:
    return bool(partitions) and max(partitions) - min(partitions) + 1 == len(partitions)


# ---- the tests ---------------------------------------------------------------------------------------------------

STEPS = (("librdkafka", "rd-1"), ("librdkafka", "rd-2"), ("java", "java-1"), ("java", "java-2"))


@dataclass(frozen=True)
class Grown:
    topic: str
    group: str
    produced: set[tuple[int, int]]
    members: list[Member]
    history: list[Settled]
    revoked: dict[str, dict[str, frozenset[int]]]


def grow(broker: Broker, admin: AdminClient, members, assignor: str) -> Grown:
    """One member at a time, as STEPS says; after each, a settled group whose records the owners read."""
    topic, group = unique("kip848j"), unique("g848j")
    create_topic(broker.kraft.bootstrap, topic, PARTITIONS)
    sent = produce(broker.kraft.bootstrap, topic, 20)
    group_members: list[Member] = []
    history: list[Settled] = []
    revoked: dict[str, dict[str, frozenset[int]]] = {}
    for kind, base in STEPS:
        name = f"{base}-{assignor}-{unique('m')[-4:]}"
        since = time.time()
        group_members.append(members(kind, group, topic, name, assignor))
        settled = settle(broker, admin, group, group_members)
        assert settled.assignor == assignor
        if history:
            assert settled.epoch > history[-1].epoch, (settled.epoch, history[-1].epoch)
            revoked[name] = moved_in_join(history[-1], settled, name, since, group_members[:-1])
        history.append(settled)
        sent |= read_by_owners(broker.kraft.bootstrap, topic, settled, group_members)
        # Everything produced before the group formed is read too (at least once: a moved partition is read again
        # from its last commit).
        assert sent <= set().union(*(m.consumed() for m in group_members))
        log.info("%s joined (%s): epoch %d, %s; first assignment after %s s", name, assignor, settled.epoch,
                 {k: sorted(v) for k, v in settled.held.items()}, group_members[-1].first_assignment_s())
    return Grown(topic, group, sent, group_members, history, revoked)


def test_a_mixed_group_under_uniform_moves_only_what_balance_requires(broker: Broker, members) -> None:
    admin = AdminClient({"bootstrap.servers": broker.kraft.bootstrap})
    grown = grow(broker, admin, members, "uniform")
    group_members, history, revoked = grown.members, grown.history, grown.revoked

    # Sticky: every join took from each incumbent only what the joiner needed, and nothing else moved.
    for (before, after), member in zip(pairwise(history), group_members[1:], strict=True):
        moves = revoked[member.name]
        assert after.held[member.name] == frozenset().union(*moves.values()), (member.name, moves)
        for name, partitions in moves.items():
            assert after.held[name] == before.held[name] - partitions, (name, before.held[name], after.held[name])
    # The last join, the second Java member into two librdkafka members and a Java one: 4, 4, 4 become 3 each,
    # each incumbent giving up exactly one.
    assert {name: len(p) for name, p in revoked[group_members[-1].name].items()} == {
        m.name: 1 for m in group_members[:-1]}

    # Both clients speak the same protocol: ConsumerGroupHeartbeat v1 from a join at epoch 0, no classic group API.
    for member in group_members:
        requests = [r for r in broker.sink.records() if r.link == member.name and r.kind == "request"]
        beats = [r for r in requests if r.api_name == "ConsumerGroupHeartbeat"]
        assert {r.api_version for r in beats} == {1} and beats[0].member_epoch == 0, member.name
        assert not {r.api_name for r in requests} & CLASSIC_APIS, member.name
    # In the settled group both heartbeat at the interval the broker gives them, not at one of their own.
    steady = time.time()
    wait_for(lambda: all(len(heartbeats_since(broker.sink, m.name, steady)) >= 5 for m in group_members),
             timeout=10 * HEARTBEAT_MS / 1000, message="five heartbeats from every member of the settled group")
    for member in group_members:
        profile = wire_profile(broker.sink, member, steady)
        log.info("%s (%s) on the wire: %s", member.name, member.kind, profile)
        # the interval is the broker's to give, and both clients are told the same (the gap they keep is logged
        # above, not asserted: a timed assertion fails on a loaded machine, not on a wrong client)
        answers = [r for r in broker.sink.records() if r.link == member.name and r.kind == "response"
                   and r.api_name == "ConsumerGroupHeartbeat" and r.error_code == 0]
        assert answers and {r.heartbeat_interval_ms for r in answers} == {HEARTBEAT_MS}, (member.name, profile)

    # A leave is a heartbeat with member epoch -1 from either client, and the rest take over its partitions.
    leaving, staying = group_members[-1], group_members[:-1]
    since = time.time()
    leaving.stop()
    left(broker.sink, leaving)
    after_leave = settle(broker, admin, grown.group, staying)
    assert after_leave.epoch > history[-1].epoch
    for member in staying:
        assert history[-1].held[member.name] <= after_leave.held[member.name]
        assert not [c for c in member.callbacks() if c.ts >= since and c.kind in ("revoked", "lost")], member.name
    staying[0].stop()
    left(broker.sink, staying[0])


def test_range_gives_every_member_of_either_client_a_range(broker: Broker, members) -> None:
    admin = AdminClient({"bootstrap.servers": broker.kraft.bootstrap})
    grown = grow(broker, admin, members, "range")
    group_members, history, revoked = grown.members, grown.history, grown.revoked
    for settled in history:
        # One range each, the ranges tiling the topic: what the broker's range assignor lays out.
        assert all(contiguous(p) for p in settled.held.values()), settled.held
    last = history[-1]
    assert sorted(min(p) for p in last.held.values()) == [0, 3, 6, 9]
    log.info("range joins moved %s", {name: sum(map(len, moves.values())) for name, moves in revoked.items()})

    # Everything is read: a Java member's commitSync() stores, for each partition it owns, the end of the log.
    ends = {(grown.topic, p): max(o for q, o in grown.produced if q == p) + 1 for p in range(PARTITIONS)}
    java_members = [m for m in group_members if isinstance(m, JavaMember)]
    for member in java_members:
        committed = member.member.commit()
        assert committed == {tp: ends[tp] for tp in member.member.assignment()}, member.name
    # A `stop` line closes the consumer as SIGTERM does (a leave, epoch -1), and the JVM then exits 0, not 143.
    assert java_members[0].member.stop(command=True) == 0
    left(broker.sink, java_members[0])
    assert java_members[1].member.stop() == 143
    left(broker.sink, java_members[1])
    log.info("close() took %s ms", [e["close_ms"] for m in java_members for e in m.member.events
                                    if e["event"] == "closed"])
    settle(broker, admin, grown.group, [m for m in group_members if m not in java_members])


def test_a_killed_java_member_is_dropped_after_its_session_and_its_partitions_move(broker: Broker, members) -> None:
    admin = AdminClient({"bootstrap.servers": broker.kraft.bootstrap})
    topic, group = unique("kip848k"), unique("g848k")
    create_topic(broker.kraft.bootstrap, topic, PARTITIONS)
    survivor = members("librdkafka", group, topic, unique("rd-k"), "uniform")
    java = members("java", group, topic, unique("java-k"), "uniform")
    assert isinstance(java, JavaMember)
    before = settle(broker, admin, group, [survivor, java])
    java.member.kill()
    killed_at = time.time()
    # No leave: the coordinator notices only when the session ends.
    assert heartbeats(broker.sink, java.name, "request")[-1].member_epoch == before.epoch
    after = settle(broker, admin, group, [survivor])
    session_s = int(broker.kraft.properties()["group.consumer.session.timeout.ms"]) / 1000
    assert time.time() - killed_at >= session_s * 0.9
    assert after.epoch > before.epoch and before.held[survivor.name] < after.held[survivor.name]


def test_missing_javac_or_java_is_one_line_naming_what_to_install(monkeypatch, tmp_path: Path) -> None:
    # A JDK home without bin/javac or bin/java, and a build directory without a build: javac is needed.
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(java_consumer.InteropError) as failure:
        java_consumer.build(into=tmp_path / "builds")
    message = str(failure.value)
    assert "\n" not in message and "javac not found" in message and "openjdk-17-jdk-headless" in message
    member = JavaConsumerMember("127.0.0.1:9", "g", ["t"], "nojava", tmp_path)
    with pytest.raises(java_consumer.InteropError) as failure:
        member.start()
    message = str(failure.value)
    assert "\n" not in message and "java not found" in message and member.pid is None


# ---- what the log reports ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WireProfile:
    """How one member used the wire: the versions of each API it sent, and its heartbeats: how many, how many
    sent well before the interval was up (each answers something: a join, an assignment, a revocation), how many
    listed the partitions owned, the gap from the join to the next one, and the median gap between two in the
    settled group."""

    versions: dict[str, list[int]]
    heartbeats: int
    prompt: int
    with_owned: int
    after_join_ms: float
    steady_gap_ms: float


def heartbeats_since(sink: RecordCollector, link: str, since: float) -> list[KafkaRecord]:
    return [r for r in heartbeats(sink, link, "request") if r.ts >= since]


def wire_profile(sink: RecordCollector, member: Member, steady: float) -> WireProfile:
    requests = [r for r in sink.records() if r.link == member.name and r.kind == "request" and r.api_name]
    versions: dict[str, set[int]] = {}
    for r in requests:
        versions.setdefault(r.api_name, set()).add(r.api_version)
    beats = [r for r in requests if r.api_name == "ConsumerGroupHeartbeat"]
    prompt = sum(1 for a, b in pairwise(beats) if (b.ts - a.ts) * 1000 < 0.8 * HEARTBEAT_MS)
    gaps = sorted((b.ts - a.ts) * 1000 for a, b in pairwise(heartbeats_since(sink, member.name, steady)))
    return WireProfile({api: sorted(v) for api, v in sorted(versions.items())}, len(beats), prompt,
                       sum(1 for b in beats if b.owned is not None), round((beats[1].ts - beats[0].ts) * 1000, 1),
                       round(gaps[len(gaps) // 2], 1))
