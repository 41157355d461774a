"""The simulation's `SyncPrimitives` (rebalance/sync.py): a member's locks, events, condition and threads, all
blocking in virtual time (scheduler.py). The connector, its listener and the watch recipes take them through
their `sync=` argument, so the simulation runs the product's code as it is, with no attribute replaced.

One `VirtualSync` per simulated member: its threads are processes of that member (`spawn`), so a crash ends them
with the member's other processes, and a crashed member's threads never start again.

A thread that waits on a condition only when it has nothing to do (the listener's watcher: `wait_for` a
trigger, a task, a new session or the shutdown flag) would hold an idle OS thread per member. Here it *parks*
instead: `ParkingCondition.wait_for` with a false predicate ends the thread's process, and the condition's next
notify starts a fresh process of the same thread, which enters its target from the top and finds the flags set:
the same steps as a thread woken from its wait. So a target must take its condition at the top of each round and
keep nothing across a wait in local variables, as the listener's `_watch` does. A member's threads are taken to
be of that kind (the only one a simulated member starts is the watcher; its auto-commit is off), so a thread
started before anything was notified has nothing to do yet: it waits, without a process, for the first notify
of one of its member's conditions (a notify before its start counts: its first look at the flags would find
them set). Starting it at once would give the same counts and times, with one more scheduler event per start.
"""

from __future__ import annotations

from collections.abc import Callable

from zkconsumer.lab.sim.scheduler import Parked, Process, Scheduler, VirtualEvent, VirtualLock


class VirtualSync:
    """`SyncPrimitives` for one member. `spawn(name, target)` starts a process of that member; `halted()` is true
    once the member is dead (kill -9): nothing of it runs again."""

    def __init__(self, sched: Scheduler, spawn: Callable[[str, Callable[[], object]], Process],
                 halted: Callable[[], bool]) -> None:
        self.sched = sched
        self._spawn = spawn
        self._halted = halted
        self._threads: list[VirtualThread] = []
        self._notified = False  # some condition of this member was notified (a thread not yet run would see it)

    def lock(self) -> VirtualLock:
        return VirtualLock(self.sched)

    def rlock(self) -> VirtualLock:
        return VirtualLock(self.sched, reentrant=True)

    def event(self) -> VirtualEvent:
        return VirtualEvent(self.sched)

    def condition(self) -> ParkingCondition:
        return ParkingCondition(self)

    def thread(self, target: Callable[[], object], name: str) -> VirtualThread:
        thread = VirtualThread(self, target, name)
        self._threads.append(thread)
        return thread

    def current_thread(self) -> object:
        running = self.sched.running()
        for thread in self._threads:
            if running is not None and thread.process is running:
                return thread
        return running

    def _notify(self, condition: ParkingCondition) -> None:
        self._notified = True
        for thread in condition.take_parked() + [t for t in self._threads if t.waiting_first_run]:
            thread.run()


class VirtualThread:
    """A thread of a simulated member: `start`, `join` and `is_alive` as `threading.Thread`'s, in virtual time.
    Each run of its target is a process; a run that parks on a `ParkingCondition` ends, and the condition's next
    notify runs the target again (see the module docstring)."""

    def __init__(self, sync: VirtualSync, target: Callable[[], object], name: str) -> None:
        self.sync = sync
        self.name = name
        self._target = target
        self._started = False
        self._ever_ran = False
        self.process: Process | None = None
        self._done: VirtualEvent | None = None

    @property
    def waiting_first_run(self) -> bool:
        return self._started and not self._ever_ran

    def start(self) -> None:
        if self._started:
            raise RuntimeError("threads can only be started once")
        self._started = True
        if self.sync._notified:
            self.run()

    def run(self) -> None:
        """Run the target in a new process, unless the member is dead or a run is under way."""
        if self.sync._halted() or self.is_alive():
            return
        self._ever_ran = True
        done = self._done = VirtualEvent(self.sync.sched)
        self.process = self.sync._spawn(self.name, self._body)
        self.process.on_exit.append(done.set)

    def _body(self) -> None:
        try:
            self._target()
        except Parked as parked:
            if isinstance(parked.condition, ParkingCondition):
                parked.condition.park(self)

    def is_alive(self) -> bool:
        return self.process is not None and self.process.alive

    def join(self, timeout: float | None = None) -> None:
        if self.is_alive() and self._done is not None:
            self._done.wait(timeout)


class ParkingCondition:
    """The condition a `VirtualSync` gives: `wait`/`wait_for` park the calling thread (its process ends) and
    `notify_all` runs the parked threads again. The baton already gives mutual exclusion, so entering the
    condition takes nothing."""

    def __init__(self, sync: VirtualSync) -> None:
        self._sync = sync
        self._parked: list[VirtualThread] = []

    def __enter__(self) -> ParkingCondition:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def wait(self, timeout: float | None = None) -> bool:
        raise Parked(self)

    def wait_for(self, predicate: Callable[[], object], timeout: float | None = None) -> object:
        """`threading.Condition.wait_for`: true at once, or park until a notify runs the thread again."""
        result = predicate()
        if not result:
            raise Parked(self)
        return result

    def park(self, thread: VirtualThread) -> None:
        self._parked.append(thread)

    def take_parked(self) -> list[VirtualThread]:
        parked, self._parked = self._parked, []
        return parked

    def notify_all(self) -> None:
        self._sync._notify(self)

    notify = notify_all


__all__ = ["ParkingCondition", "VirtualSync", "VirtualThread"]
