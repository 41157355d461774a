"""The simulation's `sync=` primitives (virtual_sync.py): a thread that parks on its condition when idle runs
again at the next notify, in virtual time, as a real thread woken from its wait would; a dead member's threads
never run again; join waits in virtual time."""

from __future__ import annotations

from zkconsumer.lab.sim.scheduler import MS, Scheduler
from zkconsumer.lab.sim.virtual_sync import VirtualSync


class Worker:
    """The listener's watcher loop in miniature: wait for work or the stop flag, take the work, do it."""

    def __init__(self, sync: VirtualSync) -> None:
        self.sched = sync.sched
        self.cond = sync.condition()
        self.stop = sync.event()
        self.pending: list[str] = []
        self.done: list[tuple[str, int]] = []
        self.rounds = 0
        self.seen_as: list[object] = []
        self.sync = sync
        self.thread = sync.thread(self.loop, name="worker")

    def loop(self) -> None:
        while True:
            with self.cond:
                self.cond.wait_for(lambda: self.stop.is_set() or self.pending)
                if self.stop.is_set():
                    return
                work, self.pending = self.pending, []
            self.rounds += 1
            self.seen_as.append(self.sync.current_thread())
            for item in work:
                self.sched.sleep(MS)  # the work takes a millisecond of virtual time
                self.done.append((item, self.sched.now))

    def submit(self, item: str) -> None:
        with self.cond:
            self.pending.append(item)
            self.cond.notify_all()

    def shut(self) -> None:
        self.stop.set()
        with self.cond:
            self.cond.notify_all()


def _sync(sched: Scheduler, dead: list[bool]) -> VirtualSync:
    return VirtualSync(sched, sched.spawn, lambda: dead[0])


def test_a_parked_thread_runs_again_at_each_notify_and_join_waits_in_virtual_time() -> None:
    sched = Scheduler()
    try:
        worker = Worker(_sync(sched, [False]))
        worker.thread.start()
        assert not worker.thread.is_alive()  # nothing to do: no process waits
        sched.call_at(5 * MS, lambda: worker.submit("a"))
        sched.call_at(5 * MS + MS // 2, lambda: worker.submit("b"))  # while "a" is under way: taken next round
        sched.call_at(20 * MS, lambda: worker.submit("c"))
        joined: list[int] = []

        def stopper() -> None:
            worker.submit("d")
            worker.shut()  # before the worker runs: its round sees the stop flag first and leaves "d"
            worker.thread.join(10.0)
            joined.append(sched.now)

        sched.spawn("stopper", stopper, at=30 * MS)
        sched.run()
        assert worker.done == [("a", 6 * MS), ("b", 7 * MS), ("c", 21 * MS)]
        assert worker.rounds == 3 and all(seen is worker.thread for seen in worker.seen_as)
        assert not worker.thread.is_alive()
        assert joined == [30 * MS]  # the round that saw the flag returned at once, in no virtual time
        assert sched.idle and not sched.live_processes()
    finally:
        sched.terminate_all()


def test_a_notify_before_start_is_seen_at_start_and_a_dead_members_thread_never_runs() -> None:
    sched = Scheduler()
    dead = [False]
    try:
        early = Worker(_sync(sched, dead))
        early.submit("before start")
        sched.spawn("starter", early.thread.start, at=3 * MS)
        sched.run()
        assert early.done == [("before start", 4 * MS)]

        gone = Worker(_sync(sched, dead))
        gone.thread.start()
        dead[0] = True
        gone.submit("after death")
        sched.run()
        assert gone.done == [] and gone.rounds == 0 and not gone.thread.is_alive()
    finally:
        sched.terminate_all()
