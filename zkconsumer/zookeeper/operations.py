"""The ZooKeeper operations this project uses, written once over six primitive requests.

`ZkClient` (kazoo, a real server) and `MemoryZkClient` (the in-memory server) differ only in how one request
reaches a server and how a watch recipe is installed; everything built from requests (null-data parents,
create-or-set, recursive delete, the owner claim with its KAFKA-1387 rule) and the counting around watch
callbacks lives here, so that both count exactly the same operations for the same calls.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, Literal, Protocol

from kazoo.exceptions import NodeExistsError, NoNodeError

log = logging.getLogger(__name__)

# The six requests a subclass's `_request` sends: ZooKeeper's getData, getChildren, exists, create, setData, delete.
ZkOp = Literal["get", "get_children", "exists", "create", "set", "delete"]


class ZnodeStat(Protocol):
    """A node's stat as a read returns it: kazoo's `ZnodeStat`, or `MemoryStat` (memory_nodes.py), which has the same
    fields in the same order."""

    @property
    def czxid(self) -> int: ...

    @property
    def mzxid(self) -> int: ...

    @property
    def ctime(self) -> int: ...

    @property
    def mtime(self) -> int: ...

    @property
    def version(self) -> int: ...

    @property
    def cversion(self) -> int: ...

    @property
    def aversion(self) -> int: ...

    @property
    def ephemeralOwner(self) -> int: ...

    @property
    def dataLength(self) -> int: ...

    @property
    def numChildren(self) -> int: ...

    @property
    def pzxid(self) -> int: ...


class WatchHandle:
    """Stops a children/data watch: the next notification returns False to the recipe and the watch ends."""

    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


class ZkOperations:
    """Subclasses set `log_id` and implement `_request` (one bounded request: get, get_children, exists,
    create, set, delete) and the two recipe installers."""

    log_id: str

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._count_lock = threading.Lock()

    # --- what a subclass provides ----------------------------------------------------------------------

    def _request(self, kind: str, op: ZkOp, path: str, *, data: bytes | None = None, ephemeral: bool = False) -> Any:
        """Send one request (counted as `kind`), retrying while disconnected up to the request timeout."""
        raise NotImplementedError

    def _install_children_watch(self, path: str, on_change: Callable[[list[str]], bool | None]) -> None:
        raise NotImplementedError

    def _install_data_watch(self, path: str, on_change: Callable[[bytes | None, object], bool | None]) -> None:
        raise NotImplementedError

    # --- counting --------------------------------------------------------------------------------------

    def _count(self, kind: str, n: int = 1) -> None:
        with self._count_lock:
            self.counts[kind] += n

    def op_counts(self) -> dict[str, int]:
        with self._count_lock:
            return dict(self.counts)

    # --- reads -----------------------------------------------------------------------------------------

    def get(self, path: str) -> tuple[bytes | None, ZnodeStat] | None:
        """(data, stat), or None if the node does not exist (data is None for a node with null data)."""
        try:
            found: tuple[bytes | None, ZnodeStat] = self._request("get_data", "get", path)
        except NoNodeError:
            return None
        return found

    def get_many(self, paths: list[str]) -> list[tuple[bytes | None, ZnodeStat] | None]:
        """`get` of every path, in order: the same requests as one `get` after another. A client that can have
        several requests in flight (`ZkClient`) sends them all before waiting for the first answer."""
        return [self.get(path) for path in paths]

    def get_children(self, path: str) -> list[str] | None:
        """Children names, or None if the node does not exist."""
        try:
            return list(self._request("get_children", "get_children", path))
        except NoNodeError:
            return None

    def exists(self, path: str) -> bool:
        return self._request("exists", "exists", path) is not None

    def ephemeral_owner(self, path: str) -> int | None:
        found = self.get(path)
        return None if found is None else found[1].ephemeralOwner

    # --- writes ----------------------------------------------------------------------------------------

    def create(self, path: str, data: bytes | None = None, *, ephemeral: bool = False, makepath: bool = True) -> None:
        """Create a node; missing parents are created as persistent nodes with null data. Raises NodeExistsError.

        Null, not empty: zkclient's `createPersistent(path, true)`, which Kafka 0.8.2 uses for every parent,
        writes null data, and a whole-tree comparison with a Scala group must come out equal. kazoo's own
        `makepath` would write b"" parents, so parents are made here.
        """
        try:
            self._request("create", "create", path, data=data, ephemeral=ephemeral)
        except NoNodeError:
            if not makepath:
                raise
            parent = path.rsplit("/", 1)[0]
            if parent:
                self.ensure_path(parent)
            self._request("create", "create", path, data=data, ephemeral=ephemeral)

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
            self._request("set_data", "set", path, data=data)
        except NoNodeError:
            try:
                self.create(path, data)
            except NodeExistsError:
                self._request("set_data", "set", path, data=data)

    def delete(self, path: str, *, recursive: bool = False) -> bool:
        """Delete a node; a missing node is fine. Returns True if this call deleted it."""
        if recursive:
            for child in self.get_children(path) or []:
                self.delete(f"{path.rstrip('/')}/{child}", recursive=True)
        try:
            self._request("delete", "delete", path)
            return True
        except NoNodeError:
            return False

    def delete_many(self, paths: list[str]) -> None:
        """`delete` of each (missing nodes are fine); `ZkClient` sends them as one pipelined batch."""
        for path in paths:
            self.delete(path)

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
            return existing == data and stat.ephemeralOwner == self.session_id, existing

    @property
    def session_id(self) -> int | None:
        raise NotImplementedError

    # --- watches ---------------------------------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[[list[str]], None], *, initial: bool = True,
                       create_missing: bool = True) -> WatchHandle:
        """Call `callback(children)` on every change (and now, if `initial`); re-armed after reconnects.

        The path is created if missing. `initial=False` gives zkclient's subscribeChildChanges semantics.
        `create_missing=False` is for read-only observers (`zkconsumer watch`): nothing is created, and on a
        missing path (or once the node is deleted) the watch ends without calling `callback`."""
        handle = WatchHandle()
        counted = self._counting(handle, "children", path, lambda children, *_: callback(list(children)), initial)
        if create_missing:
            self.ensure_path(path)
        self._install_children_watch(path, counted)
        return handle

    def watch_data(self, path: str, callback: Callable[[bytes | None], None], *, initial: bool = True) -> WatchHandle:
        """Call `callback(data or None)` on every change/creation/deletion of the node (and now, if `initial`)."""
        handle = WatchHandle()
        self._install_data_watch(path, self._counting(handle, "data", path, lambda data, *_: callback(data), initial))
        return handle

    def _counting(self, handle: WatchHandle, what: str, path: str, callback: Callable[..., None],
                  initial: bool) -> Callable[..., bool | None]:
        """Wrap a recipe callback: the recipe's read is one request, and every call but the first follows a
        notification; returning False ends the recipe once the handle is stopped."""
        first = [True]
        read_kind = "get_children" if what == "children" else "get_data"

        def on_change(*args: Any) -> bool | None:
            if handle.stopped:
                return False
            was_first = first[0]
            first[0] = False
            self._count(read_kind)
            if not was_first:
                self._count(f"watch:{what}")
            elif not initial:
                return None
            try:
                callback(*args)
            except Exception:
                log.exception("%s: %s watch callback for %s failed", self.log_id, what, path)
            return None

        return on_change
