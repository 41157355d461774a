"""The only place that talks to kazoo: bounded retries, watches that survive reconnects, and op counting.

Semantics follow zkclient as Kafka 0.8.2 used it (calls retry while disconnected; watches re-arm), with two
deliberate bounds: every call gives up after `request_timeout_s` (a synchronous kazoo call made while
SUSPENDED can otherwise block for minutes), and every request and watch notification is counted by kind so
the lab can measure the herd effect.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

log = logging.getLogger(__name__)

__all__ = [
    "NoNodeError", "NodeExistsError", "NotEmptyError", "WatchHandle", "ZkClient", "ZkClosedError", "ZkUnavailableError",
]

_RETRYABLE = (ConnectionLoss, SessionExpiredError, KazooTimeoutError)
# Short and persistent: the kazoo default backs off for up to an hour between reconnect attempts.
CONNECTION_RETRY = {"max_tries": -1, "delay": 0.05, "backoff": 1.5, "max_delay": 1.0}


class ZkUnavailableError(RuntimeError):
    """ZooKeeper could not be reached within the bound; nothing was changed by the failed call."""


class ZkClosedError(ZkUnavailableError):
    """The client was closed (the member is shutting down): no call is sent, and none waits."""


class WatchHandle:
    """Stops a children/data watch: the next notification returns False to kazoo and the watch ends."""

    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


class ZkClient:
    """A started kazoo session plus counters. `log_id` (the consumer id) prefixes every log line."""

    def __init__(
        self, connect: str, *, session_timeout_ms: int = 6000, connection_timeout_ms: int | None = None,
        request_timeout_s: float | None = None, log_id: str = "zk",
    ) -> None:
        self.connect = connect
        self.log_id = log_id
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000.0
        self.request_timeout_s = request_timeout_s or max(10.0, 2 * session_timeout_ms / 1000.0)
        self.counts: Counter[str] = Counter()
        self._count_lock = threading.Lock()
        self._connected = threading.Event()
        self._closed = threading.Event()
        self._session_id: int | None = None
        self._new_session_callbacks: list[Callable[[], None]] = []
        self._state_callbacks: list[Callable[[str], None]] = []
        self._kazoo = KazooClient(
            hosts=connect, timeout=session_timeout_ms / 1000.0, connection_retry=dict(CONNECTION_RETRY),
            command_retry={"max_tries": 3, "delay": 0.05, "backoff": 1.5, "max_delay": 1.0},
        )
        self._kazoo.add_listener(self._on_state)

    # --- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> ZkClient:
        try:
            self._kazoo.start(timeout=self.connection_timeout_s)
        except KazooTimeoutError:
            self._kazoo.stop()
            self._kazoo.close()
            raise ZkUnavailableError(
                f"could not connect to ZooKeeper at {self.connect} within {self.connection_timeout_s:.1f} s: "
                "check zookeeper.connect and that the server is up"
            ) from None
        self._session_id = self._kazoo.client_id[0] if self._kazoo.client_id else None
        self._connected.set()
        self._ensure_chroot()
        return self

    def _ensure_chroot(self) -> None:
        chroot = self._kazoo.chroot
        if chroot and not self.exists("/"):
            root = KazooClient(hosts=self.connect.split("/", 1)[0], timeout=self.session_timeout_ms / 1000.0,
                               connection_retry=dict(CONNECTION_RETRY))
            root.start(timeout=self.connection_timeout_s)
            try:
                root.ensure_path(chroot)
            finally:
                root.stop()
                root.close()

    def close(self) -> None:
        """End the session (ephemeral nodes vanish on the server) and free the connection threads.

        Calls waiting for a connection fail at once with `ZkClosedError`, so nothing (an auto-commit, a claim)
        can reach ZooKeeper after the member's final commit."""
        self._closed.set()
        self._connected.set()  # wake every waiter in `_call`; it sees `_closed` and fails fast
        try:
            self._kazoo.stop()
        finally:
            self._kazoo.close()

    def __enter__(self) -> ZkClient:
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
        """(session id, password): what a test needs to force a real server-side expiry."""
        return self._kazoo.client_id

    def on_new_session(self, callback: Callable[[], None]) -> None:
        """Call `callback` (must not block) whenever the client comes back with a *different* session."""
        self._new_session_callbacks.append(callback)

    def on_state_change(self, callback: Callable[[str], None]) -> None:
        """Call `callback(state)` (must not block) on every connection state change: "connected", "suspended"
        (connection lost, session may survive) or "lost" (session expired or closed)."""
        self._state_callbacks.append(callback)

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: record and signal only, never block here.
        self._count(f"state:{state.lower()}")
        for state_callback in list(self._state_callbacks):
            state_callback(state.lower())
        if state == KazooState.CONNECTED:
            new_id = self._kazoo.client_id[0] if self._kazoo.client_id else None
            renewed = self._session_id is not None and new_id != self._session_id
            self._session_id = new_id
            self._connected.set()
            if renewed:
                log.warning("%s: ZooKeeper session expired; new session 0x%x", self.log_id, new_id or 0)
                for callback in list(self._new_session_callbacks):
                    callback()
        elif not self._closed.is_set():
            self._connected.clear()
            log.info("%s: ZooKeeper connection %s", self.log_id, state)

    # --- counting ----------------------------------------------------------------------------------

    def _count(self, kind: str, n: int = 1) -> None:
        with self._count_lock:
            self.counts[kind] += n

    def op_counts(self) -> dict[str, int]:
        with self._count_lock:
            return dict(self.counts)

    # --- bounded calls -----------------------------------------------------------------------------

    def _call(self, kind: str, method: str, *args: object, **kwargs: object) -> object:
        deadline = time.monotonic() + self.request_timeout_s
        while True:
            if self._closed.is_set():
                raise ZkClosedError(f"{self.log_id}: the ZooKeeper client is closed ({kind} {args[0] if args else ''})")
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._connected.wait(remaining):
                raise ZkUnavailableError(
                    f"{self.log_id}: ZooKeeper at {self.connect} unreachable for {self.request_timeout_s:.0f} s "
                    f"({kind} {args[0] if args else ''})"
                )
            self._count(kind)
            try:
                return getattr(self._kazoo, method + "_async")(*args, **kwargs).get(timeout=remaining)
            except _RETRYABLE as exc:
                log.debug("%s: %s %s failed with %r; retrying", self.log_id, kind, args[:1], exc)
                time.sleep(0.05)
            except ConnectionClosedError:
                raise ZkClosedError(f"{self.log_id}: the ZooKeeper client is closed") from None

    def get(self, path: str) -> tuple[bytes, object] | None:
        """(data, stat), or None if the node does not exist."""
        try:
            return self._call("get_data", "get", path)  # type: ignore[return-value]
        except NoNodeError:
            return None

    def get_children(self, path: str) -> list[str] | None:
        """Children names, or None if the node does not exist."""
        try:
            return list(self._call("get_children", "get_children", path))  # type: ignore[arg-type]
        except NoNodeError:
            return None

    def exists(self, path: str) -> bool:
        return self._call("exists", "exists", path) is not None

    def create(self, path: str, data: bytes | None = None, *, ephemeral: bool = False, makepath: bool = True) -> None:
        """Create a node; missing parents are created as persistent nodes with null data. Raises NodeExistsError.

        Null, not empty: zkclient's `createPersistent(path, true)`, which Kafka 0.8.2 uses for every parent,
        writes null data, and a whole-tree comparison with a Scala group must come out equal. kazoo's own
        `makepath` would write b"" parents, so parents are made here.
        """
        try:
            self._call("create", "create", path, data, None, ephemeral, False, False)
        except NoNodeError:
            if not makepath:
                raise
            parent = path.rsplit("/", 1)[0]
            if parent:
                self.ensure_path(parent)
            self._call("create", "create", path, data, None, ephemeral, False, False)

    def ensure_path(self, path: str) -> None:
        """Create `path` and its missing parents, all persistent with null data; existing nodes are fine.

        Like zkclient's `createPersistent(path, true)`: try the create first (one request when it exists)."""
        try:
            self.create(path, None, makepath=True)
        except NodeExistsError:
            pass

    def set(self, path: str, data: bytes) -> None:
        """Set data without a version check; create the node (with parents) if it is missing."""
        try:
            self._call("set_data", "set", path, data, -1)
        except NoNodeError:
            try:
                self.create(path, data)
            except NodeExistsError:
                self._call("set_data", "set", path, data, -1)

    def delete(self, path: str, *, recursive: bool = False) -> bool:
        """Delete a node; a missing node is fine. Returns True if this call deleted it."""
        if recursive:
            for child in self.get_children(path) or []:
                self.delete(f"{path.rstrip('/')}/{child}", recursive=True)
        try:
            self._call("delete", "delete", path, -1)
            return True
        except NoNodeError:
            return False

    def ephemeral_owner(self, path: str) -> int | None:
        found = self.get(path)
        return None if found is None else found[1].ephemeralOwner  # type: ignore[attr-defined]

    def create_ephemeral_expect_conflict(self, path: str, data: bytes) -> tuple[bool, bytes | None]:
        """Create an ephemeral node. Returns (True, data) when we hold it afterwards, else (False, the current
        node's data, or None if it vanished before it could be read).

        Kafka's rule: an existing node with the same data counts as ours (created during a connection loss).
        Our addition (the KAFKA-1387 fix): the same data under *another* session is a conflict, because that
        node dies with the other session; so equal data counts only if the node's ephemeral owner is us.
        """
        try:
            self.create(path, data, ephemeral=True)
            return True, data
        except NodeExistsError:
            found = self.get(path)
            if found is None:
                return False, None  # vanished between create and read: the owner is leaving; retry later
            existing, stat = found
            return existing == data and stat.ephemeralOwner == self.session_id, existing  # type: ignore[attr-defined]

    # --- watches -----------------------------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[[list[str]], None], *, initial: bool = True) -> WatchHandle:
        """Call `callback(children)` on every change (and now, if `initial`); re-armed after reconnects.

        The path is created if missing. `initial=False` gives zkclient's subscribeChildChanges semantics."""
        handle = WatchHandle()
        first = [True]

        def on_change(children: list[str]) -> bool | None:
            if handle.stopped:
                return False
            was_first = first[0]
            first[0] = False
            self._count("get_children")
            if not was_first:
                self._count("watch:children")
            elif not initial:
                return None
            try:
                callback(list(children))
            except Exception:
                log.exception("%s: children watch callback for %s failed", self.log_id, path)
            return None

        self.ensure_path(path)
        ChildrenWatch(self._kazoo, path, on_change)
        return handle

    def watch_data(self, path: str, callback: Callable[[bytes | None], None], *, initial: bool = True) -> WatchHandle:
        """Call `callback(data or None)` on every change/creation/deletion of the node (and now, if `initial`)."""
        handle = WatchHandle()
        first = [True]

        def on_change(data: bytes | None, _stat: object) -> bool | None:
            if handle.stopped:
                return False
            was_first = first[0]
            first[0] = False
            self._count("get_data")
            if not was_first:
                self._count("watch:data")
            elif not initial:
                return None
            try:
                callback(data)
            except Exception:
                log.exception("%s: data watch callback for %s failed", self.log_id, path)
            return None

        DataWatch(self._kazoo, path, on_change)
        return handle
