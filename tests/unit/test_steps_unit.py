"""Single rebalance steps pinned down over the in-memory ZooKeeper: what the offsets checkpoint writes and
skips, that a rebalance commits before it releases, how claims and conflicts are reported and counted, and
that a member with no broker rebalances again when one registers."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from conftest import BROKER
from helpers import wait_for

from rebalance.assignment import TopicPartition
from rebalance.events import EventBus, EventKind
from rebalance.offsets import OffsetCheckpoints
from rebalance.ownership import Ownership
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.group import ZkGroupStore
from zkconsumer.zookeeper.memory import MemoryZkClient


@dataclass
class Position:
    topic: str
    partition: int
    consumed_offset: int


class Marks:
    def __init__(self) -> None:
        self.count = 0

    def mark(self, n: int = 1) -> None:
        self.count += n


@pytest.fixture
def store(memory_group):
    client = MemoryZkClient(memory_group.server, log_id="steps").start()
    yield ZkGroupStore(client, "g")
    client.close()


def test_offsets_are_written_only_when_changed_and_never_negative(store):
    events = EventBus("g_m")
    commits: list = []
    events.subscribe(lambda e: commits.append(e) if e.kind == EventKind.COMMIT else None)
    meter = Marks()
    offsets = OffsetCheckpoints(store, "g_m", meter, events)
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    store.write_offset("t", 1, 40)
    assert offsets.fetch([tp0, tp1]) == {tp0: -1, tp1: 40}  # -1: nothing stored
    written = offsets.commit([Position("t", 0, 7), Position("t", 1, 40), Position("t", 2, -1), Position("t", 2, 0)])
    assert written == 2  # t/1 unchanged since fetch, t/2 at -1 skipped; t/0 and t/2=0 written
    assert store.read_offset("t", 0) == 7 and store.read_offset("t", 1) == 40 and store.read_offset("t", 2) == 0
    assert meter.count == 2
    assert [(e.data["partition"], e.data["offset"]) for e in commits] == [(0, 7), (2, 0)]
    assert offsets.commit([Position("t", 0, 7)]) == 0  # unchanged since the last commit
    assert offsets.commit([Position("t", 0, 9), Position("t", 1, 41)]) == 2  # every changed one, not the first
    offsets.reset()
    assert offsets.commit([Position("t", 0, 9)]) == 1  # after a reset nothing counts as unchanged


def test_claims_report_their_owner_and_partitions_by_topic(store):
    from rebalance.assignment import ConsumerThreadId

    events = EventBus("g_m")
    claims: list = []
    events.subscribe(lambda e: claims.append(e.data) if e.kind == EventKind.CLAIM else None)
    ownership = Ownership(store, "g_m", events)
    me = ConsumerThreadId("g_m", 0)
    decision = {TopicPartition("t", 0): me, TopicPartition("t", 3): me, TopicPartition("u", 1): me}
    assert ownership.claim(decision)
    ownership.install(decision, {})
    assert [(c["topic"], c["partition"], c["ok"], c["owner"]) for c in claims] == [
        ("t", 0, True, "g_m-0"), ("t", 3, True, "g_m-0"), ("u", 1, True, "g_m-0")]
    assert ownership.partitions_by_topic() == {"t": {0, 3}, "u": {1}}
    other = ConsumerThreadId("g_x", 0)
    rival = Ownership(store, "g_x", events)
    assert not rival.claim({TopicPartition("t", 0): other, TopicPartition("t", 9): other})
    assert claims[-2]["ok"] is False and claims[-2]["owner"] == "g_m-0"
    assert store.zk.get(layout.owner_path("g", "t", 9)) is None  # rolled back


def test_a_rebalance_commits_what_was_consumed_before_it_releases(memory_group):
    topic = memory_group.topic("t", 2)
    member = memory_group.member("g", "m", auto_commit_enable=True, auto_commit_interval_ms=3_600_000)
    kinds: list[str] = []
    member.add_event_listener(lambda e: kinds.append(str(e.kind)))
    member.create_message_streams({topic: 1})
    for info in member.ownership.infos():
        info.set_consumed_offset(5)
    kinds.clear()
    memory_group.member("g", "a").create_message_streams({topic: 1})  # sorts first: takes partition 0
    wait_for(lambda: memory_group.settled("g") and member.state == "owning", timeout=10, message="settled")
    assert kinds.index("commit") < kinds.index("release")
    assert memory_group.admin.get(layout.offset_path("g", topic, 0))[0] == b"5"
    assert member.rebalance_stats.conflicts == 0


def test_conflicts_are_counted_and_attempts_reported(memory_group):
    topic = memory_group.topic("t", 1)
    stale = layout.owner_path("g", topic, 0)
    memory_group.admin.create(stale, b"old-0", ephemeral=True)
    member = memory_group.member("g", "m", rebalance_max_retries=5)
    ends: list = []
    member.add_event_listener(lambda e: ends.append(e.data) if e.kind == EventKind.REBALANCE_END else None)
    attempts: list = []

    def release_after_first(event) -> None:
        if event.kind == EventKind.ATTEMPT_END:
            attempts.append(event.data["result"])
            if len(attempts) == 1:
                memory_group.admin.delete(stale)

    member.add_event_listener(release_after_first)
    member.create_message_streams({topic: 1})
    assert attempts == ["conflict", "ok"]
    assert member.rebalance_stats.conflicts == 1 and member.rebalance_stats.failed_attempts == 1
    assert ends[-1]["result"] == "ok" and ends[-1]["attempts"] == 2


def test_a_member_without_brokers_rebalances_when_one_registers(memory_group):
    memory_group.admin.delete(layout.broker_path(1))
    topic = memory_group.topic("t", 2)
    member = memory_group.member("g", "m")
    member.create_message_streams({topic: 1})
    assert member.owned_partitions() == {}
    memory_group.admin.create(layout.broker_path(1), BROKER, ephemeral=True)
    wait_for(lambda: len(member.owned_partitions()) == 2, timeout=10, message="owned once a broker registered")
