"""An in-memory ZooKeeper server: the znode tree, sessions, ephemerals and one-shot watches, without Java.

It exists so that rebalance logic can be driven in-process (unit tests in seconds, many cheap lab members, a
scale simulation on a virtual clock) while keeping the ZooKeeper semantics that rebalancing depends on:

* znodes hold null or bytes and carry a stat (versions, zxids, ephemeral owner, child count);
* ephemeral nodes belong to a session, cannot have children, and vanish when the session closes or expires;
* watches are one-shot and set only by reads: `get_data`/`get_children` on an existing node, `exists` on any
  node. They fire as ZooKeeper fires them: NodeCreated/NodeDataChanged/NodeDeleted for data and exists
  watches, NodeChildrenChanged on the parent's child watches, NodeDeleted on the deleted node's child watches.
  A session that holds both kinds on a deleted node gets one notification, as from a real server;
* every request a session sends is counted by the kind names `ZkClient` counts under, so the server-side
  totals of a run can be compared with the clients' own counters.

Errors are kazoo's exception classes, so callers catch the same types as with a real server. The records it
keeps (znodes, stats, sessions, watch events) are in memory_nodes.py.

Concurrency: one re-entrant lock (`locked()`) guards everything. Notifications are queued to the owning
session's `EventSink` while the lock is held (so each session sees them in transaction order) and flushed
after the outermost holder lets go, so no callback ever runs under the lock.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    ConnectionLoss,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)

from zkconsumer.zookeeper.memory_nodes import (
    CHANGED,
    CHILD,
    CREATED,
    DELETED,
    EventSink,
    InlineSink,
    MemoryStat,
    Session,
    SessionInfo,
    Watcher,
    WatchEvent,
    Znode,
    check_data,
    normalize,
    parent_path,
)

log = logging.getLogger(__name__)

__all__ = ["MemoryZooKeeper"]

_MASK64 = (1 << 64) - 1
_SYSTEM = ("/zookeeper", "/zookeeper/config", "/zookeeper/quota")  # what a fresh 3.5+ server already holds


class MemoryZooKeeper:
    """The server. Requests name their session by id; `MemoryZkClient` is the usual way to talk to it.

    `clock_ms` (default: wall clock) stamps ctime/mtime and seeds session ids, so a simulation on a virtual clock
    gets reproducible stats. Sessions never time out on their own: `expire_session` is the server deciding that a
    session is dead, which a test or lab calls when its scenario says so.
    """

    def __init__(self, *, name: str | None = None, server_id: int = 1,
                 clock_ms: Callable[[], int] | None = None) -> None:
        if not 0 <= server_id < 128:
            raise ValueError("server_id must be in 0..127 (it becomes the top byte of every session id)")
        self.name = name or f"memzk-{secrets.token_hex(4)}"
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._lock = threading.RLock()
        self._depth = 0
        self._dirty: dict[EventSink, None] = {}
        self._zxid = 0
        # ZooKeeper's SessionTrackerImpl: the server id in the top byte, the start time below, then +1 per session.
        self._next_session_id = (((self._clock_ms() << 24) & _MASK64) >> 8) | (server_id << 56)
        self._sessions: dict[int, Session] = {}
        self._counts: Counter[str] = Counter()
        self._session_counts: dict[int, Counter[str]] = {}
        # path -> session id -> watchers (ordered sets); data watches include exists watches, as on the server.
        self._data_watches: dict[str, dict[int, dict[Watcher, None]]] = {}
        self._child_watches: dict[str, dict[int, dict[Watcher, None]]] = {}
        self._nodes: dict[str, Znode] = {"/": Znode(b"", 0, 0, 0)}
        self._nodes["/"].cversion = -1  # as a fresh server reports it
        for path in _SYSTEM:
            self._nodes[path] = Znode(b"", 0, 0, 0)
            self._nodes[parent_path(path)].children[path.rsplit("/", 1)[1]] = None

    # --- locking and delivery ----------------------------------------------------------------------

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the server lock across several steps (re-entrant). Notifications queued meanwhile are flushed to
        their sinks when the outermost holder leaves, so callbacks never run under the lock."""
        self._lock.acquire()
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            dirty: list[EventSink] = []
            if self._depth == 0:
                dirty = list(self._dirty)
                self._dirty.clear()
            self._lock.release()
            for sink in dirty:
                try:
                    sink.flush()
                except Exception:  # one owner's failing callback must not strand the others' notifications
                    log.exception("delivering in-memory ZooKeeper notifications failed")

    def post(self, sink: EventSink, fn: Callable[[], None]) -> None:
        """Queue `fn` on `sink` in order with the notifications of the current transaction."""
        with self.locked():
            sink.put(fn)
            self._dirty[sink] = None

    # --- sessions ----------------------------------------------------------------------------------

    def open_session(self, sink: EventSink | None = None, *, timeout_ms: int = 6000,
                     on_expired: Callable[[int, list[Watcher]], None] | None = None) -> tuple[int, bytes]:
        """Create a connected session; returns (id, password) like kazoo's `client_id`.

        `on_expired(id, dropped_watchers)` runs under the server lock when `expire_session` kills this session;
        it may post to sinks and open a new session, nothing that blocks."""
        with self.locked():
            session_id = self._next_session_id
            self._next_session_id += 1
            self._zxid += 1  # createSession is a transaction
            session = Session(session_id, sink or InlineSink(), timeout_ms, on_expired)
            self._sessions[session_id] = session
            self._session_counts[session_id] = session.counts
            return session_id, session.password

    def disconnect(self, session_id: int) -> list[Watcher]:
        """The session's connection dropped: the session (and its ephemerals) lives on, its watches do not (the
        server forgets a connection's watches; kazoo clears its own table too). Returns the dropped watchers."""
        with self.locked():
            session = self._sessions.get(session_id)
            if session is None or not session.connected:
                return []
            session.connected = False
            return self._drop_watches(session)

    def reconnect(self, session_id: int) -> bool:
        """The client is back; False if its session expired meanwhile (the client must open a new one)."""
        with self.locked():
            session = self._sessions.get(session_id)
            if session is None:
                return False
            session.connected = True
            return True

    def close_session(self, session_id: int) -> None:
        """The client ended its session: its ephemerals are deleted (in one transaction), others are notified."""
        with self.locked():
            session = self._sessions.pop(session_id, None)
            if session is not None:
                self._drop_watches(session)
                self._delete_ephemerals(session)

    def expire_session(self, session_id: int) -> bool:
        """Expire a session as the server does when it stops hearing from the client: its watches are dropped,
        its ephemerals deleted (notifying every other session), and its owner told (`on_expired`). A connected
        client learns at once; a disconnected one when it reconnects. False if no such live session."""
        with self.locked():
            session = self._sessions.pop(session_id, None)
            if session is None:
                return False
            dropped = self._drop_watches(session)
            self._delete_ephemerals(session)
            if session.on_expired is not None:
                session.on_expired(session_id, dropped)
                self._dirty[session.sink] = None
            return True

    def sessions(self) -> list[SessionInfo]:
        with self.locked():
            return [SessionInfo(s.id, s.connected, s.timeout_ms, tuple(s.ephemerals)) for s in self._sessions.values()]

    def _drop_watches(self, session: Session) -> list[Watcher]:
        dropped: list[Watcher] = []
        # kazoo resets child watchers first, then data watchers.
        for table, paths in ((self._child_watches, session.child_paths), (self._data_watches, session.data_paths)):
            for path in sorted(paths):
                by_session = table.get(path, {})
                dropped.extend(by_session.pop(session.id, {}))
                if not by_session:
                    table.pop(path, None)
            paths.clear()
        return dropped

    def _delete_ephemerals(self, session: Session) -> None:
        if session.ephemerals:
            self._zxid += 1  # closeSession: one transaction for all of them
            for path in sorted(session.ephemerals):
                self._remove(path, self._zxid)
            session.ephemerals.clear()

    # --- requests ----------------------------------------------------------------------------------

    def _request(self, session_id: int, kind: str, path: str) -> tuple[Session, str]:
        path = normalize(path)
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionExpiredError()
        if not session.connected:
            raise ConnectionLoss()
        session.counts[kind] += 1
        self._counts[kind] += 1
        return session, path

    def _node(self, path: str) -> Znode:
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError()
        return node

    def create(self, session_id: int, path: str, data: bytes | None = None, *, ephemeral: bool = False) -> str:
        """Create one node; the parent must exist. Returns the created path."""
        check_data(data)
        with self.locked():
            session, path = self._request(session_id, "create", path)
            if path == "/":
                raise NodeExistsError()
            parent = self._node(parent_path(path))
            if path in self._nodes:
                raise NodeExistsError()
            if parent.owner:
                raise NoChildrenForEphemeralsError()
            self._zxid += 1
            self._nodes[path] = Znode(data, session.id if ephemeral else 0, self._zxid, self._clock_ms())
            if ephemeral:
                session.ephemerals[path] = None
            parent.children[path.rsplit("/", 1)[1]] = None
            parent.cversion += 1
            parent.pzxid = self._zxid
            self._fire(self._data_watches, path, CREATED, "watch:data")
            self._fire(self._child_watches, parent_path(path), CHILD, "watch:children")
            return path

    def get_data(self, session_id: int, path: str, watch: Watcher | None = None) -> tuple[bytes | None, MemoryStat]:
        with self.locked():
            session, path = self._request(session_id, "get_data", path)
            node = self._node(path)  # a missing node leaves no watch
            if watch is not None:
                self._arm(self._data_watches, session, session.data_paths, path, watch)
            return node.data, node.stat()

    def exists(self, session_id: int, path: str, watch: Watcher | None = None) -> MemoryStat | None:
        with self.locked():
            session, path = self._request(session_id, "exists", path)
            if watch is not None:  # armed whether or not the node exists: it fires on creation too
                self._arm(self._data_watches, session, session.data_paths, path, watch)
            node = self._nodes.get(path)
            return None if node is None else node.stat()

    def get_children(self, session_id: int, path: str, watch: Watcher | None = None) -> list[str]:
        """Children in creation order (a real server's order is arbitrary: callers must not rely on any)."""
        with self.locked():
            session, path = self._request(session_id, "get_children", path)
            node = self._node(path)
            if watch is not None:
                self._arm(self._child_watches, session, session.child_paths, path, watch)
            return list(node.children)

    def set_data(self, session_id: int, path: str, data: bytes | None, version: int = -1) -> MemoryStat:
        check_data(data)
        with self.locked():
            _, path = self._request(session_id, "set_data", path)
            node = self._node(path)
            if version not in (-1, node.version):
                raise BadVersionError()
            self._zxid += 1
            node.data = data
            node.version += 1
            node.mzxid = self._zxid
            node.mtime = self._clock_ms()
            self._fire(self._data_watches, path, CHANGED, "watch:data")
            return node.stat()

    def delete(self, session_id: int, path: str, version: int = -1) -> None:
        with self.locked():
            _, path = self._request(session_id, "delete", path)
            if path == "/" or path in _SYSTEM:
                raise BadArgumentsError()
            node = self._node(path)
            if version not in (-1, node.version):
                raise BadVersionError()
            if node.children:
                raise NotEmptyError()
            self._zxid += 1
            self._remove(path, self._zxid)

    def _remove(self, path: str, zxid: int) -> None:
        node = self._nodes.pop(path)
        if node.owner:
            owner = self._sessions.get(node.owner)
            if owner is not None:
                owner.ephemerals.pop(path, None)
        parent = self._nodes[parent_path(path)]
        del parent.children[path.rsplit("/", 1)[1]]
        parent.cversion += 1
        parent.pzxid = zxid
        self._fire_deleted(path)
        self._fire(self._child_watches, parent_path(path), CHILD, "watch:children")

    # --- watches -----------------------------------------------------------------------------------

    def _arm(self, table: dict[str, dict[int, dict[Watcher, None]]], session: Session, paths: set[str], path: str,
             watch: Watcher) -> None:
        table.setdefault(path, {}).setdefault(session.id, {})[watch] = None
        paths.add(path)

    def _fire(self, table: dict[str, dict[int, dict[Watcher, None]]], path: str, event_type: str, kind: str) -> None:
        by_session = table.pop(path, None)
        if not by_session:
            return
        event = WatchEvent(event_type, path)
        for session_id, watchers in by_session.items():
            session = self._sessions[session_id]
            (session.data_paths if table is self._data_watches else session.child_paths).discard(path)
            self._notify(session, kind, event, list(watchers))

    def _fire_deleted(self, path: str) -> None:
        """NodeDeleted reaches data/exists watches and child watches on the node; a session holding both gets one
        notification (the server suppresses the second), and kazoo hands it to both kinds of watcher."""
        data = self._data_watches.pop(path, {})
        child = self._child_watches.pop(path, {})
        event = WatchEvent(DELETED, path)
        for session_id in [*data, *(s for s in child if s not in data)]:
            session = self._sessions[session_id]
            session.data_paths.discard(path)
            session.child_paths.discard(path)
            watchers = [*data.get(session_id, {}), *child.get(session_id, {})]
            self._notify(session, "watch:data" if session_id in data else "watch:children", event, watchers)

    def _notify(self, session: Session, kind: str, event: WatchEvent, watchers: list[Watcher]) -> None:
        session.counts[kind] += 1
        self._counts[kind] += 1
        for watcher in watchers:
            session.sink.put(partial(watcher, event))
        self._dirty[session.sink] = None

    # --- inspection --------------------------------------------------------------------------------

    def op_counts(self, session_id: int | None = None) -> dict[str, int]:
        """Requests received and notifications sent, by kind: all sessions', or one session's (also after it
        ended). Requests refused before reaching the server (closed, disconnected, bad path) are not counted."""
        with self.locked():
            counts = self._counts if session_id is None else self._session_counts.get(session_id, Counter())
            return dict(counts)

    def dump(self) -> dict[str, tuple[bytes | None, int]]:
        """Every node but the root and ZooKeeper's own /zookeeper subtree: path -> (data, ephemeralOwner)."""
        with self.locked():
            return {path: (node.data, node.owner) for path, node in sorted(self._nodes.items())
                    if path != "/" and path not in _SYSTEM}
