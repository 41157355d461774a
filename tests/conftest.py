"""Real servers for the suite: one session-scoped ZooKeeper (a fresh chroot per test), an opt-in 3-server
ensemble, and one session-scoped Apache Kafka broker in ZooKeeper mode at that ZooKeeper's root; apart from them,
the lab's own embedded servers (`shared_lab_servers`), started once for the lab sessions the tests run.

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
from zkconsumer.lab.runs.servers import LabServers
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.client import ZkClient

# pytester: tests/test_tiers.py runs tiny suites in this process; work_units: how `make test` spreads the suite
# over its workers.
pytest_plugins = ["pytester", "work_units"]

logging.getLogger("kazoo").setLevel(logging.WARNING)

# A skip whose reason starts with this names a tool the test drives as a person would (tmux, Chromium, ...).
# Locally it may be missing; in CI (.ci/run installs them) such a skip is a failure, so a missing install step
# cannot pass as a green run.
MISSING_TOOL = "missing tool: "


# The tiers (docs/testing.md, "Tiers"). A test is `slow` when it starts a child process, directly or through a
# fixture: a ZooKeeper server, a Kafka broker, any other JVM (Spark, the original consumer), a lab run, member
# processes, a CLI command in a child Python, tmux, Chromium. The product's own quick probes (`java -version`,
# `git rev-parse`) do not count. `ensemble` tests need three ZooKeeper servers of their own (and are `slow` too);
# `interop` tests run against the original 0.8.2.2 consumer. What is left, `make check` (-m "not slow and not
# ensemble and not interop"), runs in the pytest process alone.
#
# The fixtures that start such a process, defined once, with the markers a test that uses one needs. Collection
# fails for a test without them (pytest_collection_modifyitems below); item.fixturenames holds the fixtures a
# fixture uses too, so `zk`, `cluster` or `members` are caught through `zk_server` and `kafka`. Names, not
# definitions: a module's own fixture of a listed name counts the same. A fixture asked for by name at run time
# (request.getfixturevalue) is not in fixturenames: pytest_fixture_setup below fails its test when it starts. A
# test that starts a process itself (a `subprocess.run`, `LabSession(...).run()`) is marked by hand.
EXPENSIVE_FIXTURES: dict[str, tuple[str, ...]] = {
    # tests/conftest.py
    "session_lifeline": ("slow",),  # the watchdog process of the servers below
    "zk_server": ("slow",),  # the session's ZooKeeper server
    "kafka": ("slow",),  # the session's Apache Kafka broker
    "ensemble": ("slow", "ensemble"),  # three ZooKeeper servers of the test's own
    "spark": ("slow",),  # the SparkSession, a JVM; tests/analysis/conftest.py's fixtures go through it
    "shared_lab_servers": ("slow",),  # the lab's embedded servers for the session's LabSession runs
    # tests/lab/conftest.py
    "proxied_kafka": ("slow",),  # a second broker, behind the counting proxy
    "lab_servers": ("slow",),  # the lab's servers and proxies
    # tests/interop/conftest.py
    "originals": ("slow",),  # original 0.8.2.2 members, a JVM each
    # fixtures of one test module
    "cluster": ("slow",),  # tests/chaos/test_chaos_cluster.py: 3 ZooKeeper servers and 3 brokers
    "tls_cluster": ("slow",),  # tests/test_zk_tls.py: `cluster up --tls`
    "localhost_only_server": ("slow",),  # tests/test_zk_tls.py: a TLS ZooKeeper server
    "need_server": ("slow",),  # tests/test_zk_tls.py: a TLS ZooKeeper server
    "kraft": ("slow",),  # tests/test_kraft.py: a KRaft broker
    "kraft_broker": ("slow",),  # tests/lab/conftest.py: the session's KRaft broker (the KIP-848 lab modules')
    "broker": ("slow",),  # tests/interop/test_java_consumer_kip848.py: a KRaft broker
    "runs": ("slow",),  # tests/lab/test_java_lab_member.py: a lab run
    "summaries": ("slow",),  # tests/lab/test_generations_run.py: a lab run
    "lesson_runs": ("slow",),  # tests/lesson/conftest.py: the lesson scenario's lab runs
    "lesson_run": ("slow",),  # tests/lesson/test_lesson_page.py: a lab run
    "lesson": ("slow",),  # tests/lesson/test_lesson_generations.py: a lab run
    "tmux": ("slow",),  # tests/watch/test_watch_tmux.py: a tmux server
    "bare_venv": ("slow",),  # tests/test_install_without_extras.py: a fresh venv and pip install
}

# A marker that does for another: every `interop` test starts servers and original members, and `make check` leaves
# the tier out by name. In tests/interop `slow` marks the heavier tests only (several original JVMs each, or many
# oracle runs: docs/interop.md).
_SATISFIES: dict[str, tuple[str, ...]] = {"slow": ("slow", "interop")}

def _missing_markers(item: pytest.Item, fixtures: list[str]) -> list[str]:
    have = {mark.name for mark in item.iter_markers()}
    return sorted({marker for name in fixtures for marker in EXPENSIVE_FIXTURES.get(name, ())
                   if not have.intersection(_SATISFIES.get(marker, (marker,)))})


def _fix(missing: list[str]) -> str:
    return "add " + " and ".join(f"pytest.mark.{marker}" for marker in missing)


def unmarked_expensive(items: list[pytest.Item]) -> list[str]:
    """One line per test that uses an expensive fixture without the marker it needs."""
    problems = []
    for item in items:
        used = sorted(set(getattr(item, "fixturenames", ())) & EXPENSIVE_FIXTURES.keys())
        missing = _missing_markers(item, used)
        if missing:
            problems.append(f"  {item.nodeid}: uses {', '.join(used)}; {_fix(missing)}")
    return problems


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--repeat", type=int, default=1, metavar="N",
                     help="run each selected test N times in one session (docs/testing.md, \"Flaky tests\")")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    times = metafunc.config.getoption("repeat")
    if times > 1:
        metafunc.fixturenames.append("_repeat")
        metafunc.parametrize("_repeat", range(times))


@pytest.hookimpl(tryfirst=True)  # before -m deselects: an unmarked test is one -m "not slow" would wrongly keep
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    problems = unmarked_expensive(items)
    if problems:
        raise pytest.UsageError(
            "tests that start a server or process without the marker saying so (docs/testing.md, \"Tiers\"); mark "
            "the test, or the module (`pytestmark = pytest.mark.slow`) when all its tests need it:\n"
            + "\n".join(problems))


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest) -> None:
    """An expensive fixture asked for by name at run time, which collection could not see, fails its test before
    it starts anything."""
    item = getattr(request, "_pyfuncitem", None)
    missing = _missing_markers(item, [fixturedef.argname]) if item is not None else []
    if missing:
        failure = pytest.fail.Exception(
            f"{item.nodeid} starts {fixturedef.argname} (asked for by name) without the marker saying so "
            f"(docs/testing.md, \"Tiers\"): {_fix(missing)}", pytrace=False)
        # As pytest's own setup does with a failure, then torn down at once: a session fixture must not keep it
        # for the marked tests that ask next.
        fixturedef.cached_result = (None, fixturedef.cache_key(request), (failure, None))
        fixturedef.finish(request)
        raise failure


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


@pytest.fixture(scope="session")
def shared_lab_servers(tmp_path_factory: pytest.TempPathFactory, session_lifeline: Lifeline) -> Iterator[LabServers]:
    """The lab's embedded servers (one ZooKeeper server, the Kafka 3.9 broker, and the KRaft broker once a run of
    the newer protocols asks for it) for every `LabSession(..., servers=shared_lab_servers)` of the session, in
    place of a start and stop per session. Runs on them stay apart by their own group and topic names
    (zkconsumer/lab/runs/case_run.py); a run whose case needs other broker settings restarts that broker
    (zkconsumer/lab/runs/servers.py, `configure_broker`). A test about the servers' own start, settings or teardown
    starts its own."""
    servers = LabServers.start(tmp_path_factory.mktemp("lab-shared"))
    try:
        # LabServers' own lifeline also watches what starts later (the KRaft broker, a restarted broker).
        nodes = servers.ensemble.nodes if servers.ensemble is not None else []
        for process in [*(node.process for node in nodes), servers.kafka.process if servers.kafka else None]:
            if process is not None:
                session_lifeline.watch(process)
        yield servers
    finally:
        servers.stop()


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
