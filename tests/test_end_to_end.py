"""Separate OS processes consume real messages through every kind of rebalance: kill -9, a join, and a real
session expiry, audited for loss, for where new owners start, and for two members fetching one partition.

Members are `zkconsumer consume` processes; their stdout is what they consumed (`topic partition offset`),
their `--events` file the member events (fetchers started/stopped, commits, session expiry) the audit uses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import pytest
from helpers import ZkProbe, unique, wait_for
from kafka import KafkaProducer

from zkconsumer.event_log import read_events

pytestmark = pytest.mark.slow
SESSION_TIMEOUT_MS = 3000


class Member:
    def __init__(self, name: str, zk_connect: str, group: str, topic: str, workdir: Path, throttle_ms: int):
        self.name = name
        self.out = workdir / f"{name}.out"
        self.err = workdir / f"{name}.err"
        self.events_path = workdir / f"{name}.events"
        props = [f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}", "auto.commit.interval.ms=300",
                 "rebalance.backoff.ms=300", "rebalance.max.retries=40", "refresh.leader.backoff.ms=100"]
        argv = [sys.executable, "-m", "zkconsumer", "-v", "consume", "--zookeeper", zk_connect, "--group", group,
                "--topic", topic, "--from-beginning", "--format", "offsets", "--consumer-id", name,
                "--timeout-ms", "6000", "--throttle-ms", str(throttle_ms), "--events", str(self.events_path)]
        for prop in props:
            argv += ["--consumer-property", prop]
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def consumed(self) -> list[tuple[int, int]]:
        rows = []
        for line in self.out.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3:
                rows.append((int(parts[1]), int(parts[2])))
        return rows

    def events(self) -> list[dict]:
        return read_events(self.events_path) if self.events_path.exists() else []

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(timeout=30)


Span = tuple[datetime, datetime | None]


def fetch_intervals(member: Member, cutoff: datetime | None = None) -> dict[int, list[Span]]:
    """Per partition, the times this member was fetching it: from fetchers started to fetchers stopped.

    `cutoff` closes what was open at that moment: the member was killed, or frozen and then expired (it may
    fetch briefly after waking, before it sees the expiry: that window precedes its next rebalance, which the
    issue's rule excludes)."""
    intervals: dict[int, list[list]] = defaultdict(list)
    open_parts: set[int] = set()
    for event in member.events():
        when = datetime.fromtimestamp(event["time"])
        if event["kind"] == "fetchers_started":
            for key in event["offsets"]:
                partition = int(key.rsplit("/", 1)[1])
                intervals[partition].append([when, None])
                open_parts.add(partition)
        elif event["kind"] in ("fetchers_stopped", "session_expired"):
            # After an expiry the member still fetches until its own rebalance (the 0.8 split-brain window);
            # the audit only judges members that have both finished a rebalance, so the window ends here.
            for partition in open_parts:
                intervals[partition][-1][1] = when
            open_parts.clear()
    if cutoff is not None:
        for spans in intervals.values():
            for span in spans:
                if span[0] < cutoff and (span[1] is None or span[1] > cutoff):
                    span[1] = cutoff
    return {p: [(a, b) for a, b in spans] for p, spans in intervals.items()}


def test_processes_consume_everything_through_kill_join_and_expiry(cluster, tmp_path):
    topic = cluster.create_topic(partitions=8)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5)
    futures = [producer.send(topic, key=f"k{i % 97}".encode(), value=f"v{i}".encode()) for i in range(20000)]
    producer.flush()
    produced = {(f.get(timeout=30).partition, f.get(timeout=30).offset) for f in futures}
    producer.close()
    log_end = defaultdict(int)
    for partition, offset in produced:
        log_end[partition] = max(log_end[partition], offset + 1)
    assert len(produced) == 20000 and len(log_end) == 8

    group = unique("e2e")
    zk = ZkProbe(cluster.zookeeper_connect)
    members = [Member(f"m{i}", cluster.zookeeper_connect, group, topic, tmp_path, throttle_ms=2) for i in (1, 2, 3)]
    try:
        wait_for(lambda: sum(len(m.consumed()) for m in members) > 2000, timeout=60, message="consumption under way")
        cutoffs = {"m1": datetime.now()}
        members[0].proc.kill()  # kill -9: its owner nodes stay until its session times out
        members.append(Member("m4", cluster.zookeeper_connect, group, topic, tmp_path, throttle_ms=2))
        # A real server-side expiry: freeze m2 beyond its session timeout (as a long GC pause would).
        cutoffs["m2"] = datetime.now()
        os.kill(members[1].proc.pid, signal.SIGSTOP)
        wait_for(lambda: not zk.exists(f"/consumers/{group}/ids/{group}_m2"), timeout=30, message="m2 expired")
        os.kill(members[1].proc.pid, signal.SIGCONT)
        for member in members[1:]:
            member.proc.wait(timeout=240)
    finally:
        for member in members:
            member.stop()

    consumed = [row for member in members for row in member.consumed()]
    seen = set(consumed)
    missing = produced - seen
    assert not missing, f"{len(missing)} produced messages never consumed, e.g. {sorted(missing)[:5]}"

    # New owners start where the group had committed: a start offset is one a member committed, and -1 (nothing
    # stored) is possible only if that partition's first commit came after the starting member's attempt began (it
    # reads the offsets during the attempt, before its claim: 0.8's release race). Two commits leave no event: the
    # killed member's last (written to ZooKeeper, then kill -9 before the event), so its consumed offsets + 1 count
    # as commits; and the frozen member's, whose events are written only after it wakes, so event times are not
    # compared with start times.
    commits: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for member in members:
        for event in member.events():
            if event["kind"] == "commit":
                commits[event["partition"]].append((event["time"], event["offset"]))
    killed_next = defaultdict(set)
    for part, offset in members[0].consumed():
        killed_next[part].add(offset + 1)
    started: dict[int, list[tuple[float, int]]] = defaultdict(list)  # partition -> (time, offset) of its starts
    starts = 0
    for member in members:
        attempt_began = 0.0
        for event in member.events():
            if event["kind"] == "attempt_begin":
                attempt_began = event["time"]
            if event["kind"] != "fetchers_started":
                continue
            for key, start in event["offsets"].items():
                part = int(key.rsplit("/", 1)[1])
                starts += 1
                if start == -1:
                    first = min((when for when, _ in commits[part]), default=float("inf"))
                    assert first > attempt_began, f"{member.name} started {part} at -1 after its first commit"
                else:
                    committed = {offset for _, offset in commits[part]} | killed_next[part]
                    assert start in committed, f"{member.name} started {part} at {start}, which nobody committed"
                started[part].append((event["time"], max(start, 0)))
    assert starts >= 8, "every partition must have been started at least once"
    restarts = {part: [offset for _, offset in sorted(spans)[1:]] for part, spans in started.items()}  # not the first

    # Every duplicate is replayed work: an offset at or above some restart of its partition, and no more of them
    # per partition than the restarts can replay (from each restart offset to the log end).
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for row in consumed:
        counts[row] += 1
    for part in range(8):
        dup_offsets = [o for (p, o), n in counts.items() if p == part for _ in range(n - 1)]
        if not dup_offsets:
            continue
        assert restarts.get(part), f"partition {part} has {len(dup_offsets)} duplicates but was never restarted"
        assert min(dup_offsets) >= min(restarts[part]), f"partition {part}: a duplicate below every restart"
        replayable = sum(log_end[part] - start for start in restarts[part])
        assert len(dup_offsets) <= replayable, f"partition {part}: {len(dup_offsets)} > {replayable} replayable"
    # Each change replays at most a member's uncommitted work: up to auto.commit.interval.ms (300 ms) at the
    # throttle's 500 messages/s per member, plus a fetched chunk; 1,000 leaves four times the ~150-250 seen here.
    duplicates = len(consumed) - len(seen)
    assert duplicates < 1000, f"{duplicates} duplicates: more than the three changes can replay"

    final = {int(p): int(zk.text(f"/consumers/{group}/offsets/{topic}/{p}") or -1) for p in range(8)}
    assert final == dict(log_end), "committed offsets must end at the log end"

    spans = {m.name: fetch_intervals(m, cutoffs.get(m.name)) for m in members}
    for partition in range(8):
        owners = [(name, a, b) for name, per in spans.items() for a, b in per.get(partition, [])]
        for i, (n1, a1, b1) in enumerate(owners):
            for n2, a2, b2 in owners[i + 1:]:
                if n1 == n2:
                    continue
                overlap = a1 < (b2 or datetime.max) and a2 < (b1 or datetime.max)
                assert not overlap, f"partition {partition} fetched by {n1} and {n2} at once"
    zk.close()
