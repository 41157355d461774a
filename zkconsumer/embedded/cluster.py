"""`zkconsumer cluster up|status|down`: a real ZooKeeper (or ensemble) and Apache Kafka brokers in ZooKeeper mode,
in the background (docs/servers.md); with `--kraft`, beside them, an Apache Kafka 4.x broker in KRaft mode for the
modern group protocols (cooperative-sticky, KIP-848's consumer protocol), which needs no ZooKeeper (`kraft.py`).

    (no state) ──up──▶ running ──down──▶ stopped (data kept: the next `up` restarts with it)
                          │                 │
                          │             down --purge / up --purge ──▶ (no state, no data)
                          └─ a failed or killed `up` stops what it started

State lives in a JSON file in the cluster dir so that `status` and `down` work from any later process. ZooKeeper's
data and the brokers' logs live and die together: a restart keeps both (topics, offsets, messages), a purge
wipes both, so ZooKeeper never describes topics that no broker holds. The KRaft broker keeps its own metadata, in
its own directory (`kraft<id>/`), and follows the same rules: kept by `down`, wiped by `--purge`.

`--kraft` adds the KRaft broker to the ZooKeeper design's servers rather than replacing them: ZooKeeper and the 3.9
brokers start as without it (`--no-broker` still drops the 3.9 brokers), so one `up` serves both designs of the lab.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from zkconsumer.embedded import jvm
from zkconsumer.embedded.kafka import KafkaBroker
from zkconsumer.embedded.kraft import KRaftBroker
from zkconsumer.embedded.lifeline import Lifeline
from zkconsumer.embedded.process import EmbeddedError, is_running, java_executable, wait_until
from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble, zookeeper_classpath
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.client import ZkClient, ZkUnavailableError

DEFAULT_DIR = Path(".zkconsumer") / "cluster"
STATE_FILE = "state.json"
log = logging.getLogger(__name__)


@dataclass
class BrokerStatus:
    broker_id: int
    address: str
    alive: bool  # its process runs
    registered: bool  # its /brokers/ids znode exists


@dataclass
class KRaftStatus:
    node_id: int
    address: str
    alive: bool  # its process runs
    version: str | None  # Kafka's release, from the jars it was started with
    roles: str  # process.roles: "broker,controller" or "broker"


@dataclass
class ClusterStatus:
    zookeeper_connect: str
    bootstrap_servers: str | None
    modes: list[tuple[int, int, str | None]]  # (server id, client port, mode or None if down)
    brokers: list[BrokerStatus] = field(default_factory=list)
    controller: int | None = None
    topics: list[str] = field(default_factory=list)
    kraft: list[KRaftStatus] = field(default_factory=list)
    kraft_bootstrap_servers: str | None = None

    @property
    def broker_alive(self) -> bool:
        return any(b.alive for b in self.brokers)


def controller_id(zk: ZkClient) -> int | None:
    found = zk.get(layout.CONTROLLER)
    if found is None:
        return None
    try:
        return int(json.loads(found[0])["brokerid"])
    except (ValueError, KeyError, TypeError):
        return None


@dataclass
class EmbeddedCluster:
    base_dir: Path
    ensemble: ZooKeeperEnsemble
    brokers: list[KafkaBroker] = field(default_factory=list)
    kraft: list[KRaftBroker] = field(default_factory=list)  # node 1 first: the quorum's controller

    @property
    def zookeeper_connect(self) -> str:
        return self.ensemble.connect_string

    @property
    def bootstrap_servers(self) -> str | None:
        return ",".join(b.bootstrap for b in self.brokers) or None

    @property
    def kraft_bootstrap_servers(self) -> str | None:
        """bootstrap.servers of the KRaft brokers (`up --kraft`), or None."""
        return ",".join(b.bootstrap for b in self.kraft) or None

    @property
    def tls_settings(self) -> dict[str, str] | None:
        """The consumer settings that reach ZooKeeper over TLS (`up --tls`), or None: the brokers, the readiness
        probe and clients without TLS keep the plain port."""
        if self.ensemble.tls is None or self.ensemble.secure_connect_string is None:
            return None
        return {
            "zookeeper.connect": self.ensemble.secure_connect_string, "zookeeper.ssl.client.enable": "true",
            "zookeeper.ssl.truststore.location": str(self.ensemble.tls.ca), "zookeeper.ssl.truststore.type": "PEM",
        }

    # --- state file --------------------------------------------------------------------------------

    def save(self) -> None:
        state = {
            "zookeeper.connect": self.zookeeper_connect, "bootstrap.servers": self.bootstrap_servers,
            "ensemble": self.ensemble.to_dict(), "brokers": [b.to_dict() for b in self.brokers],
            "kraft.bootstrap.servers": self.kraft_bootstrap_servers, "kraft": [b.to_dict() for b in self.kraft],
        }
        path = self.base_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, base_dir: Path) -> EmbeddedCluster:
        path = Path(base_dir) / STATE_FILE
        try:
            state = json.loads(path.read_text())
            return cls(base_dir=Path(base_dir), ensemble=ZooKeeperEnsemble.from_dict(state["ensemble"]),
                       brokers=[KafkaBroker.from_dict(b) for b in state.get("brokers") or []],
                       kraft=[KRaftBroker.from_dict(b) for b in state.get("kraft") or []])
        except FileNotFoundError:
            raise EmbeddedError(
                f"no cluster in {base_dir} (no {STATE_FILE}): start one with `zkconsumer cluster up`"
            ) from None
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddedError(f"{path} is corrupt ({exc}): stop stray processes by hand and delete it") from None

    # --- lifecycle ---------------------------------------------------------------------------------

    @classmethod
    def up(
        cls, base_dir: Path = DEFAULT_DIR, zk_servers: int = 1, zk_port: int | None = None,
        broker_port: int | None = None, brokers: int = 1, purge: bool = False,
        broker_settings: dict[str, str] | None = None, tls: bool = False, kraft: int = 0,
        kraft_settings: dict[str, str] | None = None,
    ) -> EmbeddedCluster:
        """Start ZooKeeper and `brokers` Kafka brokers (0: ZooKeeper only); with `purge`, from empty data; with
        `tls`, ZooKeeper also has a TLS client port, with a throw-away CA in `base_dir/tls` (docs/security.md);
        with `kraft`, that many Kafka 4.x KRaft nodes beside them (node 1 the controller, `kraft.py`)."""
        base_dir = Path(base_dir).resolve()
        if (base_dir / STATE_FILE).exists():
            existing = cls.load(base_dir)
            if existing.anything_running():
                raise EmbeddedError(
                    f"a cluster is already running in {base_dir}: run `zkconsumer cluster down --dir {base_dir}` first"
                )
            (base_dir / STATE_FILE).unlink()
        if purge:
            purge_data(base_dir)
        if broker_port is not None and brokers != 1:
            raise EmbeddedError("--broker-port only applies to a single broker; drop it or use --brokers 1")
        base_dir.mkdir(parents=True, exist_ok=True)
        # Resolve the jars before any server starts: a failed download then leaves nothing to clean up.
        classpath = jvm.classpath(jvm.KAFKA_BROKER) if brokers else None
        kraft_classpath = jvm.classpath(jvm.KAFKA4_BROKER) if kraft else None
        cluster = cls(base_dir, ZooKeeperEnsemble.plan(base_dir, zk_servers, zk_port, tls=tls))
        java, zk_classpath = java_executable(), zookeeper_classpath(tls=tls)
        lifeline = Lifeline()  # stops the servers if this process dies before they are all up
        try:
            for node in cluster.ensemble.nodes:
                cluster.ensemble.start_node(node, java=java, classpath=zk_classpath)
                lifeline.watch(node.process)
            cluster.save()
            cluster.ensemble.wait_ready()
            cluster.brokers = [
                KafkaBroker.plan(base_dir, i, cluster.zookeeper_connect, port=broker_port, settings=broker_settings)
                for i in range(1, brokers + 1)
            ]
            for broker in cluster.brokers:
                broker.start(cluster_size=brokers, classpath=classpath)
                lifeline.watch(broker.process)
            cluster.save()
            # Started before the 3.9 brokers are waited for, so both start at once; they share nothing.
            for node_id in range(1, kraft + 1):
                controller = cluster.kraft[0] if cluster.kraft else None
                cluster.kraft.append(KRaftBroker.plan(base_dir, node_id, settings=kraft_settings,
                                                      controller=controller))
                cluster.kraft[-1].start(classpath=kraft_classpath)
                lifeline.watch(cluster.kraft[-1].process)
                cluster.save()
            cluster.wait_brokers()
            for node in cluster.kraft:
                node.wait_ready()
            lifeline.release()
        except BaseException:
            cluster.down()
            lifeline.cut()
            raise
        return cluster

    def wait_brokers(self, timeout: float = 90.0) -> None:
        """Every broker registered and a controller elected (it is the controller that writes topic znodes)."""
        with ZkClient(self.zookeeper_connect, log_id="cluster") as zk:
            for broker in self.brokers:
                broker.wait_ready(lambda i: zk.exists(layout.broker_path(i)), timeout)
            if self.brokers and not wait_until(lambda: controller_id(zk) is not None, timeout):
                raise EmbeddedError(f"no Kafka controller was elected within {timeout:.0f} s; see "
                                    f"{self.brokers[0].log_path}")

    def anything_running(self) -> bool:
        records = ([n.process for n in self.ensemble.nodes] + [b.process for b in self.brokers]
                   + [b.process for b in self.kraft])
        return any(is_running(r) for r in records if r)

    def down(self, purge: bool = False) -> list[str]:
        """Stop everything we started, brokers first (a controlled shutdown needs ZooKeeper, or for a KRaft broker
        its controller, node 1, stopped last of them); returns what was stopped. With `purge`, delete ZooKeeper's
        data and the brokers' logs too."""
        stopped = []
        for broker in self.brokers:
            if broker.stop():
                stopped.append(f"{broker.process.name} (pid {broker.process.pid})")
        for node in reversed(self.kraft):
            if node.stop():
                stopped.append(f"{node.process.name} (pid {node.process.pid})")
        for node in self.ensemble.nodes:
            if node.process and self.ensemble.stop_node(node):
                stopped.append(f"{node.process.name} (pid {node.process.pid})")
        state = self.base_dir / STATE_FILE
        if state.exists():
            state.unlink()
        if purge:
            purge_data(self.base_dir)
        return stopped

    def status(self) -> ClusterStatus:
        modes = [(n.server_id, n.client_port, n.mode()) for n in self.ensemble.nodes]
        topics: list[str] = []
        registered: set[int] = set()
        controller = None
        if any(m for _, _, m in modes):
            try:
                with ZkClient(self.zookeeper_connect, session_timeout_ms=4000, log_id="cluster") as zk:
                    topics = sorted(zk.get_children(layout.BROKER_TOPICS) or [])
                    registered = {int(c) for c in zk.get_children(layout.BROKER_IDS) or [] if c.isdigit()}
                    controller = controller_id(zk)
            except ZkUnavailableError:
                pass
        brokers = [BrokerStatus(b.broker_id, b.bootstrap, bool(b.process and is_running(b.process)),
                                b.broker_id in registered) for b in self.brokers]
        kraft = [KRaftStatus(b.node_id, b.bootstrap, bool(b.process and is_running(b.process)), b.version,
                             "broker,controller" if b.controller else "broker") for b in self.kraft]
        return ClusterStatus(self.zookeeper_connect, self.bootstrap_servers, modes, brokers, controller, topics,
                             kraft, self.kraft_bootstrap_servers)


def purge_data(base_dir: Path) -> None:
    """Delete the data of a stopped cluster (ZooKeeper's and the brokers', the KRaft ones' too), never anything else
    in `base_dir`."""
    for child in Path(base_dir).glob("*"):
        if child.is_dir() and child.name.startswith(("zk", "kafka", "kraft")):
            shutil.rmtree(child, ignore_errors=True)


def default_dir() -> Path:
    return Path(os.environ.get("ZKCONSUMER_CLUSTER_DIR", DEFAULT_DIR))


def _running(base_dir: Path | None) -> EmbeddedCluster | None:
    try:
        cluster = EmbeddedCluster.load(base_dir or default_dir())
    except EmbeddedError:
        return None
    return cluster if cluster.anything_running() else None


def default_zookeeper(base_dir: Path | None = None) -> str | None:
    """`zookeeper.connect` of a running embedded cluster, so CLI commands can omit --zookeeper."""
    cluster = _running(base_dir)
    return cluster.zookeeper_connect if cluster else None
