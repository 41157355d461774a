"""The ZooKeeper design in the lab: members are this project's connector, as OS processes (full members that
fetch) or as threads in the orchestrator's process (rebalance-only members, for large groups).

Every member reaches ZooKeeper through its own link of the counting proxy; the driver itself observes the
group over a direct, uncounted connection (owner snapshots, convergence), and forces real session expiries
with the member's own credentials.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from rebalance.assignors import get_assignor
from rebalance.convergence import check_convergence
from zkconsumer.lab.driver import LabEnvironment, TraceTail
from zkconsumer.lab.zk_member import ZkMember, ZkMemberSettings, settings_json
from zkconsumer.zookeeper.client import ZkClient
from zkconsumer.zookeeper.group import read_group_snapshot

log = logging.getLogger(__name__)
_STOP_S = 10.0
PYTHON = sys.executable  # the interpreter member processes run on (a test may point it at a failing program)


class _ProcessMember:
    def __init__(self, settings: ZkMemberSettings, log_path: Path) -> None:
        self.settings = settings
        self.log_file = open(log_path, "a", encoding="utf-8")  # closed in close()
        self.proc = subprocess.Popen([PYTHON, "-m", "zkconsumer.lab.zk_member", settings_json(settings)],
                                     stdin=subprocess.DEVNULL, stdout=self.log_file, stderr=subprocess.STDOUT)

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self, graceful: bool = True) -> None:
        if graceful:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(_STOP_S)
            except subprocess.TimeoutExpired:
                log.warning("lab member %s did not leave within %.0f s: killing it", self.settings.name, _STOP_S)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(_STOP_S)
        self.log_file.close()


class _ThreadMember:
    def __init__(self, member: ZkMember) -> None:
        self.member = member
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._start, name=f"lab-{member.settings.name}-start", daemon=True)
        self.thread.start()

    def _start(self) -> None:
        try:
            self.member.start()
        except BaseException as exc:  # reported by the driver; the member stays in the group and retries
            self.error = exc
            log.warning("lab member %s: first rebalance failed: %s", self.member.settings.name, exc)

    def stop(self, graceful: bool = True) -> None:
        self.member.stop()
        self.thread.join(_STOP_S)


class ZkDriver:
    design = "zk"

    def __init__(self, process_mode: str = "processes") -> None:
        if process_mode not in ("processes", "threads"):
            raise ValueError(f"process_mode must be 'processes' or 'threads', not {process_mode!r}")
        self.process_mode = process_mode
        self.env: LabEnvironment | None = None
        self._members: dict[str, _ProcessMember | _ThreadMember] = {}
        self._paused: set[str] = set()
        self._tails: dict[str, TraceTail] = {}
        self._state: dict[str, dict[str, Any]] = {}  # member -> latest state, session, counts
        self._observer: ZkClient | None = None
        self._lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------------------

    def start(self, env: LabEnvironment) -> None:
        self.env = env
        self._observer = ZkClient(env.direct_zookeeper, session_timeout_ms=10000, log_id="lab-observer").start()

    def join(self, name: str) -> None:
        env = self._env()
        scenario = env.case.scenario
        trace_path = env.run.path / "traces" / f"{name}.jsonl"
        settings = ZkMemberSettings(
            name=name, group=env.group, zookeeper_connect=env.zookeeper_connect(name),
            topics={topic: scenario.group.streams for topic in env.topics}, properties=dict(scenario.zk),
            trace_path=str(trace_path), fetch=self.process_mode == "processes")
        with self._lock:
            old = self._members.pop(name, None)
            self._tails[name] = TraceTail(trace_path)
            self._state[name] = {}
            self._paused.discard(name)
        if old is not None:
            old.stop(graceful=False)
        if self.process_mode == "processes":
            member: _ProcessMember | _ThreadMember = _ProcessMember(settings, env.run.log_path(name))
        else:
            member = _ThreadMember(ZkMember(settings, env.run.trace(name, "zk")))
        with self._lock:
            self._members[name] = member

    def leave(self, name: str) -> None:
        member = self._pop(name)
        if member is not None:
            member.stop(graceful=True)

    def kill(self, name: str) -> None:
        member = self._pop(name)
        if isinstance(member, _ProcessMember):
            member.stop(graceful=False)
        elif member is not None:
            raise ValueError(f"member {name} is a thread: kill -9 needs process members")

    def pause(self, name: str) -> None:
        self._process(name).signal(signal.SIGSTOP)
        with self._lock:
            self._paused.add(name)

    def resume(self, name: str) -> None:
        self._process(name).signal(signal.SIGCONT)
        with self._lock:
            self._paused.discard(name)

    def expire(self, name: str) -> None:
        """A real server-side expiry: join the member's session with its credentials and close it."""
        self._refresh()
        session = self._state.get(name, {}).get("session")
        if session is None:
            raise RuntimeError(f"member {name} has not reported its ZooKeeper session yet")
        intruder = KazooClient(hosts=self._env().direct_zookeeper, client_id=(session[0], bytes.fromhex(session[1])),
                               connection_retry={"max_tries": -1, "delay": 0.05, "backoff": 1.5, "max_delay": 0.5})
        intruder.start(timeout=10)
        intruder.stop()
        intruder.close()

    def stop(self) -> None:
        with self._lock:
            members, self._members = dict(self._members), {}
        stoppers = [threading.Thread(target=m.stop, name=f"lab-stop-{n}", daemon=True) for n, m in members.items()]
        for thread in stoppers:
            thread.start()
        for thread in stoppers:
            thread.join(_STOP_S * 2)
        if self._observer is not None:
            self._observer.close()
            self._observer = None

    # --- observation ---------------------------------------------------------------------------------

    def failed(self) -> dict[str, str]:
        """Members that ended on their own (crashed at start, exited with an error), with where to look."""
        found = {}
        with self._lock:
            members = dict(self._members)
        for name, member in members.items():
            if isinstance(member, _ProcessMember) and member.proc.poll() is not None:
                found[name] = f"exited with code {member.proc.returncode}: see {member.log_file.name}"
            elif isinstance(member, _ThreadMember) and member.error is not None:
                found[name] = f"failed to start: {member.error}"
        return found

    def live_members(self) -> list[str]:
        with self._lock:
            return sorted(n for n in self._members if n not in self._paused)

    def stable(self) -> bool:
        """Registrations are exactly the live members, the owners are what the strategy prescribes for them,
        and every live member's last state is `owning`."""
        env = self._env()
        assert self._observer is not None
        self._refresh()
        live = {f"{env.group}_{name}" for name in self.live_members()}
        snapshot = read_group_snapshot(self._observer, env.group)
        if set(snapshot.registrations) != live or not live:
            return False
        strategy = env.case.scenario.zk.get("partition.assignment.strategy", "range")
        if not check_convergence(snapshot, get_assignor(strategy)).settled:
            return False
        return all(self._state.get(name, {}).get("state") == "owning" for name in self.live_members())

    def owners(self) -> dict[str, str]:
        assert self._observer is not None
        snapshot = read_group_snapshot(self._observer, self._env().group)
        return {f"{tp.topic}/{tp.partition}": owner for tp, owner in sorted(snapshot.owners.items())}

    def stats(self) -> dict[str, Any]:
        self._refresh()
        totals: dict[str, int] = {}
        for state in self._state.values():
            for key, value in state.get("stats", {}).items():
                totals[key] = totals.get(key, 0) + value
        return totals

    def _refresh(self) -> None:
        """Fold the members' new trace records into their latest state and running counts."""
        with self._lock:
            tails = dict(self._tails)
        for name, tail in tails.items():
            state = self._state.setdefault(name, {})
            stats = state.setdefault("stats", {})
            for record in tail.poll():
                kind = record.get("kind")
                if kind == "state":
                    state["state"] = record.get("state")
                elif kind == "session":
                    state["session"] = (record["session"], record["password"])
                elif kind == "rebalance_begin":
                    stats["rebalances"] = stats.get("rebalances", 0) + 1
                elif kind == "attempt_end":
                    stats["attempts"] = stats.get("attempts", 0) + 1
                    if record.get("result") not in ("ok", "no_brokers"):
                        stats["failed_attempts"] = stats.get("failed_attempts", 0) + 1
                    if record.get("result") == "conflict":
                        stats["conflicts"] = stats.get("conflicts", 0) + 1
                elif kind == "rebalance_failed":
                    stats["failures"] = stats.get("failures", 0) + 1

    # --- helpers ---------------------------------------------------------------------------------------

    def _env(self) -> LabEnvironment:
        if self.env is None:
            raise RuntimeError("ZkDriver.start(env) first")
        return self.env

    def _pop(self, name: str) -> _ProcessMember | _ThreadMember | None:
        with self._lock:
            self._paused.discard(name)
            return self._members.pop(name, None)

    def _process(self, name: str) -> _ProcessMember:
        with self._lock:
            member = self._members.get(name)
        if not isinstance(member, _ProcessMember):
            raise ValueError(f"member {name} is not a running process: pause/resume need process members")
        return member

