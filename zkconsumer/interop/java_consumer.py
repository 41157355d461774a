"""Kafka's own Java consumer (kafka-clients 4.x, `group.protocol=consumer`) as the reference member of KIP-848
(docs/interop.md, "The reference client of the consumer protocol").

`ModernConsumerDriver` (in `java_kafka4/`) runs one `KafkaConsumer` with a rebalance listener and reports, one JSON
line per event, what the listener is handed and what each poll returned. It is compiled with javac against the
kafka-clients jar of the pom's `kafka-4` profile (`zkconsumer.embedded.jvm`) into the JVM cache, keyed by the
sources' and the jars' hashes, under the cache's file lock, by `jvm_member.build()` as the 0.8.2.2 driver is;
`JavaConsumerMember` is a `jvm_member.JvmMember`, which runs the driver and reads its events.

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

import signal
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rebalance.events import parse_partition_key
from zkconsumer.embedded import jvm
from zkconsumer.embedded.process import EmbeddedError, java_executable
from zkconsumer.interop import jvm_member, original
from zkconsumer.interop.jvm_member import JVM_FLAGS, InteropError, JvmMember

# Re-exported: callers name the release the drivers are compiled for from here.
JAVAC_RELEASE = jvm_member.JAVAC_RELEASE
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
    return jvm_member.find_javac(f"the driver of Kafka's Java consumer ({SOURCE_ROOT})")


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


ClientBuild = jvm_member.JvmBuild


def build(into: Path | None = None) -> ClientBuild:
    """The compiled driver, compiled first if `into` (the JVM cache's `interop/` by default) has no build of these
    sources against these jars."""
    return jvm_member.build(client_classpath(), SOURCE_ROOT, "kafka4-consumer", javac=javac_executable,
                            shared=SHARED_SOURCES, into=into)


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
    return frozenset(parse_partition_key(k) for k in keys)


class JavaConsumerMember(JvmMember):
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
        super().__init__(f"java consumer {client_id}", self.workdir / f"java-consumer-{client_id}.log")
        self._consumed: list[ConsumedBatch] = []
        self._assignment: frozenset[tuple[str, int]] = frozenset()
        self._epoch: int | None = None
        self._member_id: str | None = None

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
        self._spawn(self.argv(), f"java-consumer-{self.client_id}-events")
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

    def status(self, timeout: float = 30.0) -> dict:
        """The consumer's own assignment() and group metadata, asked between two polls."""
        since = len(self.events)
        self._send("status")
        return self.wait_for(lambda e: e["event"] == "status", timeout, "status", since)

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
