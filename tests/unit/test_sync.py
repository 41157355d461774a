"""rebalance/sync.py: the default primitives are the standard library's, so a consumer built without `sync=`
behaves as one that called `threading` itself; a connector and its listener take all of theirs from their `sync=`."""

from __future__ import annotations

import threading
from collections.abc import Callable

from conftest import MemoryGroup

from rebalance.sync import THREADING, Condition, Event, Lock, Thread
from zkconsumer.config import ConsumerConfig
from zkconsumer.connector import ZookeeperConsumerConnector
from zkconsumer.members import NoFetchers
from zkconsumer.zookeeper.memory import MemoryZkClient


def test_the_default_primitives_are_the_standard_librarys() -> None:
    assert isinstance(THREADING.lock(), type(threading.Lock()))
    assert isinstance(THREADING.rlock(), type(threading.RLock()))
    assert isinstance(THREADING.event(), threading.Event)
    assert isinstance(THREADING.condition(), threading.Condition)
    ran = threading.Event()
    thread = THREADING.thread(ran.set, name="sync-test")
    assert isinstance(thread, threading.Thread) and thread.daemon and thread.name == "sync-test"
    assert THREADING.current_thread() is threading.current_thread()
    thread.start()
    thread.join(5.0)
    assert ran.is_set() and not thread.is_alive()


class Recording:
    """THREADING's primitives, remembering what was asked for."""

    def __init__(self) -> None:
        self.made: list[str] = []

    def lock(self) -> Lock:
        self.made.append("lock")
        return THREADING.lock()

    def rlock(self) -> Lock:
        self.made.append("rlock")
        return THREADING.rlock()

    def event(self) -> Event:
        self.made.append("event")
        return THREADING.event()

    def condition(self) -> Condition:
        self.made.append("condition")
        return THREADING.condition()

    def thread(self, target: Callable[[], object], name: str) -> Thread:
        self.made.append(f"thread {name}")
        return THREADING.thread(target, name)

    def current_thread(self) -> object:
        return THREADING.current_thread()


def test_the_connector_and_its_listener_take_every_primitive_from_their_sync(memory_group: MemoryGroup) -> None:
    """Nothing is made from `threading` behind the seam's back: every lock, event, condition and thread of a
    consumer (auto-commit on, so its thread too) comes from the `sync=` it was built with."""
    topic = memory_group.topic("t", 2)
    sync = Recording()
    config = ConsumerConfig.from_properties({
        "group.id": "g", "zookeeper.connect": "memory:2181", "consumer.id": "m", "auto.commit.enable": True,
        "zookeeper.session.timeout.ms": 4000})
    connector = ZookeeperConsumerConnector(
        config, zk_factory=lambda cfg, cid: MemoryZkClient(memory_group.server, session_timeout_ms=4000, log_id=cid),
        fetcher_factory=NoFetchers, sync=sync)
    try:
        connector.create_message_streams({topic: 1})
        assert connector.owned_partitions() == {(topic, 0): "g_m-0", (topic, 1): "g_m-0"}
    finally:
        connector.shutdown()
    assert sorted(sync.made) == sorted([
        # the connector's shutdown and watch locks, its closing flag; the auto-committer's stop flag
        "lock", "lock", "event", "event",
        "rlock", "condition", "event",  # the listener's rebalance lock, its watcher's condition, its stop flag
        "thread g_m-auto-commit", "thread g_m_watcher_executor"])
