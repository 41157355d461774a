"""The ZooKeeper design in the lab: members are this project's connector, as OS processes (full members that
fetch) or as threads of member hosts (rebalance-only members, for large groups): processes of their own that
run up to `MEMBERS_PER_HOST` members each (`zk_member.MemberHost`), so that the members' kazoo clients and the
counting proxy in the orchestrator's process do not share one GIL.

Every member reaches ZooKeeper through its own link of the counting proxy; the driver itself observes the
group over a direct, uncounted connection (owner snapshots, convergence), and forces real session expiries
with the member's own credentials, which each member reports over its control channel (a process member's stdout,
a host's replies), never in its trace.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rebalance.assignors import get_assignor
from rebalance.convergence import check_convergence
from zkconsumer.lab.drivers.host_process import HOST_STOP_S, STOP_S, HostProcess
from zkconsumer.lab.drivers.interface import LabEnvironment, TraceTail
from zkconsumer.lab.members.zk import SessionChannel, ZkMemberSettings, settings_json
from zkconsumer.lab.rules.protocol import is_conflict, is_failed_attempt
from zkconsumer.zookeeper.client import ZkClient
from zkconsumer.zookeeper.expiry import expire_session
from zkconsumer.zookeeper.group import read_group_snapshot

log = logging.getLogger(__name__)
# Members per host process. At N = 128 on 2 cores, hosts of 32 spent 0.44 ms of CPU per request against 0.57 ms
# for hosts of 64: fewer threads behind each GIL (docs/lab.md, "Large groups").
MEMBERS_PER_HOST = 32
# Python member hosts each run on one core (one GIL): a group of 16 in one host left the second core idle, and its
# time to stable was bounded by that one core's CPU (0.7 ms per request), where the original's JVM spreads its
# members' threads over every core. At least one host per core measures both alike.
MIN_HOSTS = os.cpu_count() or 1
PYTHON = sys.executable  # the interpreter member processes run on (a test may point it at a failing program)
# How long an expiry waits for a member's first session report: it is sent as the member connects, before its first
# rebalance, so a member that has taken part in the group has sent it.
_SESSION_WAIT_S = 10.0


class _ProcessMember:
    is_process = True  # kill -9, pause and resume act on its own process

    def __init__(self, settings: ZkMemberSettings, log_path: Path) -> None:
        self.settings = settings
        self.log_file = open(log_path, "a", encoding="utf-8")  # closed in close()
        # stdin is a pipe the member reads to its end: when this process dies, however, the member leaves. stdout is
        # its control channel (its session credentials), stderr its log.
        self.proc = subprocess.Popen([PYTHON, "-m", "zkconsumer.lab.members.zk", settings_json(settings)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log_file,
                                     text=True, encoding="utf-8")
        self.channel = SessionChannel(self.proc.stdout, settings.name)

    def session(self, timeout: float) -> tuple[int, str] | None:
        return self.channel.session(timeout)

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self, graceful: bool = True) -> None:
        if graceful:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_S)
            except subprocess.TimeoutExpired:
                log.warning("lab member %s did not leave within %.0f s: killing it", self.settings.name, STOP_S)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(STOP_S)
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.channel.join(STOP_S)
        self.log_file.close()

    def error(self) -> str | None:
        if self.proc.poll() is None:
            return None
        return f"exited with code {self.proc.returncode}: see {self.log_file.name}"


class _MemberHost(HostProcess):
    """A member-host process (`python -m zkconsumer.lab.members.zk --host`): JSON-lines commands."""

    def __init__(self, name: str, log_path: Path) -> None:
        level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
        # The log path is on the command line so that a leftover host is found by its results directory.
        super().__init__(name, log_path, [PYTHON, "-m", "zkconsumer.lab.members.zk", "--host", name, level,
                                          str(log_path)])

    def join(self, settings: ZkMemberSettings) -> None:
        self._joining(settings.name, {"op": "join", "settings": json.loads(settings_json(settings))})


class _ThreadMember:
    """A rebalance-only member on a member host."""

    is_process = False

    def __init__(self, host: _MemberHost, settings: ZkMemberSettings) -> None:
        self.host = host
        self.name = settings.name
        host.join(settings)

    def stop(self, graceful: bool = True) -> None:
        self.host.leave(self.name)

    def session(self, timeout: float) -> tuple[int, str] | None:
        return self.host.session(self.name, timeout)

    def error(self) -> str | None:
        failure = self.host.failure(self.name)
        if failure is not None:
            return f"failed to start: {failure}"
        code = self.host.exit_code()
        if code is not None:
            return f"is on {self.host.name}, which exited with code {code}: see {self.host.log_file.name}"
        return None


class ZkDriver:
    design = "zk"
    min_hosts = MIN_HOSTS  # member hosts started before any hosts a second member (threads mode)

    def __init__(self, process_mode: str = "processes", mode_properties: dict[str, str] | None = None) -> None:
        if process_mode not in ("processes", "threads"):
            raise ValueError(f"process_mode must be 'processes' or 'threads', not {process_mode!r}")
        self.process_mode = process_mode
        # An opt-in mode's `zkconsumer.*` properties (zkconsumer/modes.py), over the scenario's [zk] section
        self.mode_properties = dict(mode_properties or {})
        self.env: LabEnvironment | None = None
        self._members: dict[str, Any] = {}  # _ProcessMember | _ThreadMember, or the original design's
        self._paused: set[str] = set()
        self._tails: dict[str, TraceTail] = {}
        self._state: dict[str, dict[str, Any]] = {}  # member -> latest state, session, counts
        self._observer: ZkClient | None = None
        self._hosts: list[Any] = []  # _MemberHost, or the original's JVM hosts
        self._retired_bad_lines = 0  # bad lines the tails of restarted members' earlier incarnations counted
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
            topics={topic: scenario.group.streams for topic in env.topics},
            properties={**scenario.zk, **self.mode_properties}, trace_path=str(trace_path),
            fetch=self.process_mode == "processes", control=True)
        self._refresh()  # fold in what an earlier incarnation of this name wrote: its counts stay in stats()
        with self._lock:
            old = self._members.pop(name, None)
            old_tail = self._tails.pop(name, None)
            # A restart (the restart trap) appends to the same trace file: read only the new incarnation's
            # records, or its predecessor's last `owning` would make the group look settled before it is.
            start = trace_path.stat().st_size if trace_path.exists() else 0
            self._tails[name] = TraceTail(trace_path, keep_open=True, offset=start)
            self._state[name] = {"stats": self._state.get(name, {}).get("stats", {})}
            self._paused.discard(name)
        if old_tail is not None:
            self._retired_bad_lines += old_tail.errors.count
            old_tail.close()
        if old is not None:
            old.stop(graceful=False)
        member = self._new_member(settings)
        with self._lock:
            self._members[name] = member

    def leave(self, name: str) -> None:
        member = self._pop(name)
        if member is not None:
            member.stop(graceful=True)

    def kill(self, name: str) -> None:
        member = self._pop(name)
        if member is not None and member.is_process:
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
        """A real server-side expiry: join the member's session with its credentials (from its control channel) and
        close it."""
        with self._lock:
            member = self._members.get(name)
        if member is None:
            raise ValueError(f"member {name} is not running: cannot expire its session")
        session = member.session(_SESSION_WAIT_S)
        if session is None:
            raise RuntimeError(f"member {name} has not reported its ZooKeeper session yet")
        expire_session(self._env().direct_zookeeper, session[0], bytes.fromhex(session[1]))

    def stop(self) -> None:
        with self._lock:
            members, self._members = dict(self._members), {}
            hosts, self._hosts = list(self._hosts), []
            tails, self._tails = dict(self._tails), {}
        # Process members each stop on their own; thread members all at once with their host.
        stoppers = [threading.Thread(target=m.stop, name=f"lab-stop-{n}", daemon=True)
                    for n, m in members.items() if m.is_process]
        stoppers += [threading.Thread(target=h.stop, name=f"lab-stop-{h.name}", daemon=True) for h in hosts]
        for thread in stoppers:
            thread.start()
        deadline = time.monotonic() + HOST_STOP_S + STOP_S * 3
        for thread in stoppers:
            thread.join(max(0.0, deadline - time.monotonic()))
        for tail in tails.values():
            tail.close()
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
            if (error := member.error()) is not None:
                found[name] = error
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
        members = self.live_members()
        # The members' own states first: they cost nothing, where a snapshot reads every registration and owner.
        if not members or not all(self._state.get(name, {}).get("state") == "owning" for name in members):
            return False
        live = {f"{env.group}_{name}" for name in members}
        snapshot = read_group_snapshot(self._observer, env.group)
        if set(snapshot.registrations) != live:
            return False
        # the members' strategy: a mode may set it (sticky), over the scenario's
        strategy = {**env.case.scenario.zk, **self.mode_properties}.get("partition.assignment.strategy", "range")
        if not check_convergence(snapshot, get_assignor(strategy)).settled:
            return False
        self._refresh()  # still owning after the snapshot: no member started a rebalance while it was read
        return all(self._state.get(name, {}).get("state") == "owning" for name in self.live_members())

    def stable_since(self) -> float | None:
        """When every live member was last set `owning`: the latest `ts` among their state records (the moment the
        last member ended its rebalance, as the member itself wrote it)."""
        self._refresh()
        times = [self._state.get(name, {}).get("since") for name in self.live_members()]
        return max(times) if times and None not in times else None

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
        with self._lock:
            tails = list(self._tails.values())
        # lines of the members' trace files the live tail could not read (a torn last line of a killed member)
        totals["bad_trace_lines"] = self._retired_bad_lines + sum(tail.errors.count for tail in tails)
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
                    state["since"] = record.get("ts")
                elif kind == "rebalance_begin":
                    stats["rebalances"] = stats.get("rebalances", 0) + 1
                elif kind == "attempt_end":
                    stats["attempts"] = stats.get("attempts", 0) + 1
                    if is_failed_attempt(record.get("result")):
                        stats["failed_attempts"] = stats.get("failed_attempts", 0) + 1
                    if is_conflict(record.get("result")):
                        stats["conflicts"] = stats.get("conflicts", 0) + 1
                elif kind == "rebalance_failed":
                    stats["failures"] = stats.get("failures", 0) + 1

    # --- helpers ---------------------------------------------------------------------------------------

    def _env(self) -> LabEnvironment:
        if self.env is None:
            raise RuntimeError("ZkDriver.start(env) first")
        return self.env

    def _new_member(self, settings: ZkMemberSettings) -> Any:
        """A started member: its own process, or a thread of a member host. The original design's driver
        overrides this and `_new_host` (zkconsumer/lab/drivers/original.py); everything else is shared."""
        if self.process_mode == "processes":
            return _ProcessMember(settings, self._env().run.log_path(settings.name))
        return _ThreadMember(self._host_for(), settings)

    def _new_host(self, name: str) -> Any:
        return _MemberHost(name, self._env().run.log_path(name))

    def _host_for(self) -> Any:
        """The least loaded member host with room, or a new one: at least `min_hosts` of them before any takes a
        second member, so that a group uses every core, as one JVM hosting the original's members does."""
        with self._lock:
            live = [h for h in self._hosts if h.exit_code() is None]
            hosts = [h for h in live if len(h.members) < MEMBERS_PER_HOST]
            if hosts and len(live) >= self.min_hosts:
                return min(hosts, key=lambda h: len(h.members))
            host = self._new_host(f"host{len(self._hosts)}")
            self._hosts.append(host)
            return host

    def _pop(self, name: str) -> Any:
        with self._lock:
            self._paused.discard(name)
            return self._members.pop(name, None)

    def _process(self, name: str) -> Any:
        with self._lock:
            member = self._members.get(name)
        if member is None or not member.is_process:
            raise ValueError(f"member {name} is not a running process: pause/resume need process members")
        return member

