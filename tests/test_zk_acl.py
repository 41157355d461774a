"""ZooKeeper digest authentication and the ACLs of a group's nodes, against the suite's real ZooKeeper
(docs/security.md): the authenticated identity may do anything in its group, everyone else may only read."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from helpers import CALL_TIMEOUT, TEST_CONNECTION_RETRY, make_config, unique, wait_for
from kafka import KafkaProducer
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE, Permissions, make_digest_acl_credential

from fetcher_manager.broker import Broker
from zkconsumer import ZookeeperConsumerConnector
from zkconsumer.config import ConfigError, ConsumerConfig
from zkconsumer.members import NoFetchers
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.client import ZkClient
from zkconsumer.zookeeper.security import ZkAuth, ZkAuthError

PASSWORD = "s3cret-Pa55"  # a string that appears nowhere else, so a leak is found by searching for it
CREDENTIALS = f"alice:{PASSWORD}"


def _foreign(hosts: str, credentials: str | None) -> KazooClient:
    auth = [("digest", credentials)] if credentials else None
    client = KazooClient(hosts=hosts, timeout=10.0, connection_retry=dict(TEST_CONNECTION_RETRY), auth_data=auth)
    client.start(timeout=CALL_TIMEOUT)
    return client


def _acls(client: KazooClient, path: str) -> list[tuple[int, str, str]]:
    acls, _ = client.get_acls_async(path).get(timeout=CALL_TIMEOUT)
    return sorted((a.perms, a.id.scheme, a.id.id) for a in acls)


def _produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for i in range(per_partition):
            for p in range(partitions):
                producer.send(topic, value=f"v{p}-{i}".encode(), partition=p)
        producer.flush()
    finally:
        producer.close()


def _group_nodes(group: str, topic: str, consumer_id: str) -> list[str]:
    return [
        layout.group_dir(group), layout.ids_dir(group), layout.registration_path(group, consumer_id),
        layout.owners_dir(group), layout.owners_dir(group, topic), layout.owner_path(group, topic, 0),
        f"{layout.group_dir(group)}/offsets", f"{layout.group_dir(group)}/offsets/{topic}",
        layout.offset_path(group, topic, 0),
    ]


@pytest.mark.slow
def test_an_authenticated_member_protects_its_group_and_keeps_its_partitions(cluster, zk, members):
    topic = cluster.create_topic(partitions=2)
    _produce(cluster.bootstrap_servers, topic, 2, 5)
    group = unique("acl")
    member = members(group, "a", zookeeper_auth_credentials=CREDENTIALS, consumer_timeout_ms=10000)
    stream = member.create_message_streams({topic: 1})[topic][0]
    consumed = [next(iter(stream)) for _ in range(10)]
    assert sorted((m.partition, m.offset) for m in consumed) == [(p, o) for p in range(2) for o in range(5)]
    member.commit_offsets()
    owners = wait_for(lambda: zk.owners(group) if len(zk.owners(group)) == 2 else None, message="both owned")

    ours = (Permissions.ALL, "digest", make_digest_acl_credential("alice", PASSWORD))
    everyone_reads = (Permissions.READ, "world", "anyone")
    alice = _foreign(cluster.zookeeper_connect, CREDENTIALS)  # the server shows a digest's hash only to its ADMINs
    try:
        for path in _group_nodes(group, topic, member.consumer_id):
            assert _acls(alice, path) == sorted([ours, everyone_reads]), path
            assert _acls(zk.client, path) == sorted([(Permissions.ALL, "digest", "alice:x"), everyone_reads]), path
    finally:
        alice.stop()
        alice.close()
    # /consumers is shared by every group (and identity): it stays open, so other groups can be created.
    acls, _ = zk.client.get_acls_async(layout.CONSUMERS).get(timeout=CALL_TIMEOUT)
    assert list(acls) == list(OPEN_ACL_UNSAFE)

    owner = layout.owner_path(group, topic, 0)
    offset = layout.offset_path(group, topic, 0)
    registration = layout.registration_path(group, member.consumer_id)
    for credentials in (None, f"bob:{PASSWORD}", "alice:wrong-password"):
        foreign = _foreign(cluster.zookeeper_connect, credentials)
        try:
            # Reading is allowed: tools such as `groups describe` work without credentials.
            assert foreign.get_async(owner).get(timeout=CALL_TIMEOUT)[0] == owners[(topic, 0)].encode()
            assert foreign.get_async(offset).get(timeout=CALL_TIMEOUT)[0] == b"5"
            assert foreign.get_async(registration).get(timeout=CALL_TIMEOUT)[0].startswith(b'{"version":1')
            attempts = {
                "delete the owner node": lambda f=foreign: f.delete_async(owner).get(timeout=CALL_TIMEOUT),
                "overwrite the owner node": lambda f=foreign: f.set_async(owner, b"thief-0").get(timeout=CALL_TIMEOUT),
                "claim a new partition": lambda f=foreign: f.create_async(
                    layout.owner_path(group, topic, 7), b"thief-0", ephemeral=True).get(timeout=CALL_TIMEOUT),
                "rewrite an offset": lambda f=foreign: f.set_async(offset, b"0").get(timeout=CALL_TIMEOUT),
                "delete an offset": lambda f=foreign: f.delete_async(offset).get(timeout=CALL_TIMEOUT),
                "register in the group": lambda f=foreign: f.create_async(
                    f"{layout.ids_dir(group)}/{group}_thief", b"{}", ephemeral=True).get(timeout=CALL_TIMEOUT),
                "delete a registration": lambda f=foreign: f.delete_async(registration).get(timeout=CALL_TIMEOUT),
            }
            for what, attempt in attempts.items():
                with pytest.raises(NoAuthError):
                    attempt()
                    pytest.fail(f"{credentials or 'no credentials'} could {what}")
        finally:
            foreign.stop()
            foreign.close()

    assert zk.owners(group) == owners
    assert member.owned_partitions() == owners
    assert zk.text(offset) == "5"
    assert zk.children(layout.ids_dir(group)) == [member.consumer_id]

    # The same identity in another member shares the group: it creates owner nodes in the parents the first made.
    second = members(group, "b", zookeeper_auth_credentials=CREDENTIALS)
    second.create_message_streams({topic: 1})
    wait_for(lambda: sorted(zk.owners(group).values()) == [f"{group}_a-0", f"{group}_b-0"], message="shared")


@pytest.mark.slow
def test_in_a_chroot_the_group_below_it_is_protected(zk_connect, zk):
    # The suite's fresh chroot, with topic and broker znodes by hand (ownership needs only ZooKeeper).
    zk.create(layout.broker_path(1), codecs.encode_broker(Broker(1, "127.0.0.1", 1)))
    zk.create(layout.topic_path("t"), codecs.encode_topic({0: [1]}))
    member = ZookeeperConsumerConnector(make_config(zk_connect, "g", "a", zookeeper_auth_credentials=CREDENTIALS),
                                        fetcher_factory=NoFetchers)
    try:
        member.create_message_streams({"t": 1})
        wait_for(lambda: zk.owners("g") == {("t", 0): "g_a-0"}, message="owned in the chroot")
        owner = layout.owner_path("g", "t", 0)
        everyone_reads = (Permissions.READ, "world", "anyone")
        assert _acls(zk.client, owner) == sorted([(Permissions.ALL, "digest", "alice:x"), everyone_reads])
        assert _acls(zk.client, "/") == _acls(zk.client, layout.CONSUMERS) == [(Permissions.ALL, "world", "anyone")]
        with pytest.raises(NoAuthError):
            zk.delete(owner)
        assert member.owned_partitions() == {("t", 0): "g_a-0"}
    finally:
        member.shutdown()


@pytest.mark.slow
def test_a_wrong_password_fails_on_the_first_write_with_a_clear_error(cluster, zk, members):
    topic = cluster.create_topic(partitions=1)
    group = unique("acl")
    members(group, "a", zookeeper_auth_credentials=CREDENTIALS).create_message_streams({topic: 1})
    intruder = members(group, "b", zookeeper_auth_credentials="alice:not-the-password")
    with pytest.raises(ZkAuthError) as refused:
        intruder.create_message_streams({topic: 1})
    message = str(refused.value)
    assert "NoAuth" in message and "zookeeper.auth.credentials" in message and "'alice'" in message
    assert "not-the-password" not in message
    assert zk.children(layout.ids_dir(group)) == [f"{group}_a"]


@pytest.mark.slow
def test_refused_credentials_fail_at_start_instead_of_retrying(zk_connect):
    # The stock server accepts any digest password (it only hashes it); a scheme it has no provider for is what it
    # refuses with AUTH_FAILED, and then closes the session: kazoo stops connecting, we must not wait for it.
    before = set(threading.enumerate())
    client = ZkClient(zk_connect, session_timeout_ms=4000, log_id="refused", auth=ZkAuth("alice", PASSWORD, "nosuch"))
    with pytest.raises(ZkAuthError) as refused:
        client.start()
    # start() stopped what it started: the caller gets no client to close, so no kazoo thread may stay behind.
    wait_for(lambda: not [t for t in threading.enumerate() if t not in before and t.is_alive()],
             message="kazoo's threads to end")
    assert "refused the credentials" in str(refused.value) and PASSWORD not in str(refused.value)


@pytest.mark.slow
def test_without_credentials_the_nodes_stay_open_as_in_0_8_2(cluster, zk, members):
    topic = cluster.create_topic(partitions=1)
    group = unique("open")
    member = members(group, "a")
    member.create_message_streams({topic: 1})
    wait_for(lambda: zk.owners(group), message="owned")
    for path in _group_nodes(group, topic, member.consumer_id)[:6]:  # nothing consumed: no offset nodes
        acls, _ = zk.client.get_acls_async(path).get(timeout=CALL_TIMEOUT)
        assert list(acls) == list(OPEN_ACL_UNSAFE), path


def test_the_settings_are_checked_and_the_password_never_shown():
    base = {"group.id": "g", "zookeeper.connect": "127.0.0.1:2181"}
    config = ConsumerConfig.from_properties({**base, "zookeeper.auth.credentials": CREDENTIALS})
    assert config.zk_auth == ZkAuth("alice", PASSWORD)
    assert PASSWORD not in repr(config) and PASSWORD not in repr(config.zk_auth)
    assert ConsumerConfig.from_properties(config.to_properties()) == config
    with pytest.raises(ConfigError, match=r"zookeeper.auth.scheme='sasl' is invalid: only 'digest' is supported"):
        ConsumerConfig.from_properties({**base, "zookeeper.auth.scheme": "sasl",
                                        "zookeeper.auth.credentials": CREDENTIALS})
    with pytest.raises(ConfigError, match=r"zookeeper\.auth\.credentials is required"):
        ConsumerConfig.from_properties({**base, "zookeeper.auth.scheme": "digest"})
    for bad in (PASSWORD, f":{PASSWORD}"):
        with pytest.raises(ConfigError, match="expected user:password") as refused:
            ConsumerConfig.from_properties({**base, "zookeeper.auth.credentials": bad})
        assert PASSWORD not in str(refused.value)
    with pytest.raises(ConfigError) as refused:
        ConsumerConfig(group_id="g", zookeeper_connect="127.0.0.1:2181", zookeeper_auth_credentials=1234567)
    assert "1234567" not in str(refused.value)
    assert make_config("127.0.0.1:2181", "g", None).zk_auth is None


def _cli(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "zkconsumer", "-vv", *args], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, f"{args} exited {result.returncode}: {result.stderr[-2000:]}"
    return result


@pytest.mark.slow
def test_the_password_is_never_logged_printed_or_written(cluster, zk, members, caplog, tmp_path):
    caplog.set_level(1)  # every record of every logger, below DEBUG too
    caplog.set_level(1, logger="kazoo")  # the suite quiets kazoo (conftest.py); restored after the test
    topic = cluster.create_topic(partitions=1)
    _produce(cluster.bootstrap_servers, topic, 1, 3)
    group = unique("secret")
    member = members(group, "a", zookeeper_auth_credentials=CREDENTIALS, consumer_timeout_ms=10000)
    stream = member.create_message_streams({topic: 1})[topic][0]
    assert [next(iter(stream)).offset for _ in range(3)] == [0, 1, 2]
    member.commit_offsets()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    # kazoo logs the Auth packet it sends (at DEBUG): it was logged, with the credentials replaced.
    assert "auth='<redacted>'" in logged
    assert PASSWORD not in logged

    # The read-only tools work on the protected group without credentials, and show no secret either.
    described = _cli("groups", "describe", "--zookeeper", cluster.zookeeper_connect, "--group", group)
    tree = _cli("zk", "tree", layout.group_dir(group), "--zookeeper", cluster.zookeeper_connect)
    watched = _cli("watch", "--once", "--no-lag", "--group", group, "--zookeeper", cluster.zookeeper_connect)
    for result in (described, tree, watched):
        assert member.consumer_id in result.stdout
        assert PASSWORD not in result.stdout + result.stderr

    # A consumer given the credentials on the command line, at -vv, with its events written to a file.
    events = tmp_path / "events.jsonl"
    consumed = _cli("consume", "--zookeeper", cluster.zookeeper_connect, "--group", unique("secret-cli"), "--topic",
                    topic, "--from-beginning", "--max-messages", "3", "--events", str(events),
                    "--consumer-property", f"zookeeper.auth.credentials={CREDENTIALS}")
    assert consumed.stdout.split() == ["v0-0", "v0-1", "v0-2"]
    assert "auth='<redacted>'" in consumed.stderr
    assert PASSWORD not in consumed.stdout + consumed.stderr + events.read_text()
