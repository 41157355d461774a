"""Offsets in Kafka (`offsets.storage=kafka`, `dual.commit.enabled`) against the real broker.

What the broker holds is read back with kafka-python's admin client (OffsetFetch at its newest version), not with the
code under test, so a commit that encodes the wrong thing cannot pass by reading itself back.
"""

from __future__ import annotations

import logging
import socket

import pytest
from helpers import unique, wait_for
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient

from fetcher_manager.broker import Broker
from fetcher_manager.metrics import Meter
from rebalance.assignment import TopicPartition
from rebalance.events import EventKind
from zkconsumer import kafka_offsets
from zkconsumer.kafka_offsets import KafkaOffsetManager, KafkaOffsetsError, OffsetChannelSettings

WAIT_S = 30.0
WAIT_MS = int(WAIT_S * 1000)


def settings(group: str, **overrides: int) -> OffsetChannelSettings:
    values = {"backoff_ms": 200, "socket_timeout_ms": 10000, "commit_max_retries": 5} | overrides
    return OffsetChannelSettings(group, "test-client", f"{group}_test", **values)


def in_kafka(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="test-offsets")
    try:
        found = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    return {(tp.topic, tp.partition): meta.offset for tp, meta in found.items() if meta.offset >= 0}


def produce(bootstrap: str, topic: str, partitions: int, count: int, start: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for i in range(start, start + count):
            for p in range(partitions):
                producer.send(topic, value=f"v{p}-{i}".encode(), partition=p)
        producer.flush()
    finally:
        producer.close()


def consume(stream, count: int) -> list[tuple[int, int]]:
    """(partition, offset) of the next `count` messages of `stream`."""
    it = iter(stream)
    return [(m.partition, m.offset) for m in (next(it) for _ in range(count))]


def zk_offsets(zk, group: str, topic: str, partitions: int) -> dict[int, str | None]:
    return {p: zk.text(f"/consumers/{group}/offsets/{topic}/{p}") for p in range(partitions)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- the offset manager client ---------------------------------------------------------------------


@pytest.mark.slow
def test_commit_then_fetch_through_the_coordinator(cluster):
    topic = cluster.create_topic(partitions=3)
    group = unique("ko")
    meter = Meter()
    manager = KafkaOffsetManager(settings(group), lambda: [cluster.broker], meter)
    try:
        wanted = {TopicPartition(topic, 0): 7, TopicPartition(topic, 2): 11}
        assert manager.commit(wanted) == set(wanted)
        assert meter.count == 2  # KafkaCommitsPerSec counts partitions, as 0.8.2's meter
        assert in_kafka(cluster.bootstrap_servers, group) == {(topic, 0): 7, (topic, 2): 11}
        assert manager.fetch([TopicPartition(topic, p) for p in range(3)]) == {
            TopicPartition(topic, 0): 7, TopicPartition(topic, 1): -1, TopicPartition(topic, 2): 11}
        assert manager.commit({TopicPartition(topic, 0): 8}) == {TopicPartition(topic, 0)}
        assert in_kafka(cluster.bootstrap_servers, group)[(topic, 0)] == 8
    finally:
        manager.close()


@pytest.mark.slow
def test_a_partition_the_broker_refuses_is_not_reported_committed(cluster, caplog):
    topic = cluster.create_topic(partitions=1)
    group = unique("ko-refused")
    manager = KafkaOffsetManager(settings(group), lambda: [cluster.broker])
    missing = TopicPartition(unique("no-such-topic"), 0)
    try:
        with caplog.at_level(logging.ERROR, logger=kafka_offsets.__name__):
            assert manager.commit({TopicPartition(topic, 0): 3, missing: 5}) == {TopicPartition(topic, 0)}
        refusals = [r.getMessage() for r in caplog.records if "refused the commit" in r.getMessage()]
        assert len(refusals) == 1 and group in refusals[0] and f"{missing.topic}/0=5" in refusals[0]
        assert "UnknownTopicOrPartition" in refusals[0]
        assert in_kafka(cluster.bootstrap_servers, group) == {(topic, 0): 3}
    finally:
        manager.close()


def _assigned(consumer: KafkaConsumer) -> set[tuple[str, int]]:
    """What the group gave `consumer` so far; kafka-python joins (and rejoins) only inside poll, so poll first."""
    consumer.poll(timeout_ms=100)
    return {(tp.topic, tp.partition) for tp in consumer.assignment()}


@pytest.mark.slow
def test_commits_are_refused_while_a_coordinator_design_member_is_in_the_group(cluster, caplog):
    """A migration's middle: the broker stores commits without a generation only for a group with no members of
    its own, so once a new consumer with the same group.id has joined, every partition is refused (and the error
    says why), and once it has left the commits are accepted again."""
    topic = cluster.create_topic(partitions=2)
    group = unique("ko-mixed")
    manager = KafkaOffsetManager(settings(group), lambda: [cluster.broker])
    offsets = {TopicPartition(topic, p): 4 for p in range(2)}
    joined = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers, group_id=group, session_timeout_ms=6000,
                           heartbeat_interval_ms=500, enable_auto_commit=False)
    try:
        wait_for(lambda: _assigned(joined) == {(topic, 0), (topic, 1)}, WAIT_S,
                 message="the coordinator-design member to be assigned both partitions")
        with caplog.at_level(logging.ERROR, logger=kafka_offsets.__name__):
            assert manager.commit(offsets) == set()
        refusals = [r.getMessage() for r in caplog.records if "refused the commit" in r.getMessage()]
        assert len(refusals) == 2, refusals
        # UnknownMemberId in a stable group; RebalanceInProgress if the member happens to be rejoining.
        assert all("coordinator design" in m and ("UnknownMemberId" in m or "RebalanceInProgress" in m)
                   for m in refusals), refusals
        joined.close()  # leaves the group (or, had the LeaveGroup been lost, expires after its session timeout)
        wait_for(lambda: manager.commit(offsets) == set(offsets), WAIT_S, message="commits accepted again")
        assert in_kafka(cluster.bootstrap_servers, group) == {(topic, 0): 4, (topic, 1): 4}
    finally:
        joined.close()
        manager.close()


def test_a_coordinator_that_never_appears_ends_in_an_error_naming_the_group():
    group = unique("ko-nobroker")
    nobody = Broker(1, "127.0.0.1", free_port())
    manager = KafkaOffsetManager(settings(group, backoff_ms=50, socket_timeout_ms=300, commit_max_retries=1),
                                 lambda: [nobody])
    try:
        with pytest.raises(KafkaOffsetsError, match=rf"group {group}: could not fetch offsets in Kafka after 2 "
                                                    r"attempt\(s\).*offsets.commit.max.retries"):
            manager.fetch([TopicPartition("t", 0)])
        empty = KafkaOffsetManager(settings(group, backoff_ms=50, socket_timeout_ms=300, commit_max_retries=0),
                                   lambda: [])
        with pytest.raises(KafkaOffsetsError, match="no broker registered in ZooKeeper"):
            empty.commit({TopicPartition("t", 0): 1})
        empty.close()
    finally:
        manager.close()


@pytest.mark.slow
def test_a_dropped_channel_is_found_again_and_a_closed_manager_refuses(cluster):
    topic = cluster.create_topic(partitions=1)
    group = unique("ko-drop")
    manager = KafkaOffsetManager(settings(group), lambda: [cluster.broker])
    tp = TopicPartition(topic, 0)
    assert manager.commit({tp: 1}) == {tp}
    manager._client.close()  # the connection is gone under the manager, as when the coordinator dies
    assert manager.commit({tp: 2}) == {tp}
    assert manager.fetch([tp]) == {tp: 2}
    manager.close()
    with pytest.raises(KafkaOffsetsError, match="shutting down"):
        manager.commit({tp: 3})


# --- the connector with Kafka storage ---------------------------------------------------------------


@pytest.mark.slow
def test_kafka_storage_commits_in_one_request_and_a_new_member_resumes_from_it(cluster, zk, members, monkeypatch):
    topic = cluster.create_topic(partitions=2)
    produce(cluster.bootstrap_servers, topic, 2, 10)
    group = unique("ks")
    sent: list[str] = []
    real_send = KafkaOffsetManager._send

    def counting_send(self, request):
        sent.append(type(request).__name__)
        return real_send(self, request)

    monkeypatch.setattr(KafkaOffsetManager, "_send", counting_send)
    first = members(group, "a", offsets_storage="kafka", dual_commit_enabled=False, consumer_timeout_ms=WAIT_MS)
    assert first.config.dual_commit_enabled is False
    stream = first.create_message_streams({topic: 1})[topic][0]
    assert sorted(consume(stream, 20)) == [(p, o) for p in range(2) for o in range(10)]
    assert sent == ["OffsetFetchRequest_v1"]  # the rebalance read both partitions in one request
    assert first.commit_offsets() == 2
    assert sent == ["OffsetFetchRequest_v1", "OffsetCommitRequest_v1"]
    assert first.commit_offsets() == 0  # nothing changed: nothing counts as written, 0.8.2 still sends all
    assert in_kafka(cluster.bootstrap_servers, group) == {(topic, 0): 10, (topic, 1): 10}
    assert zk_offsets(zk, group, topic, 2) == {0: None, 1: None}  # no dual commit: ZooKeeper untouched
    metrics = first.metrics()
    assert next(v for k, v in metrics.items() if "KafkaCommitsPerSec" in k)["count"] == 4
    assert next(v for k, v in metrics.items() if "ZooKeeperCommitsPerSec" in k)["count"] == 0
    first.offsets.fence()  # what an expired session does: nothing claimed under it is committed any more
    assert first.commit_offsets() == 0
    assert sent == ["OffsetFetchRequest_v1", "OffsetCommitRequest_v1", "OffsetCommitRequest_v1"]
    first.shutdown()

    produce(cluster.bootstrap_servers, topic, 2, 3, start=10)
    second = members(group, "b", offsets_storage="kafka", dual_commit_enabled=False, consumer_timeout_ms=WAIT_MS)
    resumed = consume(second.create_message_streams({topic: 1})[topic][0], 6)
    assert sorted(resumed) == [(p, o) for p in range(2) for o in range(10, 13)]


@pytest.mark.slow
def test_dual_commit_writes_both_and_a_fetch_takes_the_larger(cluster, zk, members):
    topic = cluster.create_topic(partitions=2)
    produce(cluster.bootstrap_servers, topic, 2, 10)
    group = unique("kd")
    first = members(group, "a", offsets_storage="kafka", consumer_timeout_ms=WAIT_MS)
    assert first.config.dual_commit_enabled is True  # 0.8.2's default with Kafka storage
    commits: list[dict] = []
    first.add_event_listener(lambda e: commits.append(e.data) if e.kind == EventKind.COMMIT else None)
    consume(first.create_message_streams({topic: 1})[topic][0], 20)
    assert first.commit_offsets() == 2
    assert in_kafka(cluster.bootstrap_servers, group) == {(topic, 0): 10, (topic, 1): 10}
    assert zk_offsets(zk, group, topic, 2) == {0: "10", 1: "10"}
    assert sorted((c["partition"], c["offset"]) for c in commits) == [(0, 10), (1, 10)]
    first.shutdown()

    # ZooKeeper ahead on partition 0 (a member still on ZooKeeper storage committed there), behind on 1.
    zk.set(f"/consumers/{group}/offsets/{topic}/0", b"13")
    zk.set(f"/consumers/{group}/offsets/{topic}/1", b"4")
    produce(cluster.bootstrap_servers, topic, 2, 5, start=10)
    second = members(group, "b", offsets_storage="kafka", consumer_timeout_ms=WAIT_MS)
    resumed = consume(second.create_message_streams({topic: 1})[topic][0], 7)
    assert sorted(resumed) == [(0, 13), (0, 14)] + [(1, o) for o in range(10, 15)]
    assert second.commit_offsets() == 2
    assert zk_offsets(zk, group, topic, 2) == {0: "15", 1: "15"}
    assert in_kafka(cluster.bootstrap_servers, group) == {(topic, 0): 15, (topic, 1): 15}
