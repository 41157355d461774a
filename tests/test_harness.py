"""The harness itself: real servers, real expiry, leader failover keeps sessions."""

from __future__ import annotations

import pytest
from helpers import ZkProbe, expire_session, unique, wait_for
from kazoo.client import KazooState

from zkconsumer.embedded.process import kill_process


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


@pytest.mark.ensemble
@pytest.mark.slow
def test_follower_client_keeps_session_when_leader_is_killed(ensemble):
    leader = wait_for(ensemble.leader, message="a leader")
    follower = next(n for n in ensemble.nodes if n is not leader)
    probe = ZkProbe(f"127.0.0.1:{follower.client_port}", session_timeout=20)
    try:
        path = f"/{unique('eph')}"
        probe.create(path, b"x", ephemeral=True)
        session = probe.client.client_id[0]
        states: list[KazooState] = []
        probe.client.add_listener(states.append)
        kill_process(leader.process)
        others = [n for n in ensemble.nodes if n is not leader]
        wait_for(lambda: any(n.mode() == "leader" for n in others), timeout=30, message="a new leader")
        wait_for(lambda: probe.client.state == KazooState.CONNECTED and probe.exists(path), timeout=30,
                 message="the client back on the surviving quorum")
        # The follower left the quorum with its leader (it drops its clients while electing), so the client
        # really was disconnected and reconnected: the session survived a disconnect, not a non-event.
        assert KazooState.SUSPENDED in states, f"the client never saw a disconnect: {states}"
        assert probe.client.client_id[0] == session
        assert probe.stat(path).ephemeralOwner == session
    finally:
        probe.close()
