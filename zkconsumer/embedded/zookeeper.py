"""A real ZooKeeper server (or N-server ensemble) run with `java` from the jars inside the pyspark wheel, or, without
the `lab` extra that brings pyspark, from Apache Kafka 3.9's own classpath (docs/servers.md).

Readiness is judged by `srvr` reporting a `Mode:` line: `ruok` answers `imok` before the server serves
sessions (and forever, when a jar such as snappy-java is missing), so it is not a readiness probe.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass, field
from pathlib import Path

from zkconsumer import extras
from zkconsumer.embedded.process import (
    EmbeddedError,
    ProcessRecord,
    check_port_free,
    four_letter_word,
    free_port,
    is_running,
    java_executable,
    log_tail,
    start_detached,
    stop_process,
)
from zkconsumer.embedded.tls_files import TlsFiles

# Without metrics-core the JVM exits; without snappy-java it never serves a session (see docs/servers.md).
_REQUIRED_JARS = ("zookeeper-3", "zookeeper-jute", "slf4j-api", "metrics-core", "snappy-java")
# log4j 2 in pyspark's jars, reload4j (log4j 1) in Kafka 3.9's: whichever is there gets its configuration file.
_LOGGING_JARS = ("log4j-slf4j2-impl", "log4j-api-2", "log4j-core", "slf4j-reload4j", "reload4j")
# A TLS client port needs the Netty connection factory (ZooKeeper's NIO one has no TLS); pyspark ships Netty too, and
# so does Kafka 3.9. netty-codec-base exists from Netty 4.2 (pyspark's) on; Kafka 3.9's Netty 4.1 has it in codec.
_NETTY_JARS = ("netty-common-4", "netty-buffer-4", "netty-codec-4", "netty-handler-4",
               "netty-resolver-4", "netty-transport-4", "netty-transport-native-unix-common-4",
               "netty-transport-classes-epoll-4")
_OPTIONAL_NETTY_JARS = ("netty-codec-base-4",)
JVM_FLAGS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss1m")

_LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} [%t] %-5level %c{1} - %msg%n
rootLogger.level = INFO
rootLogger.appenderRef.console.ref = console
"""
_LOG4J1 = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=%d{ISO8601} [%t] %-5p %c{1} - %m%n
"""


def pyspark_jar_dir() -> Path:
    """Locate pyspark/jars without importing pyspark (which is slow and starts nothing we need)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedError(
            "pyspark is not installed: run `make demo` or `pip install pyspark`; its wheel carries the ZooKeeper jars"
        )
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    if not jars.is_dir():
        raise EmbeddedError(f"{jars} does not exist: reinstall pyspark (pip install --force-reinstall pyspark)")
    return jars


def zookeeper_jar_dir() -> Path:
    """pyspark's jars when pyspark is installed (the `lab` extra: ZooKeeper 3.9), else those of Apache Kafka 3.9's
    broker from the JVM cache (resolved on first use): the ZooKeeper 3.8 that Kafka 3.9 ships and runs itself."""
    if importlib.util.find_spec("pyspark") is not None:
        return pyspark_jar_dir()
    from zkconsumer.embedded import jvm

    return jvm.classpath(jvm.KAFKA_BROKER).directory / "jars"


def zookeeper_classpath(jar_dir: Path | None = None, *, tls: bool = False) -> str:
    jar_dir = jar_dir or zookeeper_jar_dir()
    chosen = []
    required = _REQUIRED_JARS + (_NETTY_JARS if tls else ())
    for prefix in required + (_OPTIONAL_NETTY_JARS if tls else ()) + _LOGGING_JARS:
        matches = sorted(p for p in jar_dir.glob(f"{prefix}*.jar") if "tests" not in p.name)
        if not matches:
            if prefix in required:
                raise EmbeddedError(
                    f"no {prefix}*.jar in {jar_dir}: these jars hold no ZooKeeper server (pyspark>=4.0's and Apache "
                    f"Kafka 3.9's do: install zkconsumer[lab], or resolve Kafka's with `make jvm`)"
                )
            continue
        chosen.append(str(matches[-1]))
    return ":".join(chosen)


@dataclass
class ZooKeeperNode:
    """One server of a standalone setup or an ensemble."""

    server_id: int
    client_port: int
    quorum_port: int
    election_port: int
    data_dir: Path
    process: ProcessRecord | None = None
    secure_port: int | None = None  # the TLS client port, when the ensemble has TLS

    @property
    def config_path(self) -> Path:
        return self.data_dir / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    def mode(self) -> str | None:
        """'standalone', 'leader' or 'follower' once the server serves sessions, else None."""
        for line in four_letter_word(self.client_port, "srvr").splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def to_dict(self) -> dict:
        return {
            "server_id": self.server_id, "client_port": self.client_port, "quorum_port": self.quorum_port,
            "election_port": self.election_port, "data_dir": str(self.data_dir),
            "process": self.process.to_dict() if self.process else None, "secure_port": self.secure_port,
        }

    @classmethod
    def from_dict(cls, data: dict) -> ZooKeeperNode:
        proc = data.get("process")
        return cls(
            server_id=int(data["server_id"]), client_port=int(data["client_port"]),
            quorum_port=int(data["quorum_port"]), election_port=int(data["election_port"]),
            data_dir=Path(data["data_dir"]), process=ProcessRecord.from_dict(proc) if proc else None,
            secure_port=data.get("secure_port"),
        )


@dataclass
class ZooKeeperEnsemble:
    """A standalone server (size 1) or an ensemble, all on 127.0.0.1."""

    nodes: list[ZooKeeperNode] = field(default_factory=list)
    tls: TlsFiles | None = None  # with TLS, every server also has a secure client port
    # With TLS: refuse a client that offers no certificate (ssl.clientAuth=need) instead of only checking one that
    # is offered (want, the default here).
    require_client_cert: bool = False

    @property
    def connect_string(self) -> str:
        """The plain client ports: the brokers', the readiness probe's (4lw) and any client's without TLS."""
        return ",".join(f"127.0.0.1:{n.client_port}" for n in self.nodes)

    @property
    def secure_connect_string(self) -> str | None:
        """The TLS client ports (zookeeper.ssl.client.enable=true), or None without TLS."""
        if self.tls is None:
            return None
        return ",".join(f"127.0.0.1:{n.secure_port}" for n in self.nodes)

    @classmethod
    def plan(cls, base_dir: Path, size: int = 1, client_port: int | None = None, *,
             tls: bool = False, require_client_cert: bool = False) -> ZooKeeperEnsemble:
        """Ports and directories for `size` servers; with `tls`, a new throw-away CA and server certificate in
        `base_dir/tls` (kept if one is there: clients hold its CA) and a secure client port per server, which
        with `require_client_cert` refuses clients that present no certificate signed by that CA."""
        if require_client_cert and not tls:
            raise EmbeddedError("requiring a client certificate needs TLS")
        if size < 1:
            raise EmbeddedError(f"--zk-servers must be at least 1, got {size}")
        if client_port is not None:
            if size != 1:
                raise EmbeddedError("--zk-port only applies to a single server; drop it or use --zk-servers 1")
            check_port_free(client_port, "--zk-port")
        nodes = []
        used: set[int] = set()
        for server_id in range(1, size + 1):
            ports = []
            while len(ports) < 3:
                port = client_port if (client_port and not ports) else free_port()
                if port not in used:
                    used.add(port)
                    ports.append(port)
            nodes.append(ZooKeeperNode(server_id, *ports, data_dir=base_dir / f"zk{server_id}"))
        if not tls:
            return cls(nodes)
        files = TlsFiles(base_dir / "tls")
        if not files.exist():
            extras.require("tls", "a TLS ZooKeeper (cluster up --tls)")
            from zkconsumer.embedded.certs import make_authority

            files = make_authority(files.directory)
        for node in nodes:
            node.secure_port = next(p for p in iter(free_port, None) if p not in used)
            used.add(node.secure_port)
        return cls(nodes, files, require_client_cert)

    def _write_config(self, node: ZooKeeperNode) -> None:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            "tickTime=1000", "initLimit=10", "syncLimit=5",
            f"dataDir={node.data_dir}", f"clientPort={node.client_port}", "clientPortAddress=127.0.0.1",
            "admin.enableServer=false", "4lw.commands.whitelist=*", "maxClientCnxns=0",
            # Tests and lab runs use session timeouts down to 1 s; Kafka's default 6 s stays inside the range.
            "minSessionTimeout=1000", "maxSessionTimeout=60000",
        ]
        if self.tls is not None and node.secure_port is not None:
            lines += [
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                f"secureClientPort={node.secure_port}", "secureClientPortAddress=127.0.0.1",
                f"ssl.keyStore.location={self.tls.server}", "ssl.keyStore.type=PEM",
                f"ssl.trustStore.location={self.tls.ca}", "ssl.trustStore.type=PEM",
                # want: a client certificate is checked when offered, not required; need (ZooKeeper's default,
                # X509Util.ClientAuth) refuses a client without one during the handshake.
                f"ssl.clientAuth={'need' if self.require_client_cert else 'want'}",
            ]
        if len(self.nodes) > 1:
            lines += [f"server.{n.server_id}=127.0.0.1:{n.quorum_port}:{n.election_port}" for n in self.nodes]
            (node.data_dir / "myid").write_text(f"{node.server_id}\n")
        node.config_path.write_text("\n".join(lines) + "\n")
        (node.data_dir / "log4j2.properties").write_text(_LOG4J2)
        (node.data_dir / "log4j.properties").write_text(_LOG4J1)

    def start(self, timeout: float = 60.0) -> None:
        """Start every server and wait until each one reports a Mode; on failure stop what was started."""
        java = java_executable()
        classpath = zookeeper_classpath(tls=self.tls is not None)
        try:
            for node in self.nodes:
                self.start_node(node, java=java, classpath=classpath)
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise

    def start_node(self, node: ZooKeeperNode, java: str | None = None, classpath: str | None = None) -> None:
        """(Re)start one server, e.g. after a test killed it."""
        self._write_config(node)
        argv = [
            java or java_executable(), *JVM_FLAGS,
            f"-Dlog4j2.configurationFile={node.data_dir / 'log4j2.properties'}",
            f"-Dlog4j.configuration=file:{node.data_dir / 'log4j.properties'}",
            "-Dzookeeper.admin.enableServer=false",
            "-cp", classpath or zookeeper_classpath(tls=self.tls is not None),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(node.config_path),
        ]
        node.process = start_detached(f"zookeeper-{node.server_id}", argv, node.log_path, marker=str(node.config_path))

    def wait_ready(self, timeout: float = 60.0, nodes: list[ZooKeeperNode] | None = None) -> None:
        deadline = time.monotonic() + timeout
        for node in nodes or self.nodes:
            while node.mode() is None:
                if node.process and not is_running(node.process):
                    raise EmbeddedError(
                        f"ZooKeeper server {node.server_id} exited during start-up; see {node.log_path}: "
                        f"{log_tail(node.log_path, 3)}"
                    )
                if time.monotonic() > deadline:
                    raise EmbeddedError(
                        f"ZooKeeper server {node.server_id} on port {node.client_port} did not become ready in "
                        f"{timeout:.0f} s; see {node.log_path}"
                    )
                time.sleep(0.05)

    def leader(self) -> ZooKeeperNode | None:
        return next((n for n in self.nodes if n.mode() in ("leader", "standalone")), None)

    def stop(self) -> None:
        for node in self.nodes:
            self.stop_node(node)

    def stop_node(self, node: ZooKeeperNode) -> bool:
        """Stop one server; True if it was running."""
        return bool(node.process) and stop_process(node.process)

    def to_dict(self) -> dict:
        return {"nodes": [n.to_dict() for n in self.nodes], "tls": str(self.tls.directory) if self.tls else None,
                "require_client_cert": self.require_client_cert}

    @classmethod
    def from_dict(cls, data: dict) -> ZooKeeperEnsemble:
        tls = data.get("tls")
        return cls([ZooKeeperNode.from_dict(n) for n in data["nodes"]], TlsFiles(Path(tls)) if tls else None,
                    bool(data.get("require_client_cert", False)))
