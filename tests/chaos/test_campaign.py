"""`zkconsumer lab chaos` end to end, as a user runs it: a short campaign on 3 ZooKeeper servers and 3 brokers, its
table and verdict, the history judged again by `chaos-check`, and bad arguments named with their fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

KINDS = "member_kill,session_expiry,malformed_registration"


def zkconsumer(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zkconsumer", *args], check=False, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.mark.slow  # six JVMs and two member processes
@pytest.mark.timeout(900)
def test_a_short_campaign_holds_its_invariants_and_can_be_judged_again(tmp_path: Path) -> None:
    out = tmp_path / "campaign"
    run = zkconsumer("lab", "chaos", "--faults", "3", "--seed", "2", "--kinds", KINDS, "--members", "2",
                     "--partitions", "4", "--rate", "50", "--out", str(out))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert "3 faults applied" in run.stdout
    assert sum("re-converged" in line for line in lines) == 3  # one progress line per fault
    assert "violations: 0" in lines
    document = json.loads((out / "chaos.json").read_text())
    assert document["violations"] == 0
    assert {row["kind"] for row in document["table"]} == set(KINDS.split(","))
    audit = next(c for c in document["checks"] if c["invariant"] == 3)["measurements"]
    assert audit["gaps"] == 0 and audit["consumed_offsets"] > 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["faults_applied"] == 3

    again = zkconsumer("lab", "chaos-check", str(out), timeout=120)
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "chaos.json").read_text()) == document  # the same history, the same verdict


@pytest.mark.parametrize("args, message", [
    (["--faults", "1", "--seed", "1", "--kinds", "member_kil"], "unknown fault kind(s) member_kil: choose from"),
    (["--faults", "-1", "--seed", "1"], "-1 is not in the range x>=0"),
    (["--faults", "1"], "Missing option '--seed'"),
])
def test_bad_arguments_are_named_before_anything_starts(tmp_path: Path, args: list[str], message: str) -> None:
    run = zkconsumer("lab", "chaos", *args, "--out", str(tmp_path / "c"), timeout=60)
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert not (tmp_path / "c").exists()


def test_an_existing_output_and_a_directory_that_is_no_campaign(tmp_path: Path) -> None:
    run = zkconsumer("lab", "chaos", "--faults", "1", "--seed", "1", "--out", str(tmp_path), timeout=60)
    assert run.returncode == 2 and "exists" in run.stderr
    run = zkconsumer("lab", "chaos-check", str(tmp_path), timeout=60)
    assert run.returncode == 2 and "not a campaign directory" in run.stderr


def test_a_lab_run_is_not_taken_for_a_campaign(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "x.jsonl").write_text('{"v":1,"type":"phase","ts":1.0,"design":"zk","phase":"setup"}\n')
    run = zkconsumer("lab", "chaos-check", str(tmp_path), timeout=60)
    assert run.returncode == 1 and "not a fault campaign's history" in run.stderr, run.stderr
