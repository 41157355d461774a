"""Real servers for the suite: one session-scoped ZooKeeper (a fresh chroot per test), an opt-in 3-server
ensemble, and the tansu broker registered in each test's chroot as a ZooKeeper-mode broker would be.

Every server started here is stopped here; tests get connect strings, never processes to clean up.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import ZkProbe, make_config, unique

from fetcher_manager.broker import Broker
from zkconsumer import ZookeeperConsumerConnector
from zkconsumer.admin import create_topic
from zkconsumer.embedded.broker import TansuBroker
from zkconsumer.embedded.registrar import register
from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble
from zkconsumer.zookeeper.client import ZkClient

logging.getLogger("kazoo").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    ensemble = ZooKeeperEnsemble.plan(tmp_path_factory.mktemp("zk"), size=1)
    ensemble.start()
    yield ensemble
    ensemble.stop()


@pytest.fixture(scope="session")
def zk_root(zk_server: ZooKeeperEnsemble) -> Iterator[ZkProbe]:
    probe = ZkProbe(zk_server.connect_string)
    yield probe
    probe.close()


@pytest.fixture
def zk_connect(zk_server: ZooKeeperEnsemble, zk_root: ZkProbe) -> str:
    """A connect string with a fresh (existing) chroot, so tests never see each other's nodes."""
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
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    broker = TansuBroker.plan(tmp_path_factory.mktemp("tansu"))
    broker.start()
    yield broker
    broker.stop()


@dataclass
class TestCluster:
    """What a test needs to use ZooKeeper plus a broker registered in its chroot."""

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
def cluster(zk_connect: str, tansu: TansuBroker) -> Iterator[TestCluster]:
    zk_client = ZkClient(zk_connect, session_timeout_ms=10000, log_id="test-broker").start()
    broker = Broker(tansu.node_id, "127.0.0.1", tansu.port)
    register(zk_client, broker)
    yield TestCluster(zk_connect, tansu.bootstrap, broker, zk_client)
    zk_client.close()


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
