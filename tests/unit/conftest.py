"""The unit-test layer: real connectors and rebalance listeners over the in-memory ZooKeeper, no Java, no
broker (rebalance-only members). Fast enough for mutation testing; the same behaviours are checked against
the real ZooKeeper in the integration tests one directory up."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from rebalance.assignors import get_assignor
from rebalance.convergence import check_convergence
from rebalance.events import TRANSITIONS, EventBus, EventKind, MemberEvent, MemberState
from zkconsumer.config import ConsumerConfig
from zkconsumer.connector import ZookeeperConsumerConnector
from zkconsumer.members import NoFetchers
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.group import read_group_snapshot
from zkconsumer.zookeeper.memory import MemoryZkClient, MemoryZooKeeper

BROKER = b'{"version":1,"host":"127.0.0.1","port":9092,"jmx_port":-1}'


@dataclass
class MemoryGroup:
    """An in-memory ZooKeeper with one broker registered, and the members started in it."""

    server: MemoryZooKeeper
    admin: MemoryZkClient
    members: list[ZookeeperConsumerConnector] = field(default_factory=list)

    def topic(self, name: str, partitions: int) -> str:
        self.admin.create(layout.topic_path(name), codecs.encode_topic({p: [1] for p in range(partitions)}))
        return name

    def member(self, group: str, consumer: str, **overrides: object) -> ZookeeperConsumerConnector:
        props = {"group.id": group, "zookeeper.connect": "memory:2181", "consumer.id": consumer,
                 "zookeeper.session.timeout.ms": 4000, "rebalance.backoff.ms": 20, "rebalance.max.retries": 10,
                 "auto.commit.enable": False}
        props.update({k.replace("_", "."): v for k, v in overrides.items()})
        config = ConsumerConfig.from_properties(props)
        connector = ZookeeperConsumerConnector(
            config, zk_factory=lambda cfg, cid: MemoryZkClient(self.server, session_timeout_ms=4000, log_id=cid,
                                                                request_timeout_s=2.0),
            fetcher_factory=NoFetchers)
        self.members.append(connector)
        return connector

    def settled(self, group: str, strategy: str = "range") -> bool:
        result = check_convergence(read_group_snapshot(self.admin, group), get_assignor(strategy))
        return result.settled and bool(result.expected)

    def owners(self, group: str) -> dict[tuple[str, int], str]:
        snapshot = read_group_snapshot(self.admin, group)
        return {(tp.topic, tp.partition): owner for tp, owner in snapshot.owners.items()}


@pytest.fixture
def memory_group() -> Iterator[MemoryGroup]:
    server = MemoryZooKeeper()
    admin = MemoryZkClient(server, log_id="admin").start()
    admin.create(layout.broker_path(1), BROKER, ephemeral=True)
    group = MemoryGroup(server, admin)
    yield group
    for member in group.members:
        member.shutdown()
    admin.close()


# Every member-state transition made in any unit test, as (previous, state): the STATE events. Kept for the whole
# session, to see which of TRANSITIONS' edges a run of the suite exercised (a sessionfinish hook can print it).
MADE_TRANSITIONS: set[tuple[MemberState, MemberState]] = set()


@pytest.fixture(autouse=True)
def member_transitions(monkeypatch) -> Iterator[list[MemberEvent]]:
    """Records the STATE event of every transition a unit test makes, on any member and thread, and fails the test
    if one is not an edge of MemberState's TRANSITIONS: seen from the events, so it holds even where the listener's
    own check is off or its IllegalTransition was swallowed (the watcher thread logs what it catches)."""
    made: list[MemberEvent] = []
    emit = EventBus.emit

    def recording(bus: EventBus, kind: EventKind, **data: object) -> MemberEvent:
        event = emit(bus, kind, **data)
        if kind == EventKind.STATE:
            made.append(event)
        return event

    monkeypatch.setattr(EventBus, "emit", recording)
    yield made
    pairs = [(e.consumer_id, MemberState(e.data["previous"]), MemberState(e.data["state"])) for e in made]
    MADE_TRANSITIONS.update((previous, state) for _, previous, state in pairs)
    illegal = [f"{c}: {p.name} -> {s.name}" for c, p, s in pairs if s not in TRANSITIONS[p]]
    assert not illegal, f"member-state transitions outside MemberState's TRANSITIONS: {illegal}"
