"""`WildcardStreamsHandler` (zkconsumer/wildcard.py) over the in-memory ZooKeeper: the topic watch records and hands
the work over, the apply binds a newly allowed topic to every shared stream and asks for a rebalance, a topic the
filter does not allow changes nothing; and through the connector, a new matching topic is owned and bound while a
non-matching one is not (the apply and its trigger run on the watcher thread).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from conftest import BROKER
from helpers import wait_for

from fetcher_manager.stream import ChunkQueue, KafkaStream
from rebalance.events import EventKind, MemberEvent
from rebalance.subscription import Whitelist
from zkconsumer.wildcard import WildcardStreamsHandler
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.memory import MemoryZkClient, MemoryZooKeeper


class FakeWatcher:
    """The listener's watcher thread, run by hand: submitted tasks wait in `tasks` until the test runs them."""

    def __init__(self) -> None:
        self.started = False
        self.tasks: list[Callable[[], None]] = []
        self.triggers: list[str] = []
        self._lock = threading.Lock()

    def submit(self, task: Callable[[], None]) -> None:
        with self._lock:
            self.tasks.append(task)

    def trigger(self, reason: str = "") -> None:
        self.triggers.append(reason)

    def run_tasks(self) -> int:
        with self._lock:
            tasks, self.tasks = self.tasks, []
        for task in tasks:
            task()
        return len(tasks)


class Zk:
    def __init__(self) -> None:
        self.server = MemoryZooKeeper()
        self.admin = MemoryZkClient(self.server, log_id="admin").start()
        self.admin.create(layout.broker_path(1), BROKER, ephemeral=True)
        self.client = MemoryZkClient(self.server, log_id="w", request_timeout_s=2.0).start()

    def topic(self, name: str, partitions: int = 1) -> str:
        self.admin.create(layout.topic_path(name), codecs.encode_topic({p: [1] for p in range(partitions)}))
        return name


@pytest.fixture
def zk() -> Iterator[Zk]:
    zk = Zk()
    yield zk
    zk.client.close()
    zk.admin.close()


def _handler(zk: Zk, watcher: FakeWatcher, bound: list[tuple[str, int]], watched: list[set[str]],
             closing: threading.Event, streams: int = 2) -> WildcardStreamsHandler:
    pairs = []
    for _ in range(streams):
        queue = ChunkQueue(10)
        pairs.append((queue, KafkaStream(queue, -1, "c")))
    return WildcardStreamsHandler(
        "g_w", Whitelist("clicks\\..*"), pairs, zk=zk.client, watcher=watcher,
        bind=lambda topic, i, _queue, _stream: bound.append((topic, i)), watch_topics=watched.append,
        closing=closing, exclude_internal_topics=True)


def test_a_new_matching_topic_is_bound_to_every_stream_and_a_non_matching_one_changes_nothing(zk):
    zk.topic("clicks.a")
    watcher, bound, watched, closing = FakeWatcher(), [], [], threading.Event()
    handler = _handler(zk, watcher, bound, watched, closing)

    assert handler.start() == {"clicks.a"}
    # The first apply binds without asking for a rebalance: the connector's first rebalance follows it.
    assert bound == [("clicks.a", 0), ("clicks.a", 1)]
    assert watcher.triggers == [] and watched == [] and watcher.tasks == []

    watcher.started = True
    zk.topic("views")
    wait_for(lambda: watcher.tasks, timeout=10, message="the change handed to the watcher thread")
    assert bound == [("clicks.a", 0), ("clicks.a", 1)]  # the watch callback only records and submits
    assert watcher.run_tasks()
    assert bound == [("clicks.a", 0), ("clicks.a", 1)] and watcher.triggers == [] and watched == []
    assert handler.topics == {"clicks.a"}

    zk.topic("clicks.b")
    wait_for(lambda: watcher.tasks, timeout=10, message="the change handed to the watcher thread")
    assert bound == [("clicks.a", 0), ("clicks.a", 1)]
    watcher.run_tasks()
    assert bound == [("clicks.a", 0), ("clicks.a", 1), ("clicks.b", 0), ("clicks.b", 1)]
    assert handler.topics == {"clicks.a", "clicks.b"}
    assert watched == [{"clicks.a", "clicks.b"}]
    assert watcher.triggers == ["wildcard topic set changed"]


def test_once_the_connector_closes_a_change_is_neither_submitted_nor_applied(zk):
    zk.topic("clicks.a")
    watcher, bound, watched, closing = FakeWatcher(), [], [], threading.Event()
    handler = _handler(zk, watcher, bound, watched, closing, streams=1)
    handler.start()
    watcher.started = True
    zk.topic("clicks.b")
    wait_for(lambda: watcher.tasks, timeout=10, message="the change handed to the watcher thread")
    closing.set()  # shutdown() began between the notification and the apply
    watcher.run_tasks()
    assert bound == [("clicks.a", 0)] and watcher.triggers == [] and handler.topics == {"clicks.a"}
    handler.stop()


def test_a_wildcard_member_owns_and_binds_a_new_matching_topic_and_ignores_another(memory_group):
    memory_group.topic("clicks.a", 2)
    member = memory_group.member("g", "w")
    triggers: list[tuple[MemberEvent, str]] = []
    member.add_event_listener(
        lambda e: triggers.append((e, threading.current_thread().name)) if e.kind == EventKind.TRIGGER else None)
    member.create_message_streams_by_filter(Whitelist("clicks\\..*"), 2)
    assert member.bindings.topics() == {"clicks.a"}

    memory_group.topic("views", 1)
    memory_group.topic("clicks.b", 1)
    wait_for(lambda: set(memory_group.owners("g")) == {("clicks.a", 0), ("clicks.a", 1), ("clicks.b", 0)},
             timeout=10, message="the new matching topic owned")
    assert member.bindings.topics() == {"clicks.a", "clicks.b"}
    assert {str(t) for topic, t, _ in member.bindings.bindings() if topic == "clicks.b"} == {"g_w-0", "g_w-1"}
    wildcard = [thread for event, thread in triggers if event.data["reason"] == "wildcard topic set changed"]
    assert wildcard and set(wildcard) == {"g_w_watcher_executor"}


def test_its_lock_and_event_come_from_its_sync(zk):
    """The simulation's virtual primitives must reach it too (rebalance/sync.py): nothing from `threading`."""
    made: list[str] = []

    class Recording:
        def lock(self):
            made.append("lock")
            return threading.Lock()

        def event(self):
            made.append("event")
            return threading.Event()

    WildcardStreamsHandler("g_w", Whitelist(".*"), [], zk=zk.client, watcher=FakeWatcher(), bind=lambda *_: None,
                           watch_topics=lambda _: None, closing=threading.Event(), exclude_internal_topics=True,
                           sync=Recording())  # type: ignore[arg-type]
    assert sorted(made) == ["event", "lock"]
