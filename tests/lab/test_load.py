"""The scenario's load producer against the real broker: every acknowledged offset is in a `produce` range."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from zkconsumer.event_log import read_json_lines
from zkconsumer.lab.runs.load import LoadProducer
from zkconsumer.lab.trace import TraceWriter

pytestmark = pytest.mark.slow


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.05)


def test_the_produced_ranges_cover_every_acknowledged_message_once(cluster, tmp_path: Path) -> None:
    topic = cluster.create_topic(partitions=3)
    trace = TraceWriter(tmp_path / "load.jsonl", "zk")
    load = LoadProducer(cluster.bootstrap_servers, {topic: 3}, trace, rate=400, keys=10, message_size=20).start()
    try:
        wait_until(lambda: load.sent >= 200, 30, "200 messages sent")
    finally:
        load.stop()
        trace.close()
    assert load.failed == 0
    records = [r for r in read_json_lines(tmp_path / "load.jsonl") if r["type"] == "produce"]
    offsets: dict[int, list[int]] = {}
    for r in records:
        assert r["topic"] == topic and r["count"] == r["last_offset"] - r["first_offset"] + 1
        offsets.setdefault(r["partition"], []).extend(range(r["first_offset"], r["last_offset"] + 1))
    assert sum(len(v) for v in offsets.values()) == load.sent  # each acknowledged message exactly once
    assert set(offsets) == {0, 1, 2}  # ten keys hash over all three partitions
    for partition, seen in offsets.items():
        assert sorted(seen) == list(range(len(seen))), partition  # a fresh partition: offsets 0.. with no hole
    assert not any(t.name == "lab-load-producer" for t in threading.enumerate())
