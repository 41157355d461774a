"""Real servers for the suite: one session-scoped ZooKeeper (a fresh chroot per test), an opt-in 3-server
ensemble, and one session-scoped Apache Kafka broker in ZooKeeper mode at that ZooKeeper's root.

A Kafka broker has one `zookeeper.connect`, so the tests that use it (`cluster`, `members`) share the root, where
the broker registers and its controller writes topics; they keep apart by unique topic and group names. Tests
that need ZooKeeper only get a fresh, empty chroot each.

Every server started here is stopped here; tests get connect strings, never processes to clean up.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import ZkProbe, make_config, unique

from fetcher_manager.broker import Broker
from zkconsumer import ZookeeperConsumerConnector
from zkconsumer.admin import create_topic
from zkconsumer.embedded.kafka import KafkaBroker
from zkconsumer.embedded.lifeline import Lifeline
from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.client import ZkClient

logging.getLogger("kazoo").setLevel(logging.WARNING)

# A skip whose reason starts with this names a tool the test drives as a person would (tmux, Chromium, ...).
# Locally it may be missing; in CI (.ci/run installs them) such a skip is a failure, so a missing install step
# cannot pass as a green run.
MISSING_TOOL = "missing tool: "


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") == "true" and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        if reason.startswith(MISSING_TOOL):
            report.outcome = "failed"
            report.longrepr = f"skipped in CI for want of a tool ({reason}): .ci/run must install it"


@pytest.fixture(scope="session")
def session_lifeline() -> Iterator[Lifeline]:
    """Stops the session's servers if pytest dies without tearing down (killed, or a `timeout` that sends
    SIGTERM): they run detached, so nothing else would (zkconsumer/embedded/lifeline.py)."""
    lifeline = Lifeline()
    yield lifeline
    lifeline.cut()  # after the fixtures below stopped their servers: the watchdog finds them gone


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory, session_lifeline: Lifeline) -> Iterator[ZooKeeperEnsemble]:
    ensemble = ZooKeeperEnsemble.plan(tmp_path_factory.mktemp("zk"), size=1)
    ensemble.start()
    for node in ensemble.nodes:
        if node.process is not None:
            session_lifeline.watch(node.process)
    yield ensemble
    ensemble.stop()


@pytest.fixture(scope="session")
def zk_root(zk_server: ZooKeeperEnsemble) -> Iterator[ZkProbe]:
    probe = ZkProbe(zk_server.connect_string)
    yield probe
    probe.close()


# Fixtures that put a test on the broker's ZooKeeper root instead of a chroot of its own.
_BROKER_FIXTURES = ("cluster", "members", "kafka_zk")


@pytest.fixture
def zk_connect(request: pytest.FixtureRequest, zk_server: ZooKeeperEnsemble, zk_root: ZkProbe) -> str:
    """A connect string with a fresh (existing) chroot, so tests never see each other's nodes; the broker's
    root for a test that also uses the broker (its topics and registration are only there)."""
    if any(name in request.fixturenames for name in _BROKER_FIXTURES):
        request.getfixturevalue("kafka")
        return zk_server.connect_string
    chroot = f"/{unique('t')}"
    zk_root.create(chroot)
    return f"{zk_server.connect_string}{chroot}"


@pytest.fixture
def zk(zk_connect: str) -> Iterator[ZkProbe]:
    probe = ZkProbe(zk_connect)
    yield probe
    probe.close()


@pytest.fixture
def ensemble(tmp_path: Path) -> Iterator[ZooKeeperEnsemble]:
    """A 3-server ensemble of its own (tests may kill servers in it)."""
    servers = ZooKeeperEnsemble.plan(tmp_path / "ensemble", size=3)
    servers.start()
    yield servers
    servers.stop()


@pytest.fixture(scope="session")
def kafka(zk_server: ZooKeeperEnsemble, zk_root: ZkProbe, tmp_path_factory: pytest.TempPathFactory,
          session_lifeline: Lifeline) -> Iterator[KafkaBroker]:
    """One Apache Kafka broker for the session, registered at the session ZooKeeper's root."""
    broker = KafkaBroker.plan(tmp_path_factory.mktemp("kafka"), 1, zk_server.connect_string)
    broker.start()
    if broker.process is not None:
        session_lifeline.watch(broker.process)
    try:
        broker.wait_ready(lambda i: zk_root.exists(layout.broker_path(i)))
        yield broker
    finally:
        broker.stop()


@dataclass
class TestCluster:
    """What a test needs to use ZooKeeper plus the broker registered there."""

    zookeeper_connect: str
    bootstrap_servers: str
    broker: Broker
    zk: ZkClient

    def create_topic(self, name: str | None = None, partitions: int = 4) -> str:
        """Create a topic (unique name by default: the broker is shared by the whole session)."""
        topic = name or unique("topic")
        create_topic(self.zk, topic, partitions, self.bootstrap_servers)
        return topic


@pytest.fixture
def cluster(zk_connect: str, kafka: KafkaBroker) -> Iterator[TestCluster]:
    zk_client = ZkClient(zk_connect, session_timeout_ms=10000, log_id="test-admin").start()
    yield TestCluster(zk_connect, kafka.bootstrap, Broker(kafka.broker_id, "127.0.0.1", kafka.port), zk_client)
    zk_client.close()


class PrivateCluster(TestCluster):
    """A fresh chroot holding the session broker's registration and topic znodes written by hand, for tests that
    write /brokers themselves (malformed topic data, a topic named exactly `t`): at the root the broker's controller
    would act on such writes (it once placed __consumer_offsets on a made-up broker id, and every later coordinator
    lookup failed). Ownership needs only the ZooKeeper side; fetches of a hand-made topic simply find no data."""

    def create_topic(self, name: str | None = None, partitions: int = 4) -> str:
        topic = name or unique("topic")
        replicas = {p: [self.broker.id] for p in range(partitions)}
        self.zk.create(layout.topic_path(topic), codecs.encode_topic(replicas))
        for p in replicas:
            self.zk.set(layout.partition_state_path(topic, p), codecs.encode_partition_state(self.broker.id,
                                                                                              [self.broker.id]))
        return topic


@pytest.fixture
def private_cluster(zk_connect: str, kafka: KafkaBroker) -> Iterator[PrivateCluster]:
    zk_client = ZkClient(zk_connect, session_timeout_ms=10000, log_id="test-admin").start()
    broker = Broker(kafka.broker_id, "127.0.0.1", kafka.port)
    zk_client.ensure_path(layout.BROKER_IDS)
    zk_client.ensure_path(layout.BROKER_TOPICS)
    zk_client.create(layout.broker_path(broker.id), codecs.encode_broker(broker), ephemeral=True)
    yield PrivateCluster(zk_connect, kafka.bootstrap, broker, zk_client)
    zk_client.close()


@pytest.fixture
def private_members(private_cluster):
    """`members` in a `private_cluster`."""
    started: list[ZookeeperConsumerConnector] = []

    def start(group: str, consumer: str | None, **overrides) -> ZookeeperConsumerConnector:
        config = make_config(private_cluster.zookeeper_connect, group, consumer, **overrides)
        started.append(ZookeeperConsumerConnector(config))
        return started[-1]

    yield start
    for connector in started:
        connector.shutdown()


@pytest.fixture
def members(cluster):
    """Start connectors in the test's cluster; every one is shut down at the end of the test."""
    started: list[ZookeeperConsumerConnector] = []

    def start(group: str, consumer: str | None, **overrides) -> ZookeeperConsumerConnector:
        connector = ZookeeperConsumerConnector(make_config(cluster.zookeeper_connect, group, consumer, **overrides))
        started.append(connector)
        return connector

    yield start
    for connector in started:
        connector.shutdown()


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The one SparkSession of the test run (local[2], no UI, its Python workers on this interpreter): a session
    takes seconds to start, so the analysis and simulation tests share it."""
    from zkconsumer.lab.sim.sweep import local_session

    session = local_session(2)
    yield session
    session.stop()
