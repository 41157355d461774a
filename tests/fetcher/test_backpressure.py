"""A stream's queue holds at most queued.max.message.chunks chunks and a full queue stalls its
fetcher, which resumes once the application consumes."""

from __future__ import annotations

import pytest
from fetch_helpers import broker_of, create_topic, produce, settings
from helpers import wait_for

from fetcher_manager.manager import ConsumerFetcherManager
from fetcher_manager.metrics import MetricsRegistry, metric_name
from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.stream import ChunkQueue, KafkaStream
from zkconsumer.embedded.kafka import KafkaBroker

pytestmark = pytest.mark.slow


def test_full_queue_stalls_the_fetcher_until_consumed(kafka: KafkaBroker) -> None:
    topic = create_topic(kafka.bootstrap, 1)
    total = produce(kafka.bootstrap, topic, [(0, b"k%d" % i, b"v" * 50) for i in range(6)], flush_each=True)
    # A tiny fetch size: the broker then returns about one batch (= one record here) per fetch.
    s = settings(auto_offset_reset="smallest", fetch_message_max_bytes=100)
    broker = broker_of(kafka)
    registry = MetricsRegistry()
    fetches = registry.timer(metric_name("kafka.consumer", "FetchRequestAndResponseMetrics",
                                         "FetchRequestRateAndTimeMs", clientId=s.client_id,
                                         brokerHost=broker.host, brokerPort=broker.port))
    queue = ChunkQueue(1)
    info = PartitionTopicInfo(topic, 0, queue, -1, -1)
    manager = ConsumerFetcherManager(s, lambda: [broker], registry)
    try:
        manager.start_connections([info])
        wait_for(lambda: queue.qsize() == 1 and info.fetched_offset > 0, 10, message="a first chunk queued")
        first_end = info.fetched_offset
        # Another response has arrived since; its chunk cannot be queued, so the fetched offset stays.
        wait_for(lambda: fetches.count >= 2, 10, message="a second fetch answered")
        assert queue.qsize() == 1
        assert info.fetched_offset == first_end < total

        it = iter(KafkaStream(queue, consumer_timeout_ms=5000))  # a bound, not a pace
        assert next(it).offset == 0  # takes the queued chunk: the fetcher's blocked put goes through
        wait_for(lambda: info.fetched_offset > first_end, 10, message="the fetcher advancing again")

        offsets = [0]
        while len(offsets) < total:
            offsets.append(next(it).offset)
        assert offsets == list(range(total))
        wait_for(lambda: info.fetched_offset == total, 10, message="everything fetched")
    finally:
        manager.shutdown()
