"""The servers a lab invocation runs against, started once and shared by its runs: ZooKeeper (embedded, one
server or an ensemble, or external), the broker (embedded Apache Kafka in ZooKeeper mode, or external), and the
persistent Kafka proxy. Per-run ZooKeeper proxies are made by `zookeeper_proxies()`.

The embedded broker has two listeners (zkconsumer/embedded/kafka.py): `MEMBERS`, advertised at the Kafka proxy,
which is therefore also the address in its `/brokers/ids` registration (what the ZooKeeper design's fetchers
read), and `DIRECT`, its own port, for the load producer and the topic admin, whose requests are no member's and
must not cross the proxy. The proxy is made first (the broker's `advertised.listeners` needs its port), then
pointed at `MEMBERS`.

`group.initial.rebalance.delay.ms` is a broker setting that a scenario chooses (`[coordinator]`), so
`configure_broker` restarts the embedded broker when a run needs other settings than it has (same ports, same
data); an external broker cannot be reconfigured, which the manifest records (`describe()`).

The designs of Kafka's newer group protocols (cooperative-sticky, the KIP-848 consumer protocol) run on an
Apache Kafka 4.x broker in KRaft mode (designs.py, `broker_kind`), started the first time a run asks for one
(`side`), with its own persistent Kafka proxy and the same two listeners; `configure_kraft` restarts it when a
case needs other group settings (the consumer protocol's heartbeat and session are broker settings there). A run
reaches its design's broker through a `BrokerSide`: the direct address, the proxy and the proxy's router.

Every proxy record goes to a `SinkRouter`, which hands it to the current run's trace (or drops it between
runs), so one long-lived proxy serves many runs without mixing their counts.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zkconsumer.embedded import jvm
from zkconsumer.embedded.kafka import KafkaBroker
from zkconsumer.embedded.kraft import KRaftBroker
from zkconsumer.embedded.lifeline import Lifeline
from zkconsumer.embedded.process import EmbeddedError, ProcessRecord
from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble
from zkconsumer.errors import InputError
from zkconsumer.lab.designs import BrokerKind, broker_kind
from zkconsumer.lab.runs.server_info import (
    CONSUMER_GROUP_SETTINGS,
    broker_info,
    wait_group_coordinator,
    zookeeper_info,
)
from zkconsumer.lab.wire.kafka import KafkaProxy
from zkconsumer.lab.wire.zk import ZkProxy
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.client import ZkClient

log = logging.getLogger(__name__)
BROKER_ID = 1
_UNREGISTER_S = 15.0  # a stopped broker's registration goes with its ZooKeeper session (6 s timeout at worst)


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


def broker_settings(scenario: Any) -> dict[str, str]:
    """The broker settings a scenario's coordinator design needs (docs/scenarios.md, `[coordinator]`)."""
    return {"group.initial.rebalance.delay.ms": str(scenario.coordinator.initial_rebalance_delay_ms)}


def kraft_settings(scenario: Any) -> dict[str, str]:
    """The KRaft broker's group settings a scenario needs: its `[coordinator]` session and heartbeat, which the
    consumer protocol takes from the broker (each with its bound moved so the broker accepts it: Kafka refuses a
    heartbeat below `group.consumer.min.heartbeat.interval.ms` at start-up), and the classic protocol's initial
    rebalance delay as on the ZooKeeper-mode broker."""
    c = scenario.coordinator
    heartbeat, session = c.heartbeat_interval_ms, c.session_timeout_ms
    return {
        "group.initial.rebalance.delay.ms": str(c.initial_rebalance_delay_ms),
        "group.consumer.heartbeat.interval.ms": str(heartbeat),
        "group.consumer.min.heartbeat.interval.ms": str(heartbeat),
        "group.consumer.max.heartbeat.interval.ms": str(max(heartbeat, 15000)),
        "group.consumer.session.timeout.ms": str(session),
        "group.consumer.min.session.timeout.ms": str(min(session, 1000)),
        "group.consumer.max.session.timeout.ms": str(max(session, 60000)),
    }


@dataclass(frozen=True)
class BrokerSide:
    """The broker a design's members talk to, as one run needs it."""

    kind: BrokerKind
    broker: str  # host:port for traffic that is no member's (load producer, topic admin): not the proxy
    proxy: KafkaProxy
    router: SinkRouter
    kafka: KafkaBroker | KRaftBroker | None  # None: an external broker


@dataclass
class LabServers:
    zookeeper: list[str]  # host:port of every ZooKeeper server (members get one proxy per server)
    broker: str  # host:port for traffic that is no member's (load producer, topic admin): not the proxy
    kafka_proxy: KafkaProxy
    kafka_router: SinkRouter
    ensemble: ZooKeeperEnsemble | None = None
    kafka: KafkaBroker | None = None
    chroot: str = ""  # an external ZooKeeper's chroot (`--zookeeper h:p/chroot`): the broker's and the members'
    _kafka_version: str | None = field(default=None, repr=False)
    _described: dict[str, Any] | None = field(default=None, repr=False)
    _wanted: dict[str, str] = field(default_factory=dict, repr=False)  # what runs asked of an external broker
    _stopped: bool = field(default=False, repr=False)
    # Stops the embedded servers if the lab's process dies without running `stop` (kill -9 of `lab run`): they
    # run in sessions of their own, so nothing else would (embedded/lifeline.py).
    lifeline: Lifeline | None = field(default=None, repr=False)
    # The KRaft broker and its proxy, started by the first run of a design that needs them (`side`).
    base_dir: Path | None = field(default=None, repr=False)
    kraft: KRaftBroker | None = field(default=None, repr=False)
    kraft_proxy: KafkaProxy | None = field(default=None, repr=False)
    kraft_router: SinkRouter = field(default_factory=SinkRouter, repr=False)
    _kraft_described: dict[str, Any] | None = field(default=None, repr=False)

    @classmethod
    def start(cls, base_dir: Path, zk_servers: int = 1, zookeeper: str | None = None,
              bootstrap: str | None = None, kafka_proxy_port: int = 0,
              broker_settings: dict[str, str] | None = None) -> LabServers:
        """Embedded servers unless `zookeeper` / `bootstrap` are given. An external broker must advertise the
        Kafka proxy's address (`kafka_proxy_port`) on the listener `bootstrap` names, or its clients bypass the
        proxy after their first Metadata request, and needs its own ZooKeeper (docs/lab.md)."""
        if bootstrap is not None and zookeeper is None:
            raise InputError("an external broker (--bootstrap) needs its own ZooKeeper (--zookeeper): its "
                             "registration and its topics are there, not in an embedded one")
        router = SinkRouter()
        ensemble: ZooKeeperEnsemble | None = None
        kafka: KafkaBroker | None = None
        proxy: KafkaProxy | None = None
        version = None
        path = zookeeper.split("/", 1)[1].strip("/") if zookeeper and "/" in zookeeper else ""
        chroot = f"/{path}" if path else ""
        lifeline = Lifeline() if zookeeper is None or bootstrap is None else None
        try:
            if zookeeper is None:
                ensemble = ZooKeeperEnsemble.plan(base_dir / "zookeeper", size=zk_servers)
                ensemble.start()
                for node in ensemble.nodes:
                    _watch(lifeline, node.process)
                zk_hosts = ensemble.connect_string.split(",")
            else:
                zk_hosts = zookeeper.split("/", 1)[0].split(",")
            if bootstrap is None:
                proxy = KafkaProxy(None, sink=router, name="lab-kafkaproxy", port=kafka_proxy_port).start()
                kafka = KafkaBroker.plan(base_dir / "kafka", BROKER_ID, ",".join(zk_hosts) + chroot,
                                         proxied_port=proxy.port, settings=broker_settings)
                proxy.forward_to(("127.0.0.1", kafka.listeners[0].port))  # MEMBERS, advertised at the proxy
                classpath = jvm.classpath(jvm.KAFKA_BROKER)
                version = classpath.version_of("kafka_2.13")
                kafka.start(classpath=classpath)
                _watch(lifeline, kafka.process)
                _wait_registered(kafka, kafka.zookeeper_connect)
                direct = kafka.bootstrap
                wait_group_coordinator(direct)
            else:
                upstream = bootstrap.split(",")[0]
                proxy = KafkaProxy(upstream, sink=router, name="lab-kafkaproxy", port=kafka_proxy_port).start()
                direct = _direct_listener(",".join(zk_hosts) + chroot, proxy.port) or upstream
                if direct == upstream:
                    log.warning("lab: the broker at %s has no listener that is not advertised at the proxy: the "
                                "load producer's requests will cross the proxy (link lab-load)", upstream)
        except BaseException:
            for server in (proxy, kafka, ensemble):
                if server is not None:
                    server.stop()
            if lifeline is not None:
                lifeline.cut()
            raise
        return cls(zk_hosts, direct, proxy, router, ensemble, kafka, chroot, version, lifeline=lifeline,
                   base_dir=base_dir)

    def configure_broker(self, settings: dict[str, str]) -> None:
        """Make the broker run with `settings` (only the keys given): restart the embedded one if it runs with
        other values; an external one cannot be changed, so warn and remember what was asked (`describe`)."""
        if self.kafka is None:
            if any(self._wanted.get(k) != v for k, v in settings.items()):
                log.warning("lab: cannot apply %s to the external broker: the coordinator design runs with whatever "
                            "it is configured with", ", ".join(f"{k}={v}" for k, v in sorted(settings.items())))
                self._wanted.update(settings)
                self._described = None
            return
        if all(self.kafka.settings.get(k) == v for k, v in settings.items()):
            return
        log.info("lab: restarting the broker with %s", settings)
        self.kafka.stop()
        _wait_unregistered(self.kafka, self.direct_zookeeper)
        self.kafka.settings.update(settings)
        self.kafka.start()
        _watch(self.lifeline, self.kafka.process)
        _wait_registered(self.kafka, self.direct_zookeeper)
        wait_group_coordinator(self.broker)  # the offsets topic's partitions load again after a restart
        self._described = None

    def side(self, design: str) -> BrokerSide:
        """The broker `design`'s members talk to; the KRaft broker starts on the first call that needs it."""
        if broker_kind(design) == "zookeeper":
            return BrokerSide("zookeeper", self.broker, self.kafka_proxy, self.kafka_router, self.kafka)
        kraft, proxy = self._start_kraft()
        return BrokerSide("kraft", kraft.bootstrap, proxy, self.kraft_router, kraft)

    def configure_kraft(self, settings: dict[str, str]) -> None:
        """Make the KRaft broker run with `settings`: start it with them, or restart it (same ports and data) if
        it runs with other values. A setting the broker refuses ends its start-up, and `EmbeddedError` says which
        (embedded/kraft.py reads the reason from its log)."""
        if self.kraft is None:
            self._start_kraft(settings)
            return
        if all(self.kraft.settings.get(k) == v for k, v in settings.items()):
            return
        log.info("lab: restarting the KRaft broker with %s", settings)
        self.kraft.stop()
        self.kraft.settings.update(settings)
        self._run_kraft(self.kraft)
        self._kraft_described = None

    def _start_kraft(self, settings: dict[str, str] | None = None) -> tuple[KRaftBroker, KafkaProxy]:
        if self.kraft is not None and self.kraft_proxy is not None:
            return self.kraft, self.kraft_proxy
        if self.kafka is None or self.base_dir is None:
            raise InputError("the cooperative and consumer designs run on an embedded Apache Kafka 4 broker in KRaft "
                             "mode, which a lab with an external broker (--bootstrap) does not start: run them "
                             "without --zookeeper/--bootstrap, or choose --design zk,original,coordinator")
        proxy = KafkaProxy(None, sink=self.kraft_router, name="lab-kraftproxy").start()
        try:
            kraft = KRaftBroker.plan(self.base_dir / "kraft", 1, proxied_port=proxy.port, settings=settings)
            proxy.forward_to(("127.0.0.1", kraft.listeners[0].port))  # MEMBERS, advertised at the proxy
            self._run_kraft(kraft)
        except BaseException:
            proxy.stop()
            raise
        self.kraft, self.kraft_proxy = kraft, proxy
        return kraft, proxy

    def _run_kraft(self, kraft: KRaftBroker) -> None:
        kraft.start()
        _watch(self.lifeline, kraft.process)
        try:
            kraft.wait_ready()
            wait_group_coordinator(kraft.bootstrap)  # __consumer_offsets is made on the first FindCoordinator
        except BaseException:
            kraft.stop()
            raise

    def describe(self, design: str = "zk") -> dict[str, Any]:
        """The `servers` entry of a run's manifest: what ZooKeeper and the broker `design` runs on are, as they
        say themselves (the KRaft broker also with the consumer protocol's group settings)."""
        if broker_kind(design) == "kraft":
            return self._describe_kraft()
        if self._described is None:
            if self.kafka is not None:
                broker = broker_info(self.broker, embedded=True, kind="Apache Kafka", version=self._kafka_version)
                broker["mode"] = "ZooKeeper"
            else:
                broker = broker_info(self.broker, embedded=False)
                broker["settings_applied"] = False
                broker["settings_wanted"] = dict(self._wanted)
            self._described = {"zookeeper": zookeeper_info(self.zookeeper, embedded=self.ensemble is not None),
                               "broker": broker, "kafka_proxy": self.kafka_proxy.bootstrap}
        return self._described

    def _describe_kraft(self) -> dict[str, Any]:
        kraft, proxy = self._start_kraft()
        if self._kraft_described is None:
            broker = broker_info(kraft.bootstrap, embedded=True, kind="Apache Kafka", version=kraft.version,
                                 settings=CONSUMER_GROUP_SETTINGS)
            broker["mode"] = "KRaft"
            self._kraft_described = {"zookeeper": self.describe()["zookeeper"], "broker": broker,
                                     "kafka_proxy": proxy.bootstrap}
        return self._kraft_described

    def zookeeper_proxies(self, router: SinkRouter) -> list[ZkProxy]:
        """Fresh proxies (one per ZooKeeper server) for one run; the caller stops them."""
        return [ZkProxy(host, sink=router, name=f"lab-zkproxy{i}").start() for i, host in enumerate(self.zookeeper)]

    @property
    def direct_zookeeper(self) -> str:
        """An uncounted connect string to where the broker registers (observers, admin, the broker's own)."""
        return ",".join(self.zookeeper) + self.chroot

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        # The proxy first (no member may be left talking), the broker before its ZooKeeper (a controlled shutdown
        # needs ZooKeeper to move leadership and remove its registration).
        proxies = [p.stop for p in (self.kafka_proxy, self.kraft_proxy) if p is not None]
        for stop in (*proxies, *(s.stop for s in (self.kraft, self.kafka, self.ensemble) if s is not None)):
            try:
                stop()
            except Exception:
                log.exception("error stopping a lab server")
        if self.lifeline is not None:
            self.lifeline.cut()  # what `stop` could not stop, the watchdog does; the rest it finds gone


def _watch(lifeline: Lifeline | None, process: ProcessRecord | None) -> None:
    if lifeline is not None and process is not None:
        lifeline.watch(process)


def _wait_registered(kafka: KafkaBroker, zookeeper: str) -> None:
    with ZkClient(zookeeper, session_timeout_ms=10000, log_id="lab-servers") as zk:
        kafka.wait_ready(lambda broker_id: zk.exists(layout.broker_path(broker_id)))


def _wait_unregistered(kafka: KafkaBroker, zookeeper: str) -> None:
    """Until the stopped broker's registration is gone: a restart would otherwise find its old znode, and
    `wait_ready` would take that for the new broker's."""
    with ZkClient(zookeeper, session_timeout_ms=10000, log_id="lab-servers") as zk:
        deadline = time.monotonic() + _UNREGISTER_S
        while zk.exists(layout.broker_path(kafka.broker_id)):
            if time.monotonic() > deadline:
                raise EmbeddedError(f"broker {kafka.broker_id}'s registration outlived it by {_UNREGISTER_S:.0f} s: "
                                    f"is another broker {kafka.broker_id} registered in {zookeeper}?")
            time.sleep(0.05)


def _direct_listener(zookeeper: str, proxy_port: int) -> str | None:
    """An external broker's endpoint that is not advertised at the proxy (from its `/brokers/ids` registration),
    for traffic that must not cross the proxy; None if it has only the proxied one."""
    with ZkClient(zookeeper, session_timeout_ms=10000, log_id="lab-servers") as zk:
        for broker_id in sorted(zk.get_children(layout.BROKER_IDS) or []):
            found = zk.get(f"{layout.BROKER_IDS}/{broker_id}")
            try:
                endpoints = json.loads(found[0])["endpoints"] if found else []
            except (ValueError, KeyError, TypeError):
                continue
            for endpoint in endpoints:
                address = endpoint.split("://", 1)[-1]
                if not address.endswith(f":{proxy_port}"):
                    return address
    return None
