"""`zkconsumer lab run` end to end on the real servers: a short scenario on each design, Ctrl-C, a member that
fails to start, an invalid scenario; and nothing (process or listening port) left behind.

The in-process runs share the suite's servers (`lab_servers`, tests/lab/conftest.py): no server starts per run.
Only the Ctrl-C test runs `zkconsumer lab run` as a user does, in a child process that starts its own embedded
ZooKeeper and Kafka, and checks that the interrupt stops them too."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import wait_for

from zkconsumer.cli import main as cli_main
from zkconsumer.lab.drivers import zk as zk_driver
from zkconsumer.lab.runs.case_run import CaseRun, LabRunError
from zkconsumer.lab.runs.servers import LabServers
from zkconsumer.lab.runs.summary import RunSummary, summarize
from zkconsumer.lab.scenarios.loading import expand_cases, parse_scenario
from zkconsumer.lab.trace import RunDirectory, read_traces

pytestmark = pytest.mark.slow

SHORT = """
name = "short"
description = "two members, one joins, the newest leaves"
designs = {designs}
duration = 9.0
seed = 3
settle_timeout = 40.0
[group]
members = 2
topics = [{{ name = "short", partitions = 4 }}]
[zk]
"zookeeper.session.timeout.ms" = 4000
"rebalance.backoff.ms" = 200
[coordinator]
# Nobody crashes here, so no session needs to expire within the run: 6 s (the brokers' usual minimum) leaves a
# member process starved under load time to heartbeat, where 2 s had it evicted, an extra generation breaking the
# exact counts below.
session_timeout_ms = 6000
heartbeat_interval_ms = 500
[[churn]]
at = 0.3
action = "join"
spread = 0.5
[[churn]]
at = 8.0
action = "leave"
member = "newest"
"""


def our_processes(marker: str) -> list[str]:
    """Command lines of live processes that mention `marker` (a run's temporary or output directory)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(cmdline)
    return found


def assert_timed_by_members(records: list[dict]) -> None:
    """Both changes (a join, a leave) move members, so each is timed to the last member's own record, which is
    after the change and no later than the poll that confirmed it."""
    stables = [r for r in records if r["type"] == "stable"]
    changes = [r for r in records if r["type"] == "membership" and r["action"] in ("join", "leave")]
    assert len(stables) >= len(changes) >= 2
    for record in stables[-2:]:
        assert record["basis"] == "events", record
        assert 0 < record["duration_s"] <= record["polled_s"], record


def assert_split_and_drawn(summary, records: list[dict], case) -> None:
    """Each change's time to stable splits into noticing (the incumbents heard of it) and rebalancing, and the
    join ran at the time drawn for the case (the same on every design)."""
    assert len(summary.noticing_s) == len(summary.stable_s) >= 2
    for stable_s, noticing, rebalancing in zip(summary.stable_s, summary.noticing_s, summary.rebalancing_s,
                                               strict=True):
        assert noticing is not None and 0 < noticing <= stable_s, (noticing, stable_s)
        assert noticing + rebalancing == pytest.approx(stable_s)
    [join] = [r for r in records if r["type"] == "membership" and r["action"] == "join"]
    assert join["offset_s"] == case.steps[0].offset > 0
    settled = next(r["ts"] for r in records if r["type"] == "phase" and r["phase"] == "settled")
    assert join["ts"] - settled >= case.steps[0].at


def run_short(design: str, servers: LabServers, out: Path, process_mode: str | None = None,
              text: str = SHORT) -> RunSummary:
    """The scenario's one case on `design`, on the shared servers."""
    scenario = parse_scenario(text.format(designs=f'["{design}"]') if text is SHORT else text, "inline")
    [case] = expand_cases(scenario)
    return summarize(CaseRun(case, design, servers, out, process_mode=process_mode).run())


def port_closed(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_short_scenario_on_the_zookeeper_design(lab_servers, tmp_path):
    scenario = parse_scenario(SHORT.format(designs='["zk"]'), "inline")
    summary = run_short("zk", lab_servers, tmp_path / "out")
    manifest = RunDirectory.load(summary.path)
    assert manifest["completed"] and manifest["status"] == "completed" and manifest["design"] == "zk"
    assert manifest["versions"]["kazoo"] and manifest["servers"]["zookeeper"]["version"]
    # (the embedded broker's kind in the manifest: test_ctrl_c_stops_everything_and_marks_the_run_incomplete)
    records = list(read_traces(summary.path))
    types = {r["type"] for r in records}
    assert {"phase", "membership", "stable", "member_event", "wire", "owners", "mntr"} <= types
    assert summary.changes == 2 and len(summary.stable_s) >= 1
    assert_timed_by_members(records)
    assert_split_and_drawn(summary, records, expand_cases(scenario)[0])
    # members with fetchers report how long their consumed offsets ran ahead of their consume records
    windows = [r for r in records if r["type"] == "member_event" and r["kind"] == "consume_window"]
    assert {r["member"] for r in windows} >= {"m0", "m1"}
    for window in windows:
        recorded = sum(r["count"] for r in records if r["type"] == "consume" and r["member"] == window["member"])
        assert window["messages"] == recorded and window["max_s"] <= window["total_s"] + 1e-9
    # The join rebalances all three, the leave the two that remain: exactly one rebalance per member and change. Each
    # change notifies at least the two members it leaves in place (a run under load once saw a fifth notification).
    assert summary.rebalances == 5 and summary.zk_notifications >= 4
    ports = [r["link"] for r in records if r["type"] == "wire" and r["proto"] == "zk"]
    assert {"m0", "m1", "m2"} <= set(ports)
    assert our_processes(str(tmp_path)) == []
    assert all(port_closed(p) for p in manifest["ports"]["zookeeper_proxy_links"].values())
    # the summary's requests are the proxy's request records of the churn window, counted here from the trace
    settled = next(r["ts"] for r in records if r["type"] == "phase" and r["phase"] == "settled")
    done = next(r["ts"] for r in records if r["type"] == "phase" and r["phase"] == "done")
    requests = [r for r in records if r["type"] == "wire" and r["proto"] == "zk" and r["kind"] == "request"
                and settled <= r["ts"] <= done]
    assert summary.zk_requests == len(requests) > 0


def test_thread_members_run_on_member_hosts_and_leave_nothing_behind(lab_servers, tmp_path):
    summary = run_short("zk", lab_servers, tmp_path / "out", process_mode="threads")
    manifest = RunDirectory.load(summary.path)
    assert manifest["completed"] and manifest["process_mode"] == "threads"
    assert summary.changes == 2 and summary.rebalances == 5 and summary.zk_notifications >= 4
    # One host per core before any host takes a second member (zk_driver.MIN_HOSTS): three members, three cores at
    # most, so as many hosts as cores up to three, and no more.
    hosts = min(3, zk_driver.MIN_HOSTS)
    assert all((summary.path / "logs" / f"host{i}.log").exists() for i in range(hosts))
    assert not (summary.path / "logs" / f"host{hosts}.log").exists()
    records = list(read_traces(summary.path))
    assert {"m0", "m1", "m2"} <= {r["member"] for r in records if r["type"] == "member_event"}
    assert our_processes(str(tmp_path)) == []
    assert all(port_closed(p) for p in manifest["ports"]["zookeeper_proxy_links"].values())


def test_a_member_host_that_cannot_start_is_reported_with_its_log(lab_servers, tmp_path, monkeypatch):
    monkeypatch.setattr(zk_driver, "PYTHON", "/bin/false")
    with pytest.raises(LabRunError, match=r"member m\d is on host0, which exited with code 1: see .*host0\.log"):
        run_short("zk", lab_servers, tmp_path / "out", process_mode="threads")
    assert our_processes(str(tmp_path)) == []


def test_short_scenario_on_the_coordinator_design(lab_servers, tmp_path):
    scenario = parse_scenario(SHORT.format(designs='["coordinator"]'), "inline")
    summary = run_short("coordinator", lab_servers, tmp_path / "out")
    assert summary.completed and summary.design == "coordinator"
    records = list(read_traces(summary.path))
    generations = {r["generation"] for r in records if r["type"] == "generation" and r["kind"] == "assigned"}
    assert len(generations) >= 3  # the initial group, the join, the leave
    assert summary.changes == 2 and summary.rebalances == 2  # the generations of the join and of the leave
    # a join into 2: 2 incumbents x (JoinGroup + SyncGroup), the joiner 2 JoinGroups (MEMBER_ID_REQUIRED) + 1
    # SyncGroup; the leave: 1 LeaveGroup, then 2 x (JoinGroup + SyncGroup)
    assert summary.kafka_by_api["LeaveGroup"] == 1 and summary.kafka_coordination == 7 + 5
    assert summary.zk_requests == 0  # the coordinator design never talks to ZooKeeper
    assert_timed_by_members(records)
    assert_split_and_drawn(summary, records, expand_cases(scenario)[0])
    assert our_processes(str(tmp_path)) == []


def test_a_member_that_cannot_start_is_reported_with_its_log(lab_servers, tmp_path, monkeypatch):
    monkeypatch.setattr(zk_driver, "PYTHON", "/bin/false")
    with pytest.raises(LabRunError, match=r"member m\d exited with code 1: see .*m\d\.log"):
        run_short("zk", lab_servers, tmp_path / "out")
    [manifest] = list((tmp_path / "out").glob("**/manifest.json"))
    data = json.loads(manifest.read_text())
    assert data["completed"] is False and data["status"] == "failed" and "exited with code 1" in data["error"]


def test_ctrl_c_stops_everything_and_marks_the_run_incomplete(tmp_path):
    scenario_file = tmp_path / "long.toml"
    long = SHORT.format(designs='["zk"]').replace("duration = 9.0", "duration = 120.0")
    assert "duration = 120.0" in long
    scenario_file.write_text(long)
    out = tmp_path / "out"
    # PYTHONFAULTHANDLER: a SIGABRT makes the run print every thread's stack before it dies (below).
    proc = subprocess.Popen([sys.executable, "-m", "zkconsumer", "lab", "run", str(scenario_file), "--out", str(out)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    try:
        trace = out / "short-r0" / "zk" / "traces" / "run.jsonl"
        wait_for(lambda: trace.exists() and '"phase":"churn"' in trace.read_text(), timeout=60,
                 message="the run reached its churn phase")
        os.kill(proc.pid, signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        # Where its stop hangs: every thread's stack, which the fault handler prints on SIGABRT.
        os.kill(proc.pid, signal.SIGABRT)
        try:
            output, _ = proc.communicate(timeout=10)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("the run did not end within 60 s of Ctrl-C; its output and stacks:\n"
                             + output[-12000:].decode(errors="replace")) from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, output
    assert b"interrupted" in output
    manifest = RunDirectory.load(out / "short-r0" / "zk")
    assert manifest["completed"] is False and manifest["status"] == "interrupted"
    # the only run here on servers of its own: the manifest names the embedded ones
    assert manifest["servers"]["broker"]["kind"] == "Apache Kafka" and manifest["servers"]["broker"]["embedded"]
    assert manifest["servers"]["zookeeper"]["embedded"] is True and manifest["servers"]["zookeeper"]["version"]
    deadline = time.monotonic() + 10
    while our_processes(str(out)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert our_processes(str(out)) == []  # members, and the embedded ZooKeeper and Kafka (data under out/)
    ports = manifest["ports"]
    listened = [ports["kafka_proxy"], *ports["broker_listeners"], *ports["zookeeper"],
                *ports["zookeeper_proxy_links"].values()]
    assert len(listened) >= 6  # proxy, the broker's two listeners, ZooKeeper, the two initial members' links
    assert [p for p in listened if not port_closed(p)] == []


def test_an_invalid_scenario_names_the_field(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(SHORT.format(designs='["zk"]').replace("members = 2", "members = -1"))
    result = CliRunner().invoke(cli_main, ["lab", "run", str(bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "group.members" in result.output and str(bad) in result.output
    assert not (tmp_path / "out").exists()


UNSETTLED = """
name = "unsettled"
description = "a member killed near the end: its session outlives the settle timeout"
designs = ["zk"]
duration = 0.5
seed = 5
settle_timeout = 0.1
start_timeout = 120.0
[group]
members = 2
topics = [{ name = "unsettled", partitions = 2 }]
[zk]
"zookeeper.session.timeout.ms" = 15000
"rebalance.backoff.ms" = 200
[[churn]]
at = 0.2
action = "kill"
member = "newest"
"""


def test_a_run_whose_last_change_never_settles_is_not_complete(lab_servers, tmp_path):
    # Only the last change may be what does not settle: the initial group's start (two member processes, slower on
    # a busy machine) waits on its own bound, start_timeout (docs/scenarios.md). A settle_timeout no start can meet
    # (0.1 s) makes the test fail at once if the start waited on it instead.
    summary = run_short("zk", lab_servers, tmp_path / "out", text=UNSETTLED)
    manifest = RunDirectory.load(summary.path)
    assert not summary.completed and not manifest["completed"] and manifest["status"] == "unsettled"
    assert "within settle_timeout (0 s) after the last change" in manifest["error"], manifest["error"]
    assert [r for r in read_traces(summary.path) if r["type"] == "phase" and r["phase"] == "settled"]  # t = 0 came
    assert not [r for r in read_traces(summary.path) if r["type"] == "stable"]  # no time to stable was made up
