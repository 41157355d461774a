"""One TopicPartition for all of fetcher_manager: a NamedTuple that prints like Kafka's TopicAndPartition and
stays interchangeable with the plain (topic, partition) tuple."""

from __future__ import annotations

import importlib

import pytest
from fetch_helpers import broker_of, create_topic, produce, settings
from helpers import wait_for

from fetcher_manager.chunks import ChunkQueue
from fetcher_manager.kafka_wire import KafkaWire
from fetcher_manager.manager import ConsumerFetcherManager
from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.topic_partition import TopicPartition
from zkconsumer.embedded.kafka import KafkaBroker


def test_prints_like_kafka_topic_and_partition() -> None:
    # The 0.8.2 roundrobin assignor hashes this exact text, so it must match a JVM member byte for byte.
    assert str(TopicPartition("orders", 7)) == "[orders,7]"
    assert f"{TopicPartition('a-b', 0)}" == "[a-b,0]"


def test_orders_by_topic_then_partition() -> None:
    tps = [TopicPartition("b", 0), TopicPartition("a", 10), TopicPartition("a", 2)]
    assert sorted(tps) == [TopicPartition("a", 2), TopicPartition("a", 10), TopicPartition("b", 0)]


def test_interchangeable_with_a_plain_tuple() -> None:
    tp = TopicPartition("t", 3)
    topic, partition = tp
    assert (topic, partition) == (tp.topic, tp.partition) == ("t", 3)
    assert tp == ("t", 3) and hash(tp) == hash(("t", 3))
    assert {("t", 3): "x"}[tp] == "x" and {tp: "y"}[("t", 3)] == "y"
    with pytest.raises(AttributeError):
        tp.partition = 4  # type: ignore[misc]  # immutable, so safe as a key


@pytest.mark.parametrize("module", ["fetcher_manager.manager", "fetcher_manager.fetcher_thread",
                                    "fetcher_manager.kafka_wire"])
def test_no_module_spells_it_differently(module: str) -> None:
    assert getattr(importlib.import_module(module), "TopicPartition", TopicPartition) is TopicPartition


def test_partition_info_key() -> None:
    key = PartitionTopicInfo("t", 5, ChunkQueue(1), 0, 0).key
    assert type(key) is TopicPartition and key == TopicPartition("t", 5)


@pytest.mark.slow
def test_metadata_and_fetch_results_are_keyed_by_it(kafka: KafkaBroker) -> None:
    topic = create_topic(kafka.bootstrap, 2)
    produce(kafka.bootstrap, topic, [(0, b"k", b"v")])
    broker = broker_of(kafka)
    wire = KafkaWire("tp-test", socket_timeout_ms=5000)
    try:
        leaders = wire.metadata([broker], [topic]).leaders
        assert {type(tp) for tp in leaders} == {TopicPartition}
        fetched = wire.fetch(broker, {(topic, 0): 0, TopicPartition(topic, 1): 0}, 10, 1, 1 << 20).partitions
        assert {type(tp) for tp in fetched} == {TopicPartition}
        assert set(fetched) == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    finally:
        wire.close()


@pytest.mark.slow
def test_manager_reports_partitions_as_topic_partitions(kafka: KafkaBroker) -> None:
    topic = create_topic(kafka.bootstrap, 2)
    s = settings()
    queue = ChunkQueue(2)
    manager = ConsumerFetcherManager(s, lambda: [broker_of(kafka)])
    try:
        manager.start_connections([PartitionTopicInfo(topic, p, queue, -1, -1) for p in range(2)])
        wait_for(lambda: len(manager.lags()) == 2, 10, message="both partitions fetched")
        assert {type(tp) for tp in manager.fetching()} == {TopicPartition}
        assert {type(tp) for tp in manager.lags()} == {TopicPartition}
    finally:
        manager.shutdown()
        assert manager.join(5)
