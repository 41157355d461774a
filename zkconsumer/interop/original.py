"""The original Kafka 0.8.2.2 consumer as a differential oracle (docs/interop.md).

Two small Java programs in `java/` run the original release from the pom's `kafka-0.8.2` profile
(`zkconsumer.embedded.jvm`): `OriginalConsumerDriver`, one member of a group driven through
`Consumer.createJavaConsumerConnector`, and `OriginalAssignorOracle`, the original assignors on groups written into
ZooKeeper. Neither is committed compiled: `build()` compiles the sources with javac against that classpath into
the JVM cache, keyed by the sources' and the classpath's hashes, under the cache's file lock (`jvm_member.build()`);
`OriginalMember` is a `jvm_member.JvmMember`, which runs the driver and reads its events.

    member = OriginalMember({"group.id": "g", "zookeeper.connect": zk, "consumer.id": "c1"},
                            topics={"clicks": 2}, workdir=tmp).start()   # returns after the first rebalance
    member.owned()      # {("clicks", 0): "g_c1-0", ...}, from the owner znodes
    member.messages     # OriginalMessage(topic, partition, offset, stream, key_size, value_size), as handed out
    member.commit()     # commitOffsets(); the offsets then stored in ZooKeeper for its partitions
    member.stop()       # SIGTERM (the driver's hook calls connector.shutdown()), SIGKILL after a grace period
    member.kill()       # kill -9: the session, its registration and owner nodes outlive it until the timeout
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rebalance.events import parse_partition_key
from zkconsumer.embedded import jvm
from zkconsumer.embedded.process import java_executable
from zkconsumer.interop import jvm_member
from zkconsumer.interop.jvm_member import JVM_FLAGS, InteropError, JvmMember

# Re-exported: callers name the release the drivers are compiled for from here.
JAVAC_RELEASE = jvm_member.JAVAC_RELEASE
SOURCE_ROOT = Path(__file__).with_name("java")
DRIVER_MAIN = "zkconsumer.interop.OriginalConsumerDriver"
ORACLE_MAIN = "zkconsumer.interop.OriginalAssignorOracle"
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


def javac_executable() -> str:
    return jvm_member.find_javac(f"the original 0.8.2.2 consumer's driver ({SOURCE_ROOT})")


OriginalBuild = jvm_member.JvmBuild


def build() -> OriginalBuild:
    """The compiled driver and oracle, compiling them first if the cache has no build of these sources."""
    return jvm_member.build(jvm.classpath(jvm.KAFKA_082), SOURCE_ROOT, "original", javac=javac_executable)


def java_argv(main: str, workdir: Path, *args: str) -> list[str]:
    """A JVM running `main` of the original's build, with log4j configured (written into `workdir`)."""
    log4j = workdir / "log4j.properties"
    if not log4j.exists():
        log4j.write_text(_LOG4J)
    return [java_executable(), *JVM_FLAGS, f"-Dlog4j.configuration=file:{log4j}", "-cp", str(build()), main, *args]


@dataclass(frozen=True)
class OriginalMessage:
    topic: str
    partition: int
    offset: int
    stream: str
    key_size: int
    value_size: int


class OriginalMember(JvmMember):
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
        super().__init__(f"original {self.name}", self.workdir / f"original-{self.name}.log")
        # The live list, not a copy: callers read it as it grows.
        self.events = self._events
        self._messages: list[OriginalMessage] = []
        self._owned: dict[tuple[str, int], str] = {}
        self.consumer_id: str | None = None

    # --- lifecycle -----------------------------------------------------------------------------------

    def start(self, wait: bool = True, timeout: float = START_TIMEOUT_S) -> OriginalMember:
        """Start the JVM; with `wait`, return once createMessageStreams has returned (first rebalance done)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / f"original-{self.name}.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in sorted(self.properties.items())))
        argv = java_argv(DRIVER_MAIN, self.workdir, "--config", str(config), *self.subscription)
        self._spawn(argv, f"original-{self.name}-events")
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

    # --- what it did ---------------------------------------------------------------------------------

    def owned(self) -> dict[tuple[str, int], str]:
        """(topic, partition) -> thread id: the owner nodes of this member, as last polled by the driver."""
        with self._cond:
            return dict(self._owned)

    @property
    def messages(self) -> list[OriginalMessage]:
        with self._cond:
            return list(self._messages)

    def _note(self, event: dict) -> None:
        if event["event"] == "message":
            self._messages.append(OriginalMessage(event["topic"], event["partition"], event["offset"],
                                                  event["stream"], event["key_size"], event["value_size"]))
        elif event["event"] == "owned":
            self._owned = {parse_partition_key(k): v for k, v in event["partitions"].items()}


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
            consumer: ({parse_partition_key(k): v for k, v in outcome["assignment"].items()}
                       if "assignment" in outcome else outcome["error"])
            for consumer, outcome in row["consumers"].items()
        }
    missing = [c.case_id for c in cases if c.case_id not in results]
    if missing:
        raise InteropError(f"the assignor oracle gave no answer for cases {missing} (log: {log})")
    return results
