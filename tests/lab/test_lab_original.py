"""The lab's design "original" (Kafka 0.8.2.2's own connector, zkconsumer/lab/drivers/original.py) end to end on the
real servers: a short run with a leave, a forced expiry, a kill and a join, each member's ZooKeeper traffic on its
own proxy link and none of the driver's, the group settled on what the strategy prescribes, the join's wire count
equal to the original's formula, and no JVM left behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections import Counter

import pytest
from click.testing import CliRunner
from helpers import beyond_the_textbook, conflicted, wait_for
from test_lab_run import our_processes

from zkconsumer.cli import main as cli_main
from zkconsumer.errors import InputError
from zkconsumer.lab.cli import select_designs
from zkconsumer.lab.designs import missing_client
from zkconsumer.lab.rules.join_cost import (
    ORIGINAL_PER_NOTIFICATION,
    original_accounted_requests,
    original_attempt_cost,
    original_join_requests,
)
from zkconsumer.lab.runs.session import LabSession
from zkconsumer.lab.scenarios.loading import expand_cases, parse_scenario
from zkconsumer.lab.trace import RunDirectory, read_traces

MISSING = "missing tool: "
PARTITIONS = 4
SHORT = f"""
name = "short-original"
description = "three originals: one leaves, one is expired, one is killed, then one joins"
designs = ["original"]
duration = 12.0
seed = 5
settle_timeout = 60.0
[group]
members = 3
topics = [{{ name = "so", partitions = {PARTITIONS} }}]
[zk]
"zookeeper.session.timeout.ms" = 4000
"rebalance.backoff.ms" = 200
"rebalance.max.retries" = 20
# Nothing moves an offset during the join (no load), but the fetchers reset each new partition's offset, which an
# auto-commit would then write: off, the join is the textbook case with fetchers.
"auto.commit.enable" = false
# Each change on members that are already up, spaced so that each settles before the next (a change that comes
# first would take over the stability clock); the join comes last, since a JVM's start took 2.6 to 6 s at load 12
# here, and the run waits for the last change to settle. The kill settles once m0's session has timed out.
[[churn]]
at = 0.3
action = "leave"
member = 2
[[churn]]
at = 2.0
action = "expire"
member = 1
[[churn]]
at = 5.0
action = "kill"
member = 0
[[churn]]
at = 12.0
action = "join"
"""


def _require_jdk() -> None:
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            pytest.skip(f"{MISSING}{tool} (a JDK 17: apt-get install openjdk-17-jdk-headless)")


@pytest.mark.slow
def test_a_short_run_of_originals_leave_expire_kill_join(tmp_path, shared_lab_servers):
    _require_jdk()
    scenario = parse_scenario(SHORT, "inline")
    [summary] = LabSession(scenario, expand_cases(scenario), ["original"], tmp_path / "out",
                           servers=shared_lab_servers).run()
    manifest = RunDirectory.load(summary.path)
    assert manifest["completed"] and manifest["design"] == "original"
    assert manifest["versions"]["kafka_original"] == "0.8.2.2"
    records = sorted(read_traces(summary.path), key=lambda r: r["ts"])
    assert {r["design"] for r in records} == {"original"}
    # Every change settled: leave, expire, kill, join.
    assert summary.changes == 4 and len(summary.stable_s) == 4
    assert our_processes(str(tmp_path)) == []  # every JVM stopped (their command lines name the run directory)

    # Settled on what range prescribes for the two left, m1 (expired, back with a new session) and m3: stable()
    # checked the owner nodes against the strategy; the members' own last assignments say the same.
    done = next(r["ts"] for r in records if r["type"] == "phase" and r["phase"] == "done")
    topic = next(r["topic"] for r in records if r["type"] == "member_event" and r["kind"] == "claim" and r["ok"])
    last = {r["member"]: r["partitions"] for r in records if r["type"] == "assignment"}
    assert last["m1"] == [f"{topic}/0", f"{topic}/1"] and last["m3"] == [f"{topic}/2", f"{topic}/3"]

    # Each member's ZooKeeper requests on its own link; the driver's owner polling (getChildren of the owners
    # directories, which no member ever lists) went to ZooKeeper directly, uncounted.
    zk = [r for r in records if r["type"] == "wire" and r["proto"] == "zk" and r["kind"] == "request"]
    per_link = Counter(r["link"] for r in zk)
    assert set(per_link) == {"m0", "m1", "m2", "m3"} and min(per_link.values()) > 0
    assert not [r for r in zk if "/owners" in (r.get("path") or "") and r["op"] == "getChildren"]
    assert any(r["type"] == "owners" for r in records)  # ... though it did poll
    kafka_clients = {r.get("client_id") for r in records if r["type"] == "wire" and r["proto"] == "kafka"}
    # m0-m2 fetched for seconds; m3, the last joiner, is stopped as soon as the group is stable, which can come
    # before its leader finder's first request (seen once on a loaded machine), so it is not required here.
    assert {"m0", "m1", "m2"} <= kafka_clients

    events = [r for r in records if r["type"] == "member_event"]
    # The leave was a real connector.shutdown(); the kill was not; the expiry was real and gave m1 a new session.
    assert any(e["member"] == "m2" and e["kind"] == "state" and e["state"] == "closed" for e in events)
    m0_closed = [e for e in events if e["member"] == "m0" and e["kind"] == "state" and e["state"] == "closed"]
    assert m0_closed == []
    sessions = [e["session"] for e in events if e["member"] == "m1" and e["kind"] == "session"]
    assert len(set(sessions)) == 2
    assert any(e["member"] == "m1" and e["kind"] == "session_expired" for e in events)
    # the expiry's credentials came over the JVM's stdout (LabOriginalHost's session reply), not from a trace
    assert not [r for r in records if "password" in r]

    # The join into m1 alone: exactly the original's formula with fetchers (or its per-event accounting after a
    # conflict), the leader finder of every member that then owns something reading /brokers/ids and the broker.
    join_at = next(r["ts"] for r in records if r["type"] == "membership" and r["action"] == "join")
    window = [r for r in records if join_at <= r["ts"] <= done]

    def zk_request(r: dict) -> bool:
        return r["type"] == "wire" and r["proto"] == "zk" and r["kind"] == "request"

    # A leader finder reads /brokers/ids in its own thread after its member's rebalance, so its last read can come
    # after the run saw the group stable and marked it done (4 ms after, once, among three test workers). Requests
    # up to the first session the run's stop closes belong to the join, and they can only be such reads; after
    # that, members rebalance on their way out.
    stopping = next((r["ts"] for r in records if r["ts"] > done and zk_request(r) and r["op"] == "closeSession"),
                    float("inf"))
    late = [r for r in records if done < r["ts"] < stopping and zk_request(r)]
    assert all(r["op"] in ("getChildren", "getData") and r["path"].startswith("/brokers/ids") for r in late), late
    requests = sum(zk_request(r) for r in window) + len(late)
    notified = sum(r["type"] == "wire" and r["proto"] == "zk" and r["kind"] == "event" for r in window)
    join_events = [r for r in window if r["type"] == "member_event"]
    assert notified == 1
    # the closed form in every case: plus exactly what a conflict added, which is nothing without one
    excess = beyond_the_textbook(join_events, 2, PARTITIONS, notified, original_attempt_cost(2),
                                 ORIGINAL_PER_NOTIFICATION)
    assert requests == original_join_requests(2, PARTITIONS, fetchers=True) + excess, excess
    assert (excess > 0) == conflicted(join_events), excess
    owning = sum(r["type"] == "assignment" and bool(r["partitions"]) for r in window)
    assert requests == original_accounted_requests(join_events, members_seen=2, joiners=1,
                                                   notified=notified) + 2 * owning


def test_design_choices():
    assert select_designs(["zk", "coordinator"], "both") == ["zk", "coordinator"]
    # all: every generation the scenario runs; the original wherever zk runs, the newer protocols wherever eager does,
    # Kafka's Java consumer among them where a JDK is (its own test covers the machine without one)
    java = ["consumer-java"] if missing_client("consumer-java") is None else []
    assert select_designs(["zk", "coordinator"], "all") == ["zk", "original", "coordinator", "cooperative", "consumer",
                                                            *java]
    assert select_designs(["zk", "coordinator"], "original") == ["original"]
    assert select_designs(["coordinator"], "all") == ["coordinator", "cooperative", "consumer", *java]
    assert select_designs(["zk"], "all") == ["zk", "original"]
    assert select_designs(["zk", "original"], "both") == ["zk"]
    assert select_designs(["zk", "coordinator"], "original,zk") == ["zk", "original"]  # the designs' own order
    assert select_designs(["zk", "coordinator"], "eager,consumer") == ["coordinator", "consumer"]  # eager: an alias
    with pytest.raises(InputError, match="zookeeper is not one of zk, original, coordinator, cooperative, consumer, "
                                         "consumer-java"):
        select_designs(["zk"], "zk,zookeeper")


def test_a_design_whose_client_is_missing_is_one_line_naming_the_fix(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "confluent_kafka" else
                        real(name, *a))
    with pytest.raises(InputError, match=r"--design consumer: .*pip install confluent-kafka"):
        select_designs(["zk", "coordinator"], "consumer")
    # `all` is every design this machine can run: the librdkafka designs drop out, nothing fails
    java = ["consumer-java"] if missing_client("consumer-java") is None else []
    assert select_designs(["zk", "coordinator"], "all") == ["zk", "original", "coordinator", *java]


def test_a_missing_java_is_one_line_naming_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))  # the lab looks there first
    result = CliRunner().invoke(cli_main, ["lab", "run", "lesson", "--design", "original", "--out",
                                           str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "java not found" in result.output and "install" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()  # nothing started


@pytest.mark.slow
def test_a_member_jvm_ends_when_the_lab_is_killed(tmp_path):
    """The lab killed -9 runs no `finally`: its original JVMs end at the end of their stdin (a pipe from it)."""
    _require_jdk()
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from zkconsumer.lab.drivers.original import _Jvm\n"
        f"jvm = _Jvm('host0', Path({str(tmp_path)!r}), Path({str(tmp_path / 'host0.log')!r}), '-Xmx64m')\n"
        "print(jvm.proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    lab = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        jvm_pid = int(lab.stdout.readline())  # type: ignore[union-attr]
        wait_for(lambda: any("LabOriginalHost" in c for c in our_processes(str(tmp_path))), timeout=30,
                 message="the JVM running")
        os.kill(lab.pid, signal.SIGKILL)
        lab.wait(10)
        wait_for(lambda: not our_processes(str(tmp_path)), timeout=30, message=f"JVM {jvm_pid} gone with the lab")
    finally:
        if lab.poll() is None:
            lab.kill()
            lab.wait(10)
