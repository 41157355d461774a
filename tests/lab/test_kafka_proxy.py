"""The Kafka counting proxy in front of a real Apache Kafka broker whose MEMBERS listener advertises the proxy
(tests/lab/conftest.py): request headers at several API versions, group APIs with their error codes, links keyed
by client_id (delay, reset, blackhole)."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from helpers import unique, wait_for
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from zkconsumer.lab.wire import BLACKHOLE, RESET, KafkaProxy, KafkaRecord
from zkconsumer.lab.wire.frames import read_exactly

pytestmark = pytest.mark.slow

GROUP_TIMING = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 500}


def find(proxy: KafkaProxy, **fields: object) -> list[KafkaRecord]:
    return proxy.sink.where(**fields)


def produce(proxy: KafkaProxy, topic: str, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="producer")
    try:
        for i in range(count):
            producer.send(topic, b"v%d" % i, partition=0)
        producer.flush(timeout=10)
    finally:
        producer.close()


def raw_request(sock: socket.socket, request, correlation_id: int, client_id: str) -> bytes:
    """Send one request at the version of `request` and return the response payload (after the size)."""
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    sock.sendall(request.encode(header=True, framed=True))
    size = struct.unpack(">i", read_exactly(sock, 4))[0]
    return read_exactly(sock, size)


def test_headers_of_several_api_versions_from_real_clients(proxy: KafkaProxy, new_topic) -> None:
    topic = new_topic(proxy.bootstrap, "wire", 2)  # through the proxy, as the produce and the reads below
    produce(proxy, topic, 3)
    reader = KafkaConsumer(bootstrap_servers=proxy.bootstrap, client_id="reader", auto_offset_reset="earliest")
    try:
        reader.assign([TopicPartition(topic, 0)])
        got: list = []
        wait_for(lambda: got.extend(reader.poll(timeout_ms=200).get(TopicPartition(topic, 0), [])) or len(got) >= 3,
                 message="three records through the proxy")
    finally:
        reader.close()
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        answer = raw_request(sock, ApiVersionsRequest[0](), 1, "raw")
        assert struct.unpack_from(">ih", answer) == (1, 0)
        raw_request(sock, MetadataRequest[1](topics=None), 2, "raw")

    requests = find(proxy, kind="request")
    versions = {(r.api_name, r.api_version) for r in requests}
    names = {name for name, _ in versions}
    assert {"ApiVersions", "Metadata", "Produce", "Fetch", "CreateTopics"} <= names
    assert len({v for name, v in versions if name == "ApiVersions"}) >= 2, versions
    assert len({v for name, v in versions if name == "Metadata"}) >= 2, versions
    assert {r.link for r in requests} == {"admin", "producer", "reader", "raw"}
    responses = wait_for(lambda: len(find(proxy, kind="response")) == len(requests) and find(proxy, kind="response"),
                         message="a response for every request")
    by_key = {(r.conn, r.correlation_id): r for r in requests}
    for response in responses:
        request = by_key[(response.conn, response.correlation_id)]
        assert (response.api_name, response.api_version, response.link) == (request.api_name, request.api_version,
                                                                           request.link)
        assert response.latency_ms is not None and response.latency_ms >= 0
    (produce_response, *_) = find(proxy, kind="response", api_name="Produce")
    assert produce_response.body_decoded and produce_response.partition_errors == ()
    assert proxy.counters("raw")["versions"] == {"ApiVersions/v0": 1, "Metadata/v1": 1}


def test_group_apis_and_their_error_codes(proxy: KafkaProxy, new_topic) -> None:
    topic = new_topic(proxy.bootstrap, "wire", 2)
    produce(proxy, topic, 1)
    consumer = KafkaConsumer(topic, bootstrap_servers=proxy.bootstrap, client_id="member-a", group_id=unique("g"),
                             auto_offset_reset="earliest", consumer_timeout_ms=15000, **GROUP_TIMING)
    try:
        assert next(iter(consumer)).value == b"v0"  # iterating: kafka-python keeps a finished join (see env notes)
        wait_for(lambda: find(proxy, kind="response", api_name="Heartbeat"), message="a heartbeat response")
    finally:
        consumer.close()
    wait_for(lambda: find(proxy, kind="response", api_name="LeaveGroup"), message="the LeaveGroup response")

    def codes(api: str) -> list[int | None]:
        return [r.error_code for r in find(proxy, kind="response", api_name=api)]

    for api in ("FindCoordinator", "SyncGroup", "Heartbeat", "LeaveGroup"):
        assert codes(api) and set(codes(api)) == {0}, (api, codes(api))
    joins = codes("JoinGroup")
    assert joins[-1] == 0 and set(joins) <= {0, 79}  # 79 MEMBER_ID_REQUIRED: the first join of a new member
    # the generation each JoinGroup answer forms: -1 with MEMBER_ID_REQUIRED, then 1, 2, ... (one per rebalance)
    answers = find(proxy, kind="response", api_name="JoinGroup")
    assert {r.epoch_after for r in answers if r.error_code} <= {-1}
    assert [r.epoch_after for r in answers if not r.error_code] == list(range(1, 1 + joins.count(0)))
    assert all(r.epoch_after is None for r in find(proxy, kind="response", api_name="SyncGroup"))
    counters = proxy.counters("member-a")
    assert counters["requests"]["JoinGroup"] == len(joins)
    assert counters.get("errors", {}) == ({79: 1} if 79 in joins else {})
    assert all(r.client_id == "member-a" for r in find(proxy, link="member-a"))


def test_links_keyed_by_client_id_delay_reset_and_blackhole(proxy: KafkaProxy) -> None:
    def ask(sock: socket.socket, client_id: str, correlation_id: int = 1) -> bytes:
        return raw_request(sock, ApiVersionsRequest[0](), correlation_id, client_id)

    proxy.delay("slow", 100)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        started = time.monotonic()
        ask(sock, "slow")
        assert time.monotonic() - started >= 0.2  # 100 ms each way
    assert find(proxy, kind="response", link="slow")[0].latency_ms >= 200

    proxy.cut("cut", RESET)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock, pytest.raises(ConnectionError):
        ask(sock, "cut")  # the first request names the client: its connection is reset at once
    proxy.restore("cut")

    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        ask(sock, "dark")
        proxy.cut("dark", BLACKHOLE)
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            ask(sock, "dark", 2)
        sock.settimeout(10)
        proxy.restore("dark")  # the request was lost mid-stream: the connection cannot resume, it is reset
        with pytest.raises(ConnectionError):
            read_exactly(sock, 4)
    (lost,) = find(proxy, kind="request", link="dark", dropped=True)
    assert lost.correlation_id == 2
    assert proxy.counters("dark")["dropped"] == {"request": 1}
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        assert struct.unpack_from(">ih", ask(sock, "dark", 3)) == (3, 0)


def test_a_proxy_made_before_its_broker_refuses_clients_until_it_is_pointed_at_it(proxied_kafka) -> None:
    """The lab makes the proxy first (the broker advertises its port) and points it at the broker after."""
    early = KafkaProxy(None, name=unique("kp-early")).start()
    try:
        # Refused either way: reset while connecting, or closed before an answer.
        with pytest.raises(ConnectionError), socket.create_connection(("127.0.0.1", early.port), timeout=10) as sock:
            raw_request(sock, ApiVersionsRequest[0](), 1, "early")
        early.forward_to(proxied_kafka.members_upstream)
        with socket.create_connection(("127.0.0.1", early.port), timeout=10) as sock:
            assert struct.unpack_from(">ih", raw_request(sock, ApiVersionsRequest[0](), 2, "early")) == (2, 0)
    finally:
        early.stop()
