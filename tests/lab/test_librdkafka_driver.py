"""The cooperative (KIP-429) and consumer-protocol (KIP-848) designs' lab driver and members (librdkafka through
confluent-kafka) against real Apache Kafka brokers behind the real Kafka counting proxy: cooperative on the suite's
Kafka 3.9 broker in ZooKeeper mode (tests/lab/conftest.py), the consumer protocol on a Kafka 4 broker in KRaft mode
(zkconsumer/embedded/kraft.py). Members join one by one, leave and are killed; the group is stable after each
change with a disjoint, complete assignment; a join never revokes everything an incumbent owns (what sets both
designs apart from the eager one); every produced message is consumed."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from helpers import unique, wait_for
from kafka import KafkaProducer

from zkconsumer.event_log import read_json_lines
from zkconsumer.lab.drivers.coordinator import CoordinatorDriver, MemberKind, MemberView
from zkconsumer.lab.drivers.interface import LabEnvironment, TraceTail
from zkconsumer.lab.members.librdkafka import LibrdkafkaMember, LibrdkafkaMemberSettings
from zkconsumer.lab.scenarios.loading import expand_cases, parse_scenario
from zkconsumer.lab.trace import RunDirectory
from zkconsumer.lab.wire import KafkaProxy, RecordCollector

if TYPE_CHECKING:
    from zkconsumer.embedded.kraft import KRaftBroker

PARTITIONS = 6
SESSION_MS = 2000  # the cooperative members' session.timeout.ms (a kill is noticed after it)
SCENARIO = """
name = "librdkafka-driver"
description = "the librdkafka designs' driver test group"
designs = ["{design}"]
duration = 10.0

[group]
members = 3
process_mode = "{mode}"
topics = [{{ name = "{topic}", partitions = {partitions} }}]

[coordinator]
session_timeout_ms = {session}
heartbeat_interval_ms = 500
"""


@dataclass
class Servers:
    """Where a design's members and the test's own clients connect."""

    bootstrap: str  # the counting proxy, which the broker's MEMBERS listener advertises
    direct: str  # the broker's DIRECT listener: admin and producer, uncounted
    proxy: KafkaProxy


Start = Callable[[str, str], tuple[CoordinatorDriver, LabEnvironment]]


def make_start(tmp_path: Path, servers: Servers, new_topic: Callable[[str, str, int], str]
               ) -> tuple[Start, list[CoordinatorDriver]]:
    started: list[CoordinatorDriver] = []

    def start(design: str, mode: str) -> tuple[CoordinatorDriver, LabEnvironment]:
        topic = new_topic(servers.direct, "rdk", PARTITIONS)
        text = SCENARIO.format(design=design, mode=mode, topic=topic, partitions=PARTITIONS, session=SESSION_MS)
        case = expand_cases(parse_scenario(text, "inline"))[0]
        run = RunDirectory.create(tmp_path / unique("run"))
        env = LabEnvironment(run=run, case=case, group=unique("group"), topics={topic: PARTITIONS},
                             zookeeper_connect=lambda _name: "unused", bootstrap=servers.bootstrap,
                             direct_zookeeper="unused", trace=run.trace("run", design))
        driver = CoordinatorDriver(mode, MemberKind.for_design(design))
        driver.start(env)
        started.append(driver)
        return driver, env

    return start, started


def settle(driver: CoordinatorDriver, members: list[str], timeout: float = 30.0) -> dict[str, list[str]]:
    """Wait until exactly `members` are live and stable; returns their assignment."""
    return wait_for(lambda: driver.live_members() == sorted(members) and driver.assignment(), timeout=timeout,
                    message=f"{members} stable")


def assert_partitioned(assignment: dict[str, list[str]], env: LabEnvironment) -> None:
    owned = [p for partitions in assignment.values() for p in partitions]
    (topic,) = env.topics
    assert sorted(owned) == sorted(f"{topic}/{p}" for p in range(PARTITIONS)), assignment


def member_records(env: LabEnvironment) -> list[dict]:
    """Every member's records, by time. Read as raw JSON lines: trace.read_traces drops a `generation` record
    whose generation is null, which is what a librdkafka member writes."""
    records = [r for path in sorted((env.run.path / "traces").glob("*.jsonl")) if path.stem != "run"
               for r in read_json_lines(path)]
    return sorted(records, key=lambda r: r["ts"])


def produce(direct: str, topic: str, count: int, start: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=direct, client_id="producer")
    try:
        for i in range(start, start + count):
            producer.send(topic, b"v%d" % i, partition=i % PARTITIONS)
        producer.flush(timeout=10)
    finally:
        producer.close()


def consumed_offsets(env: LabEnvironment) -> set[tuple[int, int]]:
    return {(r["partition"], offset) for r in member_records(env) if r["type"] == "consume"
            for offset in range(r["first_offset"], r["last_offset"] + 1)}


def pids(env: LabEnvironment) -> set[int]:
    return {r["pid"] for r in member_records(env) if "pid" in r}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def requests(proxy: KafkaProxy, member: str, api: str) -> int:
    return proxy.counters(member).get("requests", {}).get(api, 0)


def join_one_by_one(driver: CoordinatorDriver, env: LabEnvironment, names: list[str]) -> list[float]:
    """Join `names` one at a time, each into a stable group; returns each join's time to stable (the join's call
    to the last member's record of the state the check accepted)."""
    joined: list[str] = []
    took = []
    for name in names:
        began = time.time()
        driver.join(name)
        joined.append(name)
        assert_partitioned(settle(driver, joined), env)
        since = driver.stable_since()
        assert since is not None and since >= began
        took.append(since - began)
    return took


def assert_incremental_joins(env: LabEnvironment, names: list[str]) -> None:
    """No join revoked all an incumbent owned: every revoke before the first leave kept something (`remaining`),
    and each join after the first took partitions from incumbents."""
    records = [r for r in member_records(env) if r["type"] == "generation"]
    revokes = [r for r in records if r["kind"] in ("revoked", "lost")]
    assert revokes, "joins into a group of 6 partitions move partitions"
    for record in revokes:
        assert record["kind"] == "revoked" and record["partitions"] and record["remaining"], record
        assert record["generation"] is None and record["round"] >= 1 and record["member_id"], record
    # Both the second and the third join took something from the members already there.
    revokers = [r["member"] for r in revokes]
    assert set(revokers) <= set(names[:-1]) and names[0] in revokers and len(revokes) >= 2, revokers
    for record in (r for r in records if r["kind"] == "assigned"):
        assert set(record["added"]) <= set(record["partitions"]) and record["generation"] is None, record


def pause_past_the_session(driver: CoordinatorDriver, env: LabEnvironment, session_s: float) -> None:
    """SIGSTOP m2 until the broker has expelled it and the others own everything; after SIGCONT it finds its
    assignment lost (an `on_lost`, nothing `remaining`) and joins again."""
    driver.pause("m2")
    assert_partitioned(settle(driver, ["m0", "m1"], timeout=session_s + 20), env)
    driver.resume("m2")
    assert_partitioned(settle(driver, ["m0", "m1", "m2"], timeout=session_s + 20), env)
    assert driver.stats()["lost_per_member"] == {"m2": 1}
    (lost,) = [r for r in member_records(env) if r["type"] == "generation" and r["kind"] == "lost"]
    assert lost["member"] == "m2" and lost["partitions"] and lost["remaining"] == [], lost


def print_measure(label: str, took: list[float]) -> None:
    print(f"\n{label}: joins into 1, 2, 3 stable after " + ", ".join(f"{t:.3f} s" for t in took))


# --- pure -----------------------------------------------------------------------------------------------


def test_settings_travel_as_json_and_become_librdkafka_properties() -> None:
    settings = LibrdkafkaMemberSettings(name="m1", group="g", topics=["t"], bootstrap="127.0.0.1:1",
                                        run_path="/tmp/run", protocol="cooperative", session_timeout_ms=2000,
                                        heartbeat_interval_ms=500, incarnation=2)
    assert LibrdkafkaMemberSettings.from_json(settings.to_json()) == settings
    config = settings.consumer_config()
    assert config["partition.assignment.strategy"] == "cooperative-sticky" and config["group.protocol"] == "classic"
    assert config["session.timeout.ms"] == 2000 and config["client.id"] == "m1"
    # offsets are stored by the member once recorded, never by librdkafka on hand-out
    assert config["enable.auto.offset.store"] is False and config["enable.auto.commit"] is True
    consumer = LibrdkafkaMemberSettings(name="m1", group="g", topics=["t"], bootstrap="", run_path="",
                                        protocol="consumer", remote_assignor="range").consumer_config()
    assert consumer["group.protocol"] == "consumer" and consumer["group.remote.assignor"] == "range"
    assert "session.timeout.ms" not in consumer and "partition.assignment.strategy" not in consumer


def test_the_consumer_protocol_refuses_the_settings_the_broker_owns() -> None:
    with pytest.raises(ValueError, match=r"heartbeat_interval_ms .*broker owns it .*group\.consumer\.heartbeat"):
        LibrdkafkaMemberSettings(name="m", group="g", topics=["t"], bootstrap="", run_path="", protocol="consumer",
                                 heartbeat_interval_ms=500)
    with pytest.raises(ValueError, match=r"session_timeout_ms .*group\.consumer\.session\.timeout\.ms"):
        LibrdkafkaMemberSettings(name="m", group="g", topics=["t"], bootstrap="", run_path="", protocol="consumer",
                                 session_timeout_ms=6000)
    with pytest.raises(ValueError, match="protocol must be one of cooperative, consumer"):
        LibrdkafkaMemberSettings(name="m", group="g", topics=["t"], bootstrap="", run_path="", protocol="eager")
    with pytest.raises(ValueError, match=r"remote_assignor .* consumer protocol's"):
        LibrdkafkaMemberSettings(name="m", group="g", topics=["t"], bootstrap="", run_path="", remote_assignor="range")
    with pytest.raises(ValueError, match="remote_assignor must be one of uniform, range"):
        LibrdkafkaMemberSettings(name="m", group="g", topics=["t"], bootstrap="", run_path="", protocol="consumer",
                                 remote_assignor="sticky")


def test_the_driver_names_its_design_by_member_kind() -> None:
    assert CoordinatorDriver("threads").design == "coordinator"
    assert CoordinatorDriver("threads", MemberKind.COOPERATIVE).design == "cooperative"
    assert MemberKind.for_design("eager") is MemberKind.EAGER
    assert MemberKind.for_design("consumer").module == "zkconsumer.lab.members.librdkafka"
    with pytest.raises(ValueError, match="one of coordinator, cooperative, consumer"):
        MemberKind.for_design("zk")
    with pytest.raises(TypeError, match="MemberKind"):
        CoordinatorDriver("threads", "cooperative")  # type: ignore[arg-type]


def test_a_partial_revoke_keeps_the_rest_until_the_assign_that_follows(tmp_path: Path) -> None:
    view = MemberView("m0", TraceTail(tmp_path / "none.jsonl"), incarnation=1)

    def fold(ts: float, kind: str, partitions: list[str], **more: object) -> None:
        view.fold({"type": "generation", "ts": ts, "kind": kind, "generation": None, "partitions": partitions,
                   "incarnation": 1, **more})

    fold(1.0, "assigned", ["t/0", "t/1"], added=["t/0", "t/1"], round=1)
    assert view.current == (None, frozenset({"t/0", "t/1"})) and not view.pending and view.current_since == 1.0
    fold(2.0, "revoked", ["t/1"], remaining=["t/0"], round=1)
    assert view.current == (None, frozenset({"t/0"})) and view.pending
    fold(2.5, "assigned", ["t/0"], added=[], round=2)
    assert not view.pending and view.current_since == 2.5
    # A round that confirms what the member owns does not move the time it has owned it since.
    fold(3.0, "assigned", ["t/0"], added=[], round=3)
    assert view.current_since == 2.5
    fold(4.0, "lost", ["t/0"], remaining=[], round=3)
    assert view.current == (None, frozenset()) and view.pending
    assert (view.generations, view.assignments, view.revoked, view.lost, view.round_count) == ([], 3, 1, 1, 3)


# --- cooperative, on Kafka 3.9 (ZooKeeper mode) -----------------------------------------------------------


@pytest.fixture
def cooperative(tmp_path: Path, proxy: KafkaProxy, proxied_kafka, new_topic) -> Iterator[tuple[Start, Servers]]:
    servers = Servers(proxy.bootstrap, proxied_kafka.direct, proxy)
    start, started = make_start(tmp_path, servers, new_topic)
    yield start, servers
    for driver in started:
        driver.stop()


@pytest.mark.slow
def test_cooperative_joins_are_incremental_and_a_leave_and_a_kill_recover(cooperative) -> None:
    start, servers = cooperative
    driver, env = start("cooperative", "processes")
    (topic,) = env.topics
    produce(servers.direct, topic, 60)
    names = ["m0", "m1", "m2"]
    took = join_one_by_one(driver, env, names)
    print_measure("cooperative (Kafka 3.9, ZooKeeper mode)", took)
    assert_incremental_joins(env, names)
    # KIP-429: a join that moves partitions takes two rebalances (the revoke, then the hand-over), and every
    # member takes part in both: each incumbent's own count of assign rounds grew by two per such join.
    stats = driver.stats()
    assert stats["design"] == "cooperative" and stats["generations"] == [] and stats["rounds"]["m0"] >= 5
    assert requests(servers.proxy, "m0", "JoinGroup") >= 5
    pause_past_the_session(driver, env, SESSION_MS / 1000)

    produce(servers.direct, topic, 60, start=60)
    driver.leave("m1")
    assert requests(servers.proxy, "m1", "LeaveGroup") == 1
    assert_partitioned(settle(driver, ["m0", "m2"]), env)
    driver.kill("m2")
    # no LeaveGroup from a kill -9: the coordinator expels m2 once its session (2 s) is over
    assert_partitioned(settle(driver, ["m0"], timeout=SESSION_MS / 1000 + 20), env)
    assert requests(servers.proxy, "m2", "LeaveGroup") == 0
    expected = {(i % PARTITIONS, i // PARTITIONS) for i in range(120)}
    wait_for(lambda: consumed_offsets(env) >= expected, message="the 120 produced messages consumed")

    driver.stop()
    assert driver.live_members() == [] and driver.stats()["exit_codes"] == {"m0": [0], "m1": [0], "m2": [-9]}
    assert not [pid for pid in pids(env) if alive(pid)]


@pytest.mark.slow
def test_cooperative_thread_members_consume_and_stop_cleanly(cooperative) -> None:
    start, servers = cooperative
    driver, env = start("cooperative", "threads")
    (topic,) = env.topics
    produce(servers.direct, topic, 30)
    driver.join("t0")
    driver.join("t1")
    assert_partitioned(settle(driver, ["t0", "t1"]), env)
    wait_for(lambda: consumed_offsets(env) >= {(i % PARTITIONS, i // PARTITIONS) for i in range(30)},
             message="the 30 produced messages consumed")
    with pytest.raises(NotImplementedError, match="thread"):
        driver.kill("t0")
    driver.leave("t0")
    (topic,) = env.topics
    assert settle(driver, ["t1"]) == {"t1": sorted(f"{topic}/{p}" for p in range(PARTITIONS))}
    driver.stop()
    assert driver.stats()["exit_codes"] == {"t0": [0], "t1": [0]}
    assert not [t.name for t in threading.enumerate() if t.name.startswith(("lab-t0", "lab-t1"))]
    # The closing member's last revoke takes everything it had left.
    last = [r for r in member_records(env) if r["type"] == "generation" and r["member"] == "t0"][-1]
    assert last["kind"] == "revoked" and last["remaining"] == []


@pytest.mark.slow
def test_a_consumer_protocol_member_on_a_zookeeper_mode_broker_fails_in_one_line(tmp_path: Path, cooperative) -> None:
    # Kafka 3.9 in ZooKeeper mode has no ConsumerGroupHeartbeat: the member must say so and stop, not poll forever
    # (librdkafka alone would look for a coordinator again and again).
    start, servers = cooperative
    run = RunDirectory.create(tmp_path / "run")
    settings = LibrdkafkaMemberSettings(name="c0", group=unique("group"), topics=[unique("absent")],
                                        bootstrap=servers.bootstrap, run_path=str(run.path), protocol="consumer")
    member = LibrdkafkaMember(settings, run.trace("c0", "consumer"))
    member.start()
    try:
        assert member.join(timeout=30), "the member gave up"
    finally:
        member.stop()
        member.trace.close()
    error = str(member.error)
    assert "KRaft" in error and "ConsumerGroupHeartbeat" in error and "\n" not in error, error

    # Through the driver: the member's process exits 1 and the driver names it, with its log, as failed.
    driver, env = start("consumer", "processes")
    driver.join("c1")
    failed = wait_for(driver.failed, timeout=30, message="the driver to report c1 failed")
    assert list(failed) == ["c1"] and "exited with code 1" in failed["c1"], failed
    assert "needs a broker that answers ConsumerGroupHeartbeat v1" in env.run.log_path("c1").read_text()
    # Not live either: the run's stability tracking stops the run on `failed()` rather than wait on it.
    assert driver.live_members() == []


# --- the consumer protocol (KIP-848), on Kafka 4 (KRaft mode) ---------------------------------------------


@pytest.fixture
def consumer_protocol(tmp_path: Path, kraft_broker, new_topic) -> Iterator[tuple[Start, Servers]]:
    # The session's KRaft broker (tests/lab/conftest.py), shared with test_wire_kip848.py: topics and groups here
    # are of unique names (make_start), and the proxy is this test's own.
    kafka_proxy = KafkaProxy(kraft_broker.members_upstream, sink=RecordCollector(), name=unique("kp"),
                             port=kraft_broker.proxy_port).start()
    servers = Servers(kafka_proxy.bootstrap, kraft_broker.direct, kafka_proxy)
    start, started = make_start(tmp_path, servers, new_topic)
    try:
        yield start, servers
    finally:
        for driver in started:
            driver.stop()
        kafka_proxy.stop()


def broker_session_s(broker: KRaftBroker) -> float:
    """The broker's group.consumer.session.timeout.ms: when it fences a consumer-protocol member gone silent."""
    return int(broker.properties()["group.consumer.session.timeout.ms"]) / 1000


@pytest.mark.slow
def test_consumer_protocol_joins_are_incremental_and_a_leave_and_a_kill_recover(consumer_protocol,
                                                                                kraft_broker) -> None:
    start, servers = consumer_protocol
    driver, env = start("consumer", "processes")
    (topic,) = env.topics
    produce(servers.direct, topic, 60)
    names = ["m0", "m1", "m2"]
    took = join_one_by_one(driver, env, names)
    print_measure("consumer protocol (Kafka 4, KRaft)", took)
    assert_incremental_joins(env, names)
    assert driver.stats()["design"] == "consumer" and driver.stats()["generations"] == []
    # No JoinGroup at all: the group is run by ConsumerGroupHeartbeat.
    assert requests(servers.proxy, "m0", "JoinGroup") == 0
    pause_past_the_session(driver, env, broker_session_s(kraft_broker.broker))

    produce(servers.direct, topic, 60, start=60)
    driver.leave("m1")
    assert_partitioned(settle(driver, ["m0", "m2"]), env)
    driver.kill("m2")
    # the broker fences m2 once its session (the broker's group.consumer.session.timeout.ms) is over
    assert_partitioned(settle(driver, ["m0"], timeout=broker_session_s(kraft_broker.broker) + 20), env)
    expected = {(i % PARTITIONS, i // PARTITIONS) for i in range(120)}
    wait_for(lambda: consumed_offsets(env) >= expected, message="the 120 produced messages consumed")

    driver.stop()
    assert driver.live_members() == [] and driver.stats()["exit_codes"] == {"m0": [0], "m1": [0], "m2": [-9]}
    assert not [pid for pid in pids(env) if alive(pid)]


@pytest.mark.slow
def test_cooperative_on_kafka_4_joins_are_incremental_too(consumer_protocol) -> None:
    # The lab runs the cooperative design on the KRaft broker (designs.broker_kind): the classic protocol there.
    start, servers = consumer_protocol
    driver, env = start("cooperative", "processes")
    names = ["m0", "m1", "m2"]
    took = join_one_by_one(driver, env, names)
    print_measure("cooperative (Kafka 4, KRaft)", took)
    assert_incremental_joins(env, names)
    assert requests(servers.proxy, "m2", "JoinGroup") >= 2 and requests(servers.proxy, "m2", "SyncGroup") >= 2
