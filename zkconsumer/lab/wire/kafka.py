"""The Kafka counting proxy: ONE listening address, which the broker must advertise.

Kafka clients bootstrap anywhere but then connect to the addresses in Metadata/FindCoordinator responses, so
a proxy only sees every request if the broker advertises the proxy: a Kafka listener that listens on a port
of its own and is advertised at the proxy's (`advertised.listeners`; the lab's embedded broker has one,
`MEMBERS`, see zkconsumer/embedded/kafka.py). The proxy is made first, with no upstream, because the broker's
configuration needs its port; `forward_to` then points it at that listener. Members are told apart by the
client_id in their request headers: a connection joins the link named after the client_id of its first
request, and from then on that link's delay and cuts apply to it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from functools import partial
from typing import Any

import zkconsumer.lab.wire.kafka_codec as codec
from zkconsumer.lab.wire.connection import C2S, DecodeContext
from zkconsumer.lab.wire.framing import FrameBuffer
from zkconsumer.lab.wire.tcp import TcpProxy, host_port

log = logging.getLogger(__name__)

# A broker's socket.request.max.bytes defaults to 100 MiB; a larger "size" is not a Kafka frame.
MAX_FRAME = 100 << 20
# Response bodies are decoded on the forwarding path (a 240 KB Fetch response takes about 0.15 ms, its records
# stay bytes); bigger ones are Fetch data whose error codes are not worth holding the stream for.
DEFAULT_MAX_BODY_DECODE = 1 << 20
# Requests that get no response (Produce with acks=0) would otherwise pile up in the pending table.
_MAX_PENDING = 10_000

KINDS = ("request", "response", "undecodable")


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    """One decoded Kafka frame as it crossed the proxy.

    `ts` is the wall time the proxy read the frame's last byte; `latency_ms` (responses) runs from reading
    the request off the client to the response's scheduled delivery to the client, so it includes the link's
    delay both ways. `partition_errors` holds the nonzero error codes below the top level as (code, count).
    `body_decoded` is False when the response body was not decoded (too large, or unknown to kafka-python).

    The KIP-848 fields are None on every other API (docs/wire.md, "Kafka's consumer group protocol"). On a
    ConsumerGroupHeartbeat: `member_epoch` is the epoch the member sent (request, and its response too: 0 joins,
    -1 leaves, -2 a static member leaving to rejoin); `owned` the partitions the request says the member owns;
    on the response `epoch_after` is the epoch the coordinator answered, `assigned` the partitions of its
    assignment (None: no assignment in it, the member keeps what it has) and `heartbeat_interval_ms` the interval
    the coordinator asks for. A JoinGroup response's `epoch_after` is the generation it forms (the classic
    protocol's group epoch), so rounds of every broker-side design are counted from the wire alike.
    """

    ts: float
    link: str | None
    conn: int
    kind: str
    size: int
    client_id: str | None = None
    api_key: int | None = None
    api_name: str | None = None
    api_version: int | None = None
    correlation_id: int | None = None
    error_code: int | None = None
    error_name: str | None = None
    partition_errors: tuple[tuple[int, int], ...] = ()
    latency_ms: float | None = None
    body_decoded: bool | None = None
    dropped: bool = False
    detail: str | None = None
    member_epoch: int | None = None
    owned: int | None = None
    epoch_after: int | None = None
    assigned: int | None = None
    heartbeat_interval_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["partition_errors"] = {code: count for code, count in self.partition_errors}
        return out

    def counter_keys(self) -> Iterator[tuple[str, Any]]:
        yield "kinds", self.kind
        if self.kind == "request":
            yield "requests", self.api_name
            yield "versions", f"{self.api_name}/v{self.api_version}"
        elif self.kind == "response":
            yield "responses", self.api_name
            if self.assigned is not None:  # a KIP-848 heartbeat answered with a new assignment
                yield "assignments", self.api_name
            if self.error_code:
                yield "errors", self.error_code
            for code, count in self.partition_errors:
                for _ in range(count):
                    yield "partition_errors", code
        if self.dropped:
            yield "dropped", self.kind


@dataclass(slots=True)
class _Pending:
    api_key: int
    api_version: int
    client_id: str | None
    ts: float
    member_epoch: int | None = None  # ConsumerGroupHeartbeat: the epoch the member sent


class KafkaStreamDecoder:
    """Decodes both directions of one client connection; the forwarder serialises calls to `feed`."""

    def __init__(self, ctx: DecodeContext, max_frame: int = MAX_FRAME,
                 max_body_decode: int = DEFAULT_MAX_BODY_DECODE) -> None:
        self._ctx = ctx
        self._client = FrameBuffer(max_frame)
        self._server = FrameBuffer(max_frame)
        self._max_body_decode = max_body_decode
        self._pending: OrderedDict[int, _Pending] = OrderedDict()
        self._bound = False

    def feed(self, direction: str, data: bytes, ts: float, deliver_ts: float) -> None:
        if direction == C2S:
            for payload in self._client.feed(data):
                self._request(payload, ts)
        else:
            for payload in self._server.feed(data):
                self._response(payload, ts, deliver_ts)

    def fail(self, direction: str, error: Exception, ts: float) -> None:
        self._emit(ts, "undecodable", 0, detail=f"{direction}: {type(error).__name__}: {error}")

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _emit(self, ts: float, kind: str, size: int, **values: Any) -> None:
        self._ctx.emit(KafkaRecord(ts=ts, link=self._ctx.link_name, conn=self._ctx.conn_id, kind=kind, size=size,
                                   dropped=self._ctx.blackholed, **values))

    def _request(self, payload: bytes, ts: float) -> None:
        header = codec.parse_request_header(payload)
        if not self._bound:
            self._bound = True
            self._ctx.bind(header.client_id or "")
        body: dict[str, Any] = {}
        if header.api_key == codec.CONSUMER_GROUP_HEARTBEAT_KEY:
            # A body that does not decode leaves the epoch unknown; the header was fine, so the stream goes on.
            try:
                heartbeat = codec.decode_consumer_group_heartbeat_request(payload)
                body = {"member_epoch": heartbeat.member_epoch, "owned": heartbeat.owned}
            except codec.KafkaDecodeError as exc:
                body = {"detail": str(exc)}
                log.debug("conn %s: %s", self._ctx.conn_id, exc)
        self._pending[header.correlation_id] = _Pending(header.api_key, header.api_version, header.client_id, ts,
                                                        body.get("member_epoch"))
        while len(self._pending) > _MAX_PENDING:
            self._pending.popitem(last=False)
        self._emit(ts, "request", len(payload) + 4, client_id=header.client_id, api_key=header.api_key,
                   api_name=codec.api_name(header.api_key), api_version=header.api_version,
                   correlation_id=header.correlation_id, **body)

    def _take_pending(self, correlation_id: int) -> _Pending | None:
        if correlation_id not in self._pending:
            return None
        # A broker answers a connection's requests in order, so anything older never gets an answer.
        while True:
            key, pending = self._pending.popitem(last=False)
            if key == correlation_id:
                return pending

    def _response(self, payload: bytes, ts: float, deliver_ts: float) -> None:
        correlation_id = codec.parse_correlation_id(payload)
        pending = self._take_pending(correlation_id)
        size = len(payload) + 4
        if pending is None:
            self._emit(ts, "response", size, correlation_id=correlation_id, body_decoded=False)
            return
        error_code: int | None = None
        nested: dict[int, int] = {}
        decoded = False
        detail = None
        body: dict[str, Any] = {}
        if pending.api_key == codec.CONSUMER_GROUP_HEARTBEAT_KEY:
            body["member_epoch"] = pending.member_epoch
        if size <= self._max_body_decode:
            try:
                answer = codec.decode_response(pending.api_key, pending.api_version, payload)
                error_code, nested, decoded = answer.errors.error_code, answer.errors.nested, True
                if answer.errors.generation is not None:  # JoinGroup: the generation it forms (classic epoch)
                    body["epoch_after"] = answer.errors.generation
                if isinstance(answer.body, codec.ConsumerGroupHeartbeatResponse):
                    body.update(epoch_after=answer.body.member_epoch, assigned=answer.body.assigned,
                                heartbeat_interval_ms=answer.body.heartbeat_interval_ms)
            except codec.KafkaDecodeError as exc:
                detail = str(exc)
                log.debug("conn %s: %s", self._ctx.conn_id, exc)
        self._emit(ts, "response", size, client_id=pending.client_id, api_key=pending.api_key,
                   api_name=codec.api_name(pending.api_key), api_version=pending.api_version,
                   correlation_id=correlation_id, error_code=error_code, error_name=codec.error_name(error_code),
                   partition_errors=tuple(sorted(nested.items())), latency_ms=(deliver_ts - pending.ts) * 1000.0,
                   body_decoded=decoded, detail=detail, **body)


class KafkaProxy(TcpProxy):
    """Counting Kafka proxy on one port; links are client ids (see the module docstring)."""

    def __init__(self, upstream: str | tuple[str, int] | None, sink: Callable[[KafkaRecord], None] | None = None,
                 name: str = "kafkaproxy", port: int = 0, max_body_decode: int = DEFAULT_MAX_BODY_DECODE,
                 **kwargs: Any) -> None:
        """`upstream` None: connections are refused (reset) until `forward_to` names the broker's listener."""
        factory = partial(KafkaStreamDecoder, max_body_decode=max_body_decode)
        super().__init__(None if upstream is None else host_port(upstream), decoder_factory=factory, sink=sink,
                         name=name, **kwargs)
        self.port = self._listen(None, port)

    @property
    def bootstrap(self) -> str:
        """`host:port` for clients' bootstrap servers, and what the broker must advertise."""
        return f"{self.host}:{self.port}"
