"""The harness itself: real servers, real expiry. Leader failover keeping a follower's client's session runs on
the ensemble of test_connector.py's test_connection_loss_alone_releases_nothing (one 3-server ensemble for both)."""

from __future__ import annotations

import pytest
from helpers import ZkProbe, expire_session, wait_for
from kazoo.client import KazooState


@pytest.mark.slow
def test_chroots_isolate_tests(zk, zk_connect, zk_root):
    zk.create("/a/b", b"x")
    chroot = zk_connect.split("/", 1)[1]
    assert zk_root.text(f"/{chroot}/a/b") == "x"
    assert zk.children("/") == ["a"]


@pytest.mark.slow
def test_real_session_expiry_removes_ephemerals_on_the_server(zk_connect, zk_root):
    victim = ZkProbe(zk_connect, session_timeout=30)
    states = []
    victim.client.add_listener(states.append)
    try:
        victim.create("/eph", b"mine", ephemeral=True)
        old_session = victim.client.client_id[0]
        expire_session(zk_connect, victim.client.client_id)
        chroot = zk_connect.split("/", 1)[1]
        # Gone on the server long before the 30 s timeout: the server itself closed the session.
        wait_for(lambda: not zk_root.exists(f"/{chroot}/eph"), timeout=10, message="ephemeral to vanish")
        wait_for(lambda: KazooState.LOST in states, timeout=10, message="victim to see LOST")
        wait_for(lambda: victim.client.connected and victim.client.client_id[0] != old_session, timeout=20,
                 message="victim to reconnect with a new session")
    finally:
        victim.close()


@pytest.mark.slow
def test_cluster_fixture_registers_broker_and_creates_topics(cluster, zk):
    topic = cluster.create_topic(partitions=3)
    assert zk.children(f"/brokers/topics/{topic}/partitions") == ["0", "1", "2"]
    assert b'"PLAINTEXT://127.0.0.1:' in zk.get(f"/brokers/ids/{cluster.broker.id}")
