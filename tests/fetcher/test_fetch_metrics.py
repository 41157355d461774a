"""The Histogram metric, and the FetchRequestAndResponseMetrics a fetcher records (Kafka 0.8.2's
FetchRequestAndResponseStats.scala): per broker, and for all brokers under the clientId tag alone."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from fetch_helpers import broker_of, create_topic, keyed, produce, settings
from helpers import wait_for

from fetcher_manager.broker import Broker
from fetcher_manager.chunks import ChunkQueue
from fetcher_manager.kafka_wire import FetchResult, KafkaWire
from fetcher_manager.manager import ConsumerFetcherManager
from fetcher_manager.metrics import Histogram, MetricsRegistry, metric_name
from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.topic_partition import TopicPartition
from zkconsumer.embedded.kafka import KafkaBroker

STAT_KEYS = {"count", "min", "max", "mean", "p50", "p75", "p95", "p99"}


def test_histogram_statistics() -> None:
    histogram = Histogram()
    for value in range(100, 0, -1):  # order must not matter
        histogram.update(value)
    snap = histogram.snapshot()
    assert (snap["count"], snap["min"], snap["max"], snap["mean"]) == (100, 1, 100, 50.5)
    # metrics-core's Snapshot.getValue interpolates at quantile * (n + 1)
    assert snap["p50"] == pytest.approx(50.5)
    assert snap["p75"] == pytest.approx(75.75)
    assert snap["p95"] == pytest.approx(95.95)
    assert snap["p99"] == pytest.approx(99.99)
    assert histogram.percentile(0.0) == 1 and histogram.percentile(1.0) == 100
    with pytest.raises(ValueError):
        histogram.percentile(1.5)


def test_histogram_percentiles_cover_only_the_latest_values() -> None:
    histogram = Histogram(reservoir_size=10)
    for value in range(1, 1001):
        histogram.update(value)
    snap = histogram.snapshot()
    assert (snap["count"], snap["min"], snap["max"], snap["mean"]) == (1000, 1, 1000, 500.5)  # all values
    assert snap["p50"] == pytest.approx(995.5)  # 991..1000 only
    assert histogram.percentile(0.0) == 991


def test_empty_histogram_and_single_value() -> None:
    assert Histogram().snapshot() == dict.fromkeys(STAT_KEYS, 0) | {"mean": 0.0}
    one = Histogram()
    one.update(42)
    assert one.snapshot() == {"count": 1, "min": 42, "max": 42, "mean": 42.0, "p50": 42.0, "p75": 42.0,
                              "p95": 42.0, "p99": 42.0}


def test_histogram_counts_concurrent_updates_exactly() -> None:
    histogram = Histogram(reservoir_size=16)
    threads = [threading.Thread(target=lambda: [histogram.update(v) for v in range(1000)], name=f"hist-{i}")
               for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert histogram.count == 8000 and histogram.mean == pytest.approx(499.5)


def test_registry_histograms_in_the_snapshot() -> None:
    registry = MetricsRegistry()
    name = metric_name("kafka.consumer", "FetchRequestAndResponseMetrics", "FetchResponseSize", clientId="c")
    assert registry.histogram(name) is registry.histogram(name)
    registry.histogram(name).update(10)
    registry.meter("m").mark()
    snapshot = registry.snapshot()
    assert set(snapshot[name]) == STAT_KEYS and snapshot[name]["max"] == 10
    json.dumps(snapshot)  # plain data, like every other metric's snapshot
    with pytest.raises(TypeError):
        registry.meter(name)
    with pytest.raises(TypeError):
        registry.histogram("m")


class _CountingSocket:
    """Counts the bytes a connection reads off its socket."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self.received = 0

    def recv_into(self, buffer: Any) -> int:
        n = self._sock.recv_into(buffer)
        self.received += n
        return n

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


@pytest.mark.slow
def test_fetch_result_size_is_the_response_as_received(kafka: KafkaBroker) -> None:
    topic = create_topic(kafka.bootstrap, 2)
    produce(kafka.bootstrap, topic, keyed(2, 20))
    broker = broker_of(kafka)
    wire = KafkaWire("size-test", socket_timeout_ms=5000)
    try:
        wire.metadata([broker], [topic])  # opens the connection
        conn = wire._connections[broker]
        conn.sock = counting = _CountingSocket(conn.sock)  # type: ignore[assignment]
        result = wire.fetch(broker, {(topic, 0): 0, (topic, 1): 0}, 10, 1, 1 << 20)
        record_bytes = sum(len(part.records) for part in result.partitions.values())
        assert record_bytes > 0
        assert result.size_bytes == counting.received - 4  # all but the length prefix, as FetchResponse.sizeInBytes
        assert result.size_bytes > record_bytes
    finally:
        wire.close()


class _RecordingWire(KafkaWire):
    sizes: list[int]

    def fetch(self, broker: Broker, offsets: Mapping[TopicPartition, int], max_wait_ms: int, min_bytes: int,
              partition_max_bytes: int, *, max_bytes: int | None = None) -> FetchResult:
        result = super().fetch(broker, offsets, max_wait_ms, min_bytes, partition_max_bytes, max_bytes=max_bytes)
        if max_bytes is None:  # the fetch loop's requests; offset_for's probe passes max_bytes=1
            type(self).sizes.append(result.size_bytes)
        return result


@pytest.mark.slow
def test_fetchers_record_fetch_response_size_per_broker_and_for_all_brokers(kafka: KafkaBroker) -> None:
    topic = create_topic(kafka.bootstrap, 2)
    produce(kafka.bootstrap, topic, keyed(2, 30))
    s = settings(auto_offset_reset="smallest")
    broker = broker_of(kafka)
    registry = MetricsRegistry()
    _RecordingWire.sizes = []
    infos = [PartitionTopicInfo(topic, p, ChunkQueue(10), -1, -1) for p in range(2)]
    manager = ConsumerFetcherManager(s, lambda: [broker], registry, wire_factory=_RecordingWire.from_settings)
    try:
        manager.start_connections(infos)
        wait_for(lambda: [i.fetched_offset for i in infos] == [30, 30], 10, message="everything fetched")
    finally:
        manager.shutdown()
        assert manager.join(5)

    def name(metric: str, **broker_tags: object) -> str:
        return metric_name("kafka.consumer", "FetchRequestAndResponseMetrics", metric, clientId=s.client_id,
                           **broker_tags)

    per_broker = {"brokerHost": broker.host, "brokerPort": broker.port}
    snapshot = registry.snapshot()
    assert name("FetchResponseSize", **per_broker) == (
        f"kafka.consumer:type=FetchRequestAndResponseMetrics,name=FetchResponseSize,clientId={s.client_id},"
        f"brokerHost={broker.host},brokerPort={broker.port}")
    sizes = _RecordingWire.sizes  # every response the fetch loop received
    assert max(sizes) > 30 * 2 * len(b"value-0-0")  # the data came in these responses
    for histogram in (snapshot[name("FetchResponseSize", **per_broker)], snapshot[name("FetchResponseSize")]):
        assert set(histogram) == STAT_KEYS
        assert (histogram["count"], histogram["min"], histogram["max"]) == (len(sizes), min(sizes), max(sizes))
        assert histogram["mean"] == pytest.approx(sum(sizes) / len(sizes))
    # and the all-brokers request timer FetchRequestAndResponseStats keeps beside the per-broker one
    timers = snapshot[name("FetchRequestRateAndTimeMs", **per_broker)], snapshot[name("FetchRequestRateAndTimeMs")]
    assert timers[0]["count"] == timers[1]["count"] >= 1
