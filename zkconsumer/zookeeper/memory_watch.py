"""The client side of watching: an ordered callback queue (kazoo's event thread) and kazoo's two recipes.

`EventQueue` runs callbacks one at a time in the order queued, on a thread of its own or through a caller's
`dispatch`. `ChildrenWatch` and `DataWatch` re-implement kazoo's recipes of the same names over the in-memory
server, keeping what decides callbacks and counts: a notification makes the recipe re-read with a new watch and
call back; after a reconnect the recipe re-reads and calls back only if something changed. A recipe holds a
lock across its read, as kazoo's do; `sync=` (rebalance/sync.py) says where that lock comes from, so a
simulation's recipe waits for its read in virtual time instead of holding a real lock across it.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, TypeVar

from kazoo.exceptions import NoNodeError

from rebalance.sync import THREADING, SyncPrimitives
from zkconsumer.zookeeper.client import ZkClosedError, ZkUnavailableError
from zkconsumer.zookeeper.memory_nodes import NONE, MemoryStat, WatchEvent
from zkconsumer.zookeeper.memory_server import MemoryZooKeeper

log = logging.getLogger(__name__)

__all__ = ["ChildrenWatch", "DataWatch", "EventQueue", "RecipeHost"]

T = TypeVar("T")
_STOP = object()


class EventQueue:
    """Runs callbacks one at a time in the order queued: on a thread of its own, or through `dispatch`."""

    def __init__(self, thread_name: str, dispatch: Callable[[Callable[[], None]], None] | None) -> None:
        self.thread_name = thread_name
        self._dispatch = dispatch
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._pending: deque[Callable[[], None]] = deque()
        self._flush_lock = threading.Lock()
        # per thread (and per greenlet: the simulation runs its threads as greenlets, zkconsumer/lab/sim/scheduler.py)
        self._holding: contextvars.ContextVar[bool] = contextvars.ContextVar(f"{thread_name}-holding", default=False)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._dispatch is None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
            self._thread.start()

    def put(self, fn: Callable[[], None]) -> None:
        if self._dispatch is None:
            self._queue.put(fn)
        else:
            self._pending.append(fn)

    def flush(self) -> None:
        """Hand queued callbacks to `dispatch`. Not re-entrant per thread (a callback's own calls queue behind
        it), and a thread that finds another one flushing leaves the queue to it, so there is no lock cycle."""
        if self._dispatch is None or self._holding.get():
            return
        while self._pending:
            if not self._flush_lock.acquire(blocking=False):
                return
            self._holding.set(True)
            try:
                while self._pending:
                    self._dispatch(_logged(self._pending.popleft()))
            finally:
                self._holding.set(False)
                self._flush_lock.release()

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Defer delivery on this thread until the block ends (a recipe's first run happens on the caller's
        thread, under the recipe's lock, and must not be re-entered by its own notifications)."""
        outer = self._holding.get()
        self._holding.set(True)
        try:
            yield
        finally:
            self._holding.set(outer)
        if not outer:
            self.flush()

    def on_event_thread(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def wait_idle(self, timeout: float) -> bool:
        if self._dispatch is not None:
            self.flush()
            return not self._pending
        if self._thread is None or not self._thread.is_alive():
            return True
        if self.on_event_thread():
            raise RuntimeError("wait_idle() on the event thread would wait for itself")
        done = threading.Event()
        self._queue.put(done.set)
        return done.wait(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        if self._thread is None:
            return
        self._queue.put(_STOP)
        if not self.on_event_thread():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("%s did not finish its callbacks within %.0f s", self.thread_name, timeout)

    def _run(self) -> None:
        while True:
            fn = self._queue.get()
            if fn is _STOP:
                return
            _logged(fn)()  # type: ignore[arg-type]


def _logged(fn: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except Exception:
            log.exception("in-memory ZooKeeper callback failed")
    return run


class RecipeHost(Protocol):
    """What the recipes need from `MemoryZkClient` (its private side)."""

    server: MemoryZooKeeper

    def _recipe_read(self, request: Callable[[int], T], *, wait: bool) -> T: ...

    def _post(self, fn: Callable[[], None]) -> None: ...

    def _add_listener(self, listener: Callable[[str], None]) -> None: ...

    def _remove_listener(self, listener: Callable[[str], None]) -> None: ...

    def _holding(self) -> AbstractContextManager[None]: ...


class ChildrenWatch:
    """kazoo's ChildrenWatch: re-read with a watch on every notification and call back; after a reconnect,
    re-read and call back only if the children differ; stop for good when the node is deleted."""

    def __init__(self, client: RecipeHost, path: str, func: Callable[[list[str]], bool | None], *,
                 sync: SyncPrimitives = THREADING) -> None:
        self._client = client
        self._path = path
        self._func = func
        self._stopped = False
        self._watch_established = False
        self._prior: list[str] | None = None
        self._run_lock = sync.lock()  # held across the recipe's read, as kazoo's recipe holds its own
        client._add_listener(self._session_watcher)
        try:
            with client._holding():
                self._get_children(initial=True)
        except ZkUnavailableError:
            self._stop()
            raise

    def _get_children(self, *, initial: bool = False) -> None:
        with self._run_lock:
            if self._stopped:
                return
            server = self._client.server
            try:
                children = self._client._recipe_read(
                    lambda sid: server.get_children(sid, self._path, self._watcher), wait=initial)
            except NoNodeError:
                self._stopped = True
                return
            except ZkClosedError:
                return
            except ZkUnavailableError:
                if initial:
                    raise
                return
            if not self._watch_established:
                self._watch_established = True
                if self._prior is not None and self._prior == children:
                    return
            self._prior = children
            if self._func(children) is False:
                self._stop()

    def _stop(self) -> None:
        self._stopped = True
        self._client._remove_listener(self._session_watcher)

    def _watcher(self, event: WatchEvent) -> None:
        if event.type != NONE:
            self._get_children()

    def _session_watcher(self, state: str) -> None:
        if state in ("suspended", "lost"):
            self._watch_established = False
        elif state == "connected" and not self._watch_established and not self._stopped:
            self._client._post(self._get_children)


class DataWatch:
    """kazoo's DataWatch: works on missing nodes (an exists watch waits for the creation); calls back when the
    node's mzxid (or existence) changed since the last callback; re-reads on every reconnect."""

    def __init__(self, client: RecipeHost, path: str, func: Callable[[bytes | None, object], bool | None], *,
                 sync: SyncPrimitives = THREADING) -> None:
        self._client = client
        self._path = path
        self._func = func
        self._stopped = False
        self._version: int | None = None
        self._ever_called = False
        self._run_lock = sync.lock()  # held across the recipe's read, as kazoo's recipe holds its own
        client._add_listener(self._session_watcher)
        try:
            with client._holding():
                self._get_data(initial=True)
        except ZkUnavailableError:
            self._stop()
            raise

    def _get_data(self, *, initial: bool = False) -> None:
        with self._run_lock:
            if self._stopped:
                return
            server, path = self._client.server, self._path
            initial_version = self._version
            data: bytes | None
            stat: MemoryStat | None
            try:
                try:
                    data, stat = self._client._recipe_read(
                        lambda sid: server.get_data(sid, path, self._watcher), wait=initial)
                except NoNodeError:
                    data = None
                    stat = self._client._recipe_read(lambda sid: server.exists(sid, path, self._watcher), wait=initial)
                    if stat is not None:  # created between the two reads: read it again
                        self._client._post(self._get_data)
                        return
            except ZkClosedError:
                return
            except ZkUnavailableError:
                if initial:
                    raise
                return
            self._version = None if stat is None else stat.mzxid
            if initial_version != self._version or not self._ever_called:
                self._ever_called = True
                if self._func(data, stat) is False:
                    self._stop()

    def _stop(self) -> None:
        self._stopped = True
        self._client._remove_listener(self._session_watcher)

    def _watcher(self, _event: WatchEvent) -> None:
        self._get_data()

    def _session_watcher(self, state: str) -> None:
        if state == "connected":
            self._client._post(self._get_data)
