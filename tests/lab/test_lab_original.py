"""The lab's design "original" (Kafka 0.8.2.2's own connector, zkconsumer/lab/original_driver.py) end to end on the
real servers: a short run with a join, a leave, a forced expiry and a kill, each member's ZooKeeper traffic on its
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
from helpers import wait_for
from test_lab_run import our_processes

from zkconsumer.cli import main as cli_main
from zkconsumer.lab.cli import select_designs
from zkconsumer.lab.join_cost import original_accounted_requests, original_join_requests
from zkconsumer.lab.scenario import parse_scenario
from zkconsumer.lab.session import LabSession
from zkconsumer.lab.trace import RunDirectory, read_traces

MISSING = "missing tool: "
PARTITIONS = 4
SHORT = f"""
name = "short-original"
description = "three originals; one joins and leaves, one is expired, one is killed"
designs = ["original"]
duration = 5.0
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
[[churn]]
at = 0.3
action = "join"
[[churn]]
at = 2.0
action = "leave"
member = "newest"
[[churn]]
at = 3.0
action = "expire"
member = 1
[[churn]]
at = 4.0
action = "kill"
member = 0
"""


def _require_jdk() -> None:
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            pytest.skip(f"{MISSING}{tool} (a JDK 17: apt-get install openjdk-17-jdk-headless)")


@pytest.mark.slow
def test_a_short_run_of_originals_join_leave_expire_kill(tmp_path):
    _require_jdk()
    scenario = parse_scenario(SHORT, "inline")
    [summary] = LabSession(scenario, scenario.cases(), ["original"], tmp_path / "out").run()
    manifest = RunDirectory.load(summary.path)
    assert manifest["completed"] and manifest["design"] == "original"
    assert manifest["versions"]["kafka_original"] == "0.8.2.2"
    records = sorted(read_traces(summary.path), key=lambda r: r["ts"])
    assert {r["design"] for r in records} == {"original"}
    # Every change settled: join, leave, expire, kill.
    assert summary.changes == 4 and len(summary.stable_s) == 4
    assert our_processes(str(tmp_path)) == []  # every JVM stopped (their command lines name the run directory)

    # Settled on what range prescribes for the two left, m1 (expired, back with a new session) and m2.
    group = next(r for r in records if r["type"] == "owners" and r["owners"])  # any snapshot names the group
    prefix = next(iter(group["owners"].values())).rsplit("_", 1)[0]
    done = next(r["ts"] for r in records if r["type"] == "phase" and r["phase"] == "done")
    last = [r["owners"] for r in records if r["type"] == "owners" and r["ts"] < done][-1]  # not while stopping
    assert sorted(last.values()) == [f"{prefix}_m1-0"] * 2 + [f"{prefix}_m2-0"] * 2

    # Each member's ZooKeeper requests on its own link; the driver's owner polling (getChildren of the owners
    # directories, which no member ever lists) went to ZooKeeper directly, uncounted.
    zk = [r for r in records if r["type"] == "wire" and r["proto"] == "zk" and r["kind"] == "request"]
    per_link = Counter(r["link"] for r in zk)
    assert set(per_link) == {"m0", "m1", "m2", "m3"} and min(per_link.values()) > 0
    assert not [r for r in zk if "/owners" in (r.get("path") or "") and r["op"] == "getChildren"]
    assert any(r["type"] == "owners" for r in records)  # ... though it did poll
    kafka_clients = {r.get("client_id") for r in records if r["type"] == "wire" and r["proto"] == "kafka"}
    assert {"m0", "m1", "m2", "m3"} <= kafka_clients

    events = [r for r in records if r["type"] == "member_event"]
    # The leave was a real connector.shutdown(); the kill was not; the expiry was real and gave m1 a new session.
    assert any(e["member"] == "m3" and e["kind"] == "state" and e["state"] == "closed" for e in events)
    m0_closed = [e for e in events if e["member"] == "m0" and e["kind"] == "state" and e["state"] == "closed"]
    assert m0_closed == []
    sessions = [e["session"] for e in events if e["member"] == "m1" and e["kind"] == "session"]
    assert len(set(sessions)) == 2
    assert any(e["member"] == "m1" and e["kind"] == "session_expired" for e in events)

    # The join: exactly the original's formula with fetchers (or its per-event accounting after a conflict).
    changes = [r for r in records if r["type"] == "membership"]
    join_at = next(r["ts"] for r in changes if r["action"] == "join")
    leave_at = next(r["ts"] for r in changes if r["action"] == "leave")
    window = [r for r in records if join_at <= r["ts"] < leave_at]
    requests = sum(r["type"] == "wire" and r["proto"] == "zk" and r["kind"] == "request" for r in window)
    notified = sum(r["type"] == "wire" and r["proto"] == "zk" and r["kind"] == "event" for r in window)
    join_events = [r for r in window if r["type"] == "member_event"]
    assert notified == 3
    if not any(e["kind"] == "claim" and not e["ok"] for e in join_events):
        assert requests == original_join_requests(4, PARTITIONS, fetchers=True)
    # The leader finder of every member that now owns something reads /brokers/ids and the broker: 1 + B each.
    owning = sum(r["type"] == "assignment" and bool(r["partitions"]) for r in window)
    assert requests == original_accounted_requests(join_events, members_seen=4, joiners=1,
                                                   notified=notified) + 2 * owning


def test_design_choices():
    assert select_designs(["zk", "coordinator"], "both") == ["zk", "coordinator"]
    assert select_designs(["zk", "coordinator"], "all") == ["zk", "original", "coordinator"]
    assert select_designs(["zk", "coordinator"], "original") == ["original"]
    assert select_designs(["coordinator"], "all") == ["coordinator"]  # the original runs where the zk design does
    assert select_designs(["zk", "original"], "both") == ["zk"]


def test_a_missing_java_is_one_line_naming_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))  # the lab looks there first
    result = CliRunner().invoke(cli_main, ["lab", "run", "lesson", "--design", "original", "--out",
                                           str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "java not found" in result.output and "install" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()  # nothing started


def test_a_member_jvm_ends_when_the_lab_is_killed(tmp_path):
    """The lab killed -9 runs no `finally`: its original JVMs end at the end of their stdin (a pipe from it)."""
    _require_jdk()
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from zkconsumer.lab.original_driver import _Jvm\n"
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
