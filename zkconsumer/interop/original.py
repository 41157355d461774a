"""The original Kafka 0.8.2.2 consumer as a differential oracle (docs/interop.md).

Two small Java programs in `java/` run the original release from the pom's `kafka-0.8.2` profile
(`zkconsumer.embedded.jvm`): `OriginalConsumerDriver`, one member of a group driven through
`Consumer.createJavaConsumerConnector`, and `OriginalAssignorOracle`, the original assignors on groups written into
ZooKeeper. Neither is committed compiled: `build()` compiles the sources with javac against that classpath into
the JVM cache, keyed by the sources' and the classpath's hashes, under the cache's file lock.

    member = OriginalMember({"group.id": "g", "zookeeper.connect": zk, "consumer.id": "c1"},
                            topics={"clicks": 2}, workdir=tmp).start()   # returns after the first rebalance
    member.owned()      # {("clicks", 0): "g_c1-0", ...}, from the owner znodes
    member.messages     # OriginalMessage(topic, partition, offset, stream, key_size, value_size), as handed out
    member.commit()     # commitOffsets(); the offsets then stored in ZooKeeper for its partitions
    member.stop()       # SIGTERM (the driver's hook calls connector.shutdown()), SIGKILL after a grace period
    member.kill()       # kill -9: the session, its registration and owner nodes outlive it until the timeout
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from zkconsumer.embedded import jvm
from zkconsumer.embedded.process import EmbeddedError, java_executable

SOURCE_ROOT = Path(__file__).with_name("java")
DRIVER_MAIN = "zkconsumer.interop.OriginalConsumerDriver"
ORACLE_MAIN = "zkconsumer.interop.OriginalAssignorOracle"
# Class files for Java 11: a newer javac than the java that runs them must not produce unloadable classes.
JAVAC_RELEASE = "11"
JVM_FLAGS = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss1m")
START_TIMEOUT_S = 90.0  # a JVM start is ~2 s here; the first rebalance may wait for a peer's old session
# log4j 1 (reload4j) for the original: warnings, plus the connector's own INFO lines (its rebalance decisions,
# claims and conflicts), which explain a difference when a test finds one.
_LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.logger.kafka.consumer.ZookeeperConsumerConnector=INFO
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=%d{HH:mm:ss,SSS} %p [%t] %m (%c)%n
"""


class InteropError(EmbeddedError):
    """The original could not be built or run (one line saying why), or a driver reported an error."""


def javac_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidate = str(Path(java_home) / "bin" / "javac") if java_home else shutil.which("javac")
    if not candidate or not Path(candidate).exists():
        raise InteropError("javac not found on PATH (or JAVA_HOME): install a JDK 17, e.g. apt-get install "
                           "openjdk-17-jdk-headless; it compiles the original 0.8.2.2 consumer's driver "
                           f"({SOURCE_ROOT})")
    return candidate


@dataclass(frozen=True)
class OriginalBuild:
    classes: Path
    jars: jvm.Classpath

    def __str__(self) -> str:
        return f"{self.classes}:{self.jars}"


def _sources() -> list[Path]:
    return sorted(SOURCE_ROOT.rglob("*.java"))


def build() -> OriginalBuild:
    """The compiled driver and oracle, compiling them first if the cache has no build of these sources."""
    jars = jvm.classpath(jvm.KAFKA_082)
    digest = hashlib.sha256(f"{jars.directory.name} {JAVAC_RELEASE}".encode())
    for source in _sources():
        digest.update(str(source.relative_to(SOURCE_ROOT)).encode() + b"\0" + source.read_bytes() + b"\0")
    entry = jvm.cache_root() / "interop" / f"original-{digest.hexdigest()[:12]}"
    if not (entry / "build.json").is_file():
        entry.parent.mkdir(parents=True, exist_ok=True)
        with open(entry.parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a second test run waits, then finds the build done
            if not (entry / "build.json").is_file():
                _compile(entry, jars)
    return OriginalBuild(entry / "classes", jars)


def _compile(entry: Path, jars: jvm.Classpath) -> None:
    staging = entry.with_name(entry.name + ".partial")  # renamed into place only when complete
    shutil.rmtree(staging, ignore_errors=True)
    try:
        argv = [javac_executable(), "--release", JAVAC_RELEASE, "-Xlint:all,-path", "-Werror", "-encoding", "UTF-8",
                "-d", str(staging / "classes"), "-cp", str(jars), *map(str, _sources())]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False,
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            first = " | ".join((done.stderr or done.stdout).strip().splitlines()[:3])
            raise InteropError(f"javac failed on {SOURCE_ROOT} (exit {done.returncode}): {first}")
        (staging / "build.json").write_text(json.dumps(
            {"sources": [str(s.relative_to(SOURCE_ROOT)) for s in _sources()], "jars": str(jars.directory)}))
        shutil.rmtree(entry, ignore_errors=True)
        staging.rename(entry)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def java_argv(main: str, workdir: Path, *args: str) -> list[str]:
    """A JVM running `main` of the original's build, with log4j configured (written into `workdir`)."""
    log4j = workdir / "log4j.properties"
    if not log4j.exists():
        log4j.write_text(_LOG4J)
    return [java_executable(), *JVM_FLAGS, f"-Dlog4j.configuration=file:{log4j}", "-cp", str(build()), main, *args]


def partition_key(key: str) -> tuple[str, int]:
    """'topic/partition' (the drivers' JSON keys; '/' cannot occur in a topic name) -> (topic, partition)."""
    topic, _, partition = key.rpartition("/")
    return topic, int(partition)


@dataclass(frozen=True)
class OriginalMessage:
    topic: str
    partition: int
    offset: int
    stream: str
    key_size: int
    value_size: int


class OriginalMember:
    """One original 0.8.2.2 connector in its own JVM; its events are read by a named thread as they come.

    Give exactly one subscription: `topics` ({topic: streams}, createMessageStreams), or `whitelist`/`blacklist`
    with `streams` (createMessageStreamsByFilter). The JVM reads our end of a pipe on its stdin and exits when it
    closes, so a test process that dies takes its drivers with it.
    """

    def __init__(self, properties: Mapping[str, object], *, workdir: Path, topics: Mapping[str, int] | None = None,
                 whitelist: str | None = None, blacklist: str | None = None, streams: int = 1,
                 name: str | None = None) -> None:
        if sum(x is not None for x in (topics, whitelist, blacklist)) != 1:
            raise ValueError("give exactly one of topics, whitelist, blacklist")
        self.properties = {k: str(v) for k, v in properties.items()}
        self.name = name or self.properties.get("consumer.id") or "original"
        self.workdir = Path(workdir)
        if topics is not None:
            self.subscription = ["--topics", ",".join(f"{t}={n}" for t, n in topics.items())]
        else:
            kind, regex = ("whitelist", whitelist) if whitelist is not None else ("blacklist", blacklist)
            self.subscription = [f"--{kind}", str(regex), "--streams", str(streams)]
        self.log_path = self.workdir / f"original-{self.name}.log"
        self.events: list[dict] = []
        self._messages: list[OriginalMessage] = []
        self._owned: dict[tuple[str, int], str] = {}
        self._cond = threading.Condition()
        self._eof = False
        self._commits = 0
        self._proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self.consumer_id: str | None = None

    # --- lifecycle -----------------------------------------------------------------------------------

    def start(self, wait: bool = True, timeout: float = START_TIMEOUT_S) -> OriginalMember:
        """Start the JVM; with `wait`, return once createMessageStreams has returned (first rebalance done)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / f"original-{self.name}.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in sorted(self.properties.items())))
        argv = java_argv(DRIVER_MAIN, self.workdir, "--config", str(config), *self.subscription)
        with open(self.log_path, "ab") as log:
            # Its own session: a terminal's Ctrl-C reaches the test, which then stops the driver itself.
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                          text=True, encoding="utf-8", bufsize=1, start_new_session=True)
        self._reader = threading.Thread(target=self._read_events, name=f"original-{self.name}-events", daemon=True)
        self._reader.start()
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> str:
        # Only the errors that end the driver: an owner poll racing a rebalance is reported, not fatal.
        event = self.wait_for(lambda e: e["event"] == "ready" or e.get("where") in ("connect", "create_streams"),
                              timeout, "ready")
        if event["event"] == "error":
            raise InteropError(f"original {self.name}: {event['where']}: {event['error']} (log: {self.log_path})")
        self.consumer_id = event["consumer_id"]
        return self.consumer_id

    def stop(self, grace: float = 20.0) -> int | None:
        """SIGTERM (the driver's shutdown hook runs connector.shutdown()), SIGKILL after `grace` seconds."""
        return self._end(signal.SIGTERM, grace)

    def begin_stop(self) -> None:
        """SIGTERM without waiting, so several drivers shut down at once; `stop()` then waits for each."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)

    def kill(self) -> int | None:
        """kill -9: no shutdown, no commit; ZooKeeper keeps its nodes until the session times out."""
        return self._end(signal.SIGKILL, 0.0)

    def _end(self, sig: signal.Signals, grace: float) -> int | None:
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=grace if grace > 0 else 10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if proc.stdin:
            try:
                proc.stdin.close()
            except OSError:
                pass  # the pipe's reader is gone
        if self._reader is not None:
            self._reader.join(timeout=10)
        return proc.returncode

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def __enter__(self) -> OriginalMember:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what it did ---------------------------------------------------------------------------------

    def owned(self) -> dict[tuple[str, int], str]:
        """(topic, partition) -> thread id: the owner nodes of this member, as last polled by the driver."""
        with self._cond:
            return dict(self._owned)

    @property
    def messages(self) -> list[OriginalMessage]:
        with self._cond:
            return list(self._messages)

    def commit(self, timeout: float = 30.0) -> dict[tuple[str, int], int | None]:
        """commitOffsets(), then the offsets stored in ZooKeeper for the partitions it owns."""
        with self._cond:
            self._commits += 1
            ident = str(self._commits)
        self._send(f"commit {ident}")
        event = self.wait_for(lambda e: e.get("id") == ident or e.get("where") == f"commit {ident}", timeout,
                              f"commit {ident}")
        if event["event"] == "error":
            raise InteropError(f"original {self.name}: commit failed: {event['error']}")
        return {partition_key(k): v for k, v in event["offsets"].items()}

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float, what: str = "an event",
                 since: int = 0) -> dict:
        """The first event from index `since` on that satisfies `predicate`; fails early if the JVM exited."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events[since:]:
                    if predicate(event):
                        return event
                since = len(self.events)
                remaining = deadline - time.monotonic()
                if self._eof or remaining <= 0:
                    state = "exited" if self._eof else f"no {what} after {timeout:.0f} s"
                    raise InteropError(f"original {self.name}: {state} waiting for {what}; "
                                       f"last events {self.events[-3:]}; log {self.log_path}: {self.log_tail()}")
                self._cond.wait(remaining)

    def log_tail(self, lines: int = 5) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _send(self, command: str) -> None:
        if self._proc is None or self._proc.stdin is None or self._proc.poll() is not None:
            raise InteropError(f"original {self.name} is not running (log: {self.log_path})")
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()

    def _read_events(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            for line in self._proc.stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # not an event line (the driver sends everything else to stderr)
                with self._cond:
                    self.events.append(event)
                    if event["event"] == "message":
                        self._messages.append(OriginalMessage(event["topic"], event["partition"], event["offset"],
                                                              event["stream"], event["key_size"],
                                                              event["value_size"]))
                    elif event["event"] == "owned":
                        self._owned = {partition_key(k): v for k, v in event["partitions"].items()}
                    self._cond.notify_all()
        finally:
            with self._cond:
                self._eof = True
                self._cond.notify_all()


@dataclass(frozen=True)
class OracleCase:
    """A group written into ZooKeeper under `zookeeper_connect` (which carries the case's chroot)."""

    case_id: str
    strategy: str
    exclude_internal_topics: bool
    zookeeper_connect: str
    group: str


OracleResult = dict[str, dict[tuple[str, int], str] | str]  # consumer id -> its assignment, or the error text


def run_assignor_oracle(cases: Iterable[OracleCase], workdir: Path, timeout: float = 300.0) -> dict[str, OracleResult]:
    """The original assignors' decision for every member of every case, in one JVM run."""
    cases = list(cases)
    workdir.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"{c.case_id} {c.strategy} {str(c.exclude_internal_topics).lower()} {c.zookeeper_connect} "
                    f"{c.group}\n" for c in cases)
    log = workdir / "oracle.log"
    with open(log, "ab") as err:
        done = subprocess.run(java_argv(ORACLE_MAIN, workdir), input=lines.encode(), stdout=subprocess.PIPE,
                              stderr=err, timeout=timeout, check=False)
    if done.returncode != 0:
        raise InteropError(f"the assignor oracle exited {done.returncode} (log: {log})")
    results: dict[str, OracleResult] = {}
    for line in done.stdout.decode().splitlines():
        row = json.loads(line)
        if row.get("case") is None:
            raise InteropError(f"the assignor oracle rejected a case: {row.get('error')}")
        results[row["case"]] = {
            consumer: ({partition_key(k): v for k, v in outcome["assignment"].items()}
                       if "assignment" in outcome else outcome["error"])
            for consumer, outcome in row["consumers"].items()
        }
    missing = [c.case_id for c in cases if c.case_id not in results]
    if missing:
        raise InteropError(f"the assignor oracle gave no answer for cases {missing} (log: {log})")
    return results
