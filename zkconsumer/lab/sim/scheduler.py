"""A discrete-event scheduler that runs real blocking code under a virtual clock.

Every simulated activity that may block (a member's caller thread, its rebalance watcher, its ZooKeeper event
thread) is a `Process`: a greenlet (a coroutine with its own C stack slice, from the `greenlet` package) that runs
only while it holds the *baton*. The scheduler switches to one process at a time, in virtual-time order, and the
process switches back only when it blocks in virtual time (`sleep_until`, `block`) or ends. So exactly one process
runs at any moment, virtual time advances only between steps, and a run is a deterministic function of its inputs:
there is no wall-clock wait and no OS scheduling decision anywhere in the outcome.

Processes were OS threads handing a lock back and forth until the analysis's predictions showed what that costs:
each hand-over is two GIL transfers and two futex wakes, most of a large group's simulated time (docs/simulation.md,
"The scheduler"). A greenlet switch is a stack copy on the one thread that runs the simulation. The real code needs
no change for it: everything it blocks on goes through the virtual primitives below (the `sync=` seam,
virtual_sync.py), and what it keeps per thread is in context variables, which greenlets keep per greenlet.

Time is an integer number of nanoseconds, so sums of latencies are exact and associative (the identical-view
shortcut adds up a whole batch of reads at once and must land on the very nanosecond that one-by-one execution
reaches). Events at the same time run in the order they were scheduled.

A real lock held across a virtual wait would deadlock the simulation's one thread (the next process to take it
waits for a holder that cannot run): the product's locks on those paths come from the `sync=` seam.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

from greenlet import getcurrent, greenlet

MS = 1_000_000
S = 1_000_000_000


class SimulationError(RuntimeError):
    """The simulation itself failed (a process raised, or a virtual primitive was misused)."""


class Terminated(BaseException):
    """Raised at the suspension point of a process the scheduler is tearing down; not an `Exception`, so the real
    code's `except Exception` handlers let it through."""


class Parked(BaseException):
    """Ends a process whose loop has nothing to do; `condition` is what it waits on (virtual_sync.py)."""

    def __init__(self, condition: object = None) -> None:
        super().__init__()
        self.condition = condition


class Process:
    """One simulated thread (created by `Scheduler.spawn`), run by a greenlet made at its first resume."""

    __slots__ = ("_terminating", "_token", "alive", "glet", "name", "on_exit", "sched", "target")

    def __init__(self, sched: Scheduler, name: str, target: Callable[[], Any]) -> None:
        self.sched = sched
        self.name = name
        self.target = target
        self.alive = True
        self.on_exit: list[Callable[[], None]] = []
        self._token = 0  # a resume entry in the heap is valid only if it carries the current token
        self._terminating = False
        self.glet: greenlet | None = None

    def suspend(self) -> None:
        """Give the baton back and wait for the next resume (called in this process's own greenlet)."""
        self.sched._home.switch()
        if self._terminating:
            raise Terminated

    def _body(self) -> None:
        sched = self.sched
        try:
            if not self._terminating:
                self.target()
        except (Terminated, Parked):
            pass
        except BaseException as exc:
            sched.failure = exc
        finally:
            self.alive = False
            sched._alive.pop(self, None)
            for callback in self.on_exit:
                callback()
        # returning switches to the parent: the scheduler's greenlet that resumed us

    def __repr__(self) -> str:
        return f"Process({self.name!r}, alive={self.alive})"


class Scheduler:
    def __init__(self) -> None:
        self.now = 0
        self.events = 0
        self.resumes = 0  # events that passed the baton to a process (the expensive kind)
        self.failure: BaseException | None = None
        self.current: Process | None = None
        self._home: Any = None  # the greenlet running the event loop, which every process switches back to
        self._heap: list[tuple[int, int, Callable[[], None] | None, Process | None, int]] = []
        self._seq = itertools.count()
        self._alive: dict[Process, None] = {}

    # --- scheduling ----------------------------------------------------------------------------------

    def call_at(self, when: int, fn: Callable[[], None]) -> None:
        """Run `fn` on the scheduler's greenlet at `when` (never earlier than now). It must not block."""
        heapq.heappush(self._heap, (max(when, self.now), next(self._seq), fn, None, 0))

    def call_after(self, delay: int, fn: Callable[[], None]) -> None:
        self.call_at(self.now + delay, fn)

    def spawn(self, name: str, target: Callable[[], Any], at: int | None = None) -> Process:
        process = Process(self, name, target)
        self._alive[process] = None
        self._resume_at(process, self.now if at is None else at)
        return process

    def _resume_at(self, process: Process, when: int) -> None:
        process._token += 1  # any earlier resume of this process is now stale
        heapq.heappush(self._heap, (max(when, self.now), next(self._seq), None, process, process._token))

    def wake(self, process: Process) -> None:
        """Resume a blocked (or sleeping) process now, replacing whatever resume it was waiting for."""
        if process.alive:
            self._resume_at(process, self.now)

    # --- called by processes -------------------------------------------------------------------------

    def running(self) -> Process | None:
        """The process holding the baton, if the caller is that process's greenlet (None on the scheduler's)."""
        current = self.current
        if current is not None and current.glet is getcurrent():
            return current
        return None

    def _me(self) -> Process:
        process = self.running()
        if process is None:
            raise SimulationError("a virtual wait outside a simulated process")
        return process

    def sleep_until(self, when: int) -> None:
        process = self._me()
        self._resume_at(process, when)
        process.suspend()

    def sleep(self, delay: int) -> None:
        self.sleep_until(self.now + delay)

    def block(self) -> None:
        """Suspend until somebody calls `wake` for this process."""
        process = self._me()
        process._token += 1
        process.suspend()

    # --- the loop ------------------------------------------------------------------------------------

    def run(self, until: int | None = None, max_events: int | None = None,
            stop: Callable[[], bool] | None = None) -> None:
        """Process events in time order until none is left, the next is after `until`, or `stop()` is true."""
        heap = self._heap
        while heap and not (stop is not None and stop()):
            when, _, fn, process, token = heap[0]
            if until is not None and when > until:
                break
            heapq.heappop(heap)
            if process is not None and (token != process._token or not process.alive):
                continue
            self.now = when
            self.events += 1
            if max_events is not None and self.events > max_events:
                raise SimulationError(f"more than {max_events} events: the simulation does not settle")
            if fn is not None:
                fn()
            else:
                self.resumes += 1
                self._resume(process)  # type: ignore[arg-type]
            if self.failure is not None:
                failure, self.failure = self.failure, None
                raise SimulationError(f"a simulated process failed: {failure!r}") from failure

    @property
    def idle(self) -> bool:
        return not self._heap

    def _resume(self, process: Process) -> None:
        if self.running() is not None:
            raise SimulationError("a simulated process tried to run the scheduler's loop")
        self._home = getcurrent()
        if process.glet is None:
            process.glet = greenlet(process._body, parent=self._home)
        self.current = process
        try:
            process.glet.switch()
        finally:
            self.current = None

    def live_processes(self) -> list[Process]:
        return list(self._alive)

    def terminate_all(self) -> None:
        """End every process still parked (a crashed member's, one waiting on a lock forever): each unwinds from
        its suspension point with `Terminated`, so its `finally` blocks run and nothing leaks into the next run."""
        for process in self.live_processes():
            process._terminating = True
            for _ in range(1000):  # a `finally` that waits again is resumed (and terminated) again
                if not process.alive:
                    break
                self._resume(process)
        self.failure = None
        self._heap.clear()


class VirtualEvent:
    """`threading.Event` in virtual time: `wait(timeout)` blocks the calling process, not the OS thread."""

    def __init__(self, sched: Scheduler) -> None:
        self._sched = sched
        self._flag = False
        self._waiters: list[Process] = []

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        self._flag = True
        waiters, self._waiters = self._waiters, []
        for process in waiters:
            self._sched.wake(process)

    def clear(self) -> None:
        self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        if self._flag:
            return True
        process = self._sched._me()
        self._waiters.append(process)
        try:
            if timeout is None:
                self._sched.block()
            else:
                self._sched.sleep(max(0, round(timeout * S)))
        finally:
            if process in self._waiters:
                self._waiters.remove(process)
        return self._flag


class VirtualLock:
    """A (re-entrant, if asked) lock whose waiters block in virtual time; ownership passes in FIFO order."""

    def __init__(self, sched: Scheduler, *, reentrant: bool = False) -> None:
        self._sched = sched
        self._reentrant = reentrant
        self._owner: Process | None = None
        self._count = 0
        self._waiters: deque[Process] = deque()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = self._sched.running()
        if self._count == 0:
            self._owner, self._count = me, 1
            return True
        if self._reentrant and self._owner is me:
            self._count += 1
            return True
        if not blocking:
            return False
        if me is None:
            raise SimulationError("the scheduler's thread would block on a virtual lock")
        self._waiters.append(me)
        self._sched.block()  # `release` hands us the lock before waking us
        return True

    def release(self) -> None:
        if self._count == 0:
            raise RuntimeError("release of an unlocked virtual lock")
        self._count -= 1
        if self._count == 0:
            self._owner = None
            if self._waiters:
                self._owner, self._count = self._waiters.popleft(), 1
                self._sched.wake(self._owner)

    def locked(self) -> bool:
        return self._count > 0

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
