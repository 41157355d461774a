"""`AutoCommitter` (zkconsumer/auto_commit.py): its thread commits every interval, first one interval after it
starts, skips a round while ZooKeeper is not connected, ends at once when asked (even in a long wait), and does not
commit once asked to stop while it waited for the rebalance lock; and through the connector over the in-memory
ZooKeeper, `auto.commit.enable` writes the consumed offsets from the named thread, which shutdown ends.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from helpers import wait_for

from zkconsumer.auto_commit import AutoCommitter
from zkconsumer.zookeeper import layout


class WatchedLock:
    """A lock that says when somebody is waiting for it."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.waiting = threading.Event()

    def __enter__(self) -> object:
        self.waiting.set()
        return self.lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.lock.__exit__(*exc)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self.lock.acquire(blocking, timeout)

    def release(self) -> None:
        self.lock.release()


def _threads_named(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


@pytest.fixture
def committer() -> Iterator[Callable[..., AutoCommitter]]:
    """Makes committers named `g_c`; each is stopped and joined after the test, even a failed one, so a thread
    left running cannot be counted by the next test."""
    made: list[AutoCommitter] = []

    def make(interval_ms: int, commit: Callable[[], object], *, lock=None, connected=lambda: True) -> AutoCommitter:
        made.append(AutoCommitter("g_c", interval_ms, commit, lock=lock or threading.RLock(), connected=connected))
        return made[-1]

    yield make
    for each in made:
        each.stop()
        each.join(5.0)


def test_it_commits_every_interval_from_its_named_thread_and_ends_when_stopped(committer):
    commits: list[tuple[float, str]] = []
    committer = committer(50, lambda: commits.append((time.monotonic(), threading.current_thread().name)))
    began = time.monotonic()
    committer.start()
    wait_for(lambda: len(commits) >= 3, timeout=10, message="three rounds")
    assert len(_threads_named("g_c-auto-commit")) == 1
    committer.stop()
    assert committer.join(5.0)
    assert not _threads_named("g_c-auto-commit")
    done = len(commits)
    times = [began] + [t for t, _ in commits]
    # Each round waits the whole interval (Event.wait's timeout is measured on the monotonic clock).
    assert all(later - earlier >= 0.049 for earlier, later in itertools.pairwise(times)), times
    assert {name for _, name in commits} == {"g_c-auto-commit"}
    assert len(commits) == done  # nothing after join


def test_stop_ends_it_at_once_even_in_a_long_interval(committer):
    commits: list[float] = []
    committer = committer(3_600_000, lambda: commits.append(time.monotonic()))
    committer.start()
    committer.stop()
    assert committer.join(5.0)
    assert commits == []


def test_a_round_while_disconnected_is_skipped_and_the_next_connected_one_commits(committer):
    connected = threading.Event()
    asked: list[bool] = []
    commits: list[float] = []

    def is_connected() -> bool:
        asked.append(connected.is_set())
        return connected.is_set()

    committer = committer(10, lambda: commits.append(time.monotonic()), connected=is_connected)
    committer.start()
    wait_for(lambda: len(asked) >= 3, timeout=10, message="three disconnected rounds")
    assert commits == []
    connected.set()
    wait_for(lambda: commits, timeout=10, message="a commit once connected")
    committer.stop()
    assert committer.join(5.0)


def test_asked_to_stop_while_it_waits_for_the_rebalance_lock_it_does_not_commit(committer):
    lock = WatchedLock()
    commits: list[float] = []
    committer = committer(10, lambda: commits.append(time.monotonic()), lock=lock)
    with lock.lock:  # what shutdown() does: it holds the rebalance lock while it makes the final commit
        committer.start()
        assert lock.waiting.wait(10), "the committer never came to the lock"
        committer.stop()
    assert committer.join(5.0)
    assert commits == []


def test_join_before_start_says_it_has_ended(committer):
    assert committer(10, lambda: None).join(0.1)


def test_the_connector_auto_commits_consumed_offsets_and_its_shutdown_ends_the_thread(memory_group):
    topic = memory_group.topic("t", 1)
    member = memory_group.member("g", "c", auto_commit_enable=True, auto_commit_interval_ms=50)
    assert len(_threads_named("g_c-auto-commit")) == 1
    member.create_message_streams({topic: 1})
    wait_for(member.owned_partitions, timeout=10, message="the partition owned")
    for info in member.ownership.infos():
        info.set_consumed_offset(7)

    def committed() -> bytes | None:
        found = memory_group.admin.get(layout.offset_path("g", topic, 0))
        return found[0] if found else None

    wait_for(lambda: committed() == b"7", timeout=10, message="the auto-commit thread writes the offset")
    member.shutdown()
    assert not _threads_named("g_c-auto-commit")


def test_without_auto_commit_the_connector_starts_no_such_thread(memory_group):
    memory_group.member("g", "n")
    assert not _threads_named("g_n-auto-commit")


def test_its_event_and_thread_come_from_its_sync():
    """The simulation's virtual primitives must reach it too (rebalance/sync.py): nothing from `threading`."""
    made: list[str] = []

    class Recording:
        def event(self):
            made.append("event")
            return threading.Event()

        def thread(self, target, name):
            made.append(f"thread {name}")
            return threading.Thread(target=target, name=name, daemon=True)

    AutoCommitter("g_c", 10, lambda: None, lock=threading.RLock(), connected=lambda: True,
                  sync=Recording())  # type: ignore[arg-type]
    assert sorted(made) == ["event", "thread g_c-auto-commit"]
