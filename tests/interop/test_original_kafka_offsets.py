"""Offsets in Kafka across implementations: with `offsets.storage=kafka` on both sides, what the original 0.8.2.2
consumer commits to the group's coordinator ours resumes from, and the other way round; with dual commit (0.8.2's
default for Kafka storage) the ZooKeeper offset nodes hold the same values too (docs/kafka-offsets.md).

What the broker holds is read with kafka-python's admin client, independently of either consumer.
"""

from __future__ import annotations

import pytest
from helpers import unique, wait_for
from interop_support import Drain, first_offsets, offsets_seen, produce
from test_kafka_offsets import in_kafka

from zkconsumer.zookeeper import layout

pytestmark = pytest.mark.interop
WAIT_S = 60.0


def covered(messages, topic: str, end: dict[int, int]) -> bool:
    seen = offsets_seen(messages, topic)
    return all(max(seen.get(p, [-1])) >= last - 1 for p, last in end.items())


def in_zookeeper(zk, group: str, topic: str, partitions) -> dict[int, bytes | None]:
    return {p: zk.get(layout.offset_path(group, topic, p)) for p in partitions}


def test_kafka_offsets_of_the_original_are_resumed_by_ours_without_dual_commit(cluster, members, originals, zk):
    topic = cluster.create_topic(partitions=2)
    group = unique("koff-o2p")
    produce(cluster.bootstrap_servers, topic, range(2), 20)
    original = originals(group, "c1", topics={topic: 1}, offsets_storage="kafka", dual_commit_enabled="false")
    wait_for(lambda: covered(original.messages, topic, dict.fromkeys(range(2), 20)), WAIT_S, message="20 each")
    original.commit()
    assert in_kafka(cluster.bootstrap_servers, group) == {(topic, 0): 20, (topic, 1): 20}
    assert in_zookeeper(zk, group, topic, range(2)) == {0: None, 1: None}
    original.stop()

    produce(cluster.bootstrap_servers, topic, range(2), 10, start=20)
    connector = members(group, "c2", offsets_storage="kafka", dual_commit_enabled=False, consumer_timeout_ms=200)
    drain = Drain(connector.create_message_streams({topic: 1})[topic], "c2")
    try:
        wait_for(lambda: covered(drain.consumed, topic, dict.fromkeys(range(2), 30)), WAIT_S, message="30 each")
        assert first_offsets(drain.consumed, topic) == dict.fromkeys(range(2), 20)
        assert connector.commit_offsets() == 2
    finally:
        drain.stop()
    assert in_kafka(cluster.bootstrap_servers, group) == {(topic, 0): 30, (topic, 1): 30}
    assert in_zookeeper(zk, group, topic, range(2)) == {0: None, 1: None}


def test_dual_commits_of_ours_are_resumed_by_the_original_and_both_write_the_same_nodes(cluster, members, originals,
                                                                                         zk):
    topic = cluster.create_topic(partitions=2)
    group = unique("koff-p2o")
    produce(cluster.bootstrap_servers, topic, range(2), 20)
    connector = members(group, "c1", offsets_storage="kafka", consumer_timeout_ms=200)  # dual commit by default
    drain = Drain(connector.create_message_streams({topic: 1})[topic], "c1")
    try:
        wait_for(lambda: covered(drain.consumed, topic, dict.fromkeys(range(2), 20)), WAIT_S, message="20 each")
        assert connector.commit_offsets() == 2
    finally:
        drain.stop()
    connector.shutdown()
    assert in_kafka(cluster.bootstrap_servers, group) == {(topic, 0): 20, (topic, 1): 20}
    assert in_zookeeper(zk, group, topic, range(2)) == {0: b"20", 1: b"20"}

    # ZooKeeper ahead on partition 1, as after a member still on ZooKeeper storage committed: both take the max.
    zk.set(layout.offset_path(group, topic, 1), b"25")
    produce(cluster.bootstrap_servers, topic, range(2), 10, start=20)
    original = originals(group, "c2", topics={topic: 1}, offsets_storage="kafka")  # 0.8.2: dual commit by default
    wait_for(lambda: covered(original.messages, topic, dict.fromkeys(range(2), 30)), WAIT_S, message="30 each")
    assert first_offsets(original.messages, topic) == {0: 20, 1: 25}
    assert original.commit() == {(topic, 0): 30, (topic, 1): 30}  # what the original reads back from ZooKeeper
    assert in_kafka(cluster.bootstrap_servers, group) == {(topic, 0): 30, (topic, 1): 30}
