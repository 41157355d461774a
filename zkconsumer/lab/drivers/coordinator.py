"""The broker-side designs in the lab: consumers in one group, balanced by the broker's group coordinator, as OS
processes (default: kill -9 and SIGSTOP need them) or as threads. One driver runs one kind of member, chosen once
(`MemberKind`):

    MemberKind.EAGER        design "coordinator": kafka-python consumers, the classic protocol with an eager
                            assignor (`coordinator_member`)
    MemberKind.COOPERATIVE  design "cooperative": librdkafka consumers, the classic protocol with cooperative-sticky
                            (KIP-429) (`librdkafka_member`)
    MemberKind.CONSUMER     design "consumer": librdkafka consumers, the consumer group protocol (KIP-848)
    MemberKind.CONSUMER_JAVA  design "consumer-java": Kafka's own Java consumer (kafka-clients 4.x), the consumer
                            group protocol, each in a JVM a wrapper process starts (`java_member`); processes only

Every member reaches the broker only through the Kafka counting proxy (`env.bootstrap`, which the broker's
`MEMBERS` listener advertises) with its name as client id, so the proxy counts and delays it per member.
Members report through their own trace files (`generation`, `assignment`, `consume` records, the same for every
kind); the driver follows those files and decides stability from them alone, the same way for both process modes.
An eager member's records carry the group's generation and each revoke takes everything; a librdkafka member's
carry no generation (`generation: null`, `round` instead) and each revoke names what `remaining` the member keeps;
a Java member's carry its own member epoch, which differs between members by design.

A Java member is two processes, its wrapper and the wrapper's JVM (in a session of its own). The wrapper is the
member the driver starts, stops (SIGTERM: the JVM's graceful close) and waits for; kill -9, SIGSTOP and SIGCONT go to
the JVM first, whose pid the wrapper writes to `java_member.jvm_pid_path`: a kill must end the consumer without the
leave the JVM sends when its wrapper goes, and a pause must stop its heartbeats.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from zkconsumer.embedded.process import wait_or_kill
from zkconsumer.errors import InputError
from zkconsumer.lab.designs import DESIGNS, canonical, missing_client
from zkconsumer.lab.drivers.interface import LabEnvironment, TraceTail
from zkconsumer.lab.members.coordinator import CLOSE_TIMEOUT_MS, CoordinatorMember, CoordinatorMemberSettings
from zkconsumer.lab.trace import TraceWriter

if TYPE_CHECKING:
    # Imported where used: one needs confluent-kafka, the other a JDK, which the eager design does not.
    from zkconsumer.lab.members.java import JavaMemberSettings
    from zkconsumer.lab.members.librdkafka import LibrdkafkaMemberSettings

log = logging.getLogger(__name__)
PROCESS_MODES = ("processes", "threads")
_KILL_WAIT_S = 10.0
# The signals a Java member's JVM receives too, before its wrapper (module docstring).
_JVM_SIGNALS = (signal.SIGKILL, signal.SIGSTOP, signal.SIGCONT)


class MemberKind(Enum):
    """Which client a driver's members run, and so which group protocol; the value is the design's name."""

    EAGER = "coordinator"
    COOPERATIVE = "cooperative"
    CONSUMER = "consumer"
    CONSUMER_JAVA = "consumer-java"

    @classmethod
    def for_design(cls, design: str) -> MemberKind:
        """The kind that runs `design` (`eager` is the coordinator design's other name)."""
        try:
            return cls(canonical(design))
        except ValueError:
            choices = ", ".join(kind.value for kind in cls)
            zookeeper = [d for d in DESIGNS if d not in {kind.value for kind in cls}]
            raise ValueError(f"no broker-side design {design!r}: one of {choices} (eager = coordinator); "
                             f"{', '.join(zookeeper)} run on their own drivers") from None

    @property
    def design(self) -> str:
        return self.value

    @property
    def module(self) -> str:
        """The member's process entry point (`python -m MODULE SETTINGS_JSON`)."""
        return {MemberKind.EAGER: "zkconsumer.lab.members.coordinator",
                MemberKind.CONSUMER_JAVA: "zkconsumer.lab.members.java"}.get(self, "zkconsumer.lab.members.librdkafka")

    @property
    def has_generations(self) -> bool:
        """Whether members report one generation the whole group shares (kafka-python does; confluent-kafka
        exposes none; a Java member's records carry the member epoch of its last listener call, and a member whose
        partitions do not change moves to the new epoch without one, so a stable group's records need not agree)."""
        return self is MemberKind.EAGER


@dataclass
class MemberView:
    """What the driver knows of one member name, folded from its trace file (all its incarnations)."""

    name: str
    tail: TraceTail
    incarnation: int = 0
    # (generation, partitions) of the live assignment; the generation is None for a member that reports none
    current: tuple[int | None, frozenset[str]] | None = None
    current_since: float | None = None  # the `ts` of the record that made it current
    # Between a partial revoke or a loss (a record with `remaining`) and the assign that follows it: the member
    # still owns `current` but is in the middle of a rebalance round.
    pending: bool = False
    generations: list[int] = field(default_factory=list)  # of every assignment that had one, in order
    assignments: int = 0  # `assigned` records, over all incarnations
    rounds: dict[int, int] = field(default_factory=dict)  # incarnation -> its latest `round`
    revoked: int = 0
    lost: int = 0
    consumed: int = 0
    exit_codes: list[int | None] = field(default_factory=list)
    # (stage, error) of the live incarnation's own `failed` record: what ended it, as the member saw it
    failure: tuple[str, str] | None = None

    def fold(self, record: dict[str, Any]) -> None:
        # Lines of an earlier incarnation can only precede the new one's, but a killed member's last
        # assignment must never count as the restarted member's.
        if record.get("incarnation", self.incarnation) != self.incarnation:
            return
        kind = record.get("kind")
        if record.get("type") == "generation":
            generation = None if record.get("generation") is None else int(record["generation"])
            if record.get("round") is not None:
                self.rounds[self.incarnation] = int(record["round"])
            before = (self.current, self.pending)
            if kind == "assigned":
                self.current = (generation, frozenset(record.get("partitions", ())))
                self.pending = False
                self.assignments += 1
                if generation is not None:
                    self.generations.append(generation)
            elif kind in ("revoked", "lost"):
                if "remaining" in record:
                    # An incremental revoke: the rest stays this member's, until the assign that ends the round.
                    kept = self.current[0] if self.current is not None else generation
                    self.current = (kept, frozenset(record["remaining"]))
                    self.pending = True
                else:
                    # An eager revoke: nothing remains.
                    self.current = None
                if kind == "revoked":
                    self.revoked += 1
                else:
                    self.lost += 1
            # Since when the member has been in the state the stability check reads: an assign that confirms an
            # unchanged assignment (librdkafka calls one every cooperative round) does not move it.
            if (self.current, self.pending) != before:
                self.current_since = record.get("ts")
        elif record.get("type") == "consume":
            self.consumed += int(record.get("count", 0))
        elif record.get("type") == "member_event" and kind == "failed":
            self.failure = (str(record.get("stage")), str(record.get("error")))

    @property
    def round_count(self) -> int:
        """Assignment rounds over every incarnation, by the members' own `round` counts."""
        return sum(self.rounds.values())


class LabMember(Protocol):
    """A member run as a thread in the driver's process: `CoordinatorMember` or `LibrdkafkaMember`."""

    name: str
    trace: TraceWriter
    error: BaseException | None

    def start(self) -> None: ...

    def request_stop(self) -> None: ...

    def join(self, timeout: float) -> bool: ...

    @property
    def alive(self) -> bool: ...


@dataclass(frozen=True)
class _Launch:
    """How to start one incarnation of a member, as a process or a thread."""

    name: str
    module: str  # python -m MODULE SETTINGS_JSON
    settings_json: str
    stop_bound_s: float  # a graceful stop's budget before the kill
    thread_member: Callable[[TraceWriter], LabMember]
    jvm_pid_path: Path | None = None  # a Java member's: where its wrapper writes the JVM's pid


class _ProcessMember:
    def __init__(self, launch: _Launch, log_path: Path) -> None:
        self.name = launch.name
        self.stop_bound_s = launch.stop_bound_s
        self.jvm_pid_path = launch.jvm_pid_path
        self.log_file = open(log_path, "a", encoding="utf-8")  # closed in wait()
        self._stop_requested = False
        # A session of its own: a Ctrl-C in the orchestrator's terminal is the driver's to handle. stdin is a
        # lifeline: if the driver dies, the member sees its end and leaves.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", launch.module, launch.settings_json],
            stdin=subprocess.PIPE, stdout=self.log_file, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if not self.alive:
            return
        jvm = self._jvm_pid() if sig in _JVM_SIGNALS else None
        if jvm is not None:
            try:
                os.kill(jvm, sig)
            except ProcessLookupError:
                # Gone already (its close finished): the wrapper reaps it.
                pass
        os.kill(self.proc.pid, sig)

    def _jvm_pid(self) -> int | None:
        """A Java member's JVM, while its wrapper lives (the JVM is the wrapper's child until then, so its pid is
        not another process's); None before the wrapper has started it, or for other members."""
        if self.jvm_pid_path is None:
            return None
        try:
            return int(self.jvm_pid_path.read_text())
        except (OSError, ValueError):
            return None

    def request_stop(self) -> None:
        # Once: `stop()` follows `request_stop()` in CoordinatorDriver.stop, and a second SIGTERM that reaches the
        # process after its clean exit began finds Python's default handler back (it is reset at finalization) and
        # kills it (exit -15, no clean exit code for a member that left).
        if self._stop_requested:
            return
        self._stop_requested = True
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
        return self.wait(self.stop_bound_s)

    def kill(self) -> int | None:
        self.signal(signal.SIGKILL)
        return self.wait(_KILL_WAIT_S)

    def error(self) -> str | None:
        code = self.proc.poll()
        return None if code is None else f"exited with code {code}: see {self.log_file.name}"

    def _close_stdin(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass


class _ThreadMember:
    def __init__(self, member: LabMember, stop_bound_s: float) -> None:
        self.name = member.name
        self.member = member
        self.stop_bound_s = stop_bound_s
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
        return self.wait(self.stop_bound_s)

    def error(self) -> str | None:
        if self.member.alive:
            return None
        return f"failed: {self.member.error}" if self.member.error is not None else "ended on its own"


class CoordinatorDriver:
    """`DesignDriver` for the broker-side designs (see the module docstring): `kind` picks the members' client."""

    def __init__(self, process_mode: str = "processes", kind: MemberKind = MemberKind.EAGER) -> None:
        if process_mode not in PROCESS_MODES:
            raise ValueError(f"process_mode must be 'processes' or 'threads', not {process_mode!r}")
        if not isinstance(kind, MemberKind):
            raise TypeError(f"kind must be a MemberKind ({', '.join(k.name for k in MemberKind)}), not {kind!r}: "
                            "MemberKind.for_design(name) maps a design's name")
        if kind is MemberKind.CONSUMER_JAVA and process_mode != "processes":
            raise InputError(f"the {kind.design} design's members are JVMs, one per member process: run it with "
                             "process_mode = \"processes\" (--members processes)")
        missing = missing_client(kind.design)
        if missing is not None:
            raise InputError(missing)
        self.kind = kind
        self.design = kind.design
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
            view.current, view.pending, view.failure = None, False, None
            launch = self._launch(name, view.incarnation)
            if self.process_mode == "processes":
                member: _ProcessMember | _ThreadMember = _ProcessMember(launch, env.run.log_path(name))
            else:
                trace = env.run.trace(name, self.design, pid=os.getpid(), incarnation=view.incarnation)
                member = _ThreadMember(launch.thread_member(trace), launch.stop_bound_s)
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
            f"cannot expire {name}: the {self.design} design has no ZooKeeper session. A member's group session "
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

    def failed(self) -> dict[str, str]:
        """Members that ended on their own (a crash at start-up, a broker that cannot run their protocol), with
        why where the member wrote it (`failed to bootstrap (KafkaTimeoutError: ...)`) and where to look: a member
        the driver stopped, killed or replaced is no longer among them."""
        with self._lock:
            members = dict(self._members)
            found = {name: error for name, member in members.items() if (error := member.error()) is not None}
            for name, ended in list(found.items()):
                view = self._views.get(name)
                if view is not None:
                    self._fold(view)  # its last record may be the `failed` one
                if view is not None and view.failure is not None:
                    stage, error = view.failure
                    what = "failed to bootstrap" if stage == "bootstrap" else f"failed in {stage}"
                    found[name] = f"{what} ({error}); {ended}"
        return found

    def live_members(self) -> list[str]:
        with self._lock:
            return sorted(n for n, m in self._members.items() if n not in self._paused and m.alive)

    def stable(self) -> bool:
        """Every live member has had its first assignment and is not between a revoke and the assign that
        follows it; those assignments partition every partition of `env.topics` (disjoint, complete); and, for
        the eager design, they are all of one generation (librdkafka's members report none: disjoint and complete
        is what they can show). A group with no live member is trivially stable."""
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
            live = [self._views[name] for name in self.live_members() if name in self._views]
            current = {view.name: view.current for view in live}
            pending = any(view.pending for view in live)
        if pending or any(state is None for state in current.values()):
            return None
        states = [state for state in current.values() if state is not None]
        if self.kind.has_generations and len({generation for generation, _ in states}) > 1:
            return None
        owned = [p for _, partitions in states for p in partitions]
        if states and (len(owned) != len(set(owned)) or set(owned) != expected):
            return None
        return {name: sorted(state[1]) for name, state in current.items() if state is not None}

    def generation(self) -> int | None:
        """The generation the live members agree on now (None when they do not, or there are none, or the
        members report no generation)."""
        if not self.kind.has_generations:
            return None
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
        per_member = {name: view.assignments for name, view in sorted(views.items())}
        return {
            "design": self.design,
            "process_mode": self.process_mode,
            "members": sorted(views),
            "generations": generations,
            "generation_count": len(generations),
            "max_generation": max(generations, default=None),
            "rebalances": sum(per_member.values()),  # assignments received, over all members
            "rebalances_per_member": per_member,
            # librdkafka members' own counts of assignment rounds (their `round`), over their incarnations
            "rounds": {name: view.round_count for name, view in sorted(views.items()) if view.rounds},
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

    def _launch(self, name: str, incarnation: int) -> _Launch:
        settings = self._settings(name, incarnation)
        if isinstance(settings, CoordinatorMemberSettings):
            eager = settings
            return _Launch(name, self.kind.module, eager.to_json(),
                           eager.settle_bound_s + CLOSE_TIMEOUT_MS / 1000 + 10,
                           lambda trace: CoordinatorMember(eager, trace))
        from zkconsumer.lab.members.java import JavaMemberSettings

        if isinstance(settings, JavaMemberSettings):
            java = settings
            return _Launch(name, self.kind.module, java.to_json(), java.stop_bound_s + 10, _no_thread_member,
                           java.pid_path)
        from zkconsumer.lab.members.librdkafka import LibrdkafkaMember

        librdkafka = settings
        return _Launch(name, self.kind.module, librdkafka.to_json(), librdkafka.stop_bound_s + 10,
                       lambda trace: LibrdkafkaMember(librdkafka, trace))

    def _settings(self, name: str, incarnation: int) -> (CoordinatorMemberSettings | LibrdkafkaMemberSettings
                                                         | JavaMemberSettings):
        env = self._env()
        c = env.case.scenario.coordinator
        if self.kind is MemberKind.CONSUMER_JAVA:
            from zkconsumer.lab.members.java import JavaMemberSettings

            # The session and the heartbeat are the broker's here too (its group.consumer.* settings).
            return JavaMemberSettings(
                name=name, group=env.group, topics=sorted(env.topics), bootstrap=env.bootstrap,
                run_path=str(env.run.path), remote_assignor=c.remote_assignor,
                max_poll_interval_ms=c.max_poll_interval_ms, metadata_max_age_ms=c.metadata_max_age_ms,
                incarnation=incarnation, log_level=env.log_level,
                enable_auto_commit=env.case.scenario.coordinator_auto_commit,
                auto_commit_interval_ms=env.case.scenario.coordinator_commit_interval_ms)
        if self.kind is not MemberKind.EAGER:
            from zkconsumer.lab.members.librdkafka import LibrdkafkaMemberSettings

            classic = self.kind is MemberKind.COOPERATIVE
            return LibrdkafkaMemberSettings(
                name=name, group=env.group, topics=sorted(env.topics), bootstrap=env.bootstrap,
                run_path=str(env.run.path), protocol=self.kind.value,
                remote_assignor=None if classic else c.remote_assignor,
                # The consumer protocol's session and heartbeat are the broker's (its group.consumer.* settings).
                session_timeout_ms=c.session_timeout_ms if classic else None,
                heartbeat_interval_ms=c.heartbeat_interval_ms if classic else None,
                max_poll_interval_ms=c.max_poll_interval_ms, metadata_max_age_ms=c.metadata_max_age_ms,
                incarnation=incarnation, log_level=env.log_level,
                enable_auto_commit=env.case.scenario.coordinator_auto_commit,
                auto_commit_interval_ms=env.case.scenario.coordinator_commit_interval_ms)
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


def _no_thread_member(trace: TraceWriter) -> LabMember:
    # CoordinatorDriver refuses threads for the Java members before any member starts.
    raise NotImplementedError("a Java member runs as a process only")
