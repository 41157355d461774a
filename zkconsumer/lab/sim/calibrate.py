"""Fit the simulation's latency tables from lab runs, and read the real per-change counts the simulation is
checked against.

    python -m zkconsumer.lab.sim.calibrate fit /tmp/herd-both /tmp/far /tmp/far2     # writes latency_tables.json
    python -m zkconsumer.lab.sim.calibrate fit --only kafka /tmp/herd-both          # refits the Kafka tables only
    python -m zkconsumer.lab.sim.calibrate real /tmp/herd-threads                    # per-change counts, as JSON

`--only` keeps the other wire family's tables (and their source) from the file it rewrites: for when one server
changed and the other did not.

`fit` keeps only runs without injected network delay (no `[[network]]` rule with a delay, e.g. far-members at
delay_ms=0): a delayed link's round trips contain the delay, which the model adds per member instead (`extra_ms`).
ZooKeeper: the `latency_ms` of every reply (`type=wire, proto=zk, kind=reply`), by opcode. Kafka: the group
requests a coordinator answers at once (FindCoordinator, Heartbeat, LeaveGroup, OffsetCommit, the
MEMBER_ID_REQUIRED JoinGroup, SyncGroups not parked), by API; held JoinGroups and parked SyncGroups measure the
coordinator's wait, which the coordinator model computes itself.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from zkconsumer.lab.runs.server_info import servers_line
from zkconsumer.lab.runs.summary import summarize
from zkconsumer.lab.sim.latency import QUANTILES, TABLES_PATH
from zkconsumer.lab.trace import read_traces

# Kafka parks a follower's SyncGroup until the leader's arrives and then answers them all at once
# (GroupCoordinator.doSyncGroup): of SyncGroup responses read within this window of one another, only the one
# whose request came last (the one that released them) was answered at once.
_RELEASED_TOGETHER_S = 0.005
# The consumer protocol's ConsumerGroupHeartbeat is answered at once too: KIP-848's coordinator never holds one
# (GroupMetadataManager.consumerGroupHeartbeat answers with whatever the member may have now).
_IMMEDIATE_APIS = ("FindCoordinator", "Heartbeat", "LeaveGroup", "OffsetCommit", "JoinGroup", "SyncGroup",
                   "ConsumerGroupHeartbeat")


def run_dirs(roots: Iterable[Path]) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every run directory (one case on one design) under `roots`, with its manifest."""
    for root in roots:
        for manifest in sorted(Path(root).glob("**/manifest.json")):
            yield manifest.parent, json.loads(manifest.read_text())


def _name(run_dir: Path) -> str:
    """`<root name>/<case>/<design>`: where a run came from, without the machine's paths."""
    return "/".join(run_dir.parts[-3:])


def undelayed(manifest: dict[str, Any]) -> bool:
    rules = manifest.get("scenario_definition", {}).get("network", [])
    return not any(rule.get("delay_ms") or rule.get("jitter_ms") for rule in rules)


def quantiles(values: list[float], points: int = QUANTILES) -> list[float]:
    """Linear-interpolated quantiles at 0, 1/(points-1), ..., 1 (numpy's default method)."""
    ordered = sorted(values)
    last = len(ordered) - 1
    result = []
    for i in range(points):
        position = i / (points - 1) * last
        low = int(position)
        high = min(low + 1, last)
        result.append(round(ordered[low] + (ordered[high] - ordered[low]) * (position - low), 4))
    return result


def parked_syncs(records: list[dict[str, Any]]) -> set[tuple[Any, Any]]:
    """(conn, correlation_id) of the SyncGroup responses that waited for another member's SyncGroup."""
    responses = sorted((r for r in records if r.get("type") == "wire" and r.get("proto") == "kafka"
                        and r.get("kind") == "response" and r.get("api_name") == "SyncGroup"
                        and r.get("latency_ms") is not None), key=lambda r: r["ts"])
    parked: set[tuple[Any, Any]] = set()
    batch: list[dict[str, Any]] = []
    for response in [*responses, None]:
        if response is not None and batch and response["ts"] - batch[-1]["ts"] <= _RELEASED_TOGETHER_S:
            batch.append(response)
            continue
        if batch:  # the latest request of a batch released it; the others had been parked until then
            releaser = max(batch, key=lambda r: r["ts"] - r["latency_ms"] / 1000)
            parked.update((r["conn"], r["correlation_id"]) for r in batch if r is not releaser)
        batch = [response] if response is not None else []
    return parked


def _latency(record: dict[str, Any], parked: set[tuple[Any, Any]] = frozenset()) -> tuple[str, str, float] | None:
    if record.get("type") != "wire" or record.get("latency_ms") is None:
        return None
    latency = float(record["latency_ms"])
    if record.get("proto") == "zk" and record.get("kind") == "reply" and record.get("op"):
        return "zk", record["op"], latency
    if record.get("proto") == "kafka" and record.get("kind") == "response":
        api = record.get("api_name")
        if api not in _IMMEDIATE_APIS:
            return None
        if api == "JoinGroup" and record.get("error_name") != "MEMBER_ID_REQUIRED":
            return None  # a JoinGroup with a member id is held until the group completes
        if api == "SyncGroup" and (record.get("conn"), record.get("correlation_id")) in parked:
            return None
        return "kafka", api, latency
    return None


def fit_tables(roots: Iterable[Path], window: str = "run") -> dict[str, Any]:
    """Quantile tables from every reply of the runs (`window="run"`), or only from those of the churn window
    (`"churn"`: from the `settled` phase to `done`, i.e. under the load of the membership changes alone)."""
    if window not in ("run", "churn"):
        raise ValueError(f"window must be 'run' or 'churn', got {window!r}")
    samples: dict[str, dict[str, list[float]]] = {"zk": defaultdict(list), "kafka": defaultdict(list)}
    used: list[str] = []
    servers: set[str] = set()
    for run_dir, manifest in run_dirs(roots):
        if not undelayed(manifest):
            continue
        used.append(_name(run_dir))
        servers.add(servers_line(manifest) or "servers not recorded")
        records = list(read_traces(run_dir))
        phases = {r["phase"]: r["ts"] for r in records if r.get("type") == "phase"}
        start, end = (phases.get("settled"), phases.get("done")) if window == "churn" else (None, None)
        parked = parked_syncs(records)
        for record in records:
            found = _latency(record, parked)
            ts = record.get("ts") or 0.0
            if found is None or (start is not None and ts < start) or (end is not None and ts > end):
                continue
            family, op, latency = found
            samples[family][op].append(latency)
    return {
        "source": f"lab wire records (latency_ms) of runs without injected delay, window: {window}; servers: "
                  f"{'; '.join(sorted(servers)) or 'none'}",
        "runs": used,
        "samples": {family: {op: len(v) for op, v in sorted(ops.items())} for family, ops in samples.items()},
        **{family: {op: quantiles(v) for op, v in sorted(ops.items())} for family, ops in samples.items()},
    }


def merge_tables(old: dict[str, Any], new: dict[str, Any], family: str) -> dict[str, Any]:
    """`old` with one wire family's tables, sample counts and runs replaced by `new`'s; `source` names both fits.
    A file written before the key was `runs_by_family` has it as `runs_by_design`: it is read, and written anew."""
    kept = "kafka" if family == "zk" else "zk"
    sources = old.get("sources") or {kept: old.get("source"), family: None}
    runs = old.get("runs_by_family") or old.get("runs_by_design") or {kept: old.get("runs", []), family: []}
    merged = {k: v for k, v in old.items() if k != "runs_by_design"}
    merged.update({family: new[family], "samples": {kept: old["samples"][kept], family: new["samples"][family]},
                   "sources": {kept: sources[kept], family: new["source"]},
                   "runs_by_family": {kept: runs[kept], family: new["runs"]}})
    merged["source"] = f"{family}: {new['source']}; {kept}: {sources[kept]}"
    merged["runs"] = sorted({*runs[kept], *new["runs"]})
    return merged


def real_per_change(roots: Iterable[Path]) -> list[dict[str, Any]]:
    """The lab's own per-change counts (zkconsumer/lab/runs/summary.py, from the wire in the churn window)."""
    rows = []
    for run_dir, _ in run_dirs(roots):
        s = summarize(run_dir)
        rows.append({
            "run": _name(run_dir), "case": s.case, "design": s.design, "members": s.members, "changes": s.changes,
            "completed": s.completed, "sweep": s.sweep, "attempts": s.attempts, "conflicts": s.conflicts,
            "failed_attempts": s.failed_attempts, "zk_requests": s.zk_requests, "zk_notifications": s.zk_notifications,
            "zk_by_op": dict(sorted(s.zk_by_op.items())), "kafka_coordination": s.kafka_coordination,
            "kafka_by_api": dict(sorted(s.kafka_by_api.items())), "kafka_errors": dict(sorted(s.kafka_errors.items())),
            "stable_s": s.stable_s,
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zkconsumer.lab.sim.calibrate", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    fit = sub.add_parser("fit", help="fit latency tables from lab run directories")
    fit.add_argument("roots", nargs="+", type=Path)
    fit.add_argument("--out", type=Path, default=TABLES_PATH)
    fit.add_argument("--window", choices=("run", "churn"), default="run")
    fit.add_argument("--only", choices=("zk", "kafka"), default=None, help="refit one wire family's tables only")
    real = sub.add_parser("real", help="print the lab's per-change counts as JSON")
    real.add_argument("roots", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.command == "fit":
        tables = fit_tables(args.roots, args.window)
        if not all(tables[family] for family in ([args.only] if args.only else ["zk", "kafka"])):
            print("no usable wire records found", file=sys.stderr)
            return 1
        if args.only:
            tables = merge_tables(json.loads(args.out.read_text()), tables, args.only)
        args.out.write_text(json.dumps(tables, indent=1) + "\n")
        print(f"wrote {args.out}: {tables['samples']}")
    else:
        print(json.dumps(real_per_change(args.roots), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
