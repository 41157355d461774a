"""A ZooKeeper-design member's session credentials reach its driver over the member's control channel only: a member
process's stdout (`zk_member.SessionChannel`), a member host's replies (`HostProcess.session`). Anything else the
process prints goes to its log (stderr), never onto the channel."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from zkconsumer.lab.drivers.host_process import HostProcess
from zkconsumer.lab.members.zk import SessionChannel, session_message

pytestmark = pytest.mark.slow

MEMBER = """
from zkconsumer.lab.members.zk import _control_channel
send = _control_channel()
print("a library printing on stdout")
send(0x1234, bytes(range(16)))
send(0x5678, bytes(16))
"""


def test_a_member_process_sends_its_credentials_on_stdout_and_prints_elsewhere(tmp_path: Path) -> None:
    log = tmp_path / "m1.log"
    with open(log, "w", encoding="utf-8") as log_file:
        proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(MEMBER)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=log_file, text=True, encoding="utf-8")
        channel = SessionChannel(proc.stdout, "m1")
        try:
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        channel.join(10)
    assert channel.session() == (0x5678, "00" * 16)  # the latest report
    assert "a library printing on stdout" in log.read_text() and bytes(range(16)).hex() not in log.read_text()


def test_a_member_host_reply_carries_its_members_credentials(tmp_path: Path) -> None:
    reply = session_message(0x42, b"\x07" * 16, "m3")
    script = f"import json, sys; print(json.dumps({reply!r})); sys.stdout.flush(); sys.stdin.readline()"
    host = HostProcess("host0", tmp_path / "host0.log", [sys.executable, "-c", script])
    try:
        assert host.session("m3", timeout=30) == (0x42, "07" * 16)
        assert host.session("m4") is None
    finally:
        host.stop()
