"""ZooKeeper client protocol (jute) decoding of single frame payloads, without sockets.

Covers what a counting proxy needs from ZooKeeper 3.9's zookeeper.jute: ConnectRequest/ConnectResponse,
RequestHeader (xid, type) with the path and watch flag of the request bodies that start with a path, the
MultiOperationRecord's sub-operations, ReplyHeader (xid, zxid, err) and WatcherEvent. Reply bodies other than
notifications are not decoded: the proxy learns their meaning from the request with the same xid.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

NOTIFICATION_XID = -1
PING_XID = -2
AUTH_XID = -4
SET_WATCHES_XID = -8

OPCODES: dict[int, str] = {
    0: "notification", 1: "create", 2: "delete", 3: "exists", 4: "getData", 5: "setData", 6: "getACL",
    7: "setACL", 8: "getChildren", 9: "sync", 11: "ping", 12: "getChildren2", 13: "check", 14: "multi",
    15: "create2", 16: "reconfig", 17: "checkWatches", 18: "removeWatches", 19: "createContainer",
    20: "deleteContainer", 21: "createTTL", 22: "multiRead", 100: "auth", 101: "setWatches", 102: "sasl",
    103: "getEphemerals", 104: "getAllChildrenNumber", 105: "setWatches2", 106: "addWatch", 107: "whoAmI",
    -10: "createSession", -11: "closeSession", -1: "error",
}

ERRORS: dict[int, str] = {
    0: "OK", -1: "SystemError", -2: "RuntimeInconsistency", -3: "DataInconsistency", -4: "ConnectionLoss",
    -5: "MarshallingError", -6: "Unimplemented", -7: "OperationTimeout", -8: "BadArguments",
    -12: "UnknownSession", -13: "NewConfigNoQuorum", -14: "ReconfigInProgress", -100: "APIError",
    -101: "NoNode", -102: "NoAuth", -103: "BadVersion", -108: "NoChildrenForEphemerals", -110: "NodeExists",
    -111: "NotEmpty", -112: "SessionExpired", -113: "InvalidCallback", -114: "InvalidACL", -115: "AuthFailed",
    -118: "SessionMoved", -119: "NotReadOnly", -120: "EphemeralOnLocalSession", -121: "NoWatcher",
    -122: "RequestTimeout", -123: "ReconfigDisabled", -124: "SessionClosedRequireSaslAuth",
    -125: "QuotaExceeded", -127: "Throttled",
}

EVENT_TYPES: dict[int, str] = {
    -1: "None", 1: "NodeCreated", 2: "NodeDeleted", 3: "NodeDataChanged", 4: "NodeChildrenChanged",
    5: "DataWatchRemoved", 6: "ChildWatchRemoved", 7: "PersistentWatchRemoved",
}

KEEPER_STATES: dict[int, str] = {
    -1: "Unknown", 0: "Disconnected", 3: "SyncConnected", 4: "AuthFailed", 5: "ConnectedReadOnly",
    6: "SaslAuthenticated", 7: "Closed", -112: "Expired",
}

# Request bodies (jute records) whose first field is the path.
_PATH_FIRST = frozenset({1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 15, 17, 18, 19, 20, 21, 103, 104, 106})
# ExistsRequest, GetDataRequest, GetChildrenRequest, GetChildren2Request: path, then `boolean watch`.
_WATCH_FLAG = frozenset({3, 4, 8, 12})
_MULTI = frozenset({14, 22})
# Operations a multi (create/delete/setData/check) or multiRead (getData/getChildren) may carry.
_MULTI_OPS = frozenset({1, 2, 4, 5, 8, 12, 13, 15, 19, 21})


def op_name(opcode: int | None) -> str | None:
    return None if opcode is None else OPCODES.get(opcode, f"op{opcode}")


def error_name(err: int | None) -> str | None:
    return None if err is None else ERRORS.get(err, f"err{err}")


class JuteError(ValueError):
    """A payload that does not parse as the jute record expected."""


class JuteReader:
    """Sequential reader of jute's binary encoding (big-endian ints, int32-length buffers and strings)."""

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def _take(self, fmt: str, size: int) -> int:
        if self.pos + size > len(self.data):
            raise JuteError(f"need {size} bytes at offset {self.pos}, have {self.remaining}")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def int(self) -> int:
        return self._take(">i", 4)

    def long(self) -> int:
        return self._take(">q", 8)

    def boolean(self) -> bool:
        return bool(self._take(">B", 1))

    def buffer(self) -> bytes | None:
        size = self.int()
        if size < 0:
            return None  # jute writes -1 for a null buffer
        if self.pos + size > len(self.data):
            raise JuteError(f"buffer of {size} bytes at offset {self.pos} overruns the frame ({self.remaining} left)")
        value = self.data[self.pos:self.pos + size]
        self.pos += size
        return value

    def ustring(self) -> str | None:
        raw = self.buffer()
        if raw is None:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JuteError(f"ustring at offset {self.pos - len(raw)} is not UTF-8") from exc

    def acl_vector(self) -> None:
        count = self.int()
        for _ in range(max(count, 0)):
            self.int()  # perms
            self.ustring()  # Id.scheme
            self.ustring()  # Id.id


@dataclass(frozen=True)
class ConnectRequest:
    protocol_version: int
    last_zxid_seen: int
    timeout_ms: int
    session_id: int
    passwd: bytes
    read_only: bool | None  # absent from clients older than 3.4


@dataclass(frozen=True)
class ConnectResponse:
    protocol_version: int
    timeout_ms: int
    session_id: int
    passwd: bytes
    read_only: bool | None


@dataclass(frozen=True)
class Request:
    xid: int
    opcode: int
    path: str | None = None
    watch: bool | None = None
    sub_ops: tuple[tuple[str, str | None], ...] | None = None  # multi/multiRead: (op name, path) per operation


@dataclass(frozen=True)
class ReplyHeader:
    xid: int
    zxid: int
    err: int
    body_offset: int


@dataclass(frozen=True)
class WatcherEvent:
    type: int
    state: int
    path: str | None

    @property
    def type_name(self) -> str:
        return EVENT_TYPES.get(self.type, f"event{self.type}")

    @property
    def state_name(self) -> str:
        return KEEPER_STATES.get(self.state, f"state{self.state}")


def parse_connect_request(payload: bytes) -> ConnectRequest:
    r = JuteReader(payload)
    version, zxid, timeout, session = r.int(), r.long(), r.int(), r.long()
    passwd = r.buffer() or b""
    read_only = r.boolean() if r.remaining >= 1 else None
    return ConnectRequest(version, zxid, timeout, session, passwd, read_only)


def parse_connect_response(payload: bytes) -> ConnectResponse:
    r = JuteReader(payload)
    version, timeout, session = r.int(), r.int(), r.long()
    passwd = r.buffer() or b""
    read_only = r.boolean() if r.remaining >= 1 else None
    return ConnectResponse(version, timeout, session, passwd, read_only)


def parse_request(payload: bytes) -> Request:
    """RequestHeader plus what the body tells a counter: path, watch flag, multi sub-operations."""
    r = JuteReader(payload)
    xid, opcode = r.int(), r.int()
    if opcode in _MULTI:
        return Request(xid, opcode, sub_ops=_parse_multi(r))
    if opcode not in _PATH_FIRST or r.remaining == 0:
        return Request(xid, opcode)
    path = r.ustring()
    watch = r.boolean() if opcode in _WATCH_FLAG else None
    return Request(xid, opcode, path, watch)


def _parse_multi(r: JuteReader) -> tuple[tuple[str, str | None], ...]:
    """MultiOperationRecord: (MultiHeader type, done, err) + op body, until a header with done set."""
    ops: list[tuple[str, str | None]] = []
    while True:
        op_type, done, _err = r.int(), r.boolean(), r.int()
        if done:
            return tuple(ops)
        if op_type not in _MULTI_OPS:
            # Without this op's layout we cannot find the next header; keep what we have.
            ops.append((op_name(op_type) or "", None))
            return tuple(ops)
        path = r.ustring()
        ops.append((op_name(op_type) or "", path))
        _skip_multi_body(r, op_type)


def _skip_multi_body(r: JuteReader, op_type: int) -> None:
    """The rest of a multi sub-operation after its path (the op types multi and multiRead allow)."""
    if op_type in (1, 15, 19, 21):  # CreateRequest / CreateTTLRequest: data, acl, flags[, ttl]
        r.buffer()
        r.acl_vector()
        r.int()
        if op_type == 21:
            r.long()
    elif op_type in (2, 13):  # DeleteRequest, CheckVersionRequest: version
        r.int()
    elif op_type == 5:  # SetDataRequest: data, version
        r.buffer()
        r.int()
    else:  # GetDataRequest, GetChildrenRequest (multiRead): watch
        r.boolean()


def parse_reply_header(payload: bytes) -> ReplyHeader:
    r = JuteReader(payload)
    xid, zxid, err = r.int(), r.long(), r.int()
    return ReplyHeader(xid, zxid, err, r.pos)


def parse_watcher_event(payload: bytes, offset: int) -> WatcherEvent:
    r = JuteReader(payload, offset)
    return WatcherEvent(r.int(), r.int(), r.ustring())
