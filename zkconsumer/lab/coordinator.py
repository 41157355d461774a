"""The coordinator design in the lab: kafka-python consumers in one group, balanced by the broker's group
coordinator (`GroupCoordinator`), as OS processes (default: kill -9 and SIGSTOP need them) or as threads.

Every member reaches the broker only through the Kafka counting proxy (`env.bootstrap`, which the broker's
`MEMBERS` listener advertises) with its name as client_id, so the proxy counts and delays it per member.
Members report through their own trace files (`generation`, `assignment`, `consume` records, see
`coordinator_member`); the driver follows those files and decides stability from them alone, the same way for
both process modes.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zkconsumer.embedded.process import wait_or_kill
from zkconsumer.lab.coordinator_member import CLOSE_TIMEOUT_MS, CoordinatorMember, CoordinatorMemberSettings
from zkconsumer.lab.driver import LabEnvironment, TraceTail

log = logging.getLogger(__name__)
PROCESS_MODES = ("processes", "threads")
_KILL_WAIT_S = 10.0


@dataclass
class MemberView:
    """What the driver knows of one member name, folded from its trace file (all its incarnations)."""

    name: str
    tail: TraceTail
    incarnation: int = 0
    current: tuple[int, frozenset[str]] | None = None  # (generation, partitions) of the live assignment
    current_since: float | None = None  # the `ts` of the record that made it current
    generations: list[int] = field(default_factory=list)  # of every assignment, in order
    revoked: int = 0
    lost: int = 0
    consumed: int = 0
    exit_codes: list[int | None] = field(default_factory=list)

    def fold(self, record: dict[str, Any]) -> None:
        # Lines of an earlier incarnation can only precede the new one's, but a killed member's last
        # assignment must never count as the restarted member's.
        if record.get("incarnation", self.incarnation) != self.incarnation:
            return
        kind = record.get("kind")
        if record.get("type") == "generation":
            if kind == "assigned":
                self.current = (int(record["generation"]), frozenset(record.get("partitions", ())))
                self.current_since = record.get("ts")
                self.generations.append(int(record["generation"]))
            elif kind in ("revoked", "lost"):
                self.current = None
                if kind == "revoked":
                    self.revoked += 1
                else:
                    self.lost += 1
        elif record.get("type") == "consume":
            self.consumed += int(record.get("count", 0))


class _ProcessMember:
    def __init__(self, settings: CoordinatorMemberSettings, log_path: Path) -> None:
        self.name = settings.name
        self.settle_bound_s = settings.settle_bound_s
        self.log_file = open(log_path, "a", encoding="utf-8")  # closed in wait()
        # A session of its own: a Ctrl-C in the orchestrator's terminal is the driver's to handle. stdin is a
        # lifeline: if the driver dies, the member sees its end and leaves.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zkconsumer.lab.coordinator_member", settings.to_json()],
            stdin=subprocess.PIPE, stdout=self.log_file, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive:
            os.kill(self.proc.pid, sig)

    def request_stop(self) -> None:
        self.signal(signal.SIGCONT)  # a paused member cannot leave
        self.signal(signal.SIGTERM)
        self._close_stdin()

    def wait(self, timeout: float) -> int | None:
        """Wait for the exit; SIGKILL on timeout. Returns the exit code."""
        wait_or_kill(self.proc, timeout, f"lab member {self.name}", _KILL_WAIT_S)
        self._close_stdin()
        self.log_file.close()
        return self.proc.returncode

    def stop(self) -> int | None:
        self.request_stop()
        return self.wait(self.settle_bound_s + CLOSE_TIMEOUT_MS / 1000 + 10)

    def kill(self) -> int | None:
        self.signal(signal.SIGKILL)
        return self.wait(_KILL_WAIT_S)

    def _close_stdin(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass


class _ThreadMember:
    def __init__(self, member: CoordinatorMember) -> None:
        self.name = member.name
        self.member = member
        member.start()

    @property
    def alive(self) -> bool:
        return self.member.alive

    def request_stop(self) -> None:
        self.member.request_stop()

    def wait(self, timeout: float) -> int | None:
        if not self.member.join(timeout):
            log.warning("lab member %s (thread) did not stop within %.0f s", self.name, timeout)
        self.member.trace.close()
        return None if self.member.alive else (1 if self.member.error else 0)

    def stop(self) -> int | None:
        self.request_stop()
        return self.wait(self.member.settings.settle_bound_s + CLOSE_TIMEOUT_MS / 1000 + 10)


class CoordinatorDriver:
    """`DesignDriver` for the broker-side group coordinator (see the module docstring)."""

    design = "coordinator"

    def __init__(self, process_mode: str = "processes") -> None:
        if process_mode not in PROCESS_MODES:
            raise ValueError(f"process_mode must be 'processes' or 'threads', not {process_mode!r}")
        self.process_mode = process_mode
        self.env: LabEnvironment | None = None
        self._members: dict[str, _ProcessMember | _ThreadMember] = {}
        self._paused: set[str] = set()
        self._views: dict[str, MemberView] = {}
        self._actions: dict[str, int] = {}
        self._lock = threading.RLock()

    # --- lifecycle -------------------------------------------------------------------------------------

    def start(self, env: LabEnvironment) -> None:
        self.env = env

    def join(self, name: str) -> None:
        env = self._env()
        with self._lock:
            old = self._members.pop(name, None)
            self._paused.discard(name)
        if old is not None:
            log.warning("lab member %s is still running: killing it before starting it again", name)
            self._record_exit(name, old.stop() if isinstance(old, _ThreadMember) else old.kill())
        with self._lock:
            view = self._views.get(name)
            if view is None:
                view = self._views[name] = MemberView(name, TraceTail(env.run.path / "traces" / f"{name}.jsonl"))
            self._fold(view)  # the earlier incarnation's last lines, before its state is dropped
            view.incarnation += 1
            view.current = None
            settings = self._settings(name, view.incarnation)
            if self.process_mode == "processes":
                member: _ProcessMember | _ThreadMember = _ProcessMember(settings, env.run.log_path(name))
            else:
                trace = env.run.trace(name, "coordinator", pid=os.getpid(), incarnation=view.incarnation)
                member = _ThreadMember(CoordinatorMember(settings, trace))
            self._members[name] = member
            self._count("joins")
        log.info("lab member %s: started (%s, incarnation %d)", name, self.process_mode, view.incarnation)

    def leave(self, name: str) -> None:
        member = self._pop(name, "leaves")
        if member is not None:
            self._record_exit(name, member.stop())

    def kill(self, name: str) -> None:
        self._process(name, "kill -9")
        member = self._pop(name, "kills")
        if isinstance(member, _ProcessMember):
            self._record_exit(name, member.kill())

    def pause(self, name: str) -> None:
        self._process(name, "pause (SIGSTOP)").signal(signal.SIGSTOP)
        with self._lock:
            self._paused.add(name)
            self._count("pauses")

    def resume(self, name: str) -> None:
        self._process(name, "resume (SIGCONT)").signal(signal.SIGCONT)
        with self._lock:
            self._paused.discard(name)
            self._count("resumes")

    def expire(self, name: str) -> None:
        raise NotImplementedError(
            f"cannot expire {name}: the coordinator design has no ZooKeeper session. A member's group session "
            "ends when its heartbeats stop: use kill, or pause for longer than coordinator.session_timeout_ms")

    def stop(self) -> None:
        """Every member leaves at once (in parallel); stragglers are killed; nothing is left running."""
        with self._lock:
            members, self._members = dict(self._members), {}
            self._paused.clear()
        for member in members.values():
            member.request_stop()
        stoppers = [threading.Thread(target=lambda n=n, m=m: self._record_exit(n, m.stop()),
                                     name=f"lab-stop-{n}", daemon=True) for n, m in members.items()]
        for thread in stoppers:
            thread.start()
        for thread in stoppers:
            thread.join()

    # --- observation ---------------------------------------------------------------------------------

    def live_members(self) -> list[str]:
        with self._lock:
            return sorted(n for n, m in self._members.items() if n not in self._paused and m.alive)

    def stable(self) -> bool:
        """Every live member's latest assignment is of one generation, and those assignments partition every
        partition of `env.topics` (disjoint, complete). A group with no live member is trivially stable."""
        return self.assignment() is not None

    def stable_since(self) -> float | None:
        """When the live members' current assignments were all in place: the latest `ts` among the records that
        made them current (the last member to receive its part of the generation)."""
        with self._lock:
            self._refresh()
            times = [self._views[n].current_since for n in self.live_members() if n in self._views]
        return max(times) if times and None not in times else None

    def assignment(self) -> dict[str, list[str]] | None:
        """The live members' partitions when the group is stable, else None."""
        expected = {f"{topic}/{p}" for topic, count in self._env().topics.items() for p in range(count)}
        with self._lock:
            self._refresh()
            current = {name: self._views[name].current for name in self.live_members() if name in self._views}
        if any(state is None for state in current.values()):
            return None
        states = [state for state in current.values() if state is not None]
        if len({generation for generation, _ in states}) > 1:
            return None
        owned = [p for _, partitions in states for p in partitions]
        if states and (len(owned) != len(set(owned)) or set(owned) != expected):
            return None
        return {name: sorted(state[1]) for name, state in current.items() if state is not None}

    def generation(self) -> int | None:
        """The generation the live members agree on now (None when they do not, or there are none)."""
        with self._lock:
            self._refresh()
            states = [self._views[n].current if n in self._views else None for n in self.live_members()]
        generations = {state[0] for state in states if state is not None}
        return generations.pop() if len(generations) == 1 and None not in states else None

    def stats(self) -> dict[str, Any]:
        with self._lock:
            self._refresh()
            views = dict(self._views)
            actions = dict(self._actions)
        generations = sorted({g for view in views.values() for g in view.generations})
        per_member = {name: len(view.generations) for name, view in sorted(views.items())}
        return {
            "design": self.design,
            "process_mode": self.process_mode,
            "members": sorted(views),
            "generations": generations,
            "generation_count": len(generations),
            "max_generation": max(generations, default=None),
            "rebalances": sum(per_member.values()),  # assignments received, over all members
            "rebalances_per_member": per_member,
            "revoked_per_member": {name: view.revoked for name, view in sorted(views.items())},
            "lost_per_member": {name: view.lost for name, view in sorted(views.items()) if view.lost},
            "incarnations": {name: view.incarnation for name, view in sorted(views.items())},
            "consumed": sum(view.consumed for view in views.values()),
            "consumed_per_member": {name: view.consumed for name, view in sorted(views.items())},
            "exit_codes": {name: view.exit_codes for name, view in sorted(views.items()) if view.exit_codes},
            # lines of the members' trace files the live tail could not read (a torn last line of a killed member)
            "bad_trace_lines": sum(view.tail.errors.count for view in views.values()),
            **actions,
        }

    # --- helpers ---------------------------------------------------------------------------------------

    def _settings(self, name: str, incarnation: int) -> CoordinatorMemberSettings:
        env = self._env()
        c = env.case.scenario.coordinator
        return CoordinatorMemberSettings(
            name=name, group=env.group, topics=sorted(env.topics), bootstrap=env.bootstrap,
            run_path=str(env.run.path), session_timeout_ms=c.session_timeout_ms,
            heartbeat_interval_ms=c.heartbeat_interval_ms, max_poll_interval_ms=c.max_poll_interval_ms,
            assignor=c.assignor, metadata_max_age_ms=c.metadata_max_age_ms, incarnation=incarnation,
            log_level=env.log_level, enable_auto_commit=env.case.scenario.coordinator_auto_commit,
            auto_commit_interval_ms=env.case.scenario.coordinator_commit_interval_ms)

    def _refresh(self) -> None:
        for view in self._views.values():
            self._fold(view)

    @staticmethod
    def _fold(view: MemberView) -> None:
        for record in view.tail.poll():
            view.fold(record)

    def _record_exit(self, name: str, code: int | None) -> None:
        with self._lock:
            if name in self._views:
                self._views[name].exit_codes.append(code)

    def _count(self, action: str) -> None:
        self._actions[action] = self._actions.get(action, 0) + 1

    def _env(self) -> LabEnvironment:
        if self.env is None:
            raise RuntimeError("CoordinatorDriver.start(env) first")
        return self.env

    def _pop(self, name: str, action: str) -> _ProcessMember | _ThreadMember | None:
        with self._lock:
            self._paused.discard(name)
            member = self._members.pop(name, None)
            if member is not None:
                self._count(action)
            return member

    def _process(self, name: str, what: str) -> _ProcessMember:
        with self._lock:
            member = self._members.get(name)
        if member is None:
            raise ValueError(f"member {name} is not running: cannot {what} it")
        if not isinstance(member, _ProcessMember):
            raise NotImplementedError(f"{what} signals the member's own process: member {name} is a thread "
                                      "(run with process_mode='processes')")
        return member
