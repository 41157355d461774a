"""The wire decoders on hand-built byte strings: jute (ZooKeeper) and Kafka framing, headers, matching by
xid / correlation id, error codes, and byte streams cut at every possible boundary."""

from __future__ import annotations

import json
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from zkconsumer.lab.wire import jute, kafka_codec
from zkconsumer.lab.wire.connection import C2S, S2C
from zkconsumer.lab.wire.framing import FrameBuffer, FrameError
from zkconsumer.lab.wire.kafka import KafkaRecord, KafkaStreamDecoder
from zkconsumer.lab.wire.links import Counters, Link
from zkconsumer.lab.wire.mntr import parse_mntr
from zkconsumer.lab.wire.sinks import JsonLinesSink
from zkconsumer.lab.wire.zk import ZkRecord, ZkStreamDecoder

SESSION = 0x1000_0ABC_0000_0001


class StubContext:
    """Stands in for a proxied connection: collects records, remembers the link a decoder binds to."""

    conn_id = 7

    def __init__(self, link: str | None = "m1") -> None:
        self.records: list = []
        self.link: str | None = link
        self.blackholed = False

    @property
    def link_name(self) -> str | None:
        return self.link

    def emit(self, record) -> None:
        self.records.append(record)

    def bind(self, name: str) -> str:
        self.link = name
        return name


# ---- jute builders ------------------------------------------------------------------------------------------
def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def ustring(s: str) -> bytes:
    raw = s.encode()
    return i32(len(raw)) + raw


def buf(b: bytes) -> bytes:
    return i32(len(b)) + b


def frame(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


def open_acl() -> bytes:
    return i32(1) + i32(31) + ustring("world") + ustring("anyone")


def connect_request(session: int = 0) -> bytes:
    return frame(i32(0) + i64(0) + i32(4000) + i64(session) + buf(b"\0" * 16) + boolean(False))


def connect_response(session: int = SESSION, timeout: int = 4000) -> bytes:
    return frame(i32(0) + i32(timeout) + i64(session) + buf(b"\x07" * 16) + boolean(False))


def request(xid: int, opcode: int, body: bytes = b"") -> bytes:
    return frame(i32(xid) + i32(opcode) + body)


def reply(xid: int, err: int = 0, body: bytes = b"", zxid: int = 42) -> bytes:
    return frame(i32(xid) + i64(zxid) + i32(err) + body)


def watch_event(event_type: int, path: str) -> bytes:
    return reply(-1, 0, i32(event_type) + i32(3) + ustring(path), zxid=-1)


def multi_body() -> bytes:
    ops = [
        (1, ustring("/a") + buf(b"x") + open_acl() + i32(0)),
        (2, ustring("/b") + i32(-1)),
        (5, ustring("/c") + buf(b"yz") + i32(3)),
        (13, ustring("/d") + i32(1)),
    ]
    body = b"".join(i32(t) + boolean(False) + i32(-1) + rest for t, rest in ops)
    return body + i32(-1) + boolean(True) + i32(-1)


CLIENT_STREAM = (connect_request() + request(1, 4, ustring("/g") + boolean(True))
                 + request(2, 14, multi_body()) + request(-2, 11) + request(3, 8, ustring("/kids") + boolean(False)))
SERVER_STREAM = (connect_response() + reply(1, 0, buf(b"data") + b"\0" * 68) + watch_event(3, "/g")
                 + reply(2, 0, b"\0" * 12) + reply(-2) + reply(3, -101))


def decode_zk(client_chunks: list[bytes], server_chunks: list[bytes]) -> list[ZkRecord]:
    ctx = StubContext()
    decoder = ZkStreamDecoder(ctx)
    for chunk in client_chunks:
        decoder.feed(C2S, chunk, 100.0, 100.0)
    for chunk in server_chunks:
        decoder.feed(S2C, chunk, 100.5, 100.75)
    return ctx.records


def test_zk_conversation_decodes_every_kind() -> None:
    records = decode_zk([CLIENT_STREAM], [SERVER_STREAM])
    kinds = [r.kind for r in records]
    assert kinds == ["connect", "request", "request", "ping", "request",
                     "connect_reply", "reply", "event", "reply", "ping_reply", "reply"]
    connect, get, multi, ping, kids, connect_reply, get_reply, event, multi_reply, ping_reply, kids_reply = records
    assert connect.session_id is None and connect.timeout_ms == 4000 and connect.size == len(connect_request())
    assert (get.op, get.opcode, get.path, get.watch, get.xid) == ("getData", 4, "/g", True, 1)
    assert multi.sub_ops == (("create", "/a"), ("delete", "/b"), ("setData", "/c"), ("check", "/d"))
    assert (ping.op, ping.xid) == ("ping", -2)
    assert (kids.op, kids.watch) == ("getChildren", False)
    assert connect_reply.session_id == SESSION and connect_reply.latency_ms == pytest.approx(750.0)
    assert (get_reply.op, get_reply.path, get_reply.err, get_reply.session_id) == ("getData", "/g", 0, SESSION)
    assert get_reply.latency_ms == pytest.approx(750.0)
    assert (event.event_type, event.event_state, event.path) == ("NodeDataChanged", "SyncConnected", "/g")
    assert event.xid == -1
    assert multi_reply.op == "multi" and ping_reply.op == "ping"
    assert (kids_reply.err, kids_reply.err_name, kids_reply.path) == (-101, "NoNode", "/kids")


def _without_ts(records: list) -> list:
    return [replace(r, ts=0.0, latency_ms=None) for r in records]


def test_zk_stream_split_at_every_byte_boundary_decodes_the_same() -> None:
    whole = _without_ts(decode_zk([CLIENT_STREAM], [SERVER_STREAM]))
    for cut in range(1, len(CLIENT_STREAM)):
        assert _without_ts(decode_zk([CLIENT_STREAM[:cut], CLIENT_STREAM[cut:]], [SERVER_STREAM])) == whole, cut
    for cut in range(1, len(SERVER_STREAM)):
        assert _without_ts(decode_zk([CLIENT_STREAM], [SERVER_STREAM[:cut], SERVER_STREAM[cut:]])) == whole, cut
    one_byte_at_a_time = [SERVER_STREAM[i:i + 1] for i in range(len(SERVER_STREAM))]
    assert _without_ts(decode_zk([CLIENT_STREAM], one_byte_at_a_time)) == whole


def test_zk_many_frames_in_one_read_match_by_xid() -> None:
    paths = {xid: f"/n{xid}" for xid in range(1, 201)}
    client = connect_request() + b"".join(request(x, 4, ustring(p) + boolean(False)) for x, p in paths.items())
    server = connect_response() + b"".join(reply(x, -101 if x % 2 else 0) for x in reversed(paths))
    records = decode_zk([client], [server])
    replies = [r for r in records if r.kind == "reply"]
    assert len(replies) == 200
    assert all(r.path == paths[r.xid] and r.op == "getData" for r in replies)
    assert sum(r.err == -101 for r in replies) == 100


def test_zk_reply_without_request_and_expired_session() -> None:
    records = decode_zk([], [connect_response(session=0, timeout=0), reply(9)])
    assert records[0].kind == "connect_reply" and records[0].timeout_ms == 0
    assert records[1].op is None and records[1].latency_ms is None and records[1].session_id is None


def test_zk_four_letter_word_is_not_jute() -> None:
    ctx = StubContext()
    decoder = ZkStreamDecoder(ctx)
    with pytest.raises(FrameError):
        decoder.feed(C2S, b"ruok", 1.0, 1.0)
    decoder.fail(C2S, FrameError("x"), 1.0)
    assert [r.kind for r in ctx.records] == ["undecodable"] and "c2s" in ctx.records[0].detail


@pytest.mark.parametrize(("opcode", "body", "path", "watch"), [
    (1, ustring("/p") + buf(b"v") + open_acl() + i32(2), "/p", None),
    (3, ustring("/e") + boolean(False), "/e", False),
    (12, ustring("/c2") + boolean(True), "/c2", True),
    (106, ustring("/w") + i32(1), "/w", None),
    (-11, b"", None, None),
    (101, i64(5) + i32(0) + i32(0) + i32(0), None, None),
    (100, i32(0) + ustring("digest") + buf(b"u:p"), None, None),
])
def test_parse_request_paths_and_watch_flags(opcode: int, body: bytes, path: str | None, watch: bool | None) -> None:
    parsed = jute.parse_request(i32(5) + i32(opcode) + body)
    assert (parsed.xid, parsed.opcode, parsed.path, parsed.watch) == (5, opcode, path, watch)
    assert jute.op_name(opcode) == jute.OPCODES[opcode]


def test_truncated_jute_body_raises() -> None:
    with pytest.raises(jute.JuteError):
        jute.parse_request(i32(5) + i32(4) + i32(50) + b"/short")


def test_frame_buffer_limits() -> None:
    frames = FrameBuffer(16)
    assert frames.feed(frame(b"a") + frame(b"") + i32(3)) == [b"a", b""]
    assert frames.buffered == 4
    with pytest.raises(FrameError):
        FrameBuffer(16).feed(i32(17))
    with pytest.raises(FrameError):
        FrameBuffer(16).feed(i32(-1))


def test_zk_record_counts_and_dict() -> None:
    counters = Counters()
    records = decode_zk([CLIENT_STREAM], [SERVER_STREAM])
    for record in records:
        counters.add_record(record)
    snap = counters.snapshot()
    assert snap["requests"] == {"getData": 1, "multi": 1, "ping": 1, "getChildren": 1}
    assert snap["events"] == {"NodeDataChanged": 1}
    assert snap["errors"] == {-101: 1}
    assert snap["multi_ops"] == {"create": 1, "delete": 1, "setData": 1, "check": 1}
    as_dict = records[2].to_dict()
    assert as_dict["sub_ops"][0] == ["create", "/a"] and as_dict["link"] == "m1" and as_dict["conn"] == 7


def test_link_rejects_bad_settings() -> None:
    link = Link("m1")
    with pytest.raises(ValueError):
        link.delay(-1)
    with pytest.raises(ValueError):
        link.cut("unplug")
    link.delay(100, 20)
    assert all(0.08 <= link.sample_delay() <= 0.12 for _ in range(50))


def test_parse_mntr() -> None:
    sample = parse_mntr("zk_version\t3.9.5-abc, built on x\nzk_avg_latency\t0.25\nzk_watch_count\t12\n")
    assert sample == {"zk_version": "3.9.5-abc, built on x", "zk_avg_latency": 0.25, "zk_watch_count": 12}
    with pytest.raises(ValueError):
        parse_mntr("mntr is not executed because it is not in the whitelist.\n")


# ---- Kafka --------------------------------------------------------------------------------------------------
def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def kstring(s: str | None) -> bytes:
    if s is None:
        return i16(-1)
    return i16(len(s.encode())) + s.encode()


def krequest(api_key: int, version: int, corr: int, client_id: str | None, body: bytes = b"",
             flexible: bool = False) -> bytes:
    # Kafka request header v1, or v2 (= v1 + tagged fields: here none) for flexible versions.
    header = i16(api_key) + i16(version) + i32(corr) + kstring(client_id) + (b"\x00" if flexible else b"")
    return frame(header + body)


def heartbeat_response(corr: int, error: int) -> bytes:
    # Heartbeat v4 is flexible: response header v1 (correlation id + empty tagged fields), throttle, error, tags.
    return frame(i32(corr) + b"\x00" + i32(0) + i16(error) + b"\x00")


def test_kafka_request_header_v1_and_v2() -> None:
    v1 = kafka_codec.parse_request_header(krequest(3, 1, 17, "member-a", b"\xff\xff\xff\xff")[4:])
    assert (v1.api_key, v1.api_version, v1.correlation_id, v1.client_id) == (3, 1, 17, "member-a")
    v2 = kafka_codec.parse_request_header(krequest(12, 4, 18, None, b"\x02g", flexible=True)[4:])
    assert (v2.api_key, v2.api_version, v2.correlation_id, v2.client_id) == (12, 4, 18, None)
    assert kafka_codec.api_name(11) == "JoinGroup" and kafka_codec.api_name(75) == "DescribeTopicPartitions"
    with pytest.raises(kafka_codec.KafkaDecodeError):
        kafka_codec.parse_request_header(b"\x00\x03")


KAFKA_CLIENT = (krequest(18, 0, 1, "member-a") + krequest(12, 4, 2, "member-a", b"", flexible=True)
                + krequest(12, 0, 3, "member-a"))
KAFKA_SERVER = (frame(i32(1) + i16(35) + i32(0))  # ApiVersions refused: v0 body, header v0
                + heartbeat_response(2, 27) + frame(i32(3) + i16(0)))


def decode_kafka(client_chunks: list[bytes], server_chunks: list[bytes]) -> tuple[StubContext, list[KafkaRecord]]:
    ctx = StubContext(link=None)
    decoder = KafkaStreamDecoder(ctx)
    for chunk in client_chunks:
        decoder.feed(C2S, chunk, 10.0, 10.0)
    for chunk in server_chunks:
        decoder.feed(S2C, chunk, 10.1, 10.2)
    return ctx, ctx.records


def test_kafka_responses_matched_with_error_codes() -> None:
    ctx, records = decode_kafka([KAFKA_CLIENT], [KAFKA_SERVER])
    assert ctx.link == "member-a"
    requests = [r for r in records if r.kind == "request"]
    responses = [r for r in records if r.kind == "response"]
    assert [(r.api_name, r.api_version) for r in requests] == [("ApiVersions", 0), ("Heartbeat", 4), ("Heartbeat", 0)]
    assert [(r.api_name, r.correlation_id, r.error_code) for r in responses] == [
        ("ApiVersions", 1, 35), ("Heartbeat", 2, 27), ("Heartbeat", 3, 0)]
    assert responses[1].error_name == "REBALANCE_IN_PROGRESS" and responses[1].body_decoded
    assert responses[0].latency_ms == pytest.approx(200.0)
    assert all(r.link == "member-a" and r.client_id == "member-a" for r in records)


def test_kafka_stream_split_at_every_byte_boundary_decodes_the_same() -> None:
    whole = _without_ts(decode_kafka([KAFKA_CLIENT], [KAFKA_SERVER])[1])
    for cut in range(1, len(KAFKA_CLIENT)):
        assert _without_ts(decode_kafka([KAFKA_CLIENT[:cut], KAFKA_CLIENT[cut:]], [KAFKA_SERVER])[1]) == whole, cut
    for cut in range(1, len(KAFKA_SERVER)):
        assert _without_ts(decode_kafka([KAFKA_CLIENT], [KAFKA_SERVER[:cut], KAFKA_SERVER[cut:]])[1]) == whole, cut


def test_kafka_requests_without_response_are_skipped() -> None:
    # Produce with acks=0 gets no response: the next response's correlation id retires it.
    client = krequest(0, 3, 1, "p", b"\xff\xff\x00\x00") + krequest(12, 0, 2, "p")
    ctx = StubContext(link=None)
    decoder = KafkaStreamDecoder(ctx)
    decoder.feed(C2S, client, 1.0, 1.0)
    decoder.feed(S2C, frame(i32(2) + i16(0)), 1.0, 1.0)
    assert decoder.pending == 0
    assert ctx.records[-1].api_name == "Heartbeat"
    decoder.feed(S2C, frame(i32(99) + i16(0)), 1.0, 1.0)
    assert ctx.records[-1].api_name is None and ctx.records[-1].correlation_id == 99


def test_kafka_null_client_id_binds_to_the_empty_link() -> None:
    ctx, _ = decode_kafka([krequest(18, 0, 1, None)], [])
    assert ctx.link == ""


def test_kafka_nested_and_find_coordinator_errors() -> None:
    from kafka.protocol.consumer import FetchResponse
    from kafka.protocol.metadata import FindCoordinatorResponse

    coordinator = FindCoordinatorResponse.Coordinator(key="g", node_id=-1, host="", port=-1, error_code=15,
                                                      error_message=None)
    find = FindCoordinatorResponse[4](throttle_time_ms=0, coordinators=[coordinator])
    find.with_header(correlation_id=4)
    errors = kafka_codec.response_errors(10, 4, find.encode(header=True))
    assert (errors.error_code, errors.nested) == (15, {})

    partition = FetchResponse.FetchableTopicResponse.PartitionData
    parts = [partition(partition_index=i, error_code=code, high_watermark=0, records=None)
             for i, code in enumerate([0, 1, 1, 6])]
    fetch = FetchResponse[4](throttle_time_ms=0, responses=[
        FetchResponse.FetchableTopicResponse(topic="t", partitions=parts)])
    fetch.with_header(correlation_id=5)
    errors = kafka_codec.response_errors(1, 4, fetch.encode(header=True))
    assert (errors.error_code, errors.nested) == (None, {1: 2, 6: 1})


def test_kafka_record_dict_and_counts() -> None:
    _, records = decode_kafka([KAFKA_CLIENT], [KAFKA_SERVER])
    counters = Counters()
    for record in records:
        counters.add_record(record)
    snap = counters.snapshot()
    assert snap["requests"] == {"ApiVersions": 1, "Heartbeat": 2}
    assert snap["versions"] == {"ApiVersions/v0": 1, "Heartbeat/v4": 1, "Heartbeat/v0": 1}
    assert snap["errors"] == {35: 1, 27: 1}
    assert records[-1].to_dict()["partition_errors"] == {}


def test_json_lines_sink_writes_one_record_per_line(tmp_path: Path) -> None:
    path = tmp_path / "wire.jsonl"
    with JsonLinesSink(path) as sink:
        for record in decode_kafka([KAFKA_CLIENT], [KAFKA_SERVER])[1]:
            sink(record)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["request"] * 3 + ["response"] * 3
    assert (lines[3]["api_name"], lines[3]["error_code"], lines[3]["error_name"]) == ("ApiVersions", 35,
                                                                                     "UNSUPPORTED_VERSION")
