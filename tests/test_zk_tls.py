"""TLS to ZooKeeper against a real server started by `zkconsumer cluster up --tls` (docs/security.md): a member
connects with the zookeeper.ssl.* settings and registers; a client that trusts another CA fails with a clear error
within the connection timeout instead of retrying for ever."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ZkProbe, unique, wait_for
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from fetcher_manager.broker import Broker
from zkconsumer import ZookeeperConsumerConnector
from zkconsumer.config import ConsumerConfig
from zkconsumer.embedded.certs import make_authority
from zkconsumer.members import NoFetchers
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.client import ZkClient, ZkUnavailableError
from zkconsumer.zookeeper.security import ZkTls, ZkTlsError

CLI = [sys.executable, "-m", "zkconsumer"]


def _cli(*args: str) -> str:
    result = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"{args} exited {result.returncode}: {result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """(plain connect string, the TLS settings `cluster up --tls` printed) of a ZooKeeper-only cluster."""
    base = tmp_path_factory.mktemp("tls") / "cluster"
    out = _cli("cluster", "up", "--no-broker", "--tls", "--dir", str(base))
    try:
        plain = next(line.split("=", 1)[1] for line in out.splitlines() if line.startswith("zookeeper.connect="))
        settings = dict(line.removeprefix("TLS: ").split("=", 1) for line in out.splitlines()
                        if line.startswith("TLS: "))
        assert _cli("cluster", "status", "--dir", str(base)).count("TLS: ") == len(settings) == 4
        yield plain, settings
    finally:
        _cli("cluster", "down", "--dir", str(base))


def _config(connect: str, settings: dict[str, str], group: str, **extra: str) -> ConsumerConfig:
    return ConsumerConfig.from_properties({
        **settings, "zookeeper.connect": connect, "group.id": group, "consumer.id": "tls",
        "zookeeper.session.timeout.ms": "4000", "zookeeper.connection.timeout.ms": "3000",
        "rebalance.backoff.ms": "300", "auto.commit.enable": "false", **extra,
    })


def test_a_member_connects_over_tls_registers_and_owns_its_partitions(tls_cluster):
    plain, settings = tls_cluster
    chroot = f"/{unique('tls')}"
    topic = "t"
    root = ZkProbe(plain)
    root.create(chroot)
    root.close()
    probe = ZkProbe(plain + chroot)  # over the plain port: what the member wrote over TLS is the same tree
    try:
        # Topic and broker znodes by hand: ownership needs only ZooKeeper (NoFetchers opens no broker socket).
        probe.create(layout.broker_path(1), codecs.encode_broker(Broker(1, "127.0.0.1", 1)))
        probe.create(layout.topic_path(topic), codecs.encode_topic({0: [1], 1: [1]}))
        config = _config(settings["zookeeper.connect"] + chroot, settings, "g")
        assert config.zk_tls is not None and config.zk_tls.truststore == settings["zookeeper.ssl.truststore.location"]
        member = ZookeeperConsumerConnector(config, fetcher_factory=NoFetchers)
        try:
            member.create_message_streams({topic: 1})
            assert probe.exists(layout.registration_path("g", "g_tls"))
            wait_for(lambda: probe.owners("g") == {(topic, 0): "g_tls-0", (topic, 1): "g_tls-0"},
                     message="both partitions owned over TLS")
        finally:
            member.shutdown()
    finally:
        probe.close()
    # The secure port speaks only TLS: a plain client cannot get a session there, so the member's was TLS.
    plain_on_secure = KazooClient(hosts=settings["zookeeper.connect"], timeout=4.0,
                                  connection_retry={"max_tries": 2, "delay": 0.05})
    with pytest.raises(KazooTimeoutError):
        plain_on_secure.start(timeout=3.0)
    plain_on_secure.stop()
    plain_on_secure.close()


def test_the_server_name_is_checked_and_a_client_certificate_accepted(tls_cluster):
    _, settings = tls_cluster
    port = settings["zookeeper.connect"].rsplit(":", 1)[1]
    ca = settings["zookeeper.ssl.truststore.location"]
    client_pem = str(Path(ca).with_name("client.pem"))
    for host in ("127.0.0.1", "localhost"):  # both are in the server certificate's subject alternative names
        with ZkClient(f"{host}:{port}", session_timeout_ms=4000, log_id="tls", tls=ZkTls(ca, client_pem)) as zk:
            assert zk.exists("/")


def test_a_wrong_ca_fails_with_a_clear_error(tls_cluster, tmp_path):
    _, settings = tls_cluster
    other = make_authority(tmp_path / "other-ca")
    config = _config(settings["zookeeper.connect"], {**settings, "zookeeper.ssl.truststore.location": str(other.ca)},
                     "g")
    with pytest.raises(ZkUnavailableError) as refused:
        ZookeeperConsumerConnector(config, fetcher_factory=NoFetchers)
    message = str(refused.value)
    assert "over TLS" in message and "CERTIFICATE_VERIFY_FAILED" in message
    assert "zookeeper.ssl.truststore.location" in message


def test_a_missing_trust_store_fails_before_connecting(tls_cluster, tmp_path):
    _, settings = tls_cluster
    missing = str(tmp_path / "nowhere.pem")
    config = _config(settings["zookeeper.connect"], {**settings, "zookeeper.ssl.truststore.location": missing}, "g")
    with pytest.raises(ZkTlsError, match=r"zookeeper\.ssl\.truststore\.location=.*cannot be read"):
        ZookeeperConsumerConnector(config, fetcher_factory=NoFetchers)
