"""The orchestrator's side of a process that hosts lab members: one command per stdin line, one JSON reply per
stdout line. The ZooKeeper design's member hosts (`zk_driver`, running `zk_member --host`) and the original
design's JVMs (`original_driver`) are both driven through it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
STOP_S = 10.0  # how long a member process, or a host's exit after its members left, may take
HOST_STOP_S = 30.0


class HostProcess:
    """A process hosting lab members, driven by one command per stdin line and replying one JSON object per stdout
    line (`failed`, `left`, `stopped`): ours (`_MemberHost`) and the original's JVM (`original_driver._Jvm`).
    Subclasses say how a command is written (`_encode`). The end of its stdin (the lab gone, even by kill -9)
    makes the host stop its members, so it cannot outlive the lab."""

    stop_wait_s = HOST_STOP_S  # how long its members may take to leave at `stop`

    def __init__(self, name: str, log_path: Path, argv: list[str], **popen: Any) -> None:
        self.name = name
        self.members: set[str] = set()  # hosted and not left
        self.failures: dict[str, str] = {}
        self._lock = threading.Lock()
        # Each member's latest session credentials, from its `session` replies (a forced expiry needs them; they
        # travel only here, never in a trace or a log).
        self._sessions: dict[str, tuple[int, str]] = {}
        self._session_reported = threading.Condition(self._lock)
        self._write_lock = threading.Lock()
        self._left: dict[str, threading.Event] = {}
        self._stopped = threading.Event()
        self.log_file = open(log_path, "a", encoding="utf-8")  # closed in stop()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log_file,
                                     text=True, encoding="utf-8", bufsize=1, **popen)
        self._reader = threading.Thread(target=self._read, name=f"lab-{name}-replies", daemon=True)
        self._reader.start()

    def _encode(self, command: dict[str, Any]) -> str:
        return json.dumps(command, separators=(",", ":"))

    def _joining(self, name: str, command: dict[str, Any]) -> None:
        with self._lock:
            self.members.add(name)
            self.failures.pop(name, None)
            self._sessions.pop(name, None)  # a restart's session is its own
        self._send(command)

    def leave(self, name: str) -> None:
        """Stop member `name` gracefully and wait until it has left."""
        left = threading.Event()
        with self._lock:
            self.members.discard(name)
            self._left[name] = left
        if self._send({"op": "leave", "name": name}) and not left.wait(STOP_S * 2):
            log.warning("lab member %s (on %s) did not leave within %.0f s", name, self.name, STOP_S * 2)

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def session(self, name: str, timeout: float = 0.0) -> tuple[int, str] | None:
        """(session id, password hex) member `name` last reported; waits up to `timeout` for a first report."""
        with self._session_reported:
            self._session_reported.wait_for(lambda: name in self._sessions, timeout)
            return self._sessions.get(name)

    def failure(self, name: str) -> str | None:
        """Why member `name` failed to start on this host, as the host replied; None if it has not."""
        with self._lock:
            return self.failures.get(name)

    def exit_code(self) -> int | None:
        return self.proc.poll()

    def stop(self) -> None:
        """Every member leaves (in parallel, inside the host), then the host ends; killed if it does not."""
        if self._send({"op": "stop"}):
            self._stopped.wait(self.stop_wait_s)
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        self._wait_or_kill()

    def _wait_or_kill(self) -> None:
        try:
            self.proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            log.warning("lab member host %s did not end: killing it", self.name)
            self.proc.kill()
            self.proc.wait(STOP_S)
        self._reader.join(STOP_S)
        self.log_file.close()

    def _send(self, command: dict[str, Any]) -> bool:
        try:
            with self._write_lock:  # not _lock: the reply reader must never wait behind a full pipe
                self.proc.stdin.write(self._encode(command) + "\n")  # type: ignore[union-attr]
                self.proc.stdin.flush()  # type: ignore[union-attr]
            return True
        except (OSError, ValueError):  # the host is gone: failed() reports it
            return False

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            try:
                reply = json.loads(line)
            except json.JSONDecodeError:
                continue
            name, event = reply.get("name"), reply.get("event")
            with self._lock:
                if event == "failed":
                    self.failures[name] = reply.get("error", "")
                elif event == "left" and name in self._left:
                    self._left.pop(name).set()
                elif event == "session":
                    self._sessions[name] = (int(reply["session"]), str(reply["password"]))
                    self._session_reported.notify_all()
            if event == "stopped":
                self._stopped.set()
        with self._lock:
            for left in self._left.values():
                left.set()
        self._stopped.set()
