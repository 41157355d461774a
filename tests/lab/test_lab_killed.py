"""`lab run` killed with SIGKILL leaves nothing running: its members leave (their stdin is a pipe from it) and
its embedded servers are stopped by the servers' lifeline (zkconsumer/embedded/lifeline.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import wait_for
from test_lab_run import SHORT, our_processes

pytestmark = pytest.mark.slow

MEMBER_MODULES = {"zk": "zkconsumer.lab.members.zk", "coordinator": "zkconsumer.lab.members.coordinator"}


@pytest.mark.parametrize("design", ["zk", "coordinator"])
def test_a_killed_lab_run_leaves_no_member_and_no_server(tmp_path: Path, design: str) -> None:
    # Long enough that the kill lands while the group runs: the run would last a minute on its own.
    scenario = tmp_path / "long.toml"
    long = SHORT.format(designs=f'["{design}"]').replace("duration = 9.0", "duration = 60.0")
    assert "duration = 60.0" in long  # SHORT's duration changed: replace its new value
    scenario.write_text(long)
    out = tmp_path / "out"
    with open(tmp_path / "lab.log", "w") as log:
        lab = subprocess.Popen([sys.executable, "-m", "zkconsumer", "lab", "run", str(scenario), "--design", design,
                                "--out", str(out)], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        members = wait_for(lambda: [c for c in our_processes(str(out)) if MEMBER_MODULES[design] in c]
                           if len([c for c in our_processes(str(out)) if MEMBER_MODULES[design] in c]) >= 2 else None,
                           timeout=120, message="the run's members running")
        assert any("java" in c for c in our_processes(str(out))), "the embedded servers should be running"
        os.kill(lab.pid, signal.SIGKILL)
        lab.wait(10)
        # Members leave as on SIGTERM (a few seconds at most); the lifeline stops ZooKeeper and the broker.
        wait_for(lambda: not our_processes(str(out)), timeout=90,
                 message=f"nothing of the killed run left running (members were {len(members)})")
    finally:
        if lab.poll() is None:
            lab.kill()
            lab.wait(10)
