"""The Kafka wire counters on Kafka's consumer group protocol (KIP-848): ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69) decoded from byte strings a tiny encoder here builds from Kafka's schemas
(clients/src/main/resources/common/message/ConsumerGroupHeartbeatRequest.json, ...Response.json,
ConsumerGroupDescribeRequest.json, ...Response.json), then on real traffic: librdkafka members with
`group.protocol=consumer` through the counting proxy in front of a KRaft Apache Kafka 4.4 broker
(zkconsumer/embedded/kraft.py), whose MEMBERS listener advertises the proxy."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterable

import pytest
from helpers import unique, wait_for

from zkconsumer.lab.wire import C2S, S2C, Counters, KafkaProxy, KafkaRecord, KafkaStreamDecoder, RecordCollector
from zkconsumer.lab.wire import kafka_codec as codec
from zkconsumer.lab.wire.frames import read_frame

# ---- a tiny encoder of flexible versions, from the schemas ---------------------------------------------------------


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def cstr(s: str | None) -> bytes:
    """COMPACT_(NULLABLE_)STRING: length + 1 as an unsigned varint, 0 for null."""
    if s is None:
        return uvarint(0)
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def carray(items: Iterable | None, encode: Callable[..., bytes]) -> bytes:
    if items is None:
        return uvarint(0)
    items = list(items)
    return uvarint(len(items) + 1) + b"".join(encode(item) for item in items)


NO_TAGS = b"\x00"


def topic_uuid(last: int) -> bytes:
    return bytes(15) + bytes([last])


def tps(topics: Iterable[tuple[bytes, list[int]]] | None) -> bytes:
    """[]TopicPartitions of the heartbeat: TopicId uuid, Partitions []int32, tags."""
    return carray(topics, lambda t: t[0] + carray(t[1], i32) + NO_TAGS)


def request_header_v2(api_key: int, version: int, correlation_id: int, client_id: str | None) -> bytes:
    # Request header v2 keeps client_id as a classic int16-length nullable string, then adds tagged fields.
    cid = i16(-1) if client_id is None else i16(len(client_id.encode())) + client_id.encode()
    return i16(api_key) + i16(version) + i32(correlation_id) + cid + NO_TAGS


def heartbeat_request(version: int, *, correlation_id: int = 1, client_id: str = "m1", group: str = "g",
                      member_id: str = "", epoch: int = 0, instance: str | None = None, rack: str | None = None,
                      rebalance_timeout_ms: int = -1, topics: list[str] | None = None, regex: str | None = None,
                      assignor: str | None = None, owned: list[tuple[bytes, list[int]]] | None = None) -> bytes:
    body = (cstr(group) + cstr(member_id) + i32(epoch) + cstr(instance) + cstr(rack) + i32(rebalance_timeout_ms)
            + carray(topics, cstr) + (cstr(regex) if version >= 1 else b"") + cstr(assignor) + tps(owned) + NO_TAGS)
    return request_header_v2(68, version, correlation_id, client_id) + body


def heartbeat_response(*, correlation_id: int = 1, error: int = 0, message: str | None = None,
                       member_id: str | None = "mid", epoch: int = 1, interval_ms: int = 500,
                       assignment: list[tuple[bytes, list[int]]] | None = None, throttle: int = 0) -> bytes:
    # Versions 0 and 1 share the layout. A nullable struct is an int8 marker: -1 null, 1 then the struct.
    struct_bytes = i8(-1) if assignment is None else i8(1) + tps(assignment) + NO_TAGS
    return (i32(correlation_id) + NO_TAGS + i32(throttle) + i16(error) + cstr(message) + cstr(member_id) + i32(epoch)
            + i32(interval_ms) + struct_bytes + NO_TAGS)


def describe_request(version: int, groups: list[str], correlation_id: int = 1, client_id: str = "describer") -> bytes:
    return (request_header_v2(69, version, correlation_id, client_id) + carray(groups, cstr) + i8(0) + NO_TAGS)


def described_assignment(topics: list[tuple[bytes, str, list[int]]]) -> bytes:
    return carray(topics, lambda t: t[0] + cstr(t[1]) + carray(t[2], i32) + NO_TAGS) + NO_TAGS


def describe_response(version: int, groups: list[dict], correlation_id: int = 1) -> bytes:
    def member(m: dict) -> bytes:
        return (cstr(m["id"]) + cstr(None) + cstr(None) + i32(m["epoch"]) + cstr(m["client"]) + cstr("/127.0.0.1")
                + carray(["t"], cstr) + cstr(None) + described_assignment(m["owned"])
                + described_assignment(m["target"]) + (i8(1) if version >= 1 else b"") + NO_TAGS)

    def group(g: dict) -> bytes:
        return (i16(g["error"]) + cstr(g.get("message")) + cstr(g["id"]) + cstr(g["state"]) + i32(g["epoch"])
                + i32(g["assignment_epoch"]) + cstr("uniform") + carray(g["members"], member) + i32(-2147483648)
                + NO_TAGS)

    return i32(correlation_id) + NO_TAGS + i32(0) + carray(groups, group) + NO_TAGS


# ---- names --------------------------------------------------------------------------------------------------------


def test_every_api_key_of_kafka_4_4_has_kafkas_name() -> None:
    names = {key: codec.api_name(key) for key in range(95)}  # ApiKeys.java of Apache Kafka 4.4: 0-94
    assert not [key for key, name in names.items() if name.startswith("api")]
    assert (names[68], names[69], names[71], names[72]) == ("ConsumerGroupHeartbeat", "ConsumerGroupDescribe",
                                                            "GetTelemetrySubscriptions", "PushTelemetry")
    assert names[94] == "UnregisterController" and names[2] == "ListOffsets"
    assert codec.api_name(4000) == "api4000"  # a key no Kafka release has stays visible, not dropped
    assert codec.error_name(110) == "FENCED_MEMBER_EPOCH" and codec.error_name(128) == "INVALID_REGULAR_EXPRESSION"


# ---- ConsumerGroupHeartbeat ----------------------------------------------------------------------------------------


def test_a_joining_heartbeat_request_of_each_version() -> None:
    owned = [(topic_uuid(1), [0, 2]), (topic_uuid(2), [])]
    for version in (0, 1):
        payload = heartbeat_request(version, client_id="m1", group="grp", epoch=0, rack="r1",
                                    rebalance_timeout_ms=300000, topics=["a", "b"], regex="^x.*" if version else None,
                                    assignor="uniform", owned=owned)
        decoded = codec.decode_consumer_group_heartbeat_request(payload)
        assert decoded == codec.ConsumerGroupHeartbeatRequest(
            group_id="grp", member_id="", member_epoch=0, instance_id=None, rack_id="r1", rebalance_timeout_ms=300000,
            subscribed_topic_names=("a", "b"), subscribed_topic_regex="^x.*" if version else None,
            server_assignor="uniform",
            topic_partitions=(codec.TopicPartitions("AAAAAAAAAAAAAAAAAAAAAQ", (0, 2)),
                              codec.TopicPartitions("AAAAAAAAAAAAAAAAAAAAAg", ())))
        assert decoded.owned == 2


def test_a_steady_heartbeat_request_leaves_the_unchanged_fields_null() -> None:
    decoded = codec.decode_consumer_group_heartbeat_request(
        heartbeat_request(1, member_id="Xy", epoch=7, instance="static-1"))
    assert (decoded.member_id, decoded.member_epoch, decoded.instance_id) == ("Xy", 7, "static-1")
    assert decoded.subscribed_topic_names is None and decoded.topic_partitions is None and decoded.owned is None
    assert decoded.rebalance_timeout_ms == -1


def test_heartbeat_responses_with_an_assignment_and_with_none() -> None:
    answer = heartbeat_response(epoch=5, interval_ms=2500, assignment=[(topic_uuid(1), [1, 3]), (topic_uuid(7), [0])])
    for version in (0, 1):
        decoded = codec.decode_consumer_group_heartbeat_response(answer, version)
        assert (decoded.error_code, decoded.member_epoch, decoded.heartbeat_interval_ms, decoded.assigned) == (
            0, 5, 2500, 3)
        assert decoded.assignment[0] == codec.TopicPartitions("AAAAAAAAAAAAAAAAAAAAAQ", (1, 3))
    empty = codec.decode_consumer_group_heartbeat_response(heartbeat_response(assignment=[]), 1)
    assert empty.assignment == () and empty.assigned == 0  # an assignment of nothing is not "unchanged"
    unchanged = codec.decode_consumer_group_heartbeat_response(heartbeat_response(member_id=None), 1)
    assert unchanged.assignment is None and unchanged.assigned is None and unchanged.member_id is None


def test_an_error_response_reaches_the_response_errors() -> None:
    payload = heartbeat_response(error=110, message="The consumer group member has a smaller member epoch",
                                 epoch=-1, interval_ms=0, member_id=None, throttle=15)
    decoded = codec.decode_consumer_group_heartbeat_response(payload, 1)
    assert (decoded.error_code, decoded.error_message, decoded.throttle_time_ms) == (
        110, "The consumer group member has a smaller member epoch", 15)
    assert codec.response_errors(68, 1, payload) == codec.ResponseErrors(110, {})
    assert codec.response_errors(68, 0, heartbeat_response()) == codec.ResponseErrors(0, {})


def test_truncated_and_malformed_heartbeats_raise_one_decode_error() -> None:
    request = heartbeat_request(1, topics=["a"], owned=[(topic_uuid(1), [0])])
    response = heartbeat_response(message="m", assignment=[(topic_uuid(1), [0, 1])])
    for cut in range(len(request)):
        with pytest.raises(codec.KafkaDecodeError):
            codec.decode_consumer_group_heartbeat_request(request[:cut])
    for cut in range(len(response)):
        with pytest.raises(codec.KafkaDecodeError):
            codec.decode_consumer_group_heartbeat_response(response[:cut], 1)
    with pytest.raises(codec.KafkaDecodeError, match="left over"):
        codec.decode_consumer_group_heartbeat_response(response + b"\x00", 1)
    with pytest.raises(codec.KafkaDecodeError, match="not a version"):
        codec.decode_consumer_group_heartbeat_response(response, 2)
    with pytest.raises(codec.KafkaDecodeError, match="marker"):
        codec.decode_consumer_group_heartbeat_response(heartbeat_response()[:-2] + i8(3) + NO_TAGS, 1)
    with pytest.raises(codec.KafkaDecodeError, match="null"):  # GroupId is not nullable
        codec.decode_consumer_group_heartbeat_request(request_header_v2(68, 1, 1, "m") + cstr(None) + bytes(40))
    with pytest.raises(codec.KafkaDecodeError, match="claims"):  # an array longer than the frame could hold
        codec.decode_consumer_group_heartbeat_response(heartbeat_response()[:-2] + i8(1) + uvarint(1000) + NO_TAGS, 1)


# ---- ConsumerGroupDescribe and the telemetry responses -------------------------------------------------------------


def test_describe_request_and_responses_of_each_version() -> None:
    for version in (0, 1):
        request = codec.decode_consumer_group_describe_request(describe_request(version, ["g1", "g2"]))
        assert request == codec.ConsumerGroupDescribeRequest(("g1", "g2"), False)
        payload = describe_response(version, [
            {"error": 0, "id": "g1", "state": "Reconciling", "epoch": 4, "assignment_epoch": 4, "members": [
                {"id": "A", "epoch": 4, "client": "m1", "owned": [(topic_uuid(1), "t", [0, 1])],
                 "target": [(topic_uuid(1), "t", [0])]},
                {"id": "B", "epoch": 3, "client": "m2", "owned": [], "target": [(topic_uuid(1), "t", [1])]}]},
            {"error": 69, "message": "Group g2 not found.", "id": "g2", "state": "Dead", "epoch": -1,
             "assignment_epoch": -1, "members": []}])
        decoded = codec.decode_consumer_group_describe_response(payload, version)
        first, second = decoded.groups
        assert (first.group_id, first.group_state, first.group_epoch, first.assignment_epoch) == (
            "g1", "Reconciling", 4, 4)
        assert [(m.client_id, m.member_epoch) for m in first.members] == [("m1", 4), ("m2", 3)]
        assert first.members[0].assignment == (codec.TopicPartitions("AAAAAAAAAAAAAAAAAAAAAQ", (0, 1), "t"),)
        assert first.members[1].target_assignment[0].partitions == (1,)
        assert [m.member_type for m in first.members] == ([1, 1] if version else [None, None])
        assert (second.error_code, second.error_message) == (69, "Group g2 not found.")
        # Like DescribeGroups: no top-level code, one per group.
        assert codec.response_errors(69, version, payload) == codec.ResponseErrors(None, {69: 1})
        for cut in range(len(payload)):
            with pytest.raises(codec.KafkaDecodeError):
                codec.decode_consumer_group_describe_response(payload[:cut], version)


def test_telemetry_response_error_codes() -> None:
    # GetTelemetrySubscriptionsResponse.json / PushTelemetryResponse.json v0: ThrottleTimeMs, ErrorCode first.
    get = (i32(3) + NO_TAGS + i32(0) + i16(0) + topic_uuid(9) + i32(1) + carray([], i8) + i32(300000) + i32(1 << 20)
           + i8(1) + carray([], cstr) + NO_TAGS)
    assert codec.response_errors(71, 0, get) == codec.ResponseErrors(0, {})
    push = i32(4) + NO_TAGS + i32(0) + i16(117) + NO_TAGS  # 117 UNKNOWN_SUBSCRIPTION_ID
    assert codec.response_errors(72, 0, push) == codec.ResponseErrors(117, {})
    with pytest.raises(codec.KafkaDecodeError):
        codec.response_errors(72, 0, push[:7])


# ---- the stream decoder's records ---------------------------------------------------------------------------------


class Collected:
    """The decode context of one connection, without a socket: records and the link a decoder binds to."""

    conn_id = 1
    blackholed = False

    def __init__(self) -> None:
        self.records: list[KafkaRecord] = []
        self.link_name: str | None = None

    def emit(self, record: KafkaRecord) -> None:
        self.records.append(record)

    def bind(self, name: str) -> str:
        self.link_name = name
        return name


def frame(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


def test_records_carry_the_epochs_the_assignment_and_the_interval() -> None:
    ctx = Collected()
    decoder = KafkaStreamDecoder(ctx)
    decoder.feed(C2S, frame(heartbeat_request(1, correlation_id=5, epoch=0, topics=["t"])), 1.0, 1.0)
    decoder.feed(S2C, frame(heartbeat_response(correlation_id=5, epoch=2, interval_ms=500,
                                               assignment=[(topic_uuid(1), [0, 1])])), 1.1, 1.1)
    decoder.feed(C2S, frame(heartbeat_request(1, correlation_id=6, member_id="mid", epoch=2,
                                              owned=[(topic_uuid(1), [0, 1])])), 2.0, 2.0)
    decoder.feed(S2C, frame(heartbeat_response(correlation_id=6, epoch=2)), 2.1, 2.1)
    decoder.feed(C2S, frame(heartbeat_request(1, correlation_id=7, member_id="mid", epoch=-1)), 3.0, 3.0)
    decoder.feed(S2C, frame(heartbeat_response(correlation_id=7, error=25, epoch=-1, interval_ms=0)), 3.1, 3.1)
    fields = [(r.kind, r.member_epoch, r.owned, r.epoch_after, r.assigned, r.heartbeat_interval_ms)
              for r in ctx.records]
    assert fields == [("request", 0, None, None, None, None), ("response", 0, None, 2, 2, 500),
                      ("request", 2, 2, None, None, None), ("response", 2, None, 2, None, 500),
                      ("request", -1, None, None, None, None), ("response", -1, None, -1, None, 0)]
    assert {r.api_name for r in ctx.records} == {"ConsumerGroupHeartbeat"} and ctx.link_name == "m1"
    assert ctx.records[-1].error_name == "UNKNOWN_MEMBER_ID" and ctx.records[-1].body_decoded
    assert ctx.records[1].to_dict()["assigned"] == 2
    counters = Counters()
    for record in ctx.records:
        counters.add_record(record)
    snap = counters.snapshot()
    assert snap["requests"] == {"ConsumerGroupHeartbeat": 3} and snap["assignments"] == {"ConsumerGroupHeartbeat": 1}
    assert snap["errors"] == {25: 1}


def test_a_heartbeat_whose_body_does_not_decode_is_still_counted_and_the_stream_goes_on() -> None:
    ctx = Collected()
    decoder = KafkaStreamDecoder(ctx)
    broken = heartbeat_request(1, correlation_id=1)[:-3]
    decoder.feed(C2S, frame(broken) + frame(heartbeat_request(1, correlation_id=2, epoch=3)), 1.0, 1.0)
    decoder.feed(S2C, frame(heartbeat_response(correlation_id=1)[:-4]), 1.1, 1.1)
    first, second, answer = ctx.records
    assert (first.api_name, first.member_epoch, second.member_epoch) == ("ConsumerGroupHeartbeat", None, 3)
    assert "ConsumerGroupHeartbeat v1 request" in first.detail
    assert (answer.kind, answer.body_decoded, answer.epoch_after) == ("response", False, None)
    assert "ConsumerGroupHeartbeat v1 response" in answer.detail


def test_other_apis_carry_no_kip848_fields() -> None:
    ctx = Collected()
    decoder = KafkaStreamDecoder(ctx)
    heartbeat_v4 = i16(12) + i16(4) + i32(1) + i16(2) + b"m1" + NO_TAGS + cstr("g") + i32(1) + cstr("x") + cstr(None)
    decoder.feed(C2S, frame(heartbeat_v4 + NO_TAGS), 1.0, 1.0)
    decoder.feed(S2C, frame(i32(1) + NO_TAGS + i32(0) + i16(0) + NO_TAGS), 1.1, 1.1)
    for record in ctx.records:
        assert (record.member_epoch, record.owned, record.epoch_after, record.assigned,
                record.heartbeat_interval_ms) == (None,) * 5, record


# ---- real traffic: a KRaft Apache Kafka 4.4 broker -----------------------------------------------------------------

PARTITIONS = 4


def member(bootstrap: str, group: str, name: str):
    import confluent_kafka

    # group.protocol=consumer refuses the classic settings (session.timeout.ms, heartbeat.interval.ms,
    # partition.assignment.strategy): the coordinator owns them.
    return confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "auto.commit.interval.ms": 500, "log_level": 3})


def latest_assigned(records: list[KafkaRecord], link: str) -> int | None:
    answers = [r.assigned for r in records if r.link == link and r.kind == "response"
               and r.api_name == "ConsumerGroupHeartbeat" and r.assigned is not None]
    return answers[-1] if answers else None


def describe(port: int, group: str, version: int, correlation_id: int) -> codec.ConsumerGroupDescribeResponse:
    """One raw ConsumerGroupDescribe through the proxy, decoded by the codec under test."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(frame(describe_request(version, [group], correlation_id)))
        payload = read_frame(sock)
    return codec.decode_consumer_group_describe_response(payload, version)


@pytest.mark.slow
def test_consumer_protocol_members_through_the_proxy(kraft_broker) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    # The session's KRaft broker (tests/lab/conftest.py): the topic and group are this test's own, the proxy too.
    broker, proxied_port = kraft_broker.broker, kraft_broker.proxy_port
    topic, group = unique("kip848"), unique("g848")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # held: a collected client fails its futures
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(40):
        producer.produce(topic, b"v%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0

    sink = RecordCollector()
    proxy = KafkaProxy(None, sink=sink, name=unique("kp848"), port=proxied_port).start()
    proxy.forward_to(("127.0.0.1", broker.listeners[0].port))  # MEMBERS, advertised at the proxy
    interval_ms = int(broker.properties()["group.consumer.heartbeat.interval.ms"])
    consumers: dict = {}
    consumed: set[tuple[int, int]] = set()

    def poll_all() -> None:
        for consumer in consumers.values():
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                consumed.add((message.partition(), message.offset()))

    try:
        for name in ("m1", "m2"):
            consumers[name] = member(proxy.bootstrap, group, name)
            consumers[name].subscribe([topic])

        def both_assigned() -> bool:
            poll_all()
            records = sink.records()
            return all((latest_assigned(records, name) or 0) > 0 for name in ("m1", "m2"))

        wait_for(both_assigned, timeout=60, message="both members holding partitions")
        records = sink.records()
        # The coordinator never hands out a partition another member still owns (it is revoked first).
        assert latest_assigned(records, "m1") + latest_assigned(records, "m2") == PARTITIONS

        for name in ("m1", "m2"):
            beats = [r for r in records if r.link == name and r.api_name == "ConsumerGroupHeartbeat"]
            requests = [r for r in beats if r.kind == "request"]
            answers = [r for r in beats if r.kind == "response"]
            assert requests[0].member_epoch == 0 and requests[0].client_id == name  # a join
            assert requests[0].owned == 0  # joining with nothing owned
            assert answers[0].member_epoch == 0 and answers[0].epoch_after > 0 and answers[0].error_code == 0
            assert any(r.member_epoch > 0 for r in requests[1:]), [r.member_epoch for r in requests]
            assert all(r.heartbeat_interval_ms == interval_ms for r in answers)

        # The coordinator's own view, through the proxy, decoded by the same codec, once the group settled.
        def stable() -> codec.DescribedGroup | None:
            poll_all()
            (described,) = describe(proxy.port, group, 1, 1).groups
            return described if described.group_state == "Stable" else None

        described = wait_for(stable, timeout=30, message="the group Stable in ConsumerGroupDescribe")
        assert described.error_code == 0 and described.group_epoch == described.assignment_epoch > 0
        assert sorted(m.client_id for m in described.members) == ["m1", "m2"]
        assert {m.member_epoch for m in described.members} == {described.assignment_epoch}
        assert {m.member_type for m in described.members} == {1}  # consumer-protocol members (v1)
        owned = sorted(p for m in described.members for t in m.assignment for p in t.partitions)
        assert owned == list(range(PARTITIONS)) and {t.topic_name for m in described.members
                                                     for t in m.assignment} == {topic}
        (v0,) = describe(proxy.port, group, 0, 2).groups
        assert (v0.group_epoch, len(v0.members), v0.members[0].member_type) == (described.group_epoch, 2, None)
        wait_for(lambda: poll_all() or len(consumed) == 40, timeout=30, message="all 40 records consumed")

        consumers.pop("m1").close()  # KIP-848's leave: a heartbeat with member epoch -1
        leave = wait_for(lambda: [r for r in sink.records() if r.link == "m1" and r.kind == "response"
                                  and r.api_name == "ConsumerGroupHeartbeat" and r.member_epoch == -1],
                         message="m1's leaving heartbeat answered")[-1]
        assert leave.epoch_after == -1 and leave.error_code == 0
        m1_beats = [r for r in sink.records() if r.link == "m1" and r.kind == "request"
                    and r.api_name == "ConsumerGroupHeartbeat"]
        assert m1_beats[-1].member_epoch == -1 and [r.member_epoch for r in m1_beats].count(-1) == 1
        wait_for(lambda: poll_all() or latest_assigned(sink.records(), "m2") == PARTITIONS, timeout=30,
                 message="m2 taking every partition after m1 left")
        consumers.pop("m2").close()
        wait_for(lambda: [r for r in sink.records() if r.link == "m2" and r.kind == "response"
                          and r.api_name == "ConsumerGroupHeartbeat" and r.member_epoch == -1],
                 message="m2's leaving heartbeat answered")
    finally:
        for consumer in consumers.values():
            consumer.close()
        proxy.stop()

    records = sink.records()  # the proxy stopped: records and counters hold still
    sent: set[str] = set()
    for name in ("m1", "m2"):
        mine = [r for r in records if r.link == name]
        assert all(r.api_name and not r.api_name.startswith("api") for r in mine)
        # librdkafka 2.16's consumer-protocol member (docs/wire.md): every body decoded, none undecodable.
        apis = {r.api_name for r in mine if r.kind == "request"}
        assert apis >= {"ApiVersions", "Metadata", "FindCoordinator", "ConsumerGroupHeartbeat", "OffsetFetch",
                        "Fetch"}, apis
        sent |= apis
        assert not [r for r in mine if r.kind == "undecodable" or (r.kind == "response" and not r.body_decoded)]
        assert {r.api_version for r in mine if r.api_name == "ConsumerGroupHeartbeat"} == {1}
        counters = proxy.counters(name)
        beats = [r for r in mine if r.kind == "request" and r.api_name == "ConsumerGroupHeartbeat"]
        assert counters["requests"]["ConsumerGroupHeartbeat"] == len(beats)
        assert counters["assignments"]["ConsumerGroupHeartbeat"] == len(
            [r for r in mine if r.kind == "response" and r.assigned is not None])
    assert "OffsetCommit" in sent  # whoever consumed the records committed them
    answers = [r for r in records if r.link == "describer" and r.kind == "response"]
    assert {(r.api_name, r.body_decoded, r.error_code, r.partition_errors) for r in answers} == {
        ("ConsumerGroupDescribe", True, None, ())}
    assert [r.api_version for r in answers][-2:] == [1, 0]
