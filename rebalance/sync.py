"""Where the consumer's blocking primitives come from: one seam, like the listener's `clock=`.

The connector, the rebalance listener and the in-memory watch recipes take their locks, events, condition and
threads from a `SyncPrimitives` (keyword `sync=`). The default, `THREADING`, is the standard library, so a
consumer built without the argument behaves exactly as one that called `threading` itself. The scale simulation
passes its own (zkconsumer/lab/sim/virtual_sync.py), whose primitives block in virtual time: a real lock held
across a virtual wait would stall it (docs/simulation.md, "How the product is driven").
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Protocol


class Lock(Protocol):
    def __enter__(self) -> object: ...

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None, /) -> None: ...

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool: ...

    def release(self) -> None: ...


class Event(Protocol):
    def is_set(self) -> bool: ...

    def set(self) -> None: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class Condition(Protocol):
    def __enter__(self) -> object: ...

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None, /) -> None: ...

    def wait(self, timeout: float | None = None) -> bool: ...

    def wait_for(self, predicate: Callable[[], object], timeout: float | None = None) -> object: ...

    def notify_all(self) -> None: ...


class Thread(Protocol):
    def start(self) -> None: ...

    def join(self, timeout: float | None = None) -> None: ...

    def is_alive(self) -> bool: ...


class SyncPrimitives(Protocol):
    """A factory of the primitives above. A thread it makes is a daemon: the owner stops it through its own flag
    (an event or a condition the thread waits on) and joins it with a timeout."""

    def lock(self) -> Lock: ...

    def rlock(self) -> Lock: ...

    def event(self) -> Event: ...

    def condition(self) -> Condition: ...

    def thread(self, target: Callable[[], object], name: str) -> Thread: ...

    def current_thread(self) -> object:
        """The caller's thread, as `thread()` returned it (so a thread can tell it would join itself)."""
        ...


class _Threading:
    """The standard library's primitives."""

    def lock(self) -> Lock:
        return threading.Lock()

    def rlock(self) -> Lock:
        return threading.RLock()

    def event(self) -> Event:
        return threading.Event()

    def condition(self) -> Condition:
        return threading.Condition()

    def thread(self, target: Callable[[], object], name: str) -> Thread:
        return threading.Thread(target=target, name=name, daemon=True)

    def current_thread(self) -> object:
        return threading.current_thread()


THREADING: SyncPrimitives = _Threading()

__all__ = ["THREADING", "Condition", "Event", "Lock", "SyncPrimitives", "Thread"]
