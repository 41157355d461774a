"""Fit the simulation's latency tables from lab runs, and read the real per-change counts the simulation is
checked against.

    python -m zkconsumer.lab.sim.calibrate fit /tmp/herd-both /tmp/far /tmp/far2     # writes latency_tables.json
    python -m zkconsumer.lab.sim.calibrate real /tmp/herd-threads                    # per-change counts, as JSON

`fit` keeps only runs without injected network delay (no `[[network]]` rule with a delay, e.g. far-members at
delay_ms=0): a delayed link's round trips contain the delay, which the model adds per member instead (`extra_ms`).
ZooKeeper: the `latency_ms` of every reply (`type=wire, proto=zk, kind=reply`), by opcode. Kafka: the group
requests a coordinator answers at once (FindCoordinator, Heartbeat, LeaveGroup, OffsetCommit, the
MEMBER_ID_REQUIRED JoinGroup, SyncGroups not parked), by API; held JoinGroups measure the coordinator's wait,
which the coordinator model computes itself.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from zkconsumer.lab.sim.latency import QUANTILES, TABLES_PATH
from zkconsumer.lab.summary import summarize
from zkconsumer.lab.trace import read_traces

# tansu re-checks a parked SyncGroup every second: anything this slow waited for the coordinator, not the network.
_PARKED_MS = 500.0
_IMMEDIATE_APIS = ("FindCoordinator", "Heartbeat", "LeaveGroup", "OffsetCommit", "JoinGroup", "SyncGroup")


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


def _latency(record: dict[str, Any]) -> tuple[str, str, float] | None:
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
        if api == "SyncGroup" and latency >= _PARKED_MS:
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
    for run_dir, manifest in run_dirs(roots):
        if not undelayed(manifest):
            continue
        used.append(_name(run_dir))
        records = list(read_traces(run_dir))
        phases = {r["phase"]: r["ts"] for r in records if r.get("type") == "phase"}
        start, end = (phases.get("settled"), phases.get("done")) if window == "churn" else (None, None)
        for record in records:
            found = _latency(record)
            ts = record.get("ts") or 0.0
            if found is None or (start is not None and ts < start) or (end is not None and ts > end):
                continue
            design, op, latency = found
            samples[design][op].append(latency)
    return {
        "source": f"lab wire records (latency_ms) of runs without injected delay, window: {window}",
        "runs": used,
        "samples": {design: {op: len(v) for op, v in sorted(ops.items())} for design, ops in samples.items()},
        **{design: {op: quantiles(v) for op, v in sorted(ops.items())} for design, ops in samples.items()},
    }


def real_per_change(roots: Iterable[Path]) -> list[dict[str, Any]]:
    """The lab's own per-change counts (zkconsumer/lab/summary.py, from the wire in the churn window)."""
    rows = []
    for run_dir, _ in run_dirs(roots):
        s = summarize(run_dir)
        rows.append({
            "run": _name(run_dir), "case": s.case, "design": s.design, "members": s.members, "changes": s.changes,
            "completed": s.completed, "sweep": s.sweep, "attempts": s.attempts, "conflicts": s.conflicts,
            "failed_attempts": s.failed_attempts, "zk_requests": s.zk_requests, "zk_notifications": s.zk_notifications,
            "zk_by_op": dict(sorted(s.zk_by_op.items())), "kafka_coordination": s.kafka_coordination,
            "kafka_by_api": dict(sorted(s.kafka_by_api.items())), "stable_s": s.stable_s,
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zkconsumer.lab.sim.calibrate", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    fit = sub.add_parser("fit", help="fit latency tables from lab run directories")
    fit.add_argument("roots", nargs="+", type=Path)
    fit.add_argument("--out", type=Path, default=TABLES_PATH)
    fit.add_argument("--window", choices=("run", "churn"), default="run")
    real = sub.add_parser("real", help="print the lab's per-change counts as JSON")
    real.add_argument("roots", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.command == "fit":
        tables = fit_tables(args.roots, args.window)
        if not tables["zk"] or not tables["kafka"]:
            print("no usable wire records found", file=sys.stderr)
            return 1
        args.out.write_text(json.dumps(tables, indent=1) + "\n")
        print(f"wrote {args.out}: {tables['samples']}")
    else:
        print(json.dumps(real_per_change(args.roots), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
