"""Apache Kafka 4.x brokers in KRaft mode, run with `java` from the jars of the `kafka-4` profile (docs/servers.md).

The ZooKeeper-mode broker (`kafka.py`) is Kafka 3.9, the last release line with ZooKeeper mode; the modern group
protocols (cooperative-sticky on the classic protocol, KIP-429, and the broker-side consumer protocol of KIP-848,
`group.protocol=consumer`, generally available from 4.0) are what the lab compares it with, and 4.0 removed
ZooKeeper mode. So these brokers keep their metadata in their own Raft quorum and need no ZooKeeper.

    plan ──start──▶ format the storage (only if the log dir has no meta.properties) ──▶ kafka.Kafka ──wait_ready──▶
    ready (ports open and a Metadata answer that lists this node) ──stop──▶ stopped (data kept) ──purge──▶ gone

Node 1 (`plan` without `controller`) is a combined node, `process.roles=broker,controller`, formatted as a
single-node dynamic quorum (`StorageTool format --standalone`, KIP-853). More nodes join it as brokers only
(`plan(..., controller=node1)`: `process.roles=broker`, `controller.quorum.bootstrap.servers` at node 1), so a
cluster of N nodes has one controller; the internal topics keep replication factor 1 whatever N is.

The client listeners are those of `kafka.py`: `MEMBERS` (advertised at the lab's counting proxy, first) and `DIRECT`
(advertised at its own port, for the load producer, the admin and the other brokers), or one `PLAINTEXT`. Node 1
also has the quorum's `CONTROLLER` listener on a port of its own, which clients never see (it is not advertised).
"""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from zkconsumer import extras
from zkconsumer.embedded import jvm
from zkconsumer.embedded.kafka import JVM_FLAGS, BrokerFiles, Listener, plan_listeners
from zkconsumer.embedded.process import (
    EmbeddedError,
    ProcessRecord,
    free_port,
    is_running,
    java_executable,
    port_open,
    start_detached,
    stop_process,
)

CONTROLLER_LISTENER = "CONTROLLER"
_FORMAT_TIMEOUT_S = 120

# Kafka 4 logs through log4j 2. WARN and above from everything, plus INFO from the three classes that report the
# server's life: KafkaRaftServer ("Kafka Server started", `KafkaBroker.STARTED_MESSAGE` in Kafka's
# core/src/main/scala/kafka/server/KafkaBroker.scala), BrokerServer and ControllerServer (their state transitions
# and shutdown). Written to stdout, which `start_detached` sends to kafka.log. No shutdown hook: Kafka's own hook
# logs while the JVM exits, which made log4j warn on every stop; the console appender flushes every line anyway.
_LOG4J2 = """\
status = warn
shutdownHook = disable
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = STDOUT
logger.raftserver.name = kafka.server.KafkaRaftServer
logger.raftserver.level = info
logger.brokerserver.name = kafka.server.BrokerServer
logger.brokerserver.level = info
logger.controllerserver.name = kafka.server.ControllerServer
logger.controllerserver.level = info
"""

# Settings every embedded KRaft broker gets (why, each: docs/servers.md). The group settings give the modern
# protocols the lab's short timings: KIP-848's heartbeat interval and session are the broker's, and lowering the
# interval alone makes the broker exit at start (it must not be under `group.consumer.min.heartbeat.interval.ms`,
# `GroupCoordinatorConfig` in Kafka's group-coordinator module), so the pair moves together.
BASE_SETTINGS: dict[str, str] = {
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "10",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "min.insync.replicas": "1",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "background.threads": "4",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.dedupe.buffer.size": "4194304",
}

# Topic defaults are the controller's in KRaft (it creates topics); a broker-only node given them logs a WARN at
# every start that they "will be ignored in the broker role in 5.0" (kafka.server.KafkaConfig), so it is not.
CONTROLLER_ONLY = ("num.partitions", "default.replication.factor")

# A Java exception with its message, as a stack trace's head line prints it (`Exception in thread "main" ` or
# `Caused by: ` may come first): `java.lang.IllegalArgumentException: group.consumer.heartbeat.interval.ms must be ...`.
_EXCEPTION = re.compile(r"(?:[A-Za-z_$][\w$]*\.)+[\w$]*(?:Exception|Error): .+")


def new_cluster_id() -> str:
    """A cluster id as `kafka-storage random-uuid` prints it: 16 random bytes, URL-safe base64 without padding, never
    starting with '-' (`Uuid.randomUuid` in Kafka's clients/src/main/java/org/apache/kafka/common/Uuid.java), made
    here to save a JVM start."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _read_properties(path: Path) -> dict[str, str]:
    props = {}
    for line in path.read_text(errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            props[key.strip()] = value.strip()
    return props


def failure_reason(path: Path, since: int = 0, lines: int = 3) -> str:
    """Why a JVM failed, from its log after byte `since` (earlier runs wrote the rest): the last exception line (its
    message names the bad setting; in a chain, the root cause), else the last lines."""
    try:
        with open(path, "rb") as log:
            log.seek(since)
            text = log.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    found = [m.group(0).strip() for m in map(_EXCEPTION.search, text) if m]
    return found[-1] if found else " | ".join(line.strip() for line in text[-lines:])


@dataclass
class KRaftBroker(BrokerFiles):
    node_id: int
    data_dir: Path
    cluster_id: str
    quorum_port: int  # node 1's CONTROLLER port: this node's own when it is the controller
    listeners: list[Listener]  # the client listeners; CONTROLLER is not among them
    controller: bool = True  # process.roles=broker,controller (node 1) or broker only
    settings: dict[str, str] = field(default_factory=dict)
    process: ProcessRecord | None = None
    version: str | None = None  # Kafka's version, from the classpath it was started with
    _log_start: int = field(default=0, init=False, repr=False, compare=False)  # kafka.log's size at this start

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def formatted(self) -> bool:
        """Whether the storage was formatted: `meta.properties` holds the cluster id and this node's id."""
        return (self.log_dir / "meta.properties").exists()

    @classmethod
    def plan(cls, base_dir: Path, node_id: int, *, port: int | None = None, proxied_port: int | None = None,
             settings: dict[str, str] | None = None, controller: KRaftBroker | None = None) -> KRaftBroker:
        """Ports and directory of node `node_id` in `base_dir/kraft<node_id>`. One listener on `port` (free if None);
        with `proxied_port`, a first listener `MEMBERS` advertised there and the own one named `DIRECT`. Without
        `controller` it is the quorum's controller too; with one, a broker of that controller's cluster.

        A node whose storage is already formatted (a restart) keeps its cluster id from `meta.properties`; its ports
        are new (a restarted quorum with its CONTROLLER port moved came up and kept its topics, measured on 4.4.0)."""
        listeners = plan_listeners(port, proxied_port, "a different `port`")
        node = cls(node_id, Path(base_dir) / f"kraft{node_id}", "", 0, listeners, controller is None,
                   dict(settings or {}))
        if node.formatted:
            node.cluster_id = _read_properties(node.log_dir / "meta.properties").get("cluster.id", "")
        if controller is not None:
            node.quorum_port, node.cluster_id = controller.quorum_port, node.cluster_id or controller.cluster_id
        else:
            node.quorum_port, node.cluster_id = free_port(), node.cluster_id or new_cluster_id()
        return node

    def properties(self) -> dict[str, str]:
        """server.properties: BASE_SETTINGS, this node's place in the cluster, then the caller's settings."""
        listeners = [f"{lst.name}://127.0.0.1:{lst.port}" for lst in self.listeners]
        names = [lst.name for lst in self.listeners]
        if self.controller:
            listeners.append(f"{CONTROLLER_LISTENER}://127.0.0.1:{self.quorum_port}")
        base = BASE_SETTINGS if self.controller else {k: v for k, v in BASE_SETTINGS.items()
                                                         if k not in CONTROLLER_ONLY}
        props = {
            **base,
            "process.roles": "broker,controller" if self.controller else "broker",
            "node.id": str(self.node_id),
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.quorum_port}",
            "controller.listener.names": CONTROLLER_LISTENER,
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(f"{lst.name}://127.0.0.1:{lst.advertised_port}"
                                             for lst in self.listeners),
            "listener.security.protocol.map": ",".join(f"{n}:PLAINTEXT" for n in [*names, CONTROLLER_LISTENER]),
            "inter.broker.listener.name": names[-1],
            "log.dirs": str(self.log_dir),
        }
        props.update(self.settings)
        return props

    def _java(self, java: str, classpath: jvm.Classpath, main: str, *args: str) -> list[str]:
        return [java, *JVM_FLAGS, f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={self.data_dir}", "-cp", str(classpath), main, *args]

    def start(self, classpath: jvm.Classpath | None = None) -> None:
        """Format the storage if it never was, then start the JVM; `wait_ready` waits for it."""
        extras.require("lab", "a KRaft broker (cluster up --kraft)")  # wait_ready's probe is confluent-kafka's
        classpath = classpath or jvm.classpath(jvm.KAFKA4_BROKER)
        java = java_executable()
        self.version = classpath.version_of("kafka_2.13")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        (self.data_dir / "log4j2.properties").write_text(_LOG4J2)
        if not self.formatted:
            self._format(java, classpath)
        argv = self._java(java, classpath, "kafka.Kafka", str(self.config_path))
        self.process = start_detached(f"kraft-{self.node_id}", argv, self.log_path, marker=str(self.config_path))

    def _format(self, java: str, classpath: jvm.Classpath) -> None:
        # Formatting writes meta.properties (cluster id, node id, directory id) and, on the controller, the bootstrap
        # checkpoint with the feature levels and the voter set. A broker refuses unformatted storage, and formatting
        # formatted storage fails ("already formatted"): so only when meta.properties is absent, and a restart keeps
        # what the first start formatted.
        quorum = "--standalone" if self.controller else "--no-initial-controllers"
        argv = self._java(java, classpath, "kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                          "-c", str(self.config_path), quorum)
        with open(self.log_path, "ab") as log:
            try:
                done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      timeout=_FORMAT_TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired:
                raise EmbeddedError(f"formatting the storage of KRaft node {self.node_id} took over "
                                    f"{_FORMAT_TIMEOUT_S} s; see {self.log_path}") from None
        if done.returncode != 0:
            raise EmbeddedError(f"could not format the storage of KRaft node {self.node_id} (exit {done.returncode});"
                                f" see {self.log_path}: {failure_reason(self.log_path, self._log_start)}")

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Wait until every listener accepts connections and the broker answers Metadata listing itself: a KRaft
        broker lists only registered, unfenced brokers, so this also means the controller has it."""
        deadline = time.monotonic() + timeout
        while not (all(port_open(lst.port) for lst in self.listeners) and self._lists_itself()):
            if self.process and not is_running(self.process):
                raise EmbeddedError(f"KRaft node {self.node_id} exited during start-up; see {self.log_path}: "
                                    f"{failure_reason(self.log_path, self._log_start)}")
            if time.monotonic() > deadline:
                raise EmbeddedError(f"KRaft node {self.node_id} did not answer Metadata within {timeout:.0f} s; "
                                    f"see {self.log_path}")
            time.sleep(0.1)

    def _lists_itself(self) -> bool:
        # A fresh client per probe: librdkafka's threads end with the object, and a probe is rare. confluent-kafka
        # comes with the lab extra, which `cluster up --kraft` asks for (start() checks it).
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        try:
            return self.node_id in admin.list_topics(timeout=2).brokers
        except KafkaException:
            return False

    def stop(self, grace: float = 30.0) -> bool:
        """A controlled shutdown (SIGTERM: the broker asks the controller to move its leadership away and flushes
        its log), SIGKILL after `grace`. Stop broker-only nodes before the controller, which they ask."""
        return bool(self.process) and stop_process(self.process, grace=grace)

    def purge(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def to_dict(self) -> dict:
        return {
            "node_id": self.node_id, "data_dir": str(self.data_dir), "cluster_id": self.cluster_id,
            "quorum_port": self.quorum_port, "listeners": [vars(lst) for lst in self.listeners],
            "controller": self.controller, "settings": self.settings,
            "process": self.process.to_dict() if self.process else None, "version": self.version,
        }

    @classmethod
    def from_dict(cls, data: dict) -> KRaftBroker:
        proc = data.get("process")
        return cls(int(data["node_id"]), Path(data["data_dir"]), data["cluster_id"], int(data["quorum_port"]),
                   [Listener(**lst) for lst in data["listeners"]], bool(data["controller"]),
                   dict(data.get("settings", {})), ProcessRecord.from_dict(proc) if proc else None,
                   data.get("version"))
