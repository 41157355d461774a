"""Shared pieces of the fetcher tests: topics and data on the session's Kafka broker, record sets built locally."""

from __future__ import annotations

import struct
from collections.abc import Iterable

from helpers import unique, wait_for
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.record.default_records import DefaultRecordBatchBuilder

from fetcher_manager.broker import Broker
from fetcher_manager.settings import FetchSettings
from zkconsumer.embedded.kafka import KafkaBroker


def broker_of(kafka: KafkaBroker) -> Broker:
    return Broker(kafka.broker_id, "127.0.0.1", kafka.port)


def create_topic(bootstrap: str, partitions: int, name: str | None = None) -> str:
    """Create a topic and wait until the broker leads every partition (Kafka elects leaders after CreateTopics
    returns; a fetch before that answers NOT_LEADER)."""
    topic = name or unique("fetch")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
        assert wait_for(lambda: _led(admin, topic) == partitions, timeout=30), f"{topic} has no leaders"
    finally:
        admin.close()
    return topic


def _led(admin: KafkaAdminClient, topic: str) -> int:
    described = admin.describe_topics([topic])
    return sum(1 for p in described[0]["partitions"] if p.get("leader_id", -1) >= 0) if described else 0


def produce(bootstrap: str, topic: str, records: Iterable[tuple[int, bytes | None, bytes | None]],
            flush_each: bool = False) -> int:
    """Send (partition, key, value) records; ``flush_each`` makes every record its own batch. Returns the count."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    count = 0
    try:
        for partition, key, value in records:
            producer.send(topic, key=key, value=value, partition=partition)
            count += 1
            if flush_each:
                producer.flush()
        producer.flush()
    finally:
        producer.close()
    return count


def keyed(partitions: int, per_partition: int, prefix: str = "m") -> list[tuple[int, bytes, bytes]]:
    return [(p, f"{prefix}-{p}-{i}".encode(), f"value-{p}-{i}".encode())
            for i in range(per_partition) for p in range(partitions)]


def settings(consumer_id: str | None = None, **overrides: object) -> FetchSettings:
    consumer_id = consumer_id or unique("grp_c")
    values: dict = {"client_id": "fetch-test", "consumer_id": consumer_id, "refresh_leader_backoff_ms": 50}
    values.update(overrides)
    return FetchSettings(**values)


def record_batch(base_offset: int, records: list[tuple[bytes | None, bytes | None]], compression: int = 0,
                 headers: list[tuple[str, bytes]] | None = None) -> bytes:
    """A magic-2 batch as a broker would return it (records at base_offset, base_offset+1, ...)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 24)
    for delta, (key, value) in enumerate(records):
        builder.append(delta, timestamp=1_700_000_000_000 + delta, key=key, value=value, headers=headers or [])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)  # the broker assigns the base offset (not under the CRC)
    return bytes(data)
