"""The ZooKeeper counting proxy: one listening port per link (lab member), all forwarding to one server.

Each connection's two byte streams are decoded as jute frames (see `jute.py`) into `ZkRecord`s: the
handshake, every request with its opcode/path/watch flag, every reply matched to its request by xid (so it
carries the opcode, path, error code and the latency the client saw), pings, and watch notifications.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import Any

import zkconsumer.lab.wire.jute as codec
from zkconsumer.lab.wire.connection import C2S, DecodeContext
from zkconsumer.lab.wire.framing import FrameBuffer
from zkconsumer.lab.wire.tcp import TcpProxy, host_port

# The server refuses requests above jute.maxbuffer (1 MiB by default) but replies may be larger; anything
# beyond this is not jute (e.g. a four-letter word read as a length).
MAX_FRAME = 64 << 20

KINDS = ("connect", "connect_reply", "request", "reply", "event", "ping", "ping_reply", "undecodable")


@dataclass(frozen=True, slots=True)
class ZkRecord:
    """One decoded ZooKeeper frame as it crossed the proxy.

    `ts` is the wall time the proxy read the frame's last byte. `latency_ms` (replies) runs from reading the
    request off the client to the reply's scheduled delivery to the client: the round trip the client saw,
    including the link's delay both ways. Paths are as on the wire, i.e. including the client's chroot.
    """

    ts: float
    link: str | None
    conn: int
    kind: str
    size: int
    session_id: int | None = None
    xid: int | None = None
    opcode: int | None = None
    op: str | None = None
    path: str | None = None
    watch: bool | None = None
    zxid: int | None = None
    err: int | None = None
    err_name: str | None = None
    latency_ms: float | None = None
    event_type: str | None = None
    event_state: str | None = None
    sub_ops: tuple[tuple[str, str | None], ...] | None = None
    timeout_ms: int | None = None
    dropped: bool = False
    detail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.sub_ops is not None:
            out["sub_ops"] = [list(op) for op in self.sub_ops]
        return out

    def counter_keys(self) -> Iterator[tuple[str, Any]]:
        yield "kinds", self.kind
        if self.kind in ("request", "ping"):
            yield "requests", self.op
            for sub_op, _ in self.sub_ops or ():
                yield "multi_ops", sub_op
        elif self.kind == "event":
            yield "events", self.event_type
        elif self.kind in ("reply", "ping_reply") and self.err:
            yield "errors", self.err
        if self.dropped:
            yield "dropped", self.kind


@dataclass(slots=True)
class _Pending:
    opcode: int
    path: str | None
    ts: float


class ZkStreamDecoder:
    """Decodes both directions of one client connection; the forwarder serialises calls to `feed`."""

    def __init__(self, ctx: DecodeContext, max_frame: int = MAX_FRAME) -> None:
        self._ctx = ctx
        self._client = FrameBuffer(max_frame)
        self._server = FrameBuffer(max_frame)
        self._client_handshake = True
        self._server_handshake = True
        self._connect_ts: float | None = None
        self._pending: dict[int, deque[_Pending]] = {}
        self.session_id: int | None = None

    def feed(self, direction: str, data: bytes, ts: float, deliver_ts: float) -> None:
        if direction == C2S:
            for payload in self._client.feed(data):
                self._client_frame(payload, ts)
        else:
            for payload in self._server.feed(data):
                self._server_frame(payload, ts, deliver_ts)

    def fail(self, direction: str, error: Exception, ts: float) -> None:
        self._emit(ts, "undecodable", 0, detail=f"{direction}: {type(error).__name__}: {error}")

    @property
    def pending(self) -> int:
        return sum(len(q) for q in self._pending.values())

    def _emit(self, ts: float, kind: str, size: int, **values: Any) -> None:
        values.setdefault("session_id", self.session_id)
        self._ctx.emit(ZkRecord(ts=ts, link=self._ctx.link_name, conn=self._ctx.conn_id, kind=kind, size=size,
                                dropped=self._ctx.blackholed, **values))

    def _client_frame(self, payload: bytes, ts: float) -> None:
        size = len(payload) + 4
        if self._client_handshake:
            self._client_handshake = False
            req = codec.parse_connect_request(payload)
            self._connect_ts = ts
            # A reconnect names the session it resumes; a new client sends 0.
            self._emit(ts, "connect", size, session_id=req.session_id or None, zxid=req.last_zxid_seen,
                       timeout_ms=req.timeout_ms)
            return
        req = codec.parse_request(payload)
        self._pending.setdefault(req.xid, deque()).append(_Pending(req.opcode, req.path, ts))
        kind = "ping" if req.opcode == 11 else "request"
        self._emit(ts, kind, size, xid=req.xid, opcode=req.opcode, op=codec.op_name(req.opcode), path=req.path,
                   watch=req.watch, sub_ops=req.sub_ops)

    def _server_frame(self, payload: bytes, ts: float, deliver_ts: float) -> None:
        size = len(payload) + 4
        if self._server_handshake:
            self._server_handshake = False
            resp = codec.parse_connect_response(payload)
            # timeOut 0 in a ConnectResponse means the session asked for has expired.
            if resp.session_id and resp.timeout_ms > 0:
                self.session_id = resp.session_id
            latency = None if self._connect_ts is None else (deliver_ts - self._connect_ts) * 1000.0
            self._emit(ts, "connect_reply", size, session_id=resp.session_id, timeout_ms=resp.timeout_ms,
                       latency_ms=latency)
            return
        hdr = codec.parse_reply_header(payload)
        if hdr.xid == codec.NOTIFICATION_XID:
            event = codec.parse_watcher_event(payload, hdr.body_offset)
            self._emit(ts, "event", size, xid=hdr.xid, zxid=hdr.zxid, err=hdr.err, err_name=codec.error_name(hdr.err),
                       path=event.path, event_type=event.type_name, event_state=event.state_name)
            return
        queue = self._pending.get(hdr.xid)
        pending = queue.popleft() if queue else None
        if queue is not None and not queue:
            del self._pending[hdr.xid]
        kind = "ping_reply" if hdr.xid == codec.PING_XID else "reply"
        opcode = pending.opcode if pending else None
        self._emit(ts, kind, size, xid=hdr.xid, zxid=hdr.zxid, err=hdr.err, err_name=codec.error_name(hdr.err),
                   opcode=opcode, op=codec.op_name(opcode), path=pending.path if pending else None,
                   latency_ms=(deliver_ts - pending.ts) * 1000.0 if pending else None)


class ZkProxy(TcpProxy):
    """Counting ZooKeeper proxy: `add_link(name)` opens a port for one member; all go to `upstream`."""

    def __init__(self, upstream: str | tuple[str, int], sink: Callable[[ZkRecord], None] | None = None,
                 name: str = "zkproxy", **kwargs: Any) -> None:
        super().__init__(host_port(upstream), decoder_factory=ZkStreamDecoder, sink=sink, name=name, **kwargs)
        self._ports: dict[str, int] = {}

    def add_link(self, name: str, port: int = 0) -> int:
        """Listen for member `name` (an ephemeral port unless given); returns the bound port."""
        if name in self._ports:
            raise ValueError(f"link {name!r} already has port {self._ports[name]}")
        bound = self._listen(self.link(name), port)
        self._ports[name] = bound
        return bound

    def port(self, name: str) -> int:
        return self._ports[name]

    def connect_string(self, name: str, chroot: str = "") -> str:
        """The `zookeeper.connect` value for member `name`, e.g. `127.0.0.1:40123/t-1a2b`."""
        return f"{self.host}:{self._ports[name]}{chroot}"
