"""Hand-built lab run directories whose answers are known: small helpers that write manifest.json and
traces/*.jsonl the way the lab does (docs/traces.md), with times given in seconds from a fixed origin."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from zkconsumer.lab.designs import is_zookeeper_design

T0 = 1_700_000_000.0  # a realistic wall clock: differences of such values are what the job computes

# the analysed fixture predicts up to this N only: the tail's length is a parameter, and the suite's time is not
PREDICT_TO = 64


@dataclass
class RunBuilder:
    root: Path
    case: str
    design: str
    scenario: str = "hand"
    members: int = 2
    partitions: int = 2
    sweep: dict[str, Any] = field(default_factory=dict)
    process_mode: str = "processes"
    session_timeout_ms: int = 6000
    lines: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    torn: dict[str, str] = field(default_factory=dict)  # file -> a last line cut short (no newline)

    @property
    def run_id(self) -> str:
        return f"{self.case}-{self.design}-hand"

    @property
    def path(self) -> Path:
        return self.root / self.case / self.design

    # --- any record ------------------------------------------------------------------------------------

    def add(self, file: str, type_: str, t: float, **fields: Any) -> None:
        record = {"v": 1, "design": self.design, "type": type_, "ts": T0 + t, **fields}
        self.lines[file].append(json.dumps(record))

    def raw(self, file: str, text: str) -> int:
        """Append a line as it is (a bad one); returns its line number in that file."""
        self.lines[file].append(text)
        return len(self.lines[file])

    def tear(self, file: str, text: str) -> int:
        """End the file with a torn line, as a writer killed mid-line leaves it; returns its line number."""
        self.torn[file] = text
        return len(self.lines[file]) + 1

    # --- the orchestrator ------------------------------------------------------------------------------

    def phase(self, t: float, name: str) -> None:
        self.add("run", "phase", t, phase=name)

    def membership(self, t: float, action: str, members: list[str], step: int) -> None:
        self.add("run", "membership", t, action=action, members=members, step=step)

    def stable(self, t: float, change: int, duration: float) -> None:
        self.add("run", "stable", t, generation_or_rebalance=change, duration_s=duration)

    def zk(self, t: float, member: str, kind: str = "request", op: str | None = "getData", opcode: int | None = 4,
           n: int = 1) -> None:
        for _ in range(n):
            self.add("run", "wire", t, proto="zk", link=member, conn=1, kind=kind, op=op, opcode=opcode,
                     event_type="NodeChildrenChanged" if kind == "event" else None)

    def owner(self, t: float, member: str, op: str, tp: str, err: int = 0, group: str = "g") -> None:
        """An owner-node create or delete as the ZooKeeper proxy records it: the request, then its reply (which
        repeats the op and path, docs/wire.md); the path carries a chroot, as a member with one sends it."""
        path = f"/lab/consumers/{group}/owners/{tp}"
        opcode = {"create": 1, "delete": 2}[op]
        self.add("run", "wire", t - 0.001, proto="zk", link=member, conn=1, kind="request", op=op, opcode=opcode,
                 path=path)
        self.add("run", "wire", t, proto="zk", link=member, conn=1, kind="reply", op=op, opcode=opcode, path=path,
                 err=err, err_name={0: "OK", -110: "NodeExists"}.get(err))

    def kafka(self, t: float, member: str, api: str, key: int, kind: str = "request", error: str | None = None,
              n: int = 1) -> None:
        for _ in range(n):
            self.add("run", "wire", t, proto="kafka", link=member, client_id=member, kind=kind, api_name=api,
                     api_key=key, error_name=error)

    def produce(self, t: float, topic: str, partition: int, first: int, last: int) -> None:
        self.add("run", "produce", t, topic=topic, partition=partition, first_offset=first, last_offset=last,
                 count=last - first + 1)

    # --- members ---------------------------------------------------------------------------------------

    def event(self, t: float, member: str, kind: str, **fields: Any) -> None:
        self.add(member, "member_event", t, member=member, kind=kind, **fields)

    def started(self, t: float, member: str, tps: list[str]) -> None:
        self.event(t, member, "fetchers_started", offsets={tp: -1 for tp in tps})

    def stopped(self, t: float, member: str, tps: list[str]) -> None:
        self.event(t, member, "fetchers_stopped", partitions=tps)

    def generation(self, t: float, member: str, generation: int, kind: str, tps: list[str]) -> None:
        self.add(member, "generation", t, member=member, generation=generation, kind=kind, partitions=tps,
                 pid=4242, incarnation=1)

    def consume(self, t: float, member: str, topic: str, partition: int, first: int, last: int) -> None:
        self.add(member, "consume", t, member=member, topic=topic, partition=partition, first_offset=first,
                 last_offset=last, count=last - first + 1)

    # --- the directory ---------------------------------------------------------------------------------

    def write(self) -> Path:
        traces = self.path / "traces"
        traces.mkdir(parents=True, exist_ok=True)
        timeout = ({"zk": {"zookeeper.session.timeout.ms": self.session_timeout_ms}}
                   if is_zookeeper_design(self.design)
                   else {"coordinator": {"session_timeout_ms": self.session_timeout_ms}})
        manifest = {
            "schema_version": 1, "scenario": self.scenario, "case": self.case, "design": self.design, "seed": 1,
            "repeat": 0, "sweep": self.sweep, "process_mode": self.process_mode, "run_id": self.run_id,
            "completed": True, "status": "completed", "started": T0, "ended": T0 + 60, "error": None,
            "servers": {"zookeeper": {"embedded": True, "version": "3.9.5"},  # as zkconsumer/lab/runs/server_info.py
                        "broker": {"embedded": True, "kind": "Apache Kafka", "version": "3.9.2"}},
            "scenario_definition": {"name": self.scenario, **timeout, "group": {
                "members": self.members, "process_mode": self.process_mode,
                "topics": [{"name": "t", "partitions": self.partitions}]}},
        }
        (self.path / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        for name, lines in self.lines.items():
            text = "".join(line + "\n" for line in lines) + self.torn.get(name, "")
            (traces / f"{name}.jsonl").write_text(text, encoding="utf-8")
        return self.path


# --- the hand-built runs the tests share; their known answers are in the tests that read them -----------------

BAD_LINES = {  # file m1 of the split run on the ZooKeeper design: text -> the reason the job should give
    "{not json at all": "not JSON (torn or garbled line)",
    '{"v":1,"design":"zk","type":"member_event","ts":1700000012.7,"member":"m1","kind":"claim","partition":"zero"}':
        "a field has the wrong type",
    '{"v":1,"design":"zk","type":"consume","ts":1700000012.8,"member":"m1","topic":"t","partition":1,'
    '"last_offset":3,"count":4}': "consume record without first_offset",
    '{"v":1,"design":"zk","type":"bogus","ts":1700000012.9}': "unknown type bogus",
    '{"v":2,"design":"zk","type":"consume","ts":1700000012.9,"member":"m1","topic":"t","partition":1,'
    '"first_offset":0,"last_offset":3,"count":4}': "schema version 2",
}
TORN = '{"v":1,"design":"zk","type":"member_event","ts":1700000030.0,"member":"m1","ki'


def split_zk(root: Path) -> tuple[RunBuilder, int]:
    """ZooKeeper design, 2 partitions, m0 owns t/0 and m1 t/1; m2 joins at 12 s and leaves at 20 s.

    m0 keeps fetching t/0 until 14.0 (its session expired at 12.3) while m2 fetches it from 12.5: a 1.5 s overlap.
    Returns the builder and the line number of the first bad line in m1.jsonl."""
    b = RunBuilder(root, "split", "zk", scenario="split")
    b.phase(0, "setup")
    b.phase(1, "initial")
    b.zk(2, "m0", n=4)  # before the churn: not counted
    b.zk(2.5, "m0", kind="ping", op="ping", opcode=11, n=3)
    b.started(5, "m0", ["t/0"])
    b.started(5, "m1", ["t/1"])
    b.produce(6, "t", 0, 0, 99)
    b.produce(6, "t", 1, 0, 49)
    b.consume(8, "m0", "t", 0, 0, 39)
    b.consume(8, "m1", "t", 1, 0, 49)
    b.phase(10, "settled")
    b.phase(10, "churn")
    b.zk(11, "m0", op="exists", opcode=3)  # window 0
    # change 1: m2 joins
    b.membership(12, "join", ["m2"], 0)
    b.zk(12.05, "m0", kind="event", op=None, opcode=None)
    b.zk(12.05, "m1", kind="event", op=None, opcode=None)
    b.zk(12.1, "m0", n=3)
    b.zk(12.1, "m0", op="getChildren", opcode=8, n=2)
    b.zk(12.2, "m2", op="create", opcode=1, n=3)
    b.zk(12.3, "m1", kind="ping", op="ping", opcode=11)
    b.event(12.1, "m1", "rebalance_begin", rebalance=2)
    b.event(12.15, "m1", "attempt_end", result="conflict")
    b.stopped(12.2, "m1", ["t/1"])
    b.event(12.3, "m0", "session_expired")
    b.event(12.4, "m2", "rebalance_begin", rebalance=1)
    b.event(12.5, "m2", "attempt_end", result="ok")
    b.started(12.5, "m2", ["t/0"])
    b.event(12.55, "m1", "attempt_end", result="ok")
    b.started(12.6, "m1", ["t/1"])
    first_bad = 0
    for text in BAD_LINES:
        line = b.raw("m1", text)
        first_bad = first_bad or line
    b.stable(13.0, 1, 1.0)
    b.consume(13, "m2", "t", 0, 30, 79)
    b.event(13.9, "m0", "rebalance_begin", rebalance=2)
    b.stopped(14.0, "m0", ["t/0"])
    b.event(14.05, "m0", "attempt_end", result="error")
    b.event(14.1, "m0", "rebalance_failed", error="retries exhausted")
    b.event(14.15, "m0", "rebalance_begin", rebalance=3)
    b.event(14.2, "m0", "attempt_end", result="ok")
    b.started(14.2, "m0", [])
    # change 2: m2 leaves; it stopped at 19.8, the orchestrator writes the record when it has seen that (20.0)
    b.stopped(19.8, "m2", ["t/0"])
    b.membership(20.0, "leave", ["m2"], 1)
    b.zk(20.05, "m1", op="delete", opcode=2, n=2)
    b.event(20.05, "m1", "rebalance_begin", rebalance=3)
    b.event(20.1, "m0", "rebalance_begin", rebalance=4)
    b.stopped(20.1, "m1", ["t/1"])
    b.event(20.15, "m1", "attempt_end", result="ok")
    b.started(20.2, "m1", ["t/1"])
    b.event(20.25, "m0", "attempt_end", result="ok")
    b.started(20.3, "m0", ["t/0"])
    b.stable(20.5, 2, 0.5)
    b.consume(21, "m0", "t", 0, 85, 99)
    b.phase(25, "done")
    b.stopped(25.5, "m0", ["t/0"])
    b.stopped(25.5, "m1", ["t/1"])
    b.zk(25.6, "m0", op="closeSession", opcode=-11)  # after done: not counted
    b.tear("m1", TORN)
    b.write()
    return b, first_bad


def split_coordinator(root: Path) -> RunBuilder:
    """Coordinator design, same group: m2 joins at 12 s (generation 1), is killed at 20 s (generation 2)."""
    b = RunBuilder(root, "split", "coordinator", scenario="split")
    b.phase(0, "setup")
    b.phase(1, "initial")
    b.generation(5, "m0", 0, "assigned", ["t/0"])
    b.generation(5, "m1", 0, "assigned", ["t/1"])
    b.consume(8, "m0", "t", 0, 0, 9)
    b.phase(10, "settled")
    b.phase(10, "churn")
    b.kafka(11, "m0", "Heartbeat", 12)
    b.membership(12, "join", ["m2"], 0)
    b.kafka(12.1, "m2", "JoinGroup", 11)
    for member, t in (("m0", 12.9), ("m1", 12.95)):
        b.kafka(t, member, "Heartbeat", 12)
        b.kafka(t, member, "Heartbeat", 12, kind="response", error="REBALANCE_IN_PROGRESS")
    b.generation(13.0, "m0", 0, "revoked", ["t/0"])
    b.generation(13.1, "m1", 0, "revoked", ["t/1"])
    b.kafka(13.2, "m0", "JoinGroup", 11)
    b.kafka(13.2, "m1", "JoinGroup", 11)
    for member in ("m0", "m1", "m2"):
        b.kafka(15.0, member, "SyncGroup", 14)
    b.kafka(15.0, "m0", "Fetch", 1, n=5)
    b.generation(15.0, "m0", 1, "assigned", ["t/0"])
    b.generation(15.0, "m1", 1, "assigned", [])
    b.generation(15.1, "m2", 1, "assigned", ["t/1"])
    b.consume(16, "m0", "t", 0, 5, 14)
    b.consume(16, "m2", "t", 1, 3, 9)
    b.stable(16.0, 1, 4.0)
    b.membership(20.0, "kill", ["m2"], 1)  # a killed member writes nothing more
    b.kafka(21.0, "m0", "JoinGroup", 11)
    b.generation(22.0, "m0", 1, "revoked", ["t/0"])
    b.generation(22.0, "m1", 1, "revoked", [])
    b.kafka(22.5, "m0", "SyncGroup", 14)
    b.kafka(22.5, "m1", "SyncGroup", 14)
    b.generation(23.0, "m0", 2, "assigned", ["t/0"])
    b.generation(23.0, "m1", 2, "assigned", ["t/1"])
    b.stable(23.5, 2, 3.5)
    b.phase(25, "done")
    b.generation(25.5, "m0", 2, "revoked", ["t/0"])
    b.generation(25.5, "m1", 2, "revoked", ["t/1"])
    b.write()
    return b


def split_original(root: Path) -> RunBuilder:
    """The original 0.8.2.2 consumer on the same group (a hand-built rendering input until real runs exist): its
    members report no claims or fetchers (docs/traces.md), so what they own is only on the wire.

    m2 joins at 12 s: its claim of t/0 at 12.2 is refused (NodeExists, m0 still owns it); m1 deletes t/1 at 12.2
    and m0 t/0 at 12.25, they claim them back at 12.45 and 12.4. m1 leaves at 20 s: it closed its session at
    19.8 (its owner node goes with it), m0 deletes and recreates t/0 (20.1, 20.2), m2 claims t/1 at 20.3."""
    b = RunBuilder(root, "split", "original", scenario="split")
    b.phase(0, "setup")
    b.phase(1, "initial")
    b.owner(4.9, "m0", "create", "t/0")
    b.owner(4.95, "m1", "create", "t/1")
    b.produce(6, "t", 0, 0, 99)
    b.produce(6, "t", 1, 0, 49)
    b.consume(8, "m0", "t", 0, 0, 39)
    b.consume(8, "m1", "t", 1, 0, 49)
    b.phase(10, "settled")
    b.phase(10, "churn")
    b.membership(12, "join", ["m2"], 0)
    b.zk(12.05, "m0", kind="event", op=None, opcode=None)
    b.zk(12.05, "m1", kind="event", op=None, opcode=None)
    for member in ("m0", "m1", "m2"):
        b.event(12.1, member, "rebalance_begin", rebalance=1)
        b.event(12.1, member, "attempt_begin", rebalance=1, attempt=1)
    b.owner(12.2, "m2", "create", "t/0", err=-110)
    b.event(12.21, "m2", "attempt_end", rebalance=1, attempt=1, result="conflict")
    b.owner(12.2, "m1", "delete", "t/1")
    b.owner(12.25, "m0", "delete", "t/0")
    b.owner(12.4, "m0", "create", "t/0")
    b.owner(12.45, "m1", "create", "t/1")
    b.event(12.5, "m0", "attempt_end", rebalance=1, attempt=1, result="ok")
    b.event(12.5, "m1", "attempt_end", rebalance=1, attempt=1, result="ok")
    b.event(12.6, "m2", "attempt_end", rebalance=1, attempt=2, result="ok")
    b.stable(13.0, 1, 1.0)
    b.zk(19.8, "m1", op="closeSession", opcode=-11)
    b.membership(20.0, "leave", ["m1"], 1)
    b.zk(20.05, "m0", kind="event", op=None, opcode=None)
    b.zk(20.05, "m2", kind="event", op=None, opcode=None)
    b.event(20.06, "m0", "rebalance_begin", rebalance=2)
    b.event(20.06, "m2", "rebalance_begin", rebalance=2)
    b.owner(20.1, "m0", "delete", "t/0")
    b.owner(20.2, "m0", "create", "t/0")
    b.owner(20.3, "m2", "create", "t/1")
    b.event(20.35, "m0", "attempt_end", rebalance=2, attempt=1, result="ok")
    b.event(20.35, "m2", "attempt_end", rebalance=2, attempt=1, result="ok")
    b.stable(20.5, 2, 0.5)
    b.consume(21, "m0", "t", 0, 40, 99)
    b.phase(25, "done")
    b.zk(25.6, "m0", op="closeSession", opcode=-11)  # after done: not counted
    b.zk(25.6, "m2", op="closeSession", opcode=-11)
    b.write()
    return b


SWEEP = (1, 2, 4, 8)


def sweep(root: Path) -> list[RunBuilder]:
    """A herd sweep with known growth: per join, 3·N² ZooKeeper requests and N notifications on the ZooKeeper
    design; 5·N coordination requests and N rebalance notices on the coordinator design."""
    runs = []
    for n in SWEEP:
        for design in ("zk", "coordinator"):
            b = RunBuilder(root, f"herd-members={n}-r0", design, scenario="herd-hand", members=n,
                           sweep={"members": n}, partitions=8)
            b.phase(0, "setup")
            b.phase(10, "settled")
            b.membership(12, "join", [f"m{n}"], 0)
            if design == "zk":
                b.zk(12.5, "m0", n=3 * n * n)
                b.zk(12.2, "m0", kind="event", op=None, opcode=None, n=n)
            else:
                b.kafka(12.5, "m0", "JoinGroup", 11, n=5 * n)
                b.kafka(12.2, "m0", "Heartbeat", 12, kind="response", error="REBALANCE_IN_PROGRESS", n=n)
            b.stable(12.0 + 0.1 * n, 1, 0.1 * n)
            b.phase(15, "done")
            b.write()
            runs.append(b)
    return runs


def _hashable(value: Any) -> Any:
    """A Parquet value as a multiset key: lists and structs as tuples, NaN as one key (Spark's SQL takes NaN as
    equal to NaN, where Python's == does not)."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def table_rows(path: Path, drop: Iterable[str] = ()) -> tuple[list[str], Counter]:
    """A table the job wrote (a Parquet directory), without the columns `drop`: its column names and its rows as
    a multiset. Two tables' multisets are equal exactly when Spark's exceptAll is empty both ways; read here, the
    comparison costs no Spark job (two per table, which took seconds each on the suite's busy two cores), and the
    tables compared are a few dozen rows each."""
    table = pq.read_table(path)
    table = table.drop_columns([c for c in drop if c in table.column_names])
    return table.column_names, Counter(tuple(_hashable(v) for v in row.values()) for row in table.to_pylist())
