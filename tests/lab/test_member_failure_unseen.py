"""A coordinator-design member that fails to bootstrap leaves the run incomplete even when the churn loop never saw it
fail: the member ended after the loop's last failure check and before the stability check that then no longer
counted it, so the group of the others looked stable and the change was timed (the same holds for a member that
ends while the load drains). The run's status is `failed` and its error names the member and why.

The interleaving is made certain, not waited for: the first stability check after m1's join waits (a condition,
bounded) until m1 has ended, which is what a member whose exit lands between the two checks looks like. On the
suite's servers (`lab_servers`, tests/lab/conftest.py)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest
from helpers import wait_for

from zkconsumer.embedded.process import free_port
from zkconsumer.lab.coordinator import CoordinatorDriver
from zkconsumer.lab.run import CaseRun, LabRunError
from zkconsumer.lab.scenario import expand_cases, parse_scenario
from zkconsumer.lab.summary import summarize
from zkconsumer.lab.trace import RunDirectory, read_traces

# m1 joins at the very end (at = duration), so the loop iteration that applies the join is its last one: once the
# group is seen stable there, nothing in the loop looks at the members again.
LAST_JOINER_FAILS = """
name = "last-joiner-fails"
description = "the last change is a join whose member cannot bootstrap and ends between two checks"
designs = ["coordinator"]
duration = 0.3
seed = 13
settle_timeout = 30.0
[group]
members = 1
topics = [{ name = "ljf", partitions = 2 }]
[coordinator]
session_timeout_ms = 2000
heartbeat_interval_ms = 500
[[churn]]
at = 0.3
action = "join"
"""


@pytest.mark.slow
def test_a_joiner_that_fails_between_the_checks_leaves_the_run_incomplete(lab_servers, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    unreachable = f"127.0.0.1:{free_port()}"  # a free port: nothing listens there
    settings, stable = CoordinatorDriver._settings, CoordinatorDriver.stable

    def m1_unreachable(self, name: str, incarnation: int):
        made = settings(self, name, incarnation)
        if name != "m1":
            return made
        # kafka-python's bootstrap gives up after bootstrap_timeout_ms (30 s by default)
        return dataclasses.replace(made, bootstrap=unreachable, extra={"bootstrap_timeout_ms": 1500})

    held = threading.Event()

    def stable_once_m1_ended(self) -> bool:
        with self._lock:
            m1 = self._members.get("m1")
        # The run's own thread (the churn loop), once: observers elsewhere call stable() too.
        if m1 is not None and not held.is_set() and threading.current_thread() is threading.main_thread():
            held.set()
            wait_for(lambda: not m1.alive, timeout=60, message="m1 to fail to bootstrap and end")
        return stable(self)

    monkeypatch.setattr(CoordinatorDriver, "_settings", m1_unreachable)
    monkeypatch.setattr(CoordinatorDriver, "stable", stable_once_m1_ended)
    [case] = expand_cases(parse_scenario(LAST_JOINER_FAILS, "inline"))
    with pytest.raises(LabRunError, match="member m1 failed to bootstrap") as raised:
        CaseRun(case, "coordinator", lab_servers, tmp_path / "out").run()
    assert held.is_set(), "the churn loop never checked stability after m1 joined"
    [path] = {p.parent for p in (tmp_path / "out").glob("**/manifest.json")}
    manifest = RunDirectory.load(path)
    assert manifest["completed"] is False and manifest["status"] == "failed", manifest["status"]
    assert f"member m1 failed to bootstrap (KafkaTimeoutError: Unable to bootstrap from {unreachable}" in \
        manifest["error"], manifest["error"]
    assert str(raised.value) in manifest["error"]
    assert not summarize(path).completed
    records = list(read_traces(path))
    [failure] = [r for r in records if r["type"] == "member_event" and r["kind"] == "failed"]
    assert failure["member"] == "m1" and failure["stage"] == "bootstrap"
    # The interleaving happened: the group of m0 alone was seen stable after the join (a time to stable was made)
    assert [r for r in records if r["type"] == "stable"]
    assert {r["member"] for r in records if r["type"] == "generation"} == {"m0"}
