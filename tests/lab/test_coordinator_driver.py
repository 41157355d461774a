"""The coordinator design's lab driver against a real Apache Kafka broker behind the real Kafka counting proxy
(tests/lab/conftest.py): members as OS processes (join, leave, kill -9, pause/resume) and as threads, stability
from the members' traces, and the wire counts of a join checked against one generation per membership change."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import unique, wait_for
from kafka import KafkaProducer

from zkconsumer.lab.drivers.coordinator import CoordinatorDriver, MemberView
from zkconsumer.lab.drivers.interface import LabEnvironment, TraceTail
from zkconsumer.lab.members.coordinator import CoordinatorMemberSettings, _Batches
from zkconsumer.lab.scenarios.loading import expand_cases, parse_scenario
from zkconsumer.lab.trace import RunDirectory, read_traces
from zkconsumer.lab.wire import KafkaProxy

PARTITIONS = 6
MEMBER_ID_REQUIRED = 79
SCENARIO = """
name = "coordinator-driver"
description = "the coordinator driver's test group"
designs = ["coordinator"]
duration = 10.0

[group]
members = 2
process_mode = "{mode}"
topics = [{{ name = "{topic}", partitions = {partitions} }}]

[coordinator]
session_timeout_ms = 2000
heartbeat_interval_ms = 500
"""
MakeEnv = Callable[[str], LabEnvironment]


@pytest.fixture
def make_env(tmp_path: Path, proxy: KafkaProxy, proxied_kafka, new_topic) -> MakeEnv:
    def make(mode: str) -> LabEnvironment:
        topic = new_topic(proxied_kafka.direct, "coord", PARTITIONS)
        text = SCENARIO.format(mode=mode, topic=topic, partitions=PARTITIONS)
        case = expand_cases(parse_scenario(text, "inline"))[0]
        run = RunDirectory.create(tmp_path / unique("run"))
        return LabEnvironment(run=run, case=case, group=unique("group"), topics={topic: PARTITIONS},
                              zookeeper_connect=lambda _name: "unused", bootstrap=proxy.bootstrap,
                              direct_zookeeper="unused", trace=run.trace("run", "coordinator"))

    return make


@pytest.fixture
def driver_for(make_env: MakeEnv) -> Iterator[Callable[[str], tuple[CoordinatorDriver, LabEnvironment]]]:
    started: list[CoordinatorDriver] = []

    def start(mode: str) -> tuple[CoordinatorDriver, LabEnvironment]:
        env = make_env(mode)
        driver = CoordinatorDriver(mode)
        driver.start(env)
        started.append(driver)
        return driver, env

    yield start
    for driver in started:
        driver.stop()


def settle(driver: CoordinatorDriver, members: list[str], timeout: float = 20.0) -> dict[str, list[str]]:
    """Wait until exactly `members` are live and stable; returns their assignment."""
    return wait_for(lambda: driver.live_members() == sorted(members) and driver.assignment(), timeout=timeout,
                    message=f"{members} stable")


def group_counts(proxy: KafkaProxy, member: str) -> dict[str, int]:
    counters = proxy.counters(member)
    requests = counters.get("requests", {})
    return {"JoinGroup": requests.get("JoinGroup", 0), "SyncGroup": requests.get("SyncGroup", 0),
            "LeaveGroup": requests.get("LeaveGroup", 0),
            "member_id_required": counters.get("errors", {}).get(MEMBER_ID_REQUIRED, 0)}


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {key: after[key] - before.get(key, 0) for key in after}


def member_pids(env: LabEnvironment) -> set[int]:
    return {record["pid"] for record in read_traces(env.run.path) if "pid" in record}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def assert_partitioned(assignment: dict[str, list[str]], env: LabEnvironment) -> None:
    owned = [p for partitions in assignment.values() for p in partitions]
    (topic,) = env.topics
    assert sorted(owned) == sorted(f"{topic}/{p}" for p in range(PARTITIONS)), assignment


# --- pure -----------------------------------------------------------------------------------------------


def test_settings_travel_as_json_and_become_consumer_keywords() -> None:
    settings = CoordinatorMemberSettings(name="m1", group="g", topics=["t"], bootstrap="127.0.0.1:1",
                                         run_path="/tmp/run", assignor="roundrobin", incarnation=2)
    assert CoordinatorMemberSettings.from_json(settings.to_json()) == settings
    config = settings.consumer_config()
    assert config["client_id"] == "m1" and config["group_id"] == "g" and config["enable_auto_commit"]
    assert config["partition_assignment_strategy"][0].name == "roundrobin"
    assert settings.poll_timeout_ms > settings.max_poll_interval_ms  # a join always completes inside one poll
    with pytest.raises(ValueError, match="assignor"):
        CoordinatorMemberSettings(name="m", group="g", topics=[], bootstrap="", run_path="", assignor="sticky")


@pytest.mark.parametrize(("zk", "interval", "enabled"), [
    ("", 60000, True),  # Kafka 0.8's default on both sides, not kafka-python's 5000
    ('[zk]\n"auto.commit.interval.ms" = 1000\n', 1000, True),
    ('[zk]\n"auto.commit.enable" = false\n', 60000, False),
])
def test_members_auto_commit_as_the_zookeeper_design_does(tmp_path: Path, zk: str, interval: int,
                                                           enabled: bool) -> None:
    # The delivery audit counts what was handed out again after a commit: both designs must commit alike.
    text = SCENARIO.format(mode="threads", topic="t", partitions=PARTITIONS).replace("[group]", zk + "\n[group]")
    case = expand_cases(parse_scenario(text, "inline"))[0]
    run = RunDirectory.create(tmp_path / "run")
    driver = CoordinatorDriver("threads")
    driver.start(LabEnvironment(run=run, case=case, group="g", topics={"t": PARTITIONS},
                                zookeeper_connect=lambda _name: "unused", bootstrap="127.0.0.1:1",
                                direct_zookeeper="unused", trace=run.trace("run", "coordinator")))
    config = driver._settings("m0", 1).consumer_config()
    assert config["auto_commit_interval_ms"] == interval and config["enable_auto_commit"] is enabled


def test_a_restarted_member_starts_without_its_predecessors_assignment(tmp_path: Path) -> None:
    view = MemberView("m1", TraceTail(tmp_path / "none.jsonl"), incarnation=1)
    view.fold({"type": "generation", "kind": "assigned", "generation": 3, "partitions": ["t/0"], "incarnation": 1})
    assert view.current == (3, frozenset({"t/0"}))
    view.incarnation, view.current = 2, None
    view.fold({"type": "generation", "kind": "assigned", "generation": 3, "partitions": ["t/0"], "incarnation": 1})
    assert view.current is None  # a late line of the killed incarnation
    view.fold({"type": "generation", "kind": "lost", "generation": 3, "partitions": [], "incarnation": 2})
    assert (view.lost, view.generations) == (1, [3])


def test_consume_batches_are_runs_of_offsets(tmp_path: Path) -> None:
    trace = RunDirectory.create(tmp_path / "run").trace("m1", "coordinator")
    batches = _Batches(trace, "m1")
    batches.add_offsets("t", 0, [0, 1, 2, 5, 6])  # a gap ends a run
    batches.add_offsets("t", 0, [7, 8])  # the next poll continues one
    batches.add_offsets("t", 1, [])
    batches.flush()
    trace.close()
    runs = [(r["partition"], r["first_offset"], r["last_offset"], r["count"]) for r in read_traces(tmp_path / "run")]
    assert runs == [(0, 0, 2, 3), (0, 5, 8, 4)]


def test_expire_is_refused_with_a_reason(tmp_path: Path) -> None:
    with pytest.raises(NotImplementedError, match="no ZooKeeper session"):
        CoordinatorDriver("threads").expire("m0")
    with pytest.raises(ValueError, match="process_mode"):
        CoordinatorDriver("fork")


# --- against Apache Kafka -------------------------------------------------------------------------------


@pytest.mark.slow
def test_process_members_through_join_pause_kill_and_leave(driver_for, proxy: KafkaProxy) -> None:
    driver, env = driver_for("processes")
    driver.join("m0")
    driver.join("m1")
    first = settle(driver, ["m0", "m1"])
    assert_partitioned(first, env)
    generation = driver.generation()
    assert generation is not None

    # A join into a settled group: one JoinGroup + SyncGroup per member, plus the newcomer's rejoin after
    # MEMBER_ID_REQUIRED (KIP-394: a new member's first JoinGroup only gets its member id); one new generation.
    before = {name: group_counts(proxy, name) for name in ("m0", "m1")}
    driver.join("m2")
    assert_partitioned(settle(driver, ["m0", "m1", "m2"]), env)
    assert driver.generation() == generation + 1
    for name in ("m0", "m1"):
        assert delta(group_counts(proxy, name), before[name]) == {"JoinGroup": 1, "SyncGroup": 1, "LeaveGroup": 0,
                                                                 "member_id_required": 0}, name
    assert group_counts(proxy, "m2") == {"JoinGroup": 2, "SyncGroup": 1, "LeaveGroup": 0, "member_id_required": 1}

    # SIGSTOP: the paused member is not live, so the group is not stable until the coordinator has expelled
    # it (session timeout) and the others rebalanced; after SIGCONT it finds itself evicted and rejoins.
    driver.pause("m2")
    assert driver.live_members() == ["m0", "m1"] and not driver.stable()
    assert_partitioned(settle(driver, ["m0", "m1"]), env)
    driver.resume("m2")
    assert_partitioned(settle(driver, ["m0", "m1", "m2"]), env)
    # Evicted while stopped: the listener's on_partitions_lost, then a new generation that includes m2 again.
    assert driver.stats()["lost_per_member"]["m2"] == 1
    assert driver.generation() >= generation + 3

    # kill -9: no LeaveGroup; the survivors are stable once the session timeout has passed.
    driver.kill("m1")
    assert_partitioned(settle(driver, ["m0", "m2"]), env)
    assert group_counts(proxy, "m1")["LeaveGroup"] == 0

    driver.leave("m0")
    assert group_counts(proxy, "m0")["LeaveGroup"] == 1
    assert_partitioned(settle(driver, ["m2"]), env)

    stats = driver.stats()
    assert stats["members"] == ["m0", "m1", "m2"] and stats["kills"] == 1 and stats["leaves"] == 1
    assert stats["generations"] == sorted(stats["generations"]) and stats["max_generation"] > generation + 1
    driver.stop()
    assert driver.live_members() == []
    pids = member_pids(env)
    assert len(pids) == 3 and not [pid for pid in pids if alive(pid)]
    assert group_counts(proxy, "m2")["LeaveGroup"] == 1


@pytest.mark.slow
def test_thread_members_consume_everything_and_stop_cleanly(driver_for, proxy: KafkaProxy, proxied_kafka) -> None:
    driver, env = driver_for("threads")
    (topic,) = env.topics
    producer = KafkaProducer(bootstrap_servers=proxied_kafka.direct, client_id="producer")
    try:
        for i in range(60):
            producer.send(topic, b"v%d" % i, partition=i % PARTITIONS)
        producer.flush(timeout=10)
    finally:
        producer.close()

    driver.join("t0")
    driver.join("t1")
    assert_partitioned(settle(driver, ["t0", "t1"]), env)
    wait_for(lambda: driver.stats()["consumed"] >= 60, message="the 60 records consumed")
    consumed = {(r["topic"], r["partition"], offset) for r in read_traces(env.run.path) if r["type"] == "consume"
                for offset in range(r["first_offset"], r["last_offset"] + 1)}
    assert consumed == {(topic, p, o) for p in range(PARTITIONS) for o in range(10)}

    with pytest.raises(NotImplementedError, match="thread"):
        driver.kill("t0")
    with pytest.raises(NotImplementedError, match="thread"):
        driver.pause("t0")

    driver.leave("t0")
    assert group_counts(proxy, "t0")["LeaveGroup"] == 1
    assert settle(driver, ["t1"]) == {"t1": sorted(f"{topic}/{p}" for p in range(PARTITIONS))}
    driver.stop()
    assert driver.live_members() == []
    left = [t.name for t in threading.enumerate() if t.name.startswith(("lab-t0", "lab-t1", "kafka-io-t"))]
    assert left == []
    assert driver.stats()["exit_codes"] == {"t0": [0], "t1": [0]}
