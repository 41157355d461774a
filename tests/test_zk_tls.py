"""TLS to ZooKeeper against a real server started by `zkconsumer cluster up --tls` (docs/security.md): a member
connects with the zookeeper.ssl.* settings and registers; a client that trusts another CA fails with a clear error
within the connection timeout instead of retrying for ever. Two more servers, started and stopped here, show what
`cluster up --tls` cannot: a server certificate that does not name the host connected to, and a server that
requires a client certificate (ssl.clientAuth=need). With digest credentials as well, TLS and the group's ACLs
work together."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import CALL_TIMEOUT, TEST_CONNECTION_RETRY, ZkProbe, unique, wait_for
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import Permissions

from fetcher_manager.broker import Broker
from zkconsumer import ZookeeperConsumerConnector
from zkconsumer.config import ConsumerConfig
from zkconsumer.embedded import certs
from zkconsumer.embedded.certs import TlsFiles, make_authority
from zkconsumer.embedded.lifeline import Lifeline
from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble
from zkconsumer.members import NoFetchers
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.client import ZkClient, ZkUnavailableError
from zkconsumer.zookeeper.security import ZkTls, ZkTlsError

pytestmark = pytest.mark.slow

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


def test_a_client_with_a_certificate_connects_by_either_name_in_the_server_certificate(tls_cluster):
    # ssl.clientAuth=want: the certificate is checked if offered, so this shows it is not refused, no more (a server
    # that requires one: test_a_server_that_requires_a_client_certificate_refuses_a_client_without_one).
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


# --- servers that `cluster up --tls` does not make ------------------------------------------------------------------

def _tls_server(base: Path, lifeline: Lifeline, *, require_client_cert: bool = False) -> ZooKeeperEnsemble:
    """A started standalone TLS ZooKeeper with the authority already in `base/tls` (plan keeps it)."""
    ensemble = ZooKeeperEnsemble.plan(base, tls=True, require_client_cert=require_client_cert)
    ensemble.start()
    for node in ensemble.nodes:
        if node.process is not None:
            lifeline.watch(node.process)
    return ensemble


def _secure_port(ensemble: ZooKeeperEnsemble) -> int:
    port = ensemble.nodes[0].secure_port
    assert port is not None
    return port


@pytest.fixture(scope="module")
def localhost_only_server(tmp_path_factory: pytest.TempPathFactory,
                          session_lifeline: Lifeline) -> Iterator[tuple[ZooKeeperEnsemble, TlsFiles]]:
    """A TLS server whose certificate names `localhost` and no IP address: 127.0.0.1 reaches it but is not its name."""
    base = tmp_path_factory.mktemp("tls-name")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(certs, "SERVER_NAMES", ("localhost",))
        patch.setattr(certs, "SERVER_IPS", ())
        files = make_authority(base / "tls")
    ensemble = _tls_server(base, session_lifeline)
    try:
        yield ensemble, files
    finally:
        ensemble.stop()


@pytest.fixture(scope="module")
def need_server(tmp_path_factory: pytest.TempPathFactory,
                session_lifeline: Lifeline) -> Iterator[tuple[ZooKeeperEnsemble, TlsFiles]]:
    """A TLS server with ssl.clientAuth=need and the usual certificates (localhost and 127.0.0.1)."""
    base = tmp_path_factory.mktemp("tls-need")
    ensemble = _tls_server(base, session_lifeline, require_client_cert=True)
    try:
        assert "ssl.clientAuth=need" in ensemble.nodes[0].config_path.read_text().splitlines()
        assert ensemble.tls is not None
        yield ensemble, ensemble.tls
    finally:
        ensemble.stop()


def test_a_server_certificate_that_does_not_name_the_host_is_refused(localhost_only_server):
    ensemble, files = localhost_only_server
    port = _secure_port(ensemble)
    tls = ZkTls(str(files.ca), str(files.client))
    # The same server, CA and client certificate by the name the certificate has: a session.
    with ZkClient(f"localhost:{port}", session_timeout_ms=4000, log_id="tls", tls=tls) as zk:
        assert zk.exists("/")
    # By an address that reaches the same server but is not in its certificate: refused, and the error says why.
    wrong_name = ZkClient(f"127.0.0.1:{port}", session_timeout_ms=4000, connection_timeout_ms=2000, log_id="tls",
                          tls=tls)
    with pytest.raises(ZkUnavailableError) as refused:
        wrong_name.start()
    message = str(refused.value)
    assert "\n" not in message
    assert "over TLS" in message and "certificate is not valid for '127.0.0.1'" in message, message
    assert "zookeeper.ssl.endpoint.identification.enable" in message


def test_a_server_that_requires_a_client_certificate_refuses_a_client_without_one(need_server, caplog):
    ensemble, files = need_server
    connect = f"127.0.0.1:{_secure_port(ensemble)}"
    with ZkClient(connect, session_timeout_ms=4000, log_id="tls", tls=ZkTls(str(files.ca), str(files.client))) as zk:
        assert zk.exists("/")
    caplog.set_level("WARNING", logger="kazoo.client")
    without = ZkClient(connect, session_timeout_ms=4000, connection_timeout_ms=2000, log_id="tls",
                       tls=ZkTls(str(files.ca)))
    with pytest.raises(ZkUnavailableError):
        without.start()
    # The server's reason, as kazoo logs each refused attempt: its handshake alert about the missing certificate.
    assert any("ALERT_BAD_CERTIFICATE" in r.getMessage() or "ALERT_CERTIFICATE_REQUIRED" in r.getMessage()
               for r in caplog.records if r.name == "kazoo.client"), [r.getMessage() for r in caplog.records]


def test_a_client_without_a_certificate_is_told_to_set_one(need_server):
    ensemble, files = need_server
    without = ZkClient(f"127.0.0.1:{_secure_port(ensemble)}", session_timeout_ms=4000, connection_timeout_ms=2000,
                       log_id="tls", tls=ZkTls(str(files.ca)))
    with pytest.raises(ZkUnavailableError) as refused:
        without.start()
    message = str(refused.value)
    assert "\n" not in message
    assert "certificate" in message and "zookeeper.ssl.keystore.location" in message, message


# --- TLS with digest credentials and ACLs ----------------------------------------------------------------------------

PASSWORD = "tls-Acl-s3cret"  # appears nowhere else
CREDENTIALS = f"alice:{PASSWORD}"


def _kazoo_over_tls(connect: str, settings: dict[str, str], *, client_cert: bool) -> KazooClient:
    ca = settings["zookeeper.ssl.truststore.location"]
    tls = ZkTls(ca, str(Path(ca).with_name("client.pem")) if client_cert else None)
    client = KazooClient(hosts=connect, timeout=10.0, connection_retry=dict(TEST_CONNECTION_RETRY),
                         **tls.kazoo_kwargs())
    client.start(timeout=CALL_TIMEOUT)
    return client


def test_a_member_over_tls_with_credentials_protects_its_group(tls_cluster):
    plain, settings = tls_cluster
    chroot = f"/{unique('tls-acl')}"
    root = ZkProbe(plain)
    root.create(chroot)
    root.close()
    probe = ZkProbe(plain + chroot)
    probe.create(layout.broker_path(1), codecs.encode_broker(Broker(1, "127.0.0.1", 1)))
    probe.create(layout.topic_path("t"), codecs.encode_topic({0: [1]}))
    config = _config(settings["zookeeper.connect"] + chroot, {**settings, "zookeeper.auth.credentials": CREDENTIALS},
                     "g")
    assert config.zk_tls is not None and config.zk_auth is not None
    member = ZookeeperConsumerConnector(config, fetcher_factory=NoFetchers)
    foreigners: list[KazooClient] = []
    try:
        member.create_message_streams({"t": 1})
        wait_for(lambda: probe.owners("g") == {("t", 0): "g_tls-0"}, message="the partition owned over TLS")
        owner = layout.owner_path("g", "t", 0)
        registration = layout.registration_path("g", "g_tls")
        ours = (Permissions.ALL, "digest", "alice:x")  # the server shows the hash only to the node's ADMINs
        everyone_reads = (Permissions.READ, "world", "anyone")
        for path in (layout.group_dir("g"), layout.ids_dir("g"), registration, layout.owners_dir("g", "t"), owner):
            acls, _ = probe.client.get_acls_async(path).get(timeout=CALL_TIMEOUT)
            assert sorted((a.perms, a.id.scheme, a.id.id) for a in acls) == sorted([ours, everyone_reads]), path
        # Without the credentials, over TLS (with the CA's client certificate, which is no digest identity) or over
        # the plain port: reading is allowed, every write refused.
        foreigners = [_kazoo_over_tls(settings["zookeeper.connect"] + chroot, settings, client_cert=True),
                      _kazoo_over_tls(settings["zookeeper.connect"] + chroot, settings, client_cert=False),
                      KazooClient(hosts=plain + chroot, timeout=10.0, connection_retry=dict(TEST_CONNECTION_RETRY))]
        foreigners[-1].start(timeout=CALL_TIMEOUT)
        for foreign in foreigners:
            assert foreign.get_async(owner).get(timeout=CALL_TIMEOUT)[0] == b"g_tls-0"
            attempts = {
                "delete the owner node": lambda f=foreign: f.delete_async(owner).get(timeout=CALL_TIMEOUT),
                "overwrite the owner node": lambda f=foreign: f.set_async(owner, b"thief-0").get(timeout=CALL_TIMEOUT),
                "register in the group": lambda f=foreign: f.create_async(
                    f"{layout.ids_dir('g')}/g_thief", b"{}", ephemeral=True).get(timeout=CALL_TIMEOUT),
                "delete the registration": lambda f=foreign: f.delete_async(registration).get(timeout=CALL_TIMEOUT),
            }
            for what, attempt in attempts.items():
                with pytest.raises(NoAuthError):
                    attempt()
                    pytest.fail(f"a client without the credentials could {what}")
        assert probe.owners("g") == member.owned_partitions() == {("t", 0): "g_tls-0"}
        assert probe.children(layout.ids_dir("g")) == ["g_tls"]
    finally:
        for foreign in foreigners:
            foreign.stop()
            foreign.close()
        member.shutdown()
        probe.close()
