"""The consumer processes of benchmarks/bench_fetch.py: start them, hold a group at its barrier, collect their lines.

Every contender runs in a process of its own (`OriginalFetchBench.java` in a JVM, `fetch_child.py` otherwise), so
CPU is measured the same way for all: `os.wait4` returns the child's rusage (user + system time of all its threads,
the JVM's compiler and collector threads included). Every process started here is in `LIVE` until reaped;
`stop_all()` ends whatever is left (SIGTERM, then SIGKILL), and each child also exits when its stdin closes, so not
even a SIGKILL of the bench leaves one behind.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rebalance.assignors import get_assignor
from rebalance.convergence import check_convergence
from zkconsumer.embedded.process import java_executable
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.client import ZkClient
from zkconsumer.zookeeper.group import read_group_snapshot

ROOT = Path(__file__).resolve().parent.parent
CHILD = Path(__file__).with_name("fetch_child.py")
ORIGINAL_MAIN = "zkconsumer.interop.OriginalFetchBench"
# kafka-run-class.sh of 0.8.2 starts every tool with -Xmx256M (KAFKA_HEAP_OPTS); its GC flags (ParNew + CMS) no
# longer exist in Java 17, so the JVM's default collector and both JIT tiers run, as for any Java application.
JVM_FLAGS = ("-Xmx256m",)
_LOG4J = "log4j.rootLogger=WARN, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\n" \
         "log4j.appender.stderr.Target=System.err\nlog4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n" \
         "log4j.appender.stderr.layout.ConversionPattern=%d{HH:mm:ss,SSS} %p [%t] %m (%c)%n\n"

LIVE: set[Child] = set()
_LIVE_LOCK = threading.Lock()


class RunError(RuntimeError):
    """A consumer process failed, stalled or consumed the wrong number of messages."""


@dataclass
class ProcessResult:
    """One consumer process: its result line, its launch time and its rusage from wait4."""

    name: str
    launch: float  # epoch s, just before the process was spawned
    line: dict
    cpu_s: float  # user + system, whole process life
    max_rss_mb: float


@dataclass
class Trial:
    """One run of one contender in one scenario: one process, or one per group member."""

    scenario: str
    contender: str
    processes: list[ProcessResult] = field(default_factory=list)
    broker_cpu_s: float = 0.0  # the broker's CPU time over the run: for the original it down-converts (see docs)
    load_1min: float = 0.0  # the machine's load average when the run ended

    @property
    def messages(self) -> int:
        """The messages the run was timed over: each process stops the clock at its target."""
        return sum(p.line["target"] for p in self.processes)

    @property
    def repeated(self) -> int:
        """Messages handed out beyond the targets: duplicates (each process consumes what its partitions hold)."""
        return sum(p.line["messages"] - p.line["target"] for p in self.processes)

    @property
    def steady_s(self) -> float:
        """From the first message any member handed out to the last one (start-up and rebalance excluded)."""
        return max(p.line["last"] for p in self.processes) - min(p.line["first"] for p in self.processes)

    @property
    def steady_rate(self) -> float:
        return self.messages / self.steady_s

    @property
    def second_half_rate(self) -> float:
        """The rate over the second half of each process's messages: the JVM has compiled its hot code by then."""
        count = sum(p.line["target"] - p.line["target"] // 2 for p in self.processes)
        return count / (max(p.line["last"] for p in self.processes) - min(p.line["half"] for p in self.processes))

    @property
    def end_to_end_s(self) -> float:
        """From spawning the (first) process to the last message."""
        return max(p.line["last"] for p in self.processes) - min(p.launch for p in self.processes)

    @property
    def cpu_s(self) -> float:
        return sum(p.cpu_s for p in self.processes)

    @property
    def steady_cpu_s(self) -> float:
        return sum(p.line["cpu_last"] - p.line["cpu_first"] for p in self.processes)

    def as_dict(self) -> dict:
        return {"scenario": self.scenario, "contender": self.contender, "messages": self.messages,
                "repeated": self.repeated,
                "steady_msg_s": self.steady_rate, "steady_s": self.steady_s,
                "second_half_msg_s": self.second_half_rate, "end_to_end_s": self.end_to_end_s,
                "cpu_s": self.cpu_s, "steady_cpu_s": self.steady_cpu_s,
                "max_rss_mb": max(p.max_rss_mb for p in self.processes), "broker_cpu_s": self.broker_cpu_s,
                "load_1min": self.load_1min,
                "processes": [{"name": p.name, "launch": p.launch, "cpu_s": p.cpu_s, "max_rss_mb": p.max_rss_mb,
                               **p.line} for p in self.processes]}


class Child:
    """One consumer process and the named thread that reads its JSON lines."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self._lines: queue.Queue[dict | None] = queue.Queue()
        self._status: tuple[int, float, float] | None = None  # exit code, cpu s, max rss MiB
        with _LIVE_LOCK:
            self.launch = time.time()
            with open(log_path, "ab") as log:
                # Its own session: a Ctrl-C on the terminal reaches the bench only, which then stops it here.
                self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                             cwd=ROOT, start_new_session=True, text=True, bufsize=1)
            LIVE.add(self)
        self._reader = threading.Thread(target=self._read, name=f"bench-{name}-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                self._lines.put(json.loads(raw))
            except ValueError:
                pass  # not ours: anything else goes to the log
        self._lines.put(None)

    def expect(self, event: str, timeout_s: float) -> dict:
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            raise RunError(f"{self.name}: no {event} line within {timeout_s:.0f} s ({self.log_tail()})") from None
        if line is None:
            raise RunError(f"{self.name}: exited before its {event} line ({self.log_tail()})")
        if line.get("event") != event:
            raise RunError(f"{self.name}: expected {event}, got {line}")
        return line

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def reap(self, timeout_s: float) -> tuple[int, float, float]:
        """Wait for the exit (SIGKILL after `timeout_s`); (exit code, CPU seconds, max RSS MiB) from wait4."""
        if self._status is None:
            deadline = time.monotonic() + timeout_s
            while True:
                pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() >= deadline:
                    self._signal(signal.SIGKILL)
                    pid, status, usage = os.wait4(self.proc.pid, 0)
                    break
                time.sleep(0.02)
            self.proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
            self._status = (self.proc.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass
            with _LIVE_LOCK:
                LIVE.discard(self)
        return self._status

    def stop(self) -> None:
        """SIGTERM, SIGKILL after 5 s; the process is reaped when this returns."""
        if self._status is None:
            self._signal(signal.SIGTERM)
            self.reap(5.0)

    def _signal(self, sig: signal.Signals) -> None:
        try:
            os.kill(self.proc.pid, sig)  # not yet reaped, so the pid is still this child's
        except ProcessLookupError:
            pass

    def log_tail(self, lines: int = 3) -> str:
        try:
            return "log " + str(self.log_path) + ": " + " | ".join(
                self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return f"no log at {self.log_path}"

    def result(self, timeout_s: float) -> ProcessResult:
        line = self.expect("result", timeout_s)
        code, cpu, rss = self.reap(30.0)
        if code != 0:
            raise RunError(f"{self.name}: exit {code} after consuming {line['messages']} messages ({self.log_tail()})")
        return ProcessResult(self.name, self.launch, line, cpu, rss)


def stop_all() -> None:
    with _LIVE_LOCK:
        children = list(LIVE)
    for child in children:
        child.stop()


@dataclass(frozen=True)
class Target:
    """Where the data is and how a run is bounded."""

    zookeeper: str
    bootstrap: str
    broker: str  # ID:HOST:PORT
    topic: str
    sizes: Mapping[int, int]  # partition -> messages in it
    workdir: Path
    classpath: str  # the original's build and jars
    timeout_s: float
    broker_pid: int
    properties: tuple[str, ...] = ()  # KEY=VALUE consumer settings for the original and ours alike

    def broker_cpu_s(self) -> float:
        """utime + stime of the broker process so far (/proc/<pid>/stat, fields 14 and 15)."""
        with open(f"/proc/{self.broker_pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def original_argv(target: Target, name: str, group: str, streams: int, messages: int | None) -> list[str]:
    props = target.workdir / f"{name}.properties"
    props.write_text(f"zookeeper.connect={target.zookeeper}\ngroup.id={group}\nconsumer.id={name}\n"
                     "auto.offset.reset=smallest\n" + "".join(f"{kv}\n" for kv in target.properties))
    log4j = target.workdir / "log4j.properties"
    log4j.write_text(_LOG4J)
    return [java_executable(), *JVM_FLAGS, f"-Dlog4j.configuration=file:{log4j}", "-cp", target.classpath,
            ORIGINAL_MAIN, "--config", str(props), "--topic", target.topic, "--streams", str(streams),
            *(["--wait-go"] if messages is None else ["--messages", str(messages)])]


def python_argv(target: Target, impl: str, name: str, group: str, streams: int, messages: int | None,
                partitions: Sequence[int]) -> list[str]:
    argv = [sys.executable, str(CHILD), impl, "--topic", target.topic, "--streams", str(streams),
            *(["--wait-go"] if messages is None else ["--messages", str(messages)])]
    if impl == "connector":
        argv += ["--zookeeper", target.zookeeper, "--group", group, "--consumer-id", name,
                 *(arg for kv in target.properties for arg in ("--property", kv))]
    elif impl == "fetcher":
        argv += ["--broker", target.broker, "--partitions", ",".join(map(str, partitions))]
    else:
        argv += ["--bootstrap", target.bootstrap, "--partitions", ",".join(map(str, partitions))]
    return argv


ArgvFor = Callable[[str, str, int | None, Sequence[int]], list[str]]  # name, group, messages, partitions -> argv


def contender_argv(target: Target, impl: str, streams: int, python_path: Path | None = None) -> ArgvFor:
    """`python_path`: a directory put first on the child's PYTHONPATH (through env(1), which execs Python in the same
    process, so wait4 still measures the consumer): an older fetcher_manager/ for the bench's "before" row."""
    if impl == "original":
        return lambda name, group, messages, partitions: original_argv(target, name, group, streams, messages)
    prefix = ["env", f"PYTHONPATH={python_path}"] if python_path is not None else []
    return lambda name, group, messages, partitions: [*prefix, *python_argv(target, impl, name, group, streams,
                                                                            messages, partitions)]


def run_single(target: Target, scenario: str, contender: str, argv_for: ArgvFor, group: str) -> Trial:
    """One process consumes every message of the topic."""
    total = sum(target.sizes.values())
    broker_cpu = target.broker_cpu_s()
    child = Child(contender, argv_for("m0", group, total, sorted(target.sizes)),
                  target.workdir / f"{group}.log")
    try:
        child.expect("ready", target.timeout_s)
        result = child.result(target.timeout_s)
        return Trial(scenario, contender, [result], target.broker_cpu_s() - broker_cpu)
    finally:
        child.stop()


def run_group(target: Target, scenario: str, contender: str, argv_for: ArgvFor, group: str, members: int,
              zk: ZkClient | None) -> Trial:
    """`members` processes split the partitions. Through ZooKeeper (`zk` given) they form a group, and none starts
    iterating until the owner znodes show the range assignment of all of them (a member that consumed while
    another joins would hand data back and forth); otherwise each is assigned every `members`-th partition."""
    children: list[Child] = []
    broker_cpu = target.broker_cpu_s()
    try:
        for i in range(members):
            mine = sorted(p for p in target.sizes if p % members == i)
            children.append(Child(f"{contender}-m{i}", argv_for(f"m{i}", group, None, mine),
                                  target.workdir / f"{group}-m{i}.log"))
        for child in children:
            child.expect("ready", target.timeout_s)
        if zk is None:
            owned = {f"m{i}": [p for p in target.sizes if p % members == i] for i in range(members)}
        else:
            owned = wait_settled(zk, group, target.topic, members, target.timeout_s)
        for i, child in enumerate(children):
            child.send(f"go {sum(target.sizes[p] for p in owned.get(f'm{i}', []))}")
        results = [child.result(target.timeout_s) for child in children]
        return Trial(scenario, contender, results, target.broker_cpu_s() - broker_cpu)
    finally:
        for child in children:
            child.stop()


def wait_settled(zk: ZkClient, group: str, topic: str, members: int, timeout_s: float,
                 quiet_s: float = 1.0) -> dict[str, list[int]]:
    """consumer.id -> partitions it owns, once the group has every member, the owners are what range prescribes,
    and no owner znode has been re-created for `quiet_s` (a member that releases and claims its partitions again
    leaves the same owners but new znodes, so their creation zxids are compared, not only their data)."""
    assignor = get_assignor("range")
    deadline = time.monotonic() + timeout_s
    stable: tuple[dict, float] | None = None  # (owner znodes, since when they are unchanged)
    while time.monotonic() < deadline:
        snapshot = read_group_snapshot(zk, group)
        if len(snapshot.registrations) == members and check_convergence(snapshot, assignor).settled:
            znodes = {}
            for tp, owner in snapshot.owners.items():
                found = zk.get(f"{layout.owners_dir(group, tp.topic)}/{tp.partition}") if tp.topic == topic else None
                if found is not None:
                    znodes[tp.partition] = (owner.rsplit("-", 1)[0].removeprefix(f"{group}_"), found[1].czxid)
            if stable is None or stable[0] != znodes:
                stable = (znodes, time.monotonic())
            elif time.monotonic() - stable[1] >= quiet_s:
                by_member: dict[str, list[int]] = {}
                for partition, (member, _) in sorted(znodes.items()):
                    by_member.setdefault(member, []).append(partition)
                return by_member
        else:
            stable = None
        time.sleep(0.1)
    raise RunError(f"group {group} did not settle within {timeout_s:.0f} s")
