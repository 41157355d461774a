"""Apache Kafka brokers in ZooKeeper mode, run with `java` from the jars `jvm.py` resolves (docs/servers.md).

A broker registers itself under `/brokers/ids/<id>` (the real registration JSON), elects a controller that writes
the topic znodes, and keeps its logs in its own directory, so a restart keeps its data (`cluster down --purge`
wipes it). Readiness is the broker's own registration in ZooKeeper plus its port accepting connections.

Listeners. A broker has one listener by default. The lab gives it two: `MEMBERS`, advertised at the counting
proxy so every member's request crosses the proxy, and `DIRECT`, advertised at the broker's own port for the
load producer and the other brokers. Kafka answers Metadata with the addresses of the listener a request came
in on, so a client stays on the listener it bootstrapped from. The registration's top-level `host`/`port` (all
a 0.8 consumer reads) is the first PLAINTEXT listener in `advertised.listeners`, which is why `MEMBERS` is first.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from zkconsumer.embedded import jvm
from zkconsumer.embedded.process import (
    EmbeddedError,
    ProcessRecord,
    check_port_free,
    free_port,
    is_running,
    java_executable,
    log_tail,
    port_open,
    start_detached,
    stop_process,
)

JVM_FLAGS = ("-Xms128m", "-Xmx768m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true")

_LOG4J = """\
log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaServer=INFO
log4j.logger.kafka.controller.KafkaController=INFO
log4j.logger.state.change.logger=WARN
"""

# Settings every embedded broker gets. The group settings are the lab's: a 1 s minimum session lets the
# coordinator design run with the same short timeouts as the ZooKeeper design, and the initial rebalance delay
# is 0 unless a scenario asks for Kafka's default 3000 ms (it only delays the first join into an empty group).
BASE_SETTINGS: dict[str, str] = {
    "auto.create.topics.enable": "false",
    "delete.topic.enable": "true",
    "num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "10",
    "transaction.state.log.num.partitions": "4",
    "transaction.state.log.min.isr": "1",
    "min.insync.replicas": "1",
    "zookeeper.session.timeout.ms": "6000",
    "zookeeper.connection.timeout.ms": "30000",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "background.threads": "4",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.dedupe.buffer.size": "4194304",
    "controlled.shutdown.max.retries": "1",
}


@dataclass
class Listener:
    name: str
    port: int  # where the broker listens
    advertised_port: int  # what it tells clients (a proxy's port, or `port`)


def plan_listeners(port: int | None, proxied_port: int | None, port_option: str) -> list[Listener]:
    """One listener on `port` (free if None); with `proxied_port`, a first listener `MEMBERS` advertised there and
    the own one named `DIRECT` (the module docstring has why). Both broker kinds, ZooKeeper-mode and KRaft."""
    if port is not None:
        check_port_free(port, port_option)
    listeners = [Listener("PLAINTEXT" if proxied_port is None else "DIRECT", port or free_port(), 0)]
    listeners[0].advertised_port = listeners[0].port
    if proxied_port is not None:
        listeners.insert(0, Listener("MEMBERS", free_port(), proxied_port))
    return listeners


class BrokerFiles:
    """Where a broker listens and keeps its files, alike for both broker kinds (`listeners`, `data_dir`)."""

    listeners: list[Listener]
    data_dir: Path

    @property
    def port(self) -> int:
        """The broker's own port on its last listener (the direct one in the lab, the only one otherwise)."""
        return self.listeners[-1].port

    @property
    def bootstrap(self) -> str:
        """bootstrap.servers of that listener: the producer's, the admin's and readiness's."""
        return f"127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "kafka.log"


@dataclass
class KafkaBroker(BrokerFiles):
    broker_id: int
    data_dir: Path
    zookeeper_connect: str
    listeners: list[Listener]
    settings: dict[str, str] = field(default_factory=dict)
    process: ProcessRecord | None = None

    @classmethod
    def plan(cls, base_dir: Path, broker_id: int, zookeeper_connect: str, *, port: int | None = None,
             proxied_port: int | None = None, settings: dict[str, str] | None = None) -> KafkaBroker:
        """One listener on `port` (free if None); with `proxied_port`, a first listener advertised there."""
        listeners = plan_listeners(port, proxied_port, "--broker-port")
        return cls(broker_id, base_dir / f"kafka{broker_id}", zookeeper_connect, listeners, dict(settings or {}))

    def _properties(self, cluster_size: int) -> dict[str, str]:
        replication = str(min(3, cluster_size))
        props = {
            **BASE_SETTINGS,
            "broker.id": str(self.broker_id),
            "zookeeper.connect": self.zookeeper_connect,
            "log.dirs": str(self.data_dir / "logs"),
            "listeners": ",".join(f"{lst.name}://127.0.0.1:{lst.port}" for lst in self.listeners),
            "advertised.listeners": ",".join(f"{lst.name}://127.0.0.1:{lst.advertised_port}"
                                             for lst in self.listeners),
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "default.replication.factor": "1",
        }
        if len(self.listeners) > 1 or self.listeners[0].name != "PLAINTEXT":
            props["listener.security.protocol.map"] = ",".join(f"{lst.name}:PLAINTEXT" for lst in self.listeners)
            props["inter.broker.listener.name"] = self.listeners[-1].name
        props.update(self.settings)
        return props

    def start(self, cluster_size: int = 1, classpath: jvm.Classpath | None = None) -> None:
        """Start the JVM; `wait_ready` waits for it. The log dir survives restarts (a restart keeps the data)."""
        classpath = classpath or jvm.classpath(jvm.KAFKA_BROKER)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props = self._properties(cluster_size)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.data_dir / "log4j.properties").write_text(_LOG4J)
        argv = [
            java_executable(), *JVM_FLAGS,
            f"-Dlog4j.configuration=file:{self.data_dir / 'log4j.properties'}",
            f"-Dkafka.logs.dir={self.data_dir}",
            "-cp", str(classpath), "kafka.Kafka", str(self.config_path),
        ]
        self.process = start_detached(f"kafka-{self.broker_id}", argv, self.log_path, marker=str(self.config_path))

    def wait_ready(self, registered, timeout: float = 90.0) -> None:
        """Wait until `registered(broker_id)` (its znode exists) and its ports accept connections."""
        deadline = time.monotonic() + timeout
        while not (registered(self.broker_id) and all(port_open(lst.port) for lst in self.listeners)):
            if self.process and not is_running(self.process):
                raise EmbeddedError(f"Kafka broker {self.broker_id} exited during start-up; see {self.log_path}: "
                                    f"{log_tail(self.log_path, 3)}")
            if time.monotonic() > deadline:
                raise EmbeddedError(f"Kafka broker {self.broker_id} did not register in ZooKeeper within "
                                    f"{timeout:.0f} s; see {self.log_path}")
            time.sleep(0.1)

    def stop(self, grace: float = 30.0) -> bool:
        """A controlled shutdown (SIGTERM: leadership moves, the log is flushed), SIGKILL after `grace`."""
        return bool(self.process) and stop_process(self.process, grace=grace)

    def purge(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def to_dict(self) -> dict:
        return {
            "broker_id": self.broker_id, "data_dir": str(self.data_dir), "zookeeper_connect": self.zookeeper_connect,
            "listeners": [vars(lst) for lst in self.listeners], "settings": self.settings,
            "process": self.process.to_dict() if self.process else None,
        }

    @classmethod
    def from_dict(cls, data: dict) -> KafkaBroker:
        proc = data.get("process")
        return cls(int(data["broker_id"]), Path(data["data_dir"]), data["zookeeper_connect"],
                   [Listener(**lst) for lst in data["listeners"]], dict(data.get("settings", {})),
                   ProcessRecord.from_dict(proc) if proc else None)
