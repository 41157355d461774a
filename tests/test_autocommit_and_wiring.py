"""The connector's periodic auto-commit, and its configuration reaching the fetchers, on the real servers.

The shutdown commit alone would let an auto-commit loop that never commits pass an end-to-end audit, so these
tests read the offsets while the member is still consuming. The lower bound on the time between two commit
rounds is the loop's own wait (auto.commit.interval.ms), so it holds however slow the machine is.
"""

from __future__ import annotations

import itertools
import threading
import time

import pytest
from helpers import make_config, unique, wait_for
from kafka import KafkaProducer

from fetcher_manager.kafka_wire import KafkaWire
from fetcher_manager.manager import ConsumerFetcherManager
from rebalance.events import EventKind
from zkconsumer import ZookeeperConsumerConnector

pytestmark = pytest.mark.slow

INTERVAL_MS = 300


def _produce(bootstrap: str, topic: str, per_partition: int, partitions: int, start: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for i in range(start, start + per_partition):
            for p in range(partitions):
                producer.send(topic, key=f"k{p}".encode(), value=f"v{p}-{i}".encode(), partition=p)
        producer.flush()
    finally:
        producer.close()


def _offsets(zk, group: str, topic: str, partitions: int) -> dict[int, str | None]:
    return {p: zk.text(f"/consumers/{group}/offsets/{topic}/{p}") for p in range(partitions)}


def _rounds(times: list[float], gap: float = 0.1) -> list[float]:
    """The start of each commit round: events closer than `gap` belong to one round."""
    ordered = sorted(times)
    return [t for i, t in enumerate(ordered) if i == 0 or t - ordered[i - 1] > gap]


def test_auto_commit_writes_the_consumed_offsets_while_consuming(cluster, zk, members):
    topic = cluster.create_topic(partitions=2)
    _produce(cluster.bootstrap_servers, topic, 10, 2)
    group = unique("g")
    member = members(group, "m", auto_commit_enable=True, auto_commit_interval_ms=INTERVAL_MS,
                     consumer_timeout_ms=10000)
    commits: list[float] = []
    member.add_event_listener(lambda e: commits.append(e.monotonic) if e.kind == EventKind.COMMIT else None)
    started = time.monotonic()
    stream = member.create_message_streams({topic: 1})[topic][0]
    it = iter(stream)
    first = [next(it) for _ in range(8)]
    assert len(first) == 8
    # Neither commit_offsets() nor shutdown has run: only the loop can have written these.
    wait_for(lambda: sum(int(v or 0) for v in _offsets(zk, group, topic, 2).values()) >= 8, timeout=10,
             message="the auto-commit loop to write what was consumed")
    rest = [next(it) for _ in range(12)]
    assert sorted((m.partition, m.offset) for m in first + rest) == [(p, o) for p in range(2) for o in range(10)]
    wait_for(lambda: _offsets(zk, group, topic, 2) == {0: "10", 1: "10"}, timeout=10,
             message="the next auto-commit round to write the log ends")
    rounds = _rounds(commits)
    assert len(rounds) >= 2
    assert rounds[0] - started >= INTERVAL_MS / 1000.0  # the first round comes one interval after the start
    assert all(b - a >= INTERVAL_MS / 1000.0 for a, b in itertools.pairwise(rounds)), rounds


class _RecordingWire(KafkaWire):
    """Records the arguments of every Fetch the fetcher threads send."""

    lock = threading.Lock()
    fetches: list[tuple[int, int, int]] = []

    def fetch(self, broker, offsets, max_wait_ms, min_bytes, partition_max_bytes, *, max_bytes=None):
        with type(self).lock:
            type(self).fetches.append((max_wait_ms, min_bytes, partition_max_bytes))
        return super().fetch(broker, offsets, max_wait_ms, min_bytes, partition_max_bytes, max_bytes=max_bytes)


def test_consumer_config_reaches_the_fetch_requests_and_the_offset_reset(cluster):
    """fetch.wait.max.ms, fetch.min.bytes, fetch.message.max.bytes and auto.offset.reset=largest, set on the
    connector, are what its fetchers send and do: the messages produced before it started are skipped."""
    topic = cluster.create_topic(partitions=1)
    _produce(cluster.bootstrap_servers, topic, 5, 1)
    _RecordingWire.fetches = []
    settings_seen = []

    def factory(settings, brokers, registry):
        settings_seen.append(settings)
        return ConsumerFetcherManager(settings, brokers, registry, wire_factory=_RecordingWire.from_settings)

    config = make_config(cluster.zookeeper_connect, unique("g"), "m", auto_offset_reset="largest",
                         fetch_wait_max_ms=173, fetch_min_bytes=3, fetch_message_max_bytes=54321,
                         consumer_timeout_ms=10000)
    with ZookeeperConsumerConnector(config, fetcher_factory=factory) as member:
        stream = member.create_message_streams({topic: 1})[topic][0]
        # The reset to the log end happens on the first fetch; once a fetch went out, new messages follow it.
        wait_for(lambda: _RecordingWire.fetches, timeout=10, message="a first fetch")
        _produce(cluster.bootstrap_servers, topic, 3, 1, start=5)
        it = iter(stream)
        got = [next(it) for _ in range(3)]
    assert [(m.offset, m.value) for m in got] == [(5, b"v0-5"), (6, b"v0-6"), (7, b"v0-7")]
    assert [s.auto_offset_reset for s in settings_seen] == ["largest"]
    assert set(_RecordingWire.fetches) == {(173, 3, 54321)}
