"""The campaign's servers and the faults that hit them: a 3-server ZooKeeper ensemble and 3 Apache Kafka 3.9 brokers
in ZooKeeper mode on 127.0.0.1, with proxies in front of both for the members, so that one member can be cut off or
slowed alone.

- ZooKeeper: one `ZkProxy` per server; each member gets its own link (port) on every one of them, and its connect
  string names those three ports (`member_zookeeper_connect`). The observer and the nemesis use the servers directly.
- Kafka: each broker's MEMBERS listener is advertised at its own `KafkaProxy` (what its `/brokers/ids` registration
  names, which is where the members' fetchers connect); the proxy tells members apart by client id. Each broker's
  DIRECT listener serves the load producer and the admin, which no member fault may touch.

Cuts are blackholes, not resets: a partitioned network drops packets without telling anybody, so the member's
client finds out by its own timeouts, as in production (a reset would tell it at once).

    planned ──start()──▶ serving ──(faults and their heals)──▶ serving ──stop()──▶ stopped
    (a failed start stops what it started; a Lifeline stops the servers should this process die uncleanly)
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from zkconsumer.admin import create_topic
from zkconsumer.embedded import jvm
from zkconsumer.embedded.kafka import KafkaBroker
from zkconsumer.embedded.lifeline import Lifeline
from zkconsumer.embedded.process import EmbeddedError, kill_process, wait_until
from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble
from zkconsumer.lab.wire.kafka import KafkaProxy
from zkconsumer.lab.wire.links import BLACKHOLE
from zkconsumer.lab.wire.zk import ZkProxy
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.client import ZkClient

log = logging.getLogger(__name__)

SERVERS = 3
BROKERS = 3
REPLICATION = 3
# min.insync.replicas 2 with acks=all: an acknowledged message is on two brokers, so one broker's kill -9 loses none;
# no unclean election: a stale replica never becomes leader and truncates what was acknowledged.
BROKER_SETTINGS = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false",
                   "zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "10000"}
READY_S = 120.0  # six JVMs starting on two cores
GARBAGE = b"\x00not-json{chaos"


@dataclass(frozen=True)
class Malformed:
    """Bad data another client wrote into the group's znodes, and how to take it back."""

    path: str
    data: str
    heal: Callable[[], None] = field(repr=False)


class ChaosCluster:
    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir
        self.ensemble = ZooKeeperEnsemble.plan(base_dir / "zookeeper", size=SERVERS)
        self.brokers: list[KafkaBroker] = []
        self.kafka_proxies: list[KafkaProxy] = []
        self.zk_proxies: list[ZkProxy] = []
        self._lifeline: Lifeline | None = None
        self._admin: ZkClient | None = None
        self._intruders: list[ZkClient] = []

    # --- life ------------------------------------------------------------------------------------------

    def __enter__(self) -> ChaosCluster:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        self._lifeline = Lifeline()
        try:
            self.ensemble.start(READY_S)
            for node in self.ensemble.nodes:
                self._watch(node.process)
            classpath = jvm.classpath(jvm.KAFKA_BROKER)
            for broker_id in range(1, BROKERS + 1):
                proxy = KafkaProxy(None, name=f"chaos-kafkaproxy{broker_id}").start()
                self.kafka_proxies.append(proxy)
                broker = KafkaBroker.plan(self.base_dir / "kafka", broker_id, self.direct_zookeeper,
                                          proxied_port=proxy.port, settings=BROKER_SETTINGS)
                proxy.forward_to(("127.0.0.1", broker.listeners[0].port))  # MEMBERS, advertised at the proxy
                broker.start(cluster_size=BROKERS, classpath=classpath)
                self._watch(broker.process)
                self.brokers.append(broker)
            self._admin = ZkClient(self.direct_zookeeper, session_timeout_ms=10000, log_id="chaos-admin").start()
            for broker in self.brokers:
                broker.wait_ready(lambda i: self._zk().exists(layout.broker_path(i)), READY_S)
            self.zk_proxies = [ZkProxy(f"127.0.0.1:{n.client_port}", name=f"chaos-zkproxy{n.server_id}").start()
                               for n in self.ensemble.nodes]
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Proxies first (no member left talking), brokers before ZooKeeper (a controlled shutdown needs it)."""
        for intruder in self._intruders:
            intruder.close()
        steps: list[Callable[[], object]] = [p.stop for p in [*self.zk_proxies, *self.kafka_proxies]]
        if self._admin is not None:
            steps.append(self._admin.close)
        steps += [b.stop for b in self.brokers] + [self.ensemble.stop]
        for step in steps:
            try:
                step()
            except Exception:
                log.exception("chaos: error stopping a server")
        if self._lifeline is not None:
            self._lifeline.cut()

    def _watch(self, process: object) -> None:
        if self._lifeline is not None and process is not None:
            self._lifeline.watch(process)  # type: ignore[arg-type]

    def _zk(self) -> ZkClient:
        if self._admin is None:
            raise RuntimeError("ChaosCluster.start() first")
        return self._admin

    # --- addresses -------------------------------------------------------------------------------------

    @property
    def direct_zookeeper(self) -> str:
        return self.ensemble.connect_string

    @property
    def bootstrap(self) -> str:
        """The brokers' DIRECT listeners: for the producer and the admin, never through a proxy."""
        return ",".join(b.bootstrap for b in self.brokers)

    def member_zookeeper_connect(self, name: str) -> str:
        """The member's own links, one on every server's proxy (made on first use, kept across restarts)."""
        ports = []
        for proxy in self.zk_proxies:
            try:
                ports.append(proxy.port(name))
            except KeyError:
                ports.append(proxy.add_link(name))
        return ",".join(f"127.0.0.1:{port}" for port in ports)

    def create_topic(self, topic: str, partitions: int) -> None:
        create_topic(self._zk(), topic, partitions, self.bootstrap, replication_factor=REPLICATION)
        if not wait_until(lambda: all(b is not None for b in self.partition_leaders(topic).values()), READY_S, 0.2):
            raise EmbeddedError(f"topic {topic} has partitions without a leader after {READY_S:.0f} s")

    # --- ZooKeeper faults ------------------------------------------------------------------------------

    def zk_leader(self) -> int | None:
        """The server id that reports Mode: leader to srvr (None while an election runs or the ensemble is down)."""
        leader = self.ensemble.leader()
        return leader.server_id if leader is not None else None

    def kill_zk_leader(self) -> int:
        leader = self.ensemble.leader()
        if leader is None or leader.process is None:
            raise EmbeddedError("the ZooKeeper ensemble has no leader to kill")
        kill_process(leader.process)
        return leader.server_id

    def restart_zk(self, server_id: int) -> None:
        node = next(n for n in self.ensemble.nodes if n.server_id == server_id)
        self.ensemble.start_node(node)
        self._watch(node.process)
        self.ensemble.wait_ready(READY_S, nodes=[node])

    def stop_ensemble(self) -> None:
        self.ensemble.stop()

    def start_ensemble(self) -> None:
        for node in self.ensemble.nodes:
            self.ensemble.start_node(node)
            self._watch(node.process)
        self.ensemble.wait_ready(READY_S)

    # --- Kafka faults ----------------------------------------------------------------------------------

    def partition_leaders(self, topic: str) -> dict[int, int | None]:
        """Partition -> its leader's broker id (None: no leader), from the controller's state znodes."""
        leaders: dict[int, int | None] = {}
        for child in self._zk().get_children(layout.topic_path(topic) + "/partitions") or []:
            found = self._zk().get(layout.partition_state_path(topic, int(child)))
            leader = json.loads(found[0])["leader"] if found and found[0] else -1
            leaders[int(child)] = leader if leader >= 0 else None
        return leaders

    def _broker(self, broker_id: int) -> KafkaBroker:
        return next(b for b in self.brokers if b.broker_id == broker_id)

    def kill_broker(self, broker_id: int) -> None:
        broker = self._broker(broker_id)
        if broker.process is not None:
            kill_process(broker.process)

    def restart_broker(self, broker_id: int) -> None:
        """Start it again once its old registration is gone (its session expires after the broker's
        zookeeper.session.timeout.ms): a broker that finds its id registered by another session refuses to start."""
        broker = self._broker(broker_id)
        path = layout.broker_path(broker_id)
        if not wait_until(lambda: not self._zk().exists(path), READY_S, 0.1):
            raise EmbeddedError(f"broker {broker_id}'s registration outlived its process by {READY_S:.0f} s")
        broker.start(cluster_size=BROKERS)
        self._watch(broker.process)
        broker.wait_ready(lambda i: self._zk().exists(layout.broker_path(i)), READY_S)

    # --- one member's links ----------------------------------------------------------------------------

    def cut_member_zookeeper(self, name: str) -> None:
        for proxy in self.zk_proxies:
            proxy.cut(name, BLACKHOLE)

    def cut_member_kafka(self, name: str) -> None:
        for proxy in self.kafka_proxies:
            proxy.cut(name, BLACKHOLE)

    def delay_member_zookeeper(self, name: str, ms: float) -> None:
        for proxy in self.zk_proxies:
            proxy.delay(name, ms)

    def restore_member(self, name: str) -> None:
        """Undo any cut or delay of the member's links (a connection that lost bytes is reset: links.py)."""
        for proxy in [*self.zk_proxies, *self.kafka_proxies]:
            proxy.restore(name)
            proxy.delay(name, 0)

    # --- another client's bad data ---------------------------------------------------------------------

    def write_malformed(self, what: str, group: str, topic: str, partition: int) -> Malformed:
        """As another client (its own session): `registration` adds a registration that is not JSON; `owner` puts
        garbage into the partition's owner node (creating it, held by the intruder's session, if nobody owns the
        partition); `offset` overwrites the partition's committed offset with garbage. Each heal takes its own
        write back and nothing else: an owner or offset somebody rewrote meanwhile is left as it is."""
        intruder = ZkClient(self.direct_zookeeper, session_timeout_ms=6000, log_id="chaos-intruder").start()
        self._intruders.append(intruder)

        def close() -> None:
            intruder.close()
            self._intruders.remove(intruder)

        if what == "registration":
            path = layout.registration_path(group, f"{group}_intruder-{int(time.time() * 1000)}")
            intruder.create(path, GARBAGE, ephemeral=True)
            return Malformed(path, GARBAGE.decode("latin-1"), close)  # its session's end deletes it
        if what == "owner":
            path = layout.owner_path(group, topic, partition)
            created, previous = intruder.create_ephemeral_expect_conflict(path, GARBAGE)
            if created:
                return Malformed(path, GARBAGE.decode("latin-1"), close)
            intruder.set(path, GARBAGE)
            return Malformed(path, GARBAGE.decode("latin-1"), lambda: self._restore(intruder, path, previous, close))
        if what == "offset":
            path = layout.offset_path(group, topic, partition)
            found = intruder.get(path)
            previous = found[0] if found else None
            intruder.set(path, GARBAGE)
            return Malformed(path, GARBAGE.decode("latin-1"), lambda: self._restore(intruder, path, previous, close))
        raise ValueError(f"unknown malformed write {what!r}: registration, owner or offset")

    @staticmethod
    def _restore(intruder: ZkClient, path: str, previous: bytes | None, close: Callable[[], None]) -> None:
        try:
            found = intruder.get(path)
            if found is not None and found[0] == GARBAGE:
                if previous is None:
                    intruder.delete(path)
                else:
                    intruder.set(path, previous)
        finally:
            close()
