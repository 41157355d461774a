"""The in-memory ZooKeeper's records: znodes and their stats, sessions, watch events and where a session's
notifications go, and kazoo's client-side path rules. The server (memory_server.py) keeps them and applies
requests to them; the client and the watch recipes (memory_client.py, memory_watch.py) read the public ones.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kazoo.protocol.paths import normpath

__all__ = [
    "CHANGED", "CHILD", "CREATED", "DELETED", "NONE", "EventSink", "InlineSink", "MemoryStat", "Session",
    "SessionInfo", "WatchEvent", "Watcher", "Znode", "check_data", "normalize", "parent_path",
]

# Event type names as kazoo's `EventType` spells them; NONE is the client-side "watches were reset" event.
CREATED, DELETED, CHANGED, CHILD, NONE = "CREATED", "DELETED", "CHANGED", "CHILD", "NONE"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # CREATED, DELETED, CHANGED, CHILD or NONE
    path: str | None


Watcher = Callable[[WatchEvent], None]


class EventSink(Protocol):
    """Where a session's notifications go (a client's event queue)."""

    def put(self, fn: Callable[[], None]) -> None:
        """Queue `fn`. Called with the server lock held: must not block and must not run `fn` now."""

    def flush(self) -> None:
        """Deliver what `put` queued. Called without the server lock."""


@dataclass(frozen=True, slots=True)
class MemoryStat:
    """A znode's stat, with the field names and order of kazoo's `ZnodeStat` (and its convenience names)."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeralOwner: int
    dataLength: int
    numChildren: int
    pzxid: int

    @property
    def creation_transaction_id(self) -> int:
        return self.czxid

    @property
    def last_modified_transaction_id(self) -> int:
        return self.mzxid

    @property
    def created(self) -> float:
        return self.ctime / 1000.0

    @property
    def last_modified(self) -> float:
        return self.mtime / 1000.0

    @property
    def children_version(self) -> int:
        return self.cversion

    @property
    def acl_version(self) -> int:
        return self.aversion

    @property
    def owner_session_id(self) -> int | None:
        return self.ephemeralOwner or None

    @property
    def data_length(self) -> int:
        return self.dataLength

    @property
    def children_count(self) -> int:
        return self.numChildren


@dataclass(frozen=True, slots=True)
class SessionInfo:
    session_id: int
    connected: bool
    timeout_ms: int
    ephemerals: tuple[str, ...]


class Znode:
    """A znode as the server keeps it (its `stat()` is what a client sees)."""

    __slots__ = ("children", "ctime", "cversion", "czxid", "data", "mtime", "mzxid", "owner", "pzxid", "version")

    def __init__(self, data: bytes | None, owner: int, zxid: int, now_ms: int) -> None:
        self.data = data
        self.owner = owner
        self.czxid = self.mzxid = self.pzxid = zxid
        self.ctime = self.mtime = now_ms
        self.version = self.cversion = 0
        self.children: dict[str, None] = {}  # an ordered set: creation order

    def stat(self) -> MemoryStat:
        return MemoryStat(self.czxid, self.mzxid, self.ctime, self.mtime, self.version, self.cversion, 0, self.owner,
                          len(self.data or b""), len(self.children), self.pzxid)


class InlineSink:
    """The default sink for sessions opened without one: runs notifications right after the request."""

    def __init__(self) -> None:
        self._pending: list[Callable[[], None]] = []

    def put(self, fn: Callable[[], None]) -> None:
        self._pending.append(fn)

    def flush(self) -> None:
        while self._pending:
            self._pending.pop(0)()


class Session:
    """A session as the server keeps it: its ephemerals, the paths it watches, its request counts."""

    __slots__ = ("child_paths", "connected", "counts", "data_paths", "ephemerals", "id", "on_expired", "password",
                 "sink", "timeout_ms")

    def __init__(self, session_id: int, sink: EventSink, timeout_ms: int,
                 on_expired: Callable[[int, list[Watcher]], None] | None) -> None:
        self.id = session_id
        self.password = secrets.token_bytes(16)
        self.sink = sink
        self.timeout_ms = timeout_ms
        self.on_expired = on_expired
        self.connected = True
        self.ephemerals: dict[str, None] = {}
        self.data_paths: set[str] = set()  # paths where this session holds data/exists watches
        self.child_paths: set[str] = set()
        self.counts: Counter[str] = Counter()


def parent_path(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def normalize(path: str) -> str:
    """kazoo's client-side normalisation: leading slash optional, '//' and a trailing '/' dropped, '.' and '..'
    rejected with ValueError (before anything is sent, so the server counts nothing)."""
    if not isinstance(path, str):
        raise TypeError("Invalid type for 'path' (string expected)")
    normalized: str = normpath("/" + path.lstrip("/"))
    return normalized


def check_data(data: bytes | None) -> None:
    if data is not None and not isinstance(data, bytes):
        raise TypeError("Invalid type for 'value' (must be a byte string)")
