"""The kafka-python internals fetcher_manager/kafka_wire.py relies on, checked by name so that an upgrade
that moves them fails here with the attribute spelled out, rather than deep inside a fetcher thread."""

from __future__ import annotations

import importlib
import inspect

import pytest
from fetch_helpers import broker_of, create_topic, produce, record_batch
from helpers import unique

from fetcher_manager import kafka_wire
from fetcher_manager.kafka_wire import _SUPPORTED, NO_ERROR, KafkaWire
from fetcher_manager.records import scan_record_set
from zkconsumer.embedded.kafka import KafkaBroker

# module, dotted attribute: everything kafka_wire.py touches.
REQUIRED = [
    ("kafka.protocol.consumer", "FetchRequest.FetchTopic.FetchPartition"),
    ("kafka.protocol.consumer", "FetchResponse"),
    ("kafka.protocol.consumer", "ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition"),
    ("kafka.protocol.consumer", "ListOffsetsResponse"),
    ("kafka.protocol.metadata", "ApiVersionsRequest"),
    ("kafka.protocol.metadata", "ApiVersionsResponse"),
    ("kafka.protocol.metadata", "MetadataRequest.MetadataRequestTopic"),
    ("kafka.protocol.metadata", "MetadataResponse"),
    ("kafka.protocol.api_message", "ApiMessage.with_header"),
    ("kafka.protocol.api_message", "ApiMessage.encode"),
    ("kafka.protocol.api_message", "ApiMessage.decode"),
    ("kafka.protocol.consumer", "FetchRequest.API_KEY"),
    ("kafka.protocol.consumer", "FetchRequest.max_version"),
    ("kafka.record.legacy_records", "LegacyRecordBatch.validate_crc"),
    ("kafka.errors", "for_code"),
    ("kafka.errors", "ReplicaNotAvailableError.errno"),
    ("kafka.codec", "gzip_decode"),
    ("kafka.codec", "snappy_decode"),
    ("kafka.codec", "lz4_decode"),
    ("kafka.codec", "zstd_decode"),
    ("kafka.codec", "has_gzip"),
    ("kafka.codec", "has_snappy"),
    ("kafka.codec", "has_lz4"),
    ("kafka.codec", "has_zstd"),
]


@pytest.mark.parametrize(("module", "attribute"), REQUIRED, ids=[f"{m}.{a}" for m, a in REQUIRED])
def test_kafka_python_still_has(module: str, attribute: str) -> None:
    try:
        obj = importlib.import_module(module)
    except ImportError as exc:
        pytest.fail(f"kafka-python changed: module {module} is gone ({exc}); fetcher_manager/kafka_wire.py imports it")
    for part in attribute.split("."):
        if not hasattr(obj, part):
            pytest.fail(f"kafka-python changed: {module}.{attribute} is missing (no {part!r}); "
                        "fetcher_manager/kafka_wire.py uses it")
        obj = getattr(obj, part)


def test_encode_and_decode_keep_their_keywords() -> None:
    from kafka.protocol.api_message import ApiMessage

    for method, keywords in ((ApiMessage.encode, {"version", "header", "framed"}),
                             (ApiMessage.decode, {"version", "header"}),
                             (ApiMessage.with_header, {"correlation_id", "client_id"})):
        missing = keywords - set(inspect.signature(method).parameters)
        assert not missing, f"kafka-python changed: ApiMessage.{method.__name__} lost parameters {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(_SUPPORTED))
def test_requests_encode_at_every_version_we_may_negotiate(name: str) -> None:
    request_class, low, high = _SUPPORTED[name]
    assert high <= request_class.max_version, (
        f"kafka-python changed: {request_class.__name__} only goes up to v{request_class.max_version}")
    samples = {
        "fetch": lambda: request_class(replica_id=-1, max_wait_ms=1, min_bytes=1, max_bytes=10, isolation_level=0,
                                       topics=[request_class.FetchTopic(topic="t", partitions=[
                                           request_class.FetchTopic.FetchPartition(
                                               partition=0, fetch_offset=0, partition_max_bytes=10)])]),
        "metadata": lambda: request_class(topics=[request_class.MetadataRequestTopic(name="t")],
                                          allow_auto_topic_creation=False),
        "list_offsets": lambda: request_class(replica_id=-1, isolation_level=0, topics=[request_class.ListOffsetsTopic(
            name="t", partitions=[request_class.ListOffsetsTopic.ListOffsetsPartition(partition_index=0,
                                                                                      timestamp=-1)])]),
    }
    for version in range(low, high + 1):
        request = samples[name]()
        request.API_VERSION = version
        request.with_header(correlation_id=1, client_id="contract")
        frame = request.encode(framed=True, header=True)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4, f"{name} v{version}: bad frame"


@pytest.mark.slow
def test_round_trip_against_the_broker(kafka: KafkaBroker) -> None:
    topic = create_topic(kafka.bootstrap, 2)
    produce(kafka.bootstrap, topic, [(1, b"k", b"v1"), (1, b"k", b"v2")])
    broker = broker_of(kafka)
    wire = KafkaWire("contract-test", socket_timeout_ms=5000)
    try:
        metadata = wire.metadata([broker], [topic, unique("absent")])
        assert metadata.brokers == {broker.id: broker}
        assert metadata.leaders == {(topic, 0): broker.id, (topic, 1): broker.id}
        versions = wire._connections[broker].versions
        assert {name: _SUPPORTED[name][1] <= v <= _SUPPORTED[name][2] for name, v in versions.items()} == {
            "fetch": True, "metadata": True, "list_offsets": True}

        answer = wire.fetch(broker, {(topic, 1): 0, (topic, 0): 0}, 10, 1, 1 << 20).partitions
        assert answer[(topic, 1)].error_code == NO_ERROR
        assert answer[(topic, 1)].high_watermark == 2
        assert isinstance(answer[(topic, 1)].records, bytes)
        assert scan_record_set(answer[(topic, 1)].records, 0).next_offset == 2
        assert wire.offset_for(broker, (topic, 1), earliest=True) == 0
        assert wire.offset_for(broker, (topic, 1), earliest=False) == 2
        assert wire.offset_for(broker, (topic, 0), earliest=False) == 0
    finally:
        wire.close()
    assert wire.open_connections == 0


def test_gzip_batches_inflate_through_kafka_codec() -> None:
    body = record_batch(0, [(b"k", b"v" * 100)] * 3, compression=1)[61:]  # after the 61-byte batch header
    assert len(kafka_wire.decompress(1, body)) > len(body)
