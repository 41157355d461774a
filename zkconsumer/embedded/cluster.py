"""`zkconsumer cluster up|status|down`: a real ZooKeeper (or ensemble) plus the tansu broker, in the background.

State lives in a JSON file in the cluster dir so that `status` and `down` work from any later process.
`up` cleans up after itself on every failure: a half-started cluster is never left running.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from zkconsumer.embedded.broker import TansuBroker
from zkconsumer.embedded.process import (
    EmbeddedError,
    ProcessRecord,
    is_running,
    log_tail,
    start_detached,
    stop_process,
    wait_until,
)
from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.client import ZkClient, ZkUnavailableError

DEFAULT_DIR = Path(".zkconsumer") / "cluster"
STATE_FILE = "state.json"
log = logging.getLogger(__name__)


@dataclass
class ClusterStatus:
    zookeeper_connect: str
    bootstrap_servers: str | None
    modes: list[tuple[int, int, str | None]]  # (server id, client port, mode or None if down)
    broker_alive: bool
    topics: list[str] = field(default_factory=list)


@dataclass
class EmbeddedCluster:
    base_dir: Path
    ensemble: ZooKeeperEnsemble
    broker: TansuBroker | None = None
    registrar: ProcessRecord | None = None

    @property
    def zookeeper_connect(self) -> str:
        return self.ensemble.connect_string

    @property
    def bootstrap_servers(self) -> str | None:
        return self.broker.bootstrap if self.broker else None

    # --- state file --------------------------------------------------------------------------------

    def save(self) -> None:
        state = {
            "zookeeper.connect": self.zookeeper_connect, "bootstrap.servers": self.bootstrap_servers,
            "ensemble": self.ensemble.to_dict(), "broker": self.broker.to_dict() if self.broker else None,
            "registrar": self.registrar.to_dict() if self.registrar else None,
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
        except FileNotFoundError:
            raise EmbeddedError(
                f"no cluster in {base_dir} (no {STATE_FILE}): start one with `zkconsumer cluster up`"
            ) from None
        except ValueError as exc:
            raise EmbeddedError(f"{path} is corrupt ({exc}): stop stray processes by hand and delete it") from None
        broker, registrar = state.get("broker"), state.get("registrar")
        return cls(
            base_dir=Path(base_dir), ensemble=ZooKeeperEnsemble.from_dict(state["ensemble"]),
            broker=TansuBroker.from_dict(broker) if broker else None,
            registrar=ProcessRecord.from_dict(registrar) if registrar else None,
        )

    # --- lifecycle ---------------------------------------------------------------------------------

    @classmethod
    def up(
        cls, base_dir: Path = DEFAULT_DIR, zk_servers: int = 1, zk_port: int | None = None,
        broker_port: int | None = None, with_broker: bool = True,
    ) -> EmbeddedCluster:
        base_dir = Path(base_dir).resolve()
        if (base_dir / STATE_FILE).exists():
            existing = cls.load(base_dir)
            if existing.anything_running():
                raise EmbeddedError(
                    f"a cluster is already running in {base_dir}: run `zkconsumer cluster down --dir {base_dir}` first"
                )
            (base_dir / STATE_FILE).unlink()
        base_dir.mkdir(parents=True, exist_ok=True)
        cluster = cls(base_dir, ZooKeeperEnsemble.plan(base_dir, zk_servers, zk_port))
        broker = TansuBroker.plan(base_dir, broker_port) if with_broker else None
        try:
            cluster.ensemble.start()
            cluster.save()
            if broker is not None:
                cluster.broker = broker
                broker.start()
                cluster.save()
                cluster._start_registrar()
                cluster.save()
        except BaseException:
            cluster.down()
            raise
        return cluster

    def _start_registrar(self) -> None:
        assert self.broker is not None
        argv = [sys.executable, "-m", "zkconsumer.embedded.registrar", "--zookeeper", self.zookeeper_connect,
                "--broker-id", str(self.broker.node_id), "--port", str(self.broker.port)]
        log_path = self.base_dir / "broker" / "registrar.log"
        marker = f"--port {self.broker.port}"
        self.registrar = start_detached("registrar", argv, log_path, marker=marker)
        with ZkClient(self.zookeeper_connect, log_id="cluster") as zk:
            path = layout.broker_path(self.broker.node_id)
            if not wait_until(lambda: zk.exists(path) or not is_running(self.registrar), 30):
                raise EmbeddedError(f"the broker was not registered in ZooKeeper within 30 s; see {log_path}")
            if not zk.exists(path):
                raise EmbeddedError(f"the broker registrar exited; see {log_path}: {log_tail(log_path, 3)}")

    def anything_running(self) -> bool:
        records = [n.process for n in self.ensemble.nodes if n.process]
        records += [r for r in (self.registrar, self.broker.process if self.broker else None) if r]
        return any(is_running(r) for r in records)

    def down(self) -> list[str]:
        """Stop everything we started (registrar first so its session ends cleanly). Returns what was stopped."""
        stopped = []
        records = [self.registrar, self.broker.process if self.broker else None]
        records += [n.process for n in self.ensemble.nodes]
        for record in records:
            if record and stop_process(record):
                stopped.append(f"{record.name} (pid {record.pid})")
        state = self.base_dir / STATE_FILE
        if state.exists():
            state.unlink()
        return stopped

    def status(self) -> ClusterStatus:
        modes = [(n.server_id, n.client_port, n.mode()) for n in self.ensemble.nodes]
        topics: list[str] = []
        if any(m for _, _, m in modes):
            try:
                with ZkClient(self.zookeeper_connect, session_timeout_ms=4000, log_id="cluster") as zk:
                    topics = sorted(zk.get_children(layout.BROKER_TOPICS) or [])
            except ZkUnavailableError:
                pass
        alive = bool(self.broker and self.broker.process and is_running(self.broker.process))
        return ClusterStatus(self.zookeeper_connect, self.bootstrap_servers, modes, alive, topics)


def default_dir() -> Path:
    return Path(os.environ.get("ZKCONSUMER_CLUSTER_DIR", DEFAULT_DIR))


def default_zookeeper(base_dir: Path | None = None) -> str | None:
    """`zookeeper.connect` of a running embedded cluster, so CLI commands can omit --zookeeper."""
    try:
        cluster = EmbeddedCluster.load(base_dir or default_dir())
    except EmbeddedError:
        return None
    return cluster.zookeeper_connect if cluster.anything_running() else None
