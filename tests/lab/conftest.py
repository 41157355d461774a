"""A real Apache Kafka broker behind the real Kafka counting proxy, for the proxy's and the coordinator driver's
tests: one broker for the session, a fresh proxy per test. Likewise one KRaft Apache Kafka 4 broker for the session
(`kraft_broker`), for the tests of the modern group protocols.

The broker is configured as the lab configures its own (zkconsumer/lab/runs/servers.py): a `MEMBERS` listener
advertised at a fixed proxy port, and a `DIRECT` one for traffic that is no member's. Each test gets a new
proxy on that port (fresh records and counters; the broker keeps advertising it), forwarding to `MEMBERS`.
The broker runs in a ZooKeeper chroot of its own, so it never joins the suite's other broker in a cluster.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import ZkProbe, unique
from kafka.admin import KafkaAdminClient, NewTopic

from zkconsumer.embedded.kafka import KafkaBroker
from zkconsumer.embedded.kraft import KRaftBroker
from zkconsumer.embedded.lifeline import Lifeline
from zkconsumer.embedded.process import free_port
from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble
from zkconsumer.lab.runs.server_info import wait_group_coordinator
from zkconsumer.lab.runs.servers import LabServers
from zkconsumer.lab.wire import KafkaProxy, RecordCollector
from zkconsumer.zookeeper import layout

CHROOT = "/lab-proxied-kafka"


@dataclass
class _BehindProxy:
    """A broker whose MEMBERS listener advertises `proxy_port`, where a test puts its counting proxy."""

    broker: KafkaBroker | KRaftBroker
    proxy_port: int  # what the MEMBERS listener advertises

    @property
    def members_upstream(self) -> tuple[str, int]:
        return "127.0.0.1", self.broker.listeners[0].port

    @property
    def direct(self) -> str:
        """The DIRECT listener: admin and producers whose requests must not be counted."""
        return self.broker.bootstrap


@dataclass
class ProxiedKafka(_BehindProxy):
    zookeeper: str  # the broker's zookeeper.connect (its own chroot)


class KRaftKafka(_BehindProxy):
    """The session's KRaft broker (`kraft_broker`)."""


def create_topic(bootstrap: str, prefix: str, partitions: int) -> str:
    """A topic of a unique name starting with `prefix`, `partitions` partitions (replication 1), created through
    `bootstrap` (a broker's DIRECT listener, or a proxy to count the creation); returns its name."""
    topic = unique(prefix)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="admin")
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    return topic


@pytest.fixture(scope="session")
def new_topic() -> Callable[[str, str, int], str]:
    """`create_topic` for a test: new_topic(bootstrap, prefix, partitions) -> the topic's name. Starts nothing: the
    broker is the caller's."""
    return create_topic


@pytest.fixture(scope="session")
def proxied_kafka(zk_server: ZooKeeperEnsemble, zk_root: ZkProbe,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedKafka]:
    proxy_port = free_port()
    broker = KafkaBroker.plan(tmp_path_factory.mktemp("proxied-kafka"), 1, zk_server.connect_string + CHROOT,
                              proxied_port=proxy_port)
    broker.start()
    try:
        broker.wait_ready(lambda i: zk_root.exists(CHROOT + layout.broker_path(i)))
        wait_group_coordinator(broker.bootstrap)  # group tests then never meet the offsets topic's creation
        yield ProxiedKafka(broker, proxy_port, broker.zookeeper_connect)
    finally:
        broker.stop()


@pytest.fixture
def proxy(proxied_kafka: ProxiedKafka, tmp_path: Path) -> Iterator[KafkaProxy]:
    """A fresh counting proxy on the port the broker advertises; stopped (threads joined) after the test."""
    kafka_proxy = KafkaProxy(proxied_kafka.members_upstream, sink=RecordCollector(), name=unique("kp"),
                             port=proxied_kafka.proxy_port).start()
    try:
        yield kafka_proxy
    finally:
        kafka_proxy.stop()
    assert not [t.name for t in threading.enumerate() if t.name.startswith(kafka_proxy.name)]


@pytest.fixture(scope="module")
def lab_servers(proxied_kafka: ProxiedKafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServers]:
    """The suite's ZooKeeper and this broker as the lab's external servers (the broker advertises the proxy's port),
    so runs need no servers of their own. Per module: the lab's Kafka proxy takes the port the `proxy` fixture uses."""
    servers = LabServers.start(tmp_path_factory.mktemp("lab-servers"), zookeeper=proxied_kafka.zookeeper,
                               bootstrap=f"127.0.0.1:{proxied_kafka.members_upstream[1]}",
                               kafka_proxy_port=proxied_kafka.proxy_port)
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture(scope="session")
def kraft_broker(tmp_path_factory: pytest.TempPathFactory, session_lifeline: Lifeline) -> Iterator[KRaftKafka]:
    """A KRaft Apache Kafka 4 node with the embedded defaults (zkconsumer/embedded/kraft.py, BASE_SETTINGS), whose
    MEMBERS listener advertises a port a test then puts its own proxy on. Shared by the session: its tests create
    topics and groups of unique names and count on their own proxy's records, never on the broker's totals."""
    proxy_port = free_port()
    broker = KRaftBroker.plan(tmp_path_factory.mktemp("kraft"), 1, proxied_port=proxy_port)
    try:
        broker.start()
        if broker.process is not None:
            session_lifeline.watch(broker.process)
        broker.wait_ready()
        # __consumer_offsets exists before any member asks: its creation stays out of a first join's time.
        wait_group_coordinator(broker.bootstrap)
        yield KRaftKafka(broker, proxy_port)
    finally:
        broker.stop()
