"""The connector and rebalance listener against the real ZooKeeper of the harness."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading

import pytest
from helpers import ZkProbe, expire_session, make_config, unique, wait_for
from kazoo.client import KazooState

from rebalance.assignors import RangeAssignor
from rebalance.convergence import check_convergence
from zkconsumer import (
    ConsumerRebalanceFailedError,
    MessageStreamsExistError,
    Whitelist,
    ZookeeperConsumerConnector,
)
from zkconsumer.admin import alter_partitions
from zkconsumer.embedded.process import kill_process
from zkconsumer.zookeeper.group import read_group_snapshot

pytestmark = pytest.mark.slow


def ensure_offsets_topic(bootstrap: str, zk) -> None:
    """Have the broker create __consumer_offsets (a coordinator lookup does) and wait for its znode."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        wait_for(lambda: _coordinator_found(admin), timeout=30, message="a group coordinator")
    finally:
        admin.close()
    wait_for(lambda: zk.exists("/brokers/topics/__consumer_offsets"), message="__consumer_offsets in ZooKeeper")


def _coordinator_found(admin) -> bool:
    try:
        admin.list_group_offsets(unique("probe"))
        return True
    except Exception:
        return False


def converged(zk, group: str, topics: dict[str, int]):
    """The group settled on the range assignment for its registrations, owning every partition of `topics`."""
    snapshot = read_group_snapshot(zk.zk_client, group)
    result = check_convergence(snapshot, RangeAssignor())
    return result.settled and len(result.expected) == sum(topics.values()) and snapshot.owners


def test_worked_example_r1_gives_spec_owner_values(cluster, zk, members):
    topic = cluster.create_topic(partitions=5)
    group = unique("g")
    c1 = members(group, "C1")
    c1.create_message_streams({topic: 2})
    c2 = members(group, "C2")
    c2.create_message_streams({topic: 2})
    expected = {(topic, 0): f"{group}_C1-0", (topic, 1): f"{group}_C1-0", (topic, 2): f"{group}_C1-1",
                (topic, 3): f"{group}_C2-0", (topic, 4): f"{group}_C2-1"}
    wait_for(lambda: zk.owners(group) == expected, message="R1 owners")
    wait_for(lambda: c1.owned_partitions() == {k: v for k, v in expected.items() if "C1" in v}, message="C1 view")
    registration = zk.text(f"/consumers/{group}/ids/{group}_C1")
    assert registration.startswith(f'{{"version":1,"subscription":{{"{topic}":2}},"pattern":"static","timestamp":"')
    assert zk.stat(f"/consumers/{group}/owners/{topic}/0").ephemeralOwner == c1.zk.session_id


def test_worked_example_r2_idle_thread_creates_no_owner(cluster, zk, members):
    topic = cluster.create_topic(partitions=3)
    group = "group1" + unique("")
    members(group, "a").create_message_streams({topic: 1})
    members(group, "b").create_message_streams({topic: 3})
    expected = {(topic, 0): f"{group}_a-0", (topic, 1): f"{group}_b-0", (topic, 2): f"{group}_b-1"}
    wait_for(lambda: zk.owners(group) == expected, message="R2 owners")


def test_join_leave_and_session_expiry_converge(cluster, zk, members):
    topic = cluster.create_topic(partitions=6)
    group = unique("g")
    topics = {topic: 6}
    first = members(group, "m1")
    first.create_message_streams({topic: 1})
    wait_for(lambda: converged(zk, group, topics), message="one member owns all")
    second = members(group, "m2")
    second.create_message_streams({topic: 2})
    wait_for(lambda: converged(zk, group, topics), message="two members converge")
    assert set(zk.owners(group).values()) == {f"{group}_m1-0", f"{group}_m2-0", f"{group}_m2-1"}

    old_session = second.zk.session_id
    expire_session(cluster.zookeeper_connect, second.zk.session_credentials)
    wait_for(lambda: second.zk.session_id != old_session and second.zk.connected, message="new session")
    wait_for(lambda: zk.exists(f"/consumers/{group}/ids/{group}_m2")
             and zk.stat(f"/consumers/{group}/ids/{group}_m2").ephemeralOwner == second.zk.session_id,
             message="same id re-registered under the new session")
    wait_for(lambda: converged(zk, group, topics), message="converge after expiry")

    second.shutdown()
    wait_for(lambda: converged(zk, group, topics) and set(zk.owners(group).values()) == {f"{group}_m1-0"},
             message="graceful leave hands everything back")
    assert first.rebalance_stats.rebalances >= 3


def test_partitions_added_to_a_topic_trigger_rebalance(cluster, zk, members):
    topic = cluster.create_topic(partitions=2)
    group = unique("g")
    member = members(group, "m")
    member.create_message_streams({topic: 1})
    wait_for(lambda: len(zk.owners(group)) == 2, message="2 partitions owned")
    alter_partitions(cluster.zk, topic, 4, cluster.bootstrap_servers)  # CreatePartitions: the controller writes it
    wait_for(lambda: set(zk.owners(group)) == {(topic, p) for p in range(4)}, message="new partitions owned")


def test_wildcard_member_picks_up_created_topics_and_never_internal(cluster, zk, members):
    prefix = unique("wild").replace("-", "")
    first = cluster.create_topic(f"{prefix}.a", partitions=2)
    cluster.create_topic(f"other{prefix}", partitions=1)
    ensure_offsets_topic(cluster.bootstrap_servers, zk)  # the real internal topic, made by the broker
    group = unique("g")
    member = members(group, "w")
    member.create_message_streams_by_filter(Whitelist(f"{prefix}\\..*|__consumer_offsets"), 2)
    wait_for(lambda: set(zk.owners(group)) == {(first, 0), (first, 1)}, message="first topic owned")
    second = cluster.create_topic(f"{prefix}.b", partitions=3)
    wait_for(lambda: {t for t, _ in zk.owners(group)} == {first, second}, message="created topic picked up")
    assert '"pattern":"white_list"' in zk.text(f"/consumers/{group}/ids/{group}_w")


def test_no_broker_then_broker_registration(zk_connect, zk, kafka):
    zk.create("/brokers/topics/nb", b'{"version":1,"partitions":{"0":[111],"1":[111]}}')
    group = unique("g")
    with ZookeeperConsumerConnector(make_config(zk_connect, group, "m")) as member:
        member.create_message_streams({"nb": 1})  # succeeds without brokers, owning nothing
        assert member.owned_partitions() == {}
        assert zk.owners(group) == {}
        zk.create("/brokers/ids/111", b'{"version":1,"host":"127.0.0.1","port":%d,"jmx_port":-1}' % kafka.port,
                  ephemeral=True)
        wait_for(lambda: set(zk.owners(group)) == {("nb", 0), ("nb", 1)}, message="owned after broker joined")


def test_conflicting_claims_retry_then_fail_with_the_spec_message(cluster, zk, members, caplog):
    topic = cluster.create_topic(partitions=1)
    group = unique("g")
    zk.create(f"/consumers/{group}/owners/{topic}/0", b"somebody-else-0", ephemeral=True)
    member = members(group, "m", rebalance_max_retries=3, rebalance_backoff_ms=50)
    with caplog.at_level(logging.INFO), pytest.raises(ConsumerRebalanceFailedError) as info:
        member.create_message_streams({topic: 1})
    assert str(info.value) == f"{group}_m can't rebalance after 3 retries"
    assert member.rebalance_stats.conflicts == 3
    assert "waiting for the partition ownership" in caplog.text
    # Later failures are only logged; once the stale owner goes, the next trigger succeeds.
    zk.delete(f"/consumers/{group}/owners/{topic}/0")
    members(group, "n").create_message_streams({topic: 1})  # a join triggers everybody
    wait_for(lambda: zk.owners(group).get((topic, 0)) in (f"{group}_m-0", f"{group}_n-0"), message="owned")


def test_conflict_then_release_succeeds_within_retries(cluster, zk, members):
    topic = cluster.create_topic(partitions=2)
    group = unique("g")
    zk.create(f"/consumers/{group}/owners/{topic}/1", b"old-owner-0", ephemeral=True)
    member = members(group, "m", rebalance_backoff_ms=200)
    conflicted = threading.Event()
    member.add_event_listener(lambda e: conflicted.set() if e.kind == "attempt_end" and e.data["result"] == "conflict"
                              else None)
    creator = threading.Thread(target=member.create_message_streams, args=({topic: 1},), name="test-create")
    creator.start()
    assert conflicted.wait(20), "the first attempt must meet the stale owner"
    zk.delete(f"/consumers/{group}/owners/{topic}/1")
    creator.join(20)
    assert not creator.is_alive()
    assert set(member.owned_partitions()) == {(topic, 0), (topic, 1)}
    assert member.rebalance_stats.failed_attempts >= 1 and member.rebalance_stats.conflicts >= 1


def test_bad_registration_from_another_client_fails_attempts_but_harms_nobody(cluster, zk, members):
    topic = cluster.create_topic(partitions=2)
    group = unique("g")
    member = members(group, "m", rebalance_max_retries=2, rebalance_backoff_ms=50)
    member.create_message_streams({topic: 1})
    wait_for(lambda: len(zk.owners(group)) == 2, message="owned")
    zk.create(f"/consumers/{group}/ids/garbage", b"{truncated", ephemeral=True)
    wait_for(lambda: member.rebalance_stats.failures >= 1, message="the attempt fails and is logged")
    assert member.listener.watcher_alive
    zk.delete(f"/consumers/{group}/ids/garbage")
    wait_for(lambda: len(zk.owners(group)) == 2, message="recovers on the next trigger")


def test_second_create_message_streams_raises(cluster, members):
    topic = cluster.create_topic(partitions=1)
    member = members(unique("g"), "m")
    member.create_message_streams({topic: 1})
    with pytest.raises(MessageStreamsExistError):
        member.create_message_streams({topic: 1})


def test_offsets_committed_only_when_changed_and_shutdown_leaves_no_thread(cluster, zk, members):
    topic = cluster.create_topic(partitions=2)
    group = unique("g")
    member = members(group, "m")
    member.create_message_streams({topic: 1})
    wait_for(lambda: len(member.owned_partitions()) == 2, message="owned")
    # The fetcher first resolves the unknown (-1) start offset by auto.offset.reset; let it settle.
    wait_for(lambda: all(i.consumed_offset == 0 for i in member.ownership.infos()), message="offsets reset")
    for info in member.ownership.infos():
        info.set_consumed_offset(7)
    assert member.commit_offsets() == 2
    assert member.commit_offsets() == 0  # unchanged: nothing written
    assert zk.text(f"/consumers/{group}/offsets/{topic}/0") == "7"
    metrics = member.metrics()
    commits = next(v for k, v in metrics.items() if "ZooKeeperCommitsPerSec" in k)
    assert commits["count"] == 2
    assert any("OwnedPartitionsCount" in k and f"topic={topic}" in k for k in metrics)
    member.shutdown()
    member.shutdown()  # idempotent
    assert not zk.exists(f"/consumers/{group}/ids/{group}_m")
    leftover = [t.name for t in threading.enumerate() if t.name.startswith(f"{group}_m")]
    assert leftover == []


def start_member_process(zk_connect: str, group: str, consumer: str, topic: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "zkconsumer", "consume", "--zookeeper", zk_connect, "--group", group, "--topic",
            topic, "--consumer-id", consumer, "--consumer-property", "zookeeper.session.timeout.ms=4000"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)


def test_kill_9_of_a_member_process_frees_its_partitions_at_session_timeout(cluster, zk, members):
    topic = cluster.create_topic(partitions=4)
    group = unique("g")
    proc = start_member_process(cluster.zookeeper_connect, group, "victim", topic)
    try:
        wait_for(lambda: len(zk.owners(group)) == 4, timeout=60, message="the process owns everything")
        survivor = members(group, "survivor")
        survivor.create_message_streams({topic: 1})
        wait_for(lambda: converged(zk, group, {topic: 4}) and len(set(zk.owners(group).values())) == 2,
                 message="two members share the topic")
        proc.kill()
        proc.wait(timeout=10)
        wait_for(lambda: set(zk.owners(group).values()) == {f"{group}_survivor-0"}
                 and len(zk.owners(group)) == 4, timeout=30, message="survivor owns all after the session timeout")
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_restart_with_same_consumer_id_waits_for_old_session(cluster, zk, members):
    """Field reports 1 and 27: a fixed consumer.id restarted before its old session expired.

    Documented outcome (0.8.2 behaviour, bounded): the new instance waits for the old session's
    registration to expire, then registers and owns its partitions; it does not crash with NODE_EXISTS.
    """
    topic = cluster.create_topic(partitions=2)
    group = unique("g")
    proc = start_member_process(cluster.zookeeper_connect, group, "fixed", topic)
    try:
        wait_for(lambda: len(zk.owners(group)) == 2, timeout=60, message="the first instance owns everything")
        old_session = zk.stat(f"/consumers/{group}/ids/{group}_fixed").ephemeralOwner
        proc.kill()  # crash: the server keeps the session (and its nodes) until the 4 s timeout
        proc.wait(timeout=10)
        assert zk.stat(f"/consumers/{group}/ids/{group}_fixed").ephemeralOwner == old_session
        new = members(group, "fixed")
        new.create_message_streams({topic: 1})  # waits for the old session to expire, then rebalances
        assert zk.stat(f"/consumers/{group}/ids/{group}_fixed").ephemeralOwner == new.zk.session_id
        wait_for(lambda: set(zk.owners(group).values()) == {f"{group}_fixed-0"} and len(zk.owners(group)) == 2,
                 message="the restarted instance owns all")
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_bad_topic_and_offset_data_fail_attempts_with_path_in_log(private_cluster, zk, private_members, caplog):
    cluster, members = private_cluster, private_members  # it writes malformed topic data: never at the broker's root
    topic = cluster.create_topic(partitions=2)
    group = unique("g")
    zk.create(f"/consumers/{group}/offsets/{topic}/1", b"not-a-number")
    member = members(group, "m", rebalance_max_retries=2, rebalance_backoff_ms=50)
    with caplog.at_level(logging.INFO), pytest.raises(ConsumerRebalanceFailedError):
        member.create_message_streams({topic: 1})
    assert f"/consumers/{group}/offsets/{topic}/1" in caplog.text and "not-a-number" in caplog.text
    assert zk.owners(group) == {}  # nothing claimed, nothing left behind

    zk.set(f"/consumers/{group}/offsets/{topic}/1", b"3")
    good = cluster.create_topic(partitions=1)
    other = members(unique("g"), "x", rebalance_max_retries=2, rebalance_backoff_ms=50)
    zk.set(f"/brokers/topics/{good}", b'{"version":1,"partitions":{"zero":[111]}}')
    with caplog.at_level(logging.INFO), pytest.raises(ConsumerRebalanceFailedError):
        other.create_message_streams({good: 1})
    assert "partition keys must be integers" in caplog.text


def test_roundrobin_members_give_rr1_owner_values(private_cluster, zk, private_members):
    members = private_members
    group = "g"
    # RR1's order comes from hashing "[t,0]".., so the topic must be literally "t"; the test's chroot keeps
    # that name private (ownership needs only the ZooKeeper side of the topic).
    zk.create("/brokers/topics/t", b'{"version":1,"partitions":{"0":[111],"1":[111],"2":[111],"3":[111]}}')
    members(group, "c1", partition_assignment_strategy="roundrobin").create_message_streams({"t": 1})
    members(group, "c2", partition_assignment_strategy="roundrobin").create_message_streams({"t": 1})
    expected = {("t", 0): "g_c1-0", ("t", 1): "g_c2-0", ("t", 2): "g_c1-0", ("t", 3): "g_c2-0"}
    wait_for(lambda: zk.owners(group) == expected, message="RR1 owners")


class RecordingListener:
    def __init__(self) -> None:
        self.released: list[dict[str, set[int]]] = []
        self.started: list[dict[str, dict[int, str]]] = []

    def before_releasing_partitions(self, partition_ownership):
        self.released.append({t: set(p) for t, p in partition_ownership.items()})

    def before_starting_fetchers(self, consumer_id, global_partition_assignment):
        self.started.append({t: {p: str(th) for p, th in a.items()} for t, a in global_partition_assignment.items()})


def test_rebalance_listener_sees_released_and_global_assignments(cluster, zk, members):
    topic = cluster.create_topic(partitions=2)
    group = unique("g")
    first, second = members(group, "a"), members(group, "b")
    listeners = RecordingListener(), RecordingListener()
    first.set_rebalance_listener(listeners[0])
    second.set_rebalance_listener(listeners[1])
    first.create_message_streams({topic: 1})
    assert listeners[0].released[0] == {}  # nothing owned before the first rebalance
    second.create_message_streams({topic: 1})
    wait_for(lambda: len(set(zk.owners(group).values())) == 2, message="both own one")
    wait_for(lambda: listeners[0].released[-1] == {topic: {1}} or {topic: {0, 1}} in listeners[0].released,
             message="first member released what it owned")
    wait_for(lambda: listeners[0].started and listeners[1].started
             and listeners[0].started[-1] == listeners[1].started[-1], message="same global view")
    assert listeners[1].started[-1] == {topic: {0: f"{group}_a-0", 1: f"{group}_b-0"}}
    with pytest.raises(RuntimeError, match="before creating"):
        first.set_rebalance_listener(RecordingListener())


@pytest.mark.ensemble
def test_connection_loss_alone_releases_nothing(ensemble, kafka):
    """The ensemble's leader is killed under a member and under a plain client on a follower: the client sees the
    disconnect and keeps its session and ephemeral (the harness's leader failover, once test_harness.py's test of
    its own ensemble), the member keeps its session and its partitions without a rebalance."""
    connect = ensemble.connect_string
    probe = ZkProbe(connect)
    leader = wait_for(ensemble.leader, message="a leader")
    follower = next(n for n in ensemble.nodes if n is not leader)
    on_follower = ZkProbe(f"127.0.0.1:{follower.client_port}", session_timeout=20)
    try:
        probe.create("/brokers/ids/111", b'{"version":1,"host":"127.0.0.1","port":%d}' % kafka.port, ephemeral=True)
        probe.create("/brokers/topics/lossy", b'{"version":1,"partitions":{"0":[111],"1":[111]}}')
        path = f"/{unique('eph')}"
        on_follower.create(path, b"x", ephemeral=True)
        follower_session = on_follower.client.client_id[0]
        states: list[KazooState] = []
        on_follower.client.add_listener(states.append)
        config = make_config(connect, "g", "m", zookeeper_session_timeout_ms=20000)
        with ZookeeperConsumerConnector(config) as member:
            member.create_message_streams({"lossy": 1})
            owners = probe.owners("g")
            assert len(owners) == 2
            session, rebalances = member.zk.session_id, member.rebalance_stats.rebalances
            kill_process(leader.process)
            wait_for(lambda: any(n.mode() == "leader" for n in ensemble.nodes if n is not leader), timeout=30,
                     message="a new leader")
            wait_for(lambda: member.zk.connected and probe.client.connected, timeout=30, message="reconnected")
            wait_for(lambda: on_follower.client.state == KazooState.CONNECTED and on_follower.exists(path),
                     timeout=30, message="the follower's client back on the surviving quorum")
            assert member.zk.session_id == session
            assert probe.owners("g") == owners
            assert member.rebalance_stats.rebalances == rebalances
            # The follower left the quorum with its leader (it drops its clients while electing), so its client
            # really was disconnected and reconnected: the session survived a disconnect, not a non-event.
            assert KazooState.SUSPENDED in states, f"the client never saw a disconnect: {states}"
            assert on_follower.client.client_id[0] == follower_session
            assert on_follower.stat(path).ephemeralOwner == follower_session
    finally:
        on_follower.close()
        probe.close()
