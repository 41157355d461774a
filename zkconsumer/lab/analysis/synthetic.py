"""Synthetic lab runs: trace events in the shapes and mix real runs have, generated from a seed, for timing the
analysis at a size no real run reaches (benchmarks/bench_analysis.py) and for the analysis driver's class-data
archive's training run (class_archive.py), which must load the classes a real analysis loads.

The events are a realistic mix for both designs: proxy wire records (ZooKeeper requests and watch events, Kafka
fetches, heartbeats and group requests), member events of each rebalance (stops, releases, claims, attempts,
starts; or generations), produce and consume batches (with re-consumption after each hand-over, and a few
offsets skipped), owner snapshots and mntr samples. Every run is a herd sweep point: N members, then a series
of joins, leaves and kills.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

PARTITIONS = 64
SIZES = (4, 8, 16, 32, 64)


class Run:
    """One run directory being written: records per file, then flushed as JSON lines."""

    def __init__(self, root: Path, index: int, design: str, members: int) -> None:
        self.design, self.members = design, members
        self.case = f"herd-members={members}-r{index // (2 * len(SIZES))}"
        self.path = root / self.case / design
        self.files: dict[str, list[str]] = {}
        self.t0 = 1_800_000_000.0 + index * 1000
        self.count = 0

    def add(self, file: str, type_: str, t: float, **fields) -> None:
        record = {"v": 1, "design": self.design, "type": type_, "ts": self.t0 + t, **fields}
        self.files.setdefault(file, []).append(json.dumps(record, separators=(",", ":")))
        self.count += 1

    def write(self, index: int) -> None:
        (self.path / "traces").mkdir(parents=True, exist_ok=True)
        manifest = {"schema_version": 1, "scenario": "bench-herd", "case": self.case, "design": self.design,
                    "run_id": f"{self.case}-{self.design}-{index:04d}", "sweep": {"members": self.members},
                    "process_mode": "processes", "repeat": 0, "completed": True, "status": "completed",
                    "started": self.t0, "ended": self.t0 + 200,
                    "scenario_definition": {"group": {"members": self.members, "topics": [
                        {"name": "bench", "partitions": PARTITIONS}]}, "coordinator": {"session_timeout_ms": 6000},
                        "zk": {"zookeeper.session.timeout.ms": 6000}}}
        (self.path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        for name, lines in self.files.items():
            (self.path / "traces" / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def assign(members: list[str]) -> dict[str, list[int]]:
    """Range assignment of the partitions over the members."""
    share, extra = divmod(PARTITIONS, len(members))
    out, start = {}, 0
    for i, m in enumerate(members):
        size = share + (i < extra)
        out[m] = list(range(start, start + size))
        start += size
    return out


def simulate(run: Run, budget: int, rng: random.Random) -> None:
    zk = run.design == "zk"
    live = [f"m{i}" for i in range(run.members)]
    next_id = run.members
    owned = assign(live)
    offsets = dict.fromkeys(range(PARTITIONS), 0)  # next offset to produce
    consumed = dict.fromkeys(range(PARTITIONS), 0)  # next offset the group consumes
    run.add("run", "phase", 0, phase="setup")
    for m, parts in owned.items():
        start(run, m, parts, 5.0, 0, zk)
    run.add("run", "phase", 10, phase="settled")
    t, step, generation = 10.0, 0, 0
    changes = [(20.0 + 15 * i, ("join", "leave", "kill")[i % 3]) for i in range(6)]
    for when, action in [*changes, (120.0, "end")]:
        while t < when:  # steady state: produce and consume every second
            for p in range(PARTITIONS):
                n = rng.randint(20, 60)
                run.add("run", "produce", t, topic="bench", partition=p, first_offset=offsets[p],
                        last_offset=offsets[p] + n - 1, count=n)
                offsets[p] += n
            for m, parts in owned.items():
                for p in parts:
                    first = consumed[p] + (1 if rng.random() < 0.001 else 0)  # a rare skipped offset
                    if first < offsets[p]:
                        run.add(m, "consume", t + 0.1, member=m, topic="bench", partition=p, first_offset=first,
                                last_offset=offsets[p] - 1, count=offsets[p] - first)
                        consumed[p] = offsets[p]
            t += 1.0
        if action == "end":
            break
        victim = None
        if action == "join":
            victim = f"m{next_id}"
            next_id += 1
            live.append(victim)
        elif len(live) > 1:
            victim = live.pop(rng.randrange(len(live)))
        run.add("run", "membership", when, action=action, members=[victim], step=step)
        step += 1
        generation += 1
        before = owned
        owned = assign(live)
        for m, parts in before.items():
            stop_at = when + rng.uniform(0.05, 0.4)
            if m == victim and action == "kill":
                continue  # a killed member says nothing
            stop(run, m, parts, stop_at, generation - 1, zk)
            for p in parts:  # re-consumption after the hand-over: the last commit was behind
                consumed[p] = max(0, consumed[p] - rng.randint(0, 30))
        for m, parts in owned.items():
            start(run, m, parts, when + rng.uniform(0.5, 1.5) + (3.0 if not zk else 0.0), generation, zk)
        run.add("run", "stable", when + 2.0, generation_or_rebalance=step, duration_s=2.0)
    run.add("run", "phase", 120, phase="done")
    for i in range(240):  # observers: owners every 0.5 s (ZooKeeper design), mntr every 1 s
        if zk:
            run.add("run", "owners", i * 0.5, owners={f"bench/{p}": "x" for p in range(0, PARTITIONS, 8)})
        if i % 2 == 0:
            run.add("run", "mntr", i * 0.5, server=0, sample={"zk_watch_count": rng.randint(10, 900)})
    members = [f"m{i}" for i in range(next_id)]
    while run.count < budget:  # the wire: what the proxies saw, spread over the run
        t, m = rng.uniform(0, 125), rng.choice(members)
        if zk:
            r = rng.random()
            if r < 0.05:
                run.add("run", "wire", t, proto="zk", link=m, kind="event", event_type="NodeChildrenChanged")
            else:
                op, code = rng.choice((("getData", 4), ("getChildren", 8), ("create", 1), ("delete", 2)))
                run.add("run", "wire", t, proto="zk", link=m, kind="request", op=op, opcode=code, xid=1)
        else:
            api, key = rng.choice((("Fetch", 1), ("Fetch", 1), ("Heartbeat", 12), ("JoinGroup", 11),
                                   ("SyncGroup", 14), ("OffsetCommit", 8)))
            kind = rng.choice(("request", "response"))
            run.add("run", "wire", t, proto="kafka", link=m, client_id=m, kind=kind, api_name=api, api_key=key,
                    error_name="REBALANCE_IN_PROGRESS" if kind == "response" and api == "Heartbeat" else None)


def start(run: Run, m: str, parts: list[int], t: float, generation: int, zk: bool) -> None:
    tps = [f"bench/{p}" for p in parts]
    if zk:
        run.add(m, "member_event", t - 0.05, member=m, kind="rebalance_begin", rebalance=generation)
        for p in parts:
            run.add(m, "member_event", t - 0.01, member=m, kind="claim", topic="bench", partition=p, ok=True)
        run.add(m, "member_event", t, member=m, kind="fetchers_started", offsets=dict.fromkeys(tps, 0))
        run.add(m, "member_event", t, member=m, kind="attempt_end", result="ok")
    else:
        run.add(m, "generation", t, member=m, generation=generation, kind="assigned", partitions=tps)
        run.add(m, "assignment", t, member=m, generation=generation, partitions=tps)


def stop(run: Run, m: str, parts: list[int], t: float, generation: int, zk: bool) -> None:
    tps = [f"bench/{p}" for p in parts]
    if zk:
        run.add(m, "member_event", t, member=m, kind="fetchers_stopped", partitions=tps)
        for p in parts:
            run.add(m, "member_event", t + 0.01, member=m, kind="release", topic="bench", partition=p)
    else:
        run.add(m, "generation", t, member=m, generation=generation, kind="revoked", partitions=tps)


def generate(root: Path, events: int, runs: int, seed: int = 1) -> int:
    rng = random.Random(seed)
    total = 0
    for i in range(runs):
        design = ("zk", "coordinator")[i % 2]
        run = Run(root, i, design, SIZES[(i // 2) % len(SIZES)])
        simulate(run, (events - total) // (runs - i), rng)
        run.write(i)
        total += run.count
    return total
