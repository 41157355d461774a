"""Kafka's own Java consumer (kafka-clients 4.x, `group.protocol=consumer`) as the reference member of KIP-848
(docs/interop.md, "The reference client of the consumer protocol").

`ModernConsumerDriver` (in `java_kafka4/`) runs one `KafkaConsumer` with a rebalance listener and reports, one JSON
line per event, what the listener is handed and what each poll returned. It is compiled with javac against the
kafka-clients jar of the pom's `kafka-4` profile (`zkconsumer.embedded.jvm`) into the JVM cache, keyed by the
sources' and the jars' hashes, under the cache's file lock, as `original.py` does for the 0.8.2.2 driver.

    member = JavaConsumerMember(bootstrap, "g", ["clicks"], "java-1", tmp, remote_assignor="uniform").start()
    member.assignment()   # frozenset({("clicks", 0), ...}): the whole assignment, kept from the incremental callbacks
    member.epoch()        # the member epoch: consumer.groupMetadata().generationId() under the consumer protocol
    member.consumed       # [ConsumedBatch(topic, partition, first_offset, last_offset, count), ...], one per poll
    member.commit()       # commitSync(); the offsets the coordinator then holds for its partitions
    member.stop()         # SIGTERM: consumer.close(), i.e. revoke, then leave with member epoch -1
    member.stop(command=True)   # the same close, asked for by a `stop` line on its stdin
    member.kill()         # kill -9: the member stays in the group until the broker's session timeout

Its sources live apart from `java/`: `original.build()` compiles every `.java` file of that folder against the
0.8.2.2 jars, where kafka-clients 4's API does not exist.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
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
from zkconsumer.interop import original
from zkconsumer.interop.original import JAVAC_RELEASE, JVM_FLAGS, InteropError, partition_key

SOURCE_ROOT = Path(__file__).with_name("java_kafka4")
DRIVER_MAIN = "zkconsumer.interop.ModernConsumerDriver"
# The event writer is shared with the original's driver: it needs no jar at all, so it compiles against either.
SHARED_SOURCES = (original.SOURCE_ROOT / "zkconsumer" / "interop" / "JsonLine.java",)
# kafka-clients and the runtime dependencies its pom declares (zstd, lz4, snappy, slf4j-api), plus the slf4j 1.x
# binding onto log4j 2 the profile carries: the member runs the client alone, none of the broker's jars, so nothing
# it does can come from server code that happens to be on the classpath.
CLIENT_ARTIFACTS = ("kafka-clients", "zstd-jni", "lz4-java", "snappy-java", "slf4j-api", "log4j-slf4j-impl",
                    "log4j-api", "log4j-core")
START_TIMEOUT_S = 90.0
# close() may take up to the driver's own bound of 30 s (CLOSE_TIMEOUT); SIGKILL only after that.
STOP_GRACE_S = 40.0
# log4j 2 for the client: warnings, plus the membership manager's INFO lines (its state transitions and
# reconciliations), which explain a difference when a test finds one. No log4j shutdown hook: the driver's own hook
# closes the consumer, which logs while the JVM exits.
_LOG4J2 = """\
status = warn
shutdownHook = disable
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss,SSS} %p [%t] %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
logger.membership.name = org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager
logger.membership.level = info
"""


def javac_executable() -> str:
    try:
        return original.javac_executable()
    except InteropError:
        raise InteropError("javac not found on PATH (or JAVA_HOME): install a JDK 17, e.g. apt-get install "
                           "openjdk-17-jdk-headless; it compiles the driver of Kafka's Java consumer "
                           f"({SOURCE_ROOT})") from None


def client_classpath() -> jvm.Classpath:
    """The jars of `CLIENT_ARTIFACTS` from the `kafka-4` profile (resolved first if the cache has none)."""
    profile = jvm.classpath(jvm.KAFKA4_BROKER)
    jars = []
    for artifact in CLIENT_ARTIFACTS:
        found = [jar for jar in profile.jars
                 if jar.stem.startswith(artifact + "-") and jar.stem[len(artifact) + 1:][:1].isdigit()]
        if not found:
            raise InteropError(f"the {jvm.KAFKA4_BROKER} classpath ({profile.directory}) has no {artifact} jar: "
                               f"declare it in {jvm.POM}")
        jars.extend(found)
    return jvm.Classpath(profile.profile, profile.directory, tuple(jars))


@dataclass(frozen=True)
class ClientBuild:
    classes: Path
    jars: jvm.Classpath

    def __str__(self) -> str:
        return f"{self.classes}:{self.jars}"


def _sources() -> list[Path]:
    return [*SHARED_SOURCES, *sorted(SOURCE_ROOT.rglob("*.java"))]


def build(into: Path | None = None) -> ClientBuild:
    """The compiled driver, compiled first if `into` (the JVM cache's `interop/` by default) has no build of these
    sources against these jars."""
    jars = client_classpath()
    digest = hashlib.sha256(f"{jars} {JAVAC_RELEASE}".encode())
    for source in _sources():
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    entry = (into or jvm.cache_root() / "interop") / f"kafka4-consumer-{digest.hexdigest()[:12]}"
    if not (entry / "build.json").is_file():
        entry.parent.mkdir(parents=True, exist_ok=True)
        with open(entry.parent / ".lock", "w") as lock:
            # A second test run waits, then finds the build done.
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (entry / "build.json").is_file():
                _compile(entry, jars)
    return ClientBuild(entry / "classes", jars)


def _compile(entry: Path, jars: jvm.Classpath) -> None:
    # Renamed into place only when complete.
    staging = entry.with_name(entry.name + ".partial")
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
            {"sources": [str(s) for s in _sources()], "jars": [str(j) for j in jars.jars]}))
        shutil.rmtree(entry, ignore_errors=True)
        staging.rename(entry)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@dataclass(frozen=True)
class ConsumedBatch:
    """What one poll returned for one partition: `count` records from `first_offset` to `last_offset`."""

    topic: str
    partition: int
    first_offset: int
    last_offset: int
    count: int

    def offsets(self) -> range:
        """The offsets handed out; records are contiguous here (no compaction, no transaction markers), which
        `count` confirms."""
        if self.count != self.last_offset - self.first_offset + 1:
            raise InteropError(f"{self}: offsets are not contiguous, the batch's own offsets are unknown")
        return range(self.first_offset, self.last_offset + 1)


def _partitions(keys: Iterable[str]) -> frozenset[tuple[str, int]]:
    return frozenset(partition_key(k) for k in keys)


class JavaConsumerMember:
    """One Kafka Java consumer in its own JVM; its events are read by a named thread as they come.

    The JVM reads our end of a pipe on its stdin and stops when it closes, so a test process that dies takes its
    members with it.
    """

    def __init__(self, bootstrap: str, group: str, topics: Iterable[str], client_id: str, workdir: Path,
                 remote_assignor: str | None = None, *, auto_commit: bool = False,
                 properties: Mapping[str, object] | None = None) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.topics = list(topics)
        self.client_id = client_id
        self.workdir = Path(workdir)
        self.remote_assignor = remote_assignor
        self.auto_commit = auto_commit
        self.properties = {k: str(v) for k, v in (properties or {}).items()}
        self.log_path = self.workdir / f"java-consumer-{client_id}.log"
        self.spawned_at: float | None = None
        self._events: list[dict] = []
        self._consumed: list[ConsumedBatch] = []
        self._assignment: frozenset[tuple[str, int]] = frozenset()
        self._epoch: int | None = None
        self._member_id: str | None = None
        self._cond = threading.Condition()
        self._eof = False
        self._commands = 0
        self._proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------------------

    def argv(self) -> list[str]:
        try:
            java = java_executable()
        except EmbeddedError as exc:
            # The same one line (it names what to install), as the error type this module raises.
            raise InteropError(str(exc)) from None
        log4j = self.workdir / "log4j2-java-consumer.properties"
        if not log4j.exists():
            log4j.write_text(_LOG4J2)
        args = ["--bootstrap", self.bootstrap, "--group", self.group, "--topics", ",".join(self.topics),
                "--client-id", self.client_id, "--auto-commit", str(self.auto_commit).lower()]
        if self.remote_assignor is not None:
            args += ["--assignor", self.remote_assignor]
        for key, value in sorted(self.properties.items()):
            args += ["--property", f"{key}={value}"]
        return [java, *JVM_FLAGS, f"-Dlog4j2.configurationFile={log4j}", "-cp", str(build()), DRIVER_MAIN, *args]

    def start(self, wait: bool = True, timeout: float = START_TIMEOUT_S) -> JavaConsumerMember:
        """Start the JVM; with `wait`, return once the first onPartitionsAssigned ran (possibly with nothing)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = self.argv()
        with open(self.log_path, "ab") as log:
            self.spawned_at = time.time()
            # Its own session: a terminal's Ctrl-C reaches the test, which then stops the member itself.
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                          text=True, encoding="utf-8", bufsize=1, start_new_session=True)
        self._reader = threading.Thread(target=self._read_events, name=f"java-consumer-{self.client_id}-events",
                                        daemon=True)
        self._reader.start()
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> dict:
        event = self.wait_for(lambda e: e["event"] in ("ready", "error"), timeout, "ready")
        if event["event"] == "error":
            raise InteropError(f"java consumer {self.client_id}: {event['where']}: {event['error']} "
                               f"(log: {self.log_path})")
        return event

    def stop(self, grace: float = STOP_GRACE_S, *, command: bool = False) -> int | None:
        """SIGTERM (the driver's hook waits for its poll loop to close the consumer; the JVM then exits 143), or
        with `command` a `stop` line on stdin (the poll loop closes the consumer and the JVM exits 0); SIGKILL
        after `grace` either way."""
        if command and self.returncode is None and self._proc is not None:
            self._send("stop")
            try:
                self._proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        return self._end(signal.SIGTERM, grace)

    def begin_stop(self) -> None:
        """SIGTERM without waiting, so several members leave at once; `stop()` then waits for each."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)

    def kill(self) -> int | None:
        """kill -9: no revoke, no commit, no leave; the coordinator drops it when its session times out."""
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
                # The pipe's reader is gone.
                pass
        if self._reader is not None:
            self._reader.join(timeout=10)
        return proc.returncode

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def __enter__(self) -> JavaConsumerMember:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what it did ---------------------------------------------------------------------------------

    @property
    def events(self) -> list[dict]:
        with self._cond:
            return list(self._events)

    @property
    def consumed(self) -> list[ConsumedBatch]:
        with self._cond:
            return list(self._consumed)

    def assignment(self) -> frozenset[tuple[str, int]]:
        """The whole assignment after the last assigned, revoked or lost callback."""
        with self._cond:
            return self._assignment

    def epoch(self) -> int | None:
        """The last member epoch the driver saw (a callback's, or a change between polls)."""
        with self._cond:
            return self._epoch

    @property
    def member_id(self) -> str | None:
        with self._cond:
            return self._member_id

    def commit(self, timeout: float = 30.0) -> dict[tuple[str, int], int | None]:
        """commitSync(), then the offsets the coordinator holds for the partitions it owns."""
        ident = self._next_id()
        self._send(f"commit {ident}")
        event = self.wait_for(lambda e: e.get("id") == ident or e.get("where") == f"commit {ident}", timeout,
                              f"commit {ident}")
        if event["event"] == "error":
            raise InteropError(f"java consumer {self.client_id}: commit failed: {event['error']}")
        return {partition_key(k): v for k, v in event["offsets"].items()}

    def status(self, timeout: float = 30.0) -> dict:
        """The consumer's own assignment() and group metadata, asked between two polls."""
        since = len(self.events)
        self._send("status")
        return self.wait_for(lambda e: e["event"] == "status", timeout, "status", since)

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float, what: str = "an event",
                 since: int = 0) -> dict:
        """The first event from index `since` on that satisfies `predicate`; fails early if the JVM exited."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self._events[since:]:
                    if predicate(event):
                        return event
                since = len(self._events)
                remaining = deadline - time.monotonic()
                if self._eof or remaining <= 0:
                    state = "exited" if self._eof else f"no {what} after {timeout:.0f} s"
                    raise InteropError(f"java consumer {self.client_id}: {state} waiting for {what}; "
                                       f"last events {self._events[-3:]}; log {self.log_path}: {self.log_tail()}")
                self._cond.wait(remaining)

    def log_tail(self, lines: int = 5) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _next_id(self) -> str:
        with self._cond:
            self._commands += 1
            return str(self._commands)

    def _send(self, command: str) -> None:
        if self._proc is None or self._proc.stdin is None or self._proc.poll() is not None:
            raise InteropError(f"java consumer {self.client_id} is not running (log: {self.log_path})")
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()

    def _read_events(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            for line in self._proc.stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    # Not an event line (the driver sends everything else to stderr).
                    continue
                with self._cond:
                    self._note(event)
                    self._events.append(event)
                    self._cond.notify_all()
        finally:
            with self._cond:
                self._eof = True
                self._cond.notify_all()

    def _note(self, event: dict) -> None:
        kind = event["event"]
        if kind == "consumed":
            self._consumed.append(ConsumedBatch(event["topic"], event["partition"], event["first_offset"],
                                                event["last_offset"], event["count"]))
        elif kind == "assigned":
            self._assignment = _partitions(event["partitions"])
        elif kind in ("revoked", "lost"):
            self._assignment = _partitions(event["remaining"])
        if "epoch" in event:
            self._epoch = event["epoch"]
            self._member_id = event["member_id"]
