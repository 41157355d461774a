"""A lab run whose members end on their own does not complete: the run's status is `failed` and its error names the
members and why (a coordinator-design member that cannot reach a broker: `failed to bootstrap`), even when the rest
of the group looks stable once they are gone. On the suite's servers (`lab_servers`, tests/lab/conftest.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from zkconsumer.embedded.process import free_port
from zkconsumer.lab.coordinator import CoordinatorDriver
from zkconsumer.lab.run import CaseRun, LabRunError
from zkconsumer.lab.run_stability import describe_failures
from zkconsumer.lab.scenario import expand_cases, parse_scenario
from zkconsumer.lab.summary import summarize
from zkconsumer.lab.trace import RunDirectory, read_traces

# m1 joins into a settled group of one and never reaches a broker; m0 alone owns every partition all along, so the
# group is stable again as soon as m1's process has ended.
JOINER_FAILS = """
name = "joiner-fails"
description = "a member joins, cannot bootstrap and ends; the one before it stays stable"
designs = ["coordinator"]
duration = 8.0
seed = 11
settle_timeout = 30.0
[group]
members = 1
topics = [{ name = "jf", partitions = 2 }]
[coordinator]
session_timeout_ms = 2000
heartbeat_interval_ms = 500
[[churn]]
at = 0.3
action = "join"
"""


@pytest.mark.slow
def test_a_run_whose_joiner_cannot_bootstrap_is_not_complete_and_names_it(lab_servers, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    unreachable = f"127.0.0.1:{free_port()}"  # a free port: nothing listens there
    settings = CoordinatorDriver._settings

    def m1_unreachable(self, name: str, incarnation: int):
        made = settings(self, name, incarnation)
        if name != "m1":
            return made
        # kafka-python's bootstrap gives up after bootstrap_timeout_ms (30 s by default)
        return dataclasses.replace(made, bootstrap=unreachable, extra={"bootstrap_timeout_ms": 1500})

    monkeypatch.setattr(CoordinatorDriver, "_settings", m1_unreachable)
    [case] = expand_cases(parse_scenario(JOINER_FAILS, "inline"))
    with pytest.raises(LabRunError, match="member m1 failed to bootstrap") as raised:
        CaseRun(case, "coordinator", lab_servers, tmp_path / "out").run()
    [path] = {p.parent for p in (tmp_path / "out").glob("**/manifest.json")}
    manifest = RunDirectory.load(path)
    assert manifest["completed"] is False and manifest["status"] == "failed"
    assert f"member m1 failed to bootstrap (KafkaTimeoutError: Unable to bootstrap from {unreachable}" in \
        manifest["error"], manifest["error"]
    assert "exited with code 1: see " in manifest["error"] and str(raised.value) in manifest["error"]
    assert not summarize(path).completed
    [failure] = [r for r in read_traces(path) if r["type"] == "member_event" and r["kind"] == "failed"]
    assert failure["member"] == "m1" and failure["stage"] == "bootstrap"
    # m1 never was in the group: without it the group was stable again, which is why the run must not count
    assert {r["member"] for r in read_traces(path) if r["type"] == "generation"} == {"m0"}


def test_members_that_failed_alike_are_named_together() -> None:
    failed = {"m2": "failed to bootstrap (KafkaTimeoutError: x); exited with code 1: see m2.log",
              "m1": "failed to bootstrap (KafkaTimeoutError: x); exited with code 1: see m1.log",
              "m3": "exited with code 1: see m3.log"}
    assert describe_failures(failed) == (
        "members failed to bootstrap: m1, m2 (member m1 failed to bootstrap (KafkaTimeoutError: x); exited with "
        "code 1: see m1.log; member m2 failed to bootstrap (KafkaTimeoutError: x); exited with code 1: see m2.log); "
        "member m3 exited with code 1: see m3.log")
    assert describe_failures({"m1": "exited with code 1: see m1.log"}) == "member m1 exited with code 1: see m1.log"
