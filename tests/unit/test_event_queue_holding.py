"""The watch recipes' event queue defers delivery only for the thread (or simulated thread) that holds it:
`holding()` marks the caller's context, so another greenlet of the same OS thread (the scale simulation's
processes, zkconsumer/lab/sim/scheduler.py) still delivers what it queues."""

from __future__ import annotations

from greenlet import getcurrent, greenlet

from zkconsumer.zookeeper.memory_watch import EventQueue


def _queue() -> EventQueue:
    return EventQueue("test-events", dispatch=lambda fn: fn())


def test_the_holder_defers_its_own_notifications_until_it_lets_go() -> None:
    delivered: list[str] = []
    queue = _queue()
    with queue.holding():
        queue.put(lambda: delivered.append("first"))
        queue.flush()
        assert delivered == []
    assert delivered == ["first"]


def test_another_greenlet_of_the_same_thread_delivers_while_one_holds() -> None:
    delivered: list[str] = []
    queue = _queue()
    home = getcurrent()
    seen_while_held: list[list[str]] = []

    def holder() -> None:
        with queue.holding():
            home.switch()  # parked inside `holding`, as a simulated thread waiting in virtual time is
            seen_while_held.append(list(delivered))

    def other() -> None:
        queue.put(lambda: delivered.append("other's"))
        queue.flush()

    held = greenlet(holder)
    held.switch()
    greenlet(other).switch()
    assert delivered == ["other's"]  # a per-thread flag would have deferred it behind the holder
    held.switch()
    assert seen_while_held == [["other's"]] and held.dead
