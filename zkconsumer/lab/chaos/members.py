"""The campaign's group: consumer processes (`python -m zkconsumer.lab.members.zk`, this project's connector with
fetchers), started, killed, paused, resumed and expired by name, and watched.

The orchestrator's view of them goes into the history: a `live` record whenever the set of member processes changes
(paused ones count as live: the process exists), and a `member_exit` record for every process that ended, with
`expected` true only when the nemesis killed it or the campaign stopped it. A member that ends on its own is what
invariant 6 looks for (docs/chaos.md).

A member's life here:

    absent ──start──▶ running ──pause──▶ paused ──resume──▶ running
                        │  ╰──kill (SIGKILL, expected)──▶ absent ──start (same name: same consumer id)──▶ ...
                        ╰──exits on its own (unexpected) / stop_all (expected) ──▶ absent
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from zkconsumer.embedded.process import wait_or_kill
from zkconsumer.lab.members.zk import SessionChannel, ZkMemberSettings, settings_json
from zkconsumer.lab.trace import TraceWriter
from zkconsumer.zookeeper.expiry import expire_session

log = logging.getLogger(__name__)

WATCH_S = 0.2  # how often the watcher looks for member processes that ended
STOP_S = 15.0  # a graceful leave: the member commits, releases and closes its session


@dataclass
class _Member:
    name: str
    proc: subprocess.Popen
    log_file: IO[str]
    trace: Path
    paused: bool = False
    expected_exit: bool = False
    leaving: bool = False  # asked to leave gracefully: it must then end with code 0
    # its stdout: the session credentials a forced expiry needs, which never go into the (shared) history
    channel: SessionChannel | None = None


class ChaosMembers:
    """The member processes of one campaign, by name. Thread-safe; `watcher` is a named thread stopped by
    `stop_all()`."""

    def __init__(self, trace: TraceWriter, settings: Callable[[str], ZkMemberSettings], log_dir: Path,
                 direct_zookeeper: str) -> None:
        self.trace = trace
        self._settings = settings
        self._log_dir = log_dir
        self._direct_zookeeper = direct_zookeeper
        self._members: dict[str, _Member] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="chaos-members-watcher", daemon=True)
        self._watcher.start()

    # --- the group -------------------------------------------------------------------------------------

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._members)

    def running(self) -> list[str]:
        """Members whose process exists and is not paused."""
        with self._lock:
            return sorted(n for n, m in self._members.items() if not m.paused)

    def start(self, name: str) -> None:
        self._reap()
        settings = replace(self._settings(name), control=True)
        path = Path(settings.trace_path)
        log_file = open(self._log_dir / f"{name}.log", "a", encoding="utf-8")  # closed when the member ends
        # stdout is the member's control channel (its session credentials), stderr its log
        proc = subprocess.Popen([sys.executable, "-m", "zkconsumer.lab.members.zk", settings_json(settings)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file, text=True,
                                encoding="utf-8")
        with self._lock:
            if name in self._members:
                raise ValueError(f"member {name} is already running")
            # a restart has a new process, so a new channel: an earlier life's session is never reported
            self._members[name] = _Member(name, proc, log_file, path, channel=SessionChannel(proc.stdout, name))
        self._write_live()

    def kill(self, name: str) -> int:
        """kill -9; returns the pid. The watcher writes its `member_exit` (expected)."""
        member = self._get(name)
        member.expected_exit = True
        member.proc.send_signal(signal.SIGKILL)
        member.proc.wait(STOP_S)
        self._reap()  # its member_exit and the new `live` before anything else happens
        return member.proc.pid

    def pause(self, name: str) -> int:
        member = self._get(name)
        member.proc.send_signal(signal.SIGSTOP)
        member.paused = True
        return member.proc.pid

    def resume(self, name: str) -> None:
        member = self._get(name)
        member.proc.send_signal(signal.SIGCONT)
        member.paused = False

    def session(self, name: str) -> tuple[int, str] | None:
        """The member's current ZooKeeper session (id, password hex), as it last reported it on its control
        channel; None before its first report."""
        member = self._get(name)
        assert member.channel is not None
        return member.channel.session()

    def expire(self, name: str) -> int:
        """A real server-side expiry of the member's session; returns the session id."""
        session = self.session(name)
        if session is None:
            raise RuntimeError(f"member {name} has not written its ZooKeeper session yet")
        expire_session(self._direct_zookeeper, session[0], bytes.fromhex(session[1]))
        return session[0]

    def stop_all(self) -> None:
        """Every member leaves (SIGTERM, then SIGKILL after STOP_S); then the watcher stops."""
        with self._lock:
            members = list(self._members.values())
        for member in members:
            member.expected_exit = member.leaving = True
            if member.proc.poll() is None:
                member.proc.send_signal(signal.SIGCONT)
                member.proc.send_signal(signal.SIGTERM)
        for member in members:
            wait_or_kill(member.proc, STOP_S, f"chaos member {member.name}", STOP_S)
        self._reap()
        self._stop.set()
        self._watcher.join(5)

    # --- watching --------------------------------------------------------------------------------------

    def _get(self, name: str) -> _Member:
        with self._lock:
            member = self._members.get(name)
        if member is None or member.proc.poll() is not None:
            raise ValueError(f"member {name} is not running")
        return member

    def _write_live(self) -> None:
        self.trace.write("live", members=self.names())

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_S):
            self._reap()

    def _reap(self) -> None:
        ended = []
        with self._lock:
            for name, member in list(self._members.items()):
                if member.proc.poll() is not None:
                    ended.append(self._members.pop(name))
        for member in ended:
            code = member.proc.returncode
            # never null: a record with a null required field is a bad line to every reader (trace.bad_record)
            self.trace.write("member_exit", member=member.name, pid=member.proc.pid, code=code,
                             signal=-code if code < 0 else 0, expected=member.expected_exit, graceful=member.leaving)
            if not member.expected_exit:
                log.warning("chaos: member %s ended on its own (code %s): see %s", member.name, code,
                            member.log_file.name)
            if member.proc.stdin is not None:
                member.proc.stdin.close()
            if member.channel is not None:
                member.channel.join(STOP_S)  # its reader ends at the channel's end, which the exit closed
            member.log_file.close()
        if ended:
            self._write_live()

