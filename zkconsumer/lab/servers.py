"""The servers a lab invocation runs against, started once and shared by its runs: ZooKeeper (embedded, one
server or an ensemble, or external), the broker (embedded tansu advertising the counting proxy, or external),
and the persistent Kafka proxy. Per-run ZooKeeper proxies are made by `zookeeper_proxies()`.

Every proxy record goes to a `SinkRouter`, which hands it to the current run's trace (or drops it between
runs), so one long-lived proxy serves many runs without mixing their counts.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zkconsumer.embedded.broker import TansuBroker
from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble
from zkconsumer.lab.wire.kafka import KafkaProxy
from zkconsumer.lab.wire.zk import ZkProxy

log = logging.getLogger(__name__)


class SinkRouter:
    """A proxy sink that forwards to whatever `route` currently is (None drops)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._target: Callable[[Any], None] | None = None

    def route(self, target: Callable[[Any], None] | None) -> None:
        with self._lock:
            self._target = target

    def __call__(self, record: Any) -> None:
        with self._lock:
            target = self._target
        if target is not None:
            target(record)


@dataclass
class LabServers:
    zookeeper: list[str]  # host:port of every ZooKeeper server (members get one proxy per server)
    broker: str  # host:port the Kafka proxy forwards to
    kafka_proxy: KafkaProxy
    kafka_router: SinkRouter
    ensemble: ZooKeeperEnsemble | None = None
    tansu: TansuBroker | None = None
    _stopped: bool = field(default=False, repr=False)

    @classmethod
    def start(cls, base_dir: Path, zk_servers: int = 1, zookeeper: str | None = None,
              bootstrap: str | None = None, kafka_proxy_port: int = 0) -> LabServers:
        """Embedded servers unless `zookeeper` / `bootstrap` are given. An external broker must advertise the
        Kafka proxy's address (`kafka_proxy_port`), or its clients bypass the proxy after their first
        Metadata request (docs/lab.md)."""
        router = SinkRouter()
        ensemble = tansu = None
        proxy: KafkaProxy | None = None
        try:
            if zookeeper is None:
                ensemble = ZooKeeperEnsemble.plan(base_dir / "zookeeper", size=zk_servers)
                ensemble.start()
                zk_hosts = ensemble.connect_string.split(",")
            else:
                zk_hosts = zookeeper.split("/", 1)[0].split(",")
            if bootstrap is None:
                # The proxy must exist first: tansu advertises its port, and forwards to tansu's own port.
                tansu = TansuBroker.plan(base_dir / "tansu")
                proxy = KafkaProxy(f"127.0.0.1:{tansu.port}", sink=router, name="lab-kafkaproxy",
                                   port=kafka_proxy_port).start()
                tansu.advertised_port = proxy.port
                tansu.start()
                upstream = tansu.bootstrap
            else:
                upstream = bootstrap.split(",")[0]
                proxy = KafkaProxy(upstream, sink=router, name="lab-kafkaproxy", port=kafka_proxy_port).start()
        except BaseException:
            if proxy is not None:
                proxy.stop()
            if tansu is not None:
                tansu.stop()
            if ensemble is not None:
                ensemble.stop()
            raise
        return cls(zk_hosts, upstream, proxy, router, ensemble, tansu)

    def zookeeper_proxies(self, router: SinkRouter) -> list[ZkProxy]:
        """Fresh proxies (one per ZooKeeper server) for one run; the caller stops them."""
        return [ZkProxy(host, sink=router, name=f"lab-zkproxy{i}").start() for i, host in enumerate(self.zookeeper)]

    @property
    def direct_zookeeper(self) -> str:
        return ",".join(self.zookeeper)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for stop in (self.kafka_proxy.stop, *(s.stop for s in (self.tansu, self.ensemble) if s is not None)):
            try:
                stop()
            except Exception:
                log.exception("error stopping a lab server")
