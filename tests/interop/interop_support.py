"""What the differential tests share: originals configured like `helpers.make_config` configures ours, the
original's own assignment of a live group (the oracle), ours on the same snapshot, and the znodes compared."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from helpers import ZkProbe, wait_for
from kafka import KafkaProducer
from kazoo.exceptions import NoNodeError

from fetcher_manager.errors import ConsumerTimeoutError
from rebalance.assignors import get_assignor
from rebalance.convergence import expected_owners
from zkconsumer.interop.original import OracleCase, run_assignor_oracle
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.group import read_group_snapshot

Owners = dict[tuple[str, int], str]
SETTLE_S = 60.0  # rebalances with conflicts back off 300 ms per attempt; a killed member's session lasts 4 s


def original_properties(zk_connect: str, group: str, consumer: str | None, **overrides: object) -> dict[str, str]:
    """The same settings `helpers.make_config` gives our test members, as 0.8.2.2 properties."""
    props: dict[str, object] = {
        "group.id": group, "zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": 4000,
        "rebalance.backoff.ms": 300, "rebalance.max.retries": 20, "auto.commit.enable": "false",
        "auto.offset.reset": "smallest", "refresh.leader.backoff.ms": 100,
    }
    if consumer:
        props["consumer.id"] = consumer
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return {k: str(v) for k, v in props.items()}


def normalised(owners: Mapping[tuple[str, int], str], group: str) -> Owners:
    """Owner values without the `<group>_` prefix, so groups with the same consumer ids compare equal (thread ids
    of one group share that prefix, so it never changes their string order)."""
    prefix = f"{group}_"
    assert all(v.startswith(prefix) for v in owners.values()), owners
    return {tp: v[len(prefix):] for tp, v in sorted(owners.items())}


_TIMESTAMP = re.compile(rb'"timestamp":"\d+"')


def without_timestamp(registration: bytes | None) -> bytes | None:
    """A registration's bytes with the timestamp's value replaced: the only part that may differ."""
    if registration is None:
        return None
    replaced, count = _TIMESTAMP.subn(b'"timestamp":"<ts>"', registration)
    assert count == 1, registration
    return replaced


def group_nodes(zk: ZkProbe, group: str) -> tuple[dict[str, bytes | None], dict[str, bytes | None]]:
    """(persistent, ephemeral) nodes under /consumers/<group>: relative path -> data (None = null data), with the
    group prefix of owner values and registration timestamps normalised."""
    persistent: dict[str, bytes | None] = {}
    ephemeral: dict[str, bytes | None] = {}
    base = layout.group_dir(group)

    def walk(path: str) -> None:
        try:  # kazoo keeps null data (zkclient's parents) apart from empty data: None vs b""
            data, stat = zk.client.get_async(path).get(timeout=10)
        except NoNodeError:
            return  # went away while we walked (an owner released)
        rel = path[len(base):] or "/"
        if stat.ephemeralOwner:
            if rel.startswith("/ids/"):
                data = without_timestamp(data)
            elif data is not None:
                data = data.replace(f"{group}_".encode(), b"<group>_")
            ephemeral[rel.replace(f"/ids/{group}_", "/ids/<group>_")] = data
        else:
            persistent[rel] = data
        for child in zk.children(path):
            walk(f"{path}/{child}")

    walk(base)
    return persistent, ephemeral


def oracle_expectation(zk_root: str, workdir: Path, groups: Mapping[str, str]) -> dict[str, Owners]:
    """group -> the owners the original's own assignor decides for the live group (each member's
    `RangeAssignor`/`RoundRobinAssignor.assign` on an `AssignmentContext` read from ZooKeeper, merged)."""
    cases = [OracleCase(f"g{i}", strategy, True, zk_root, group) for i, (group, strategy) in enumerate(groups.items())]
    results = run_assignor_oracle(cases, workdir)
    expected: dict[str, Owners] = {}
    for case in cases:
        merged: Owners = {}
        for consumer, outcome in sorted(results[case.case_id].items()):
            assert not isinstance(outcome, str), f"the original's assignor failed for {consumer}: {outcome}"
            assert not merged.keys() & outcome.keys(), f"two members of {case.group} decided the same partition"
            merged.update(outcome)
        expected[case.group] = dict(sorted(merged.items()))
    return expected


def our_expectation(zk: ZkProbe, group: str, strategy: str) -> Owners:
    """The owners this project's assignor prescribes for the same znodes (`rebalance.convergence.expected_owners`)."""
    snapshot = read_group_snapshot(zk.zk_client, group)
    owners = expected_owners(snapshot, get_assignor(strategy))
    return {(tp.topic, tp.partition): thread for tp, thread in sorted(owners.items())}


def settle(zk: ZkProbe, workdir: Path, groups: Mapping[str, str]) -> dict[str, Owners]:
    """Wait until every group (group -> strategy) owns what the original's assignor decides for it, after
    checking that ours prescribes the same on the same znodes; returns those owners."""
    expected = oracle_expectation(zk.hosts, workdir, groups)
    for group, strategy in groups.items():
        assert our_expectation(zk, group, strategy) == expected[group], f"the assignors disagree on {group}"
        assert expected[group], f"nothing to own in {group}"
        wait_for(lambda g=group: zk.owners(g) == expected[g], SETTLE_S, message=f"{group} to settle")
    return expected


def produce(bootstrap: str, topic: str, partitions: Iterable[int], count: int, start: int = 0) -> None:
    """`count` messages into each partition, values `m-<partition>-<i>` for i from `start`."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for i in range(start, start + count):
            for partition in partitions:
                producer.send(topic, key=b"k%d" % i, value=b"m-%d-%d" % (partition, i), partition=partition)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)


@dataclass(frozen=True)
class Consumed:
    topic: str
    partition: int
    offset: int


class Drain:
    """Reads our connector's streams in named threads, recording every message; `stop()` ends them (the iterator
    wakes every 200 ms, so set `consumer_timeout_ms=200` on the member)."""

    def __init__(self, streams: Iterable, name: str) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._consumed: list[Consumed] = []
        self._threads = [threading.Thread(target=self._run, args=(s,), name=f"drain-{name}-{i}", daemon=True)
                         for i, s in enumerate(streams)]
        for thread in self._threads:
            thread.start()

    def _run(self, stream) -> None:
        iterator = iter(stream)
        while not self._stop.is_set():
            try:
                message = next(iterator)
            except ConsumerTimeoutError:
                continue
            except StopIteration:
                return  # the connector shut down
            with self._lock:
                self._consumed.append(Consumed(message.topic, message.partition, message.offset))

    @property
    def consumed(self) -> list[Consumed]:
        with self._lock:
            return list(self._consumed)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        assert not any(t.is_alive() for t in self._threads), "a drain thread did not stop"


def first_offsets(messages: Iterable, topic: str) -> dict[int, int]:
    """partition -> the first offset delivered for it."""
    first: dict[int, int] = {}
    for m in messages:
        if m.topic == topic:
            first.setdefault(m.partition, m.offset)
    return first


def offsets_seen(messages: Iterable, topic: str) -> dict[int, list[int]]:
    seen: dict[int, list[int]] = {}
    for m in messages:
        if m.topic == topic:
            seen.setdefault(m.partition, []).append(m.offset)
    return seen
