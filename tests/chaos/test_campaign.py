"""`zkconsumer lab chaos` and `chaos-check` as a user runs them: bad arguments named with their fix before anything
starts. The short campaign itself runs on the servers of test_chaos_cluster.py (one 6-JVM cluster for both)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def zkconsumer(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zkconsumer", *args], check=False, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


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
