"""`MemoryZkClient`: `ZkClient`'s surface and semantics over a `MemoryZooKeeper`, plus connection faults.

Every operation is `ZkOperations`' (operations.py), shared with `ZkClient`: only the one-request primitive and
the recipe installers differ, so a sequence of calls counts the same here as against a real server; the
contract tests (tests/test_memory_zk_contract.py) run identical sequences on both and compare results and
`op_counts()`.

The watch recipes (memory_watch.py) mirror kazoo's `ChildrenWatch`/`DataWatch`: a notification makes the
recipe re-read with a new watch, so changes made between the notification and the re-read are seen by that
read (ZooKeeper's one-shot coalescing, no more); after a reconnect or a new session each recipe re-reads and
calls back only if something changed (children differ, or the node's mzxid differs), as kazoo's do. As with
kazoo, the recipes' own reads reach the server (and its counters) but only callbacks are counted on the client.

Threading: callbacks (watch, state, new-session) run one at a time, in order, on the client's own event thread
`memzk-<log_id>-events`, like kazoo's event thread. `dispatch=fn` replaces that thread: every callback is then
handed to `fn(callback)`, which must run each exactly once and in the order given, either at once (synchronous
delivery: notifications caused by a call are handled before the call returns, nested ones after the current
callback) or later from a queue the caller drains (a simulation's event loop). No thread is started then.

Faults: `suspend()`/`resume()` drop and restore the connection (calls wait, bounded by `request_timeout_s`;
the session survives); the server's `expire_session()` ends the session, after which the client goes
"suspended", "lost", then "connected" with a new session, as a kazoo client does when a real server expires it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, TypeVar

from kazoo.exceptions import ConnectionLoss, SessionExpiredError

from zkconsumer.zookeeper.client import ZkClosedError, ZkUnavailableError
from zkconsumer.zookeeper.memory_nodes import NONE, Watcher, WatchEvent
from zkconsumer.zookeeper.memory_server import MemoryZooKeeper
from zkconsumer.zookeeper.memory_watch import ChildrenWatch, DataWatch, EventQueue
from zkconsumer.zookeeper.operations import ZkOp, ZkOperations

log = logging.getLogger(__name__)

__all__ = ["MemoryZkClient"]

T = TypeVar("T")


class MemoryZkClient(ZkOperations):
    """`ZkClient` over a `MemoryZooKeeper` (see the module docstring for threading and faults)."""

    def __init__(
        self, server: MemoryZooKeeper, *, session_timeout_ms: int = 6000, connection_timeout_ms: int | None = None,
        request_timeout_s: float | None = None, log_id: str = "zk",
        dispatch: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.server = server
        self.connect = f"memory://{server.name}"
        self.log_id = log_id
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000.0
        self.request_timeout_s = request_timeout_s or max(10.0, 2 * session_timeout_ms / 1000.0)
        super().__init__()
        self._connected = threading.Event()
        self._closed = threading.Event()
        self._started = False
        self._suspended = False
        self._session_id: int | None = None
        self._password: bytes | None = None
        self._new_session_callbacks: list[Callable[[], None]] = []
        self._state_callbacks: list[Callable[[str], None]] = []
        self._resend_callbacks: list[Callable[[str, str, str], None]] = []  # on_resend: never called
        # The recipes' session listeners: told of every transition at once, under the server lock (flags only).
        self._listeners: list[Callable[[str], None]] = []
        self._orphaned: list[Watcher] = []  # watchers dropped with the connection; kazoo resets them with NONE
        self._events = EventQueue(f"memzk-{log_id}-events", dispatch)

    # --- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> MemoryZkClient:
        if self._closed.is_set():
            raise ZkClosedError(f"{self.log_id}: the ZooKeeper client is closed")
        if self._started:
            return self
        self._started = True
        self._events.start()
        with self.server.locked():
            self._open_session()
            self._transition("connected", renewed=False)
        return self

    def close(self) -> None:
        """End the session (ephemeral nodes vanish on the server) and stop the event thread once the final
        "lost" callbacks have run. Calls waiting for a connection fail at once with `ZkClosedError`.

        A client closed while suspended cannot tell the server: its session and ephemerals stay until the
        server expires them, as with a real server."""
        with self.server.locked():
            if self._closed.is_set():
                return
            self._closed.set()
            self._connected.set()  # wake every waiter in `_call`; it sees `_closed` and fails fast
            if self._started:
                if not self._suspended and self._session_id is not None:
                    self.server.close_session(self._session_id)
                self._orphaned.clear()
                self._transition("lost", renewed=False)
        self._events.stop()

    def __enter__(self) -> MemoryZkClient:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return self._connected.is_set() and not self._closed.is_set()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def session_id(self) -> int | None:
        return self._session_id

    @property
    def session_credentials(self) -> tuple[int, bytes] | None:
        """(session id, password) while connected, like kazoo's `client_id`."""
        if not self.connected or self._session_id is None or self._password is None:
            return None
        return self._session_id, self._password

    def on_new_session(self, callback: Callable[[], None]) -> None:
        """Call `callback` (must not block) whenever the client comes back with a *different* session."""
        self._new_session_callbacks.append(callback)

    def on_state_change(self, callback: Callable[[str], None]) -> None:
        """Call `callback(state)` (must not block) on every connection state change: "connected", "suspended"
        (connection lost, session may survive) or "lost" (session expired or closed)."""
        self._state_callbacks.append(callback)

    def on_resend(self, callback: Callable[[str, str, str], None]) -> None:
        """As ZkClient's; never called here: a call waits out a suspension before it is sent (`suspend`), so no request
        is lost in flight and none is sent again."""
        self._resend_callbacks.append(callback)

    # --- faults (in-memory only) -------------------------------------------------------------------

    def suspend(self) -> None:
        """Lose the connection: calls wait (bounded by `request_timeout_s`) until `resume()`; the session and its
        ephemerals survive unless the server expires it; watches are dropped and recipes re-read on resume."""
        with self.server.locked():
            if self._closed.is_set() or not self._started or self._suspended:
                return
            self._suspended = True
            assert self._session_id is not None
            self._orphaned.extend(self.server.disconnect(self._session_id))
            self._transition("suspended", renewed=False)

    def resume(self) -> None:
        """Reconnect: to the same session if it is still alive, else "lost" and a new session."""
        with self.server.locked():
            if self._closed.is_set() or not self._suspended:
                return
            self._suspended = False
            assert self._session_id is not None
            if self.server.reconnect(self._session_id):
                self._reset_orphaned()
                self._transition("connected", renewed=False)
            else:
                self._renew_session()

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until every callback queued so far has run (in-memory only; for tests and the lab)."""
        return self._events.wait_idle(timeout)

    def _on_expired(self, session_id: int, dropped: list[Watcher]) -> None:
        # Called by the server, under its lock, when it expires our session.
        if session_id != self._session_id or self._closed.is_set():
            return
        self._orphaned.extend(dropped)
        if self._suspended:
            return  # a disconnected client learns of the expiry when it reconnects
        # A real server closes the expired session's connection: kazoo sees the drop, reconnects, and is told.
        self._transition("suspended", renewed=False)
        self._renew_session()

    def _renew_session(self) -> None:
        self._transition("lost", renewed=False)
        self._open_session()
        log.warning("%s: ZooKeeper session expired; new session 0x%x", self.log_id, self._session_id or 0)
        self._reset_orphaned()
        self._transition("connected", renewed=True)

    def _open_session(self) -> None:
        self._session_id, self._password = self.server.open_session(
            self._events, timeout_ms=self.session_timeout_ms, on_expired=self._on_expired)

    def _reset_orphaned(self) -> None:
        # kazoo hands every watcher it dropped a NONE event; a DataWatch re-reads on it once connected.
        orphaned, self._orphaned = self._orphaned, []
        for watcher in dict.fromkeys(orphaned):
            self._post(partial(watcher, WatchEvent(NONE, None)))

    def _transition(self, state: str, *, renewed: bool) -> None:
        """Under the server lock: flip the connection flag now, queue the callbacks, tell the recipes."""
        self._count(f"state:{state}")
        if state == "connected":
            self._connected.set()
        elif not self._closed.is_set():
            self._connected.clear()
            log.info("%s: ZooKeeper connection %s", self.log_id, state)
        for state_callback in list(self._state_callbacks):
            self._post(partial(state_callback, state))
        if renewed:
            for callback in list(self._new_session_callbacks):
                self._post(callback)
        for listener in list(self._listeners):
            listener(state)

    def _post(self, fn: Callable[[], None]) -> None:
        self.server.post(self._events, fn)

    # --- bounded calls (mirror ZkClient) -----------------------------------------------------------

    def _call(self, kind: str, path: str, request: Callable[[int], T]) -> T:
        deadline = time.monotonic() + self.request_timeout_s
        while True:
            if self._closed.is_set():
                raise ZkClosedError(f"{self.log_id}: the ZooKeeper client is closed ({kind} {path})")
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._connected.wait(remaining):
                raise ZkUnavailableError(
                    f"{self.log_id}: ZooKeeper at {self.connect} unreachable for {self.request_timeout_s:.0f} s "
                    f"({kind} {path})"
                )
            self._count(kind)
            if self._closed.is_set():  # woken by close(): ZkClient counts this attempt too, then refuses it
                raise ZkClosedError(f"{self.log_id}: the ZooKeeper client is closed")
            # Connected and not closed: start() opened a session before it first set _connected, and a session id
            # is only ever replaced by the next one.
            assert self._session_id is not None
            try:
                return request(self._session_id)
            except (ConnectionLoss, SessionExpiredError):
                continue  # the connection dropped under us: wait for it (or for the new session)

    def _request(self, kind: str, op: ZkOp, path: str, *, data: bytes | None = None, ephemeral: bool = False) -> Any:
        server = self.server
        requests: dict[str, Callable[[int], Any]] = {
            "get": lambda sid: server.get_data(sid, path),
            "get_children": lambda sid: server.get_children(sid, path),
            "exists": lambda sid: server.exists(sid, path),
            "create": lambda sid: server.create(sid, path, data, ephemeral=ephemeral),
            "set": lambda sid: server.set_data(sid, path, data, -1),
            "delete": lambda sid: server.delete(sid, path, -1),
        }
        return self._call(kind, path, requests[op])

    def _install_children_watch(self, path: str, on_change: Callable[[list[str]], bool | None]) -> None:
        ChildrenWatch(self, path, on_change)

    def _install_data_watch(self, path: str, on_change: Callable[..., bool | None]) -> None:
        DataWatch(self, path, on_change)

    # --- what the recipes use ----------------------------------------------------------------------

    def _recipe_read(self, request: Callable[[int], T], *, wait: bool) -> T:
        """A recipe's own read: sent to the server (which counts it), not counted here (kazoo's recipes bypass
        ZkClient's counters; the callback wrappers count). The first read waits for a connection like any call;
        later ones never block the event thread: if the connection is down, the reconnect re-read covers them."""
        if wait and not self._connected.wait(self.request_timeout_s):
            raise ZkUnavailableError(
                f"{self.log_id}: ZooKeeper at {self.connect} unreachable for {self.request_timeout_s:.0f} s (watch)")
        if self._closed.is_set():
            raise ZkClosedError(f"{self.log_id}: the ZooKeeper client is closed")
        if not self._connected.is_set():
            raise ZkUnavailableError(f"{self.log_id}: not connected")
        # as in _call: connected and not closed, so there is a session
        assert self._session_id is not None
        try:
            return request(self._session_id)
        except (ConnectionLoss, SessionExpiredError):
            raise ZkUnavailableError(f"{self.log_id}: connection lost during a watch read") from None

    def _holding(self) -> AbstractContextManager[None]:
        return self._events.holding()

    def _add_listener(self, listener: Callable[[str], None]) -> None:
        with self.server.locked():
            self._listeners.append(listener)

    def _remove_listener(self, listener: Callable[[str], None]) -> None:
        with self.server.locked():
            if listener in self._listeners:
                self._listeners.remove(listener)
