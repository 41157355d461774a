"""The scale simulation's sweep up to N = 10,000 on local[2]: the four curves (ZooKeeper, eager, cooperative, consumer
protocol), every churn kind, one Spark task each.

    .venv/bin/python benchmarks/bench_sim.py [--members 16,100,1000,10000] [--churn join,leave,crash]
                                             [--partitions 72] [--scale 1.0] [--seed 101] [--cores 2]

Prints one line per combination (the predictions per membership change, the task's own wall time and peak
memory), then the seconds of the sweep (Spark session start apart) and the peak resident memory: the largest
task's (each task runs in a fresh Python worker: `ru_maxrss` is its own), the driver's, and Spark's JVM (VmHWM).
The ZooKeeper design is executed with the identical-view shortcut (docs/simulation.md), which is what makes
N = 10,000 fit: 10⁸ registration reads per change are counted, not executed.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from zkconsumer.lab.sim.sweep import local_session, sweep  # noqa: E402


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _jvm_peak_kb(spark) -> int | None:
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    try:
        status = Path(f"/proc/{proc.pid}/status").read_text()
    except (AttributeError, OSError):
        return None
    return next((int(x.split()[1]) for x in status.splitlines() if x.startswith("VmHWM:")), None)


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=_ints, default=[16, 100, 1000, 10000])
    parser.add_argument("--churn", default="join,leave,crash")
    parser.add_argument("--partitions", type=_ints, default=[72])
    parser.add_argument("--scale", type=float, default=1.0, help="latency scale (every round trip multiplied)")
    parser.add_argument("--seed", type=int, default=101)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--master", default=None, metavar="URL",
                        help="a Spark cluster, e.g. spark://host:7077 (default local[CORES]; docs/analysis.md)")
    args = parser.parse_args()
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]), flush=True)

    began = time.perf_counter()
    spark = local_session(args.cores, reuse_workers=False, master=args.master)
    master = spark.sparkContext.master
    started = time.perf_counter() - began
    params = {"members": args.members, "partitions": args.partitions, "churn": args.churn.split(","),
              "latency_scale": [args.scale], "seed": [args.seed]}
    try:
        began = time.perf_counter()
        rows = sorted(sweep(params, spark).collect(), key=lambda r: (r.churn, r.members, r.partitions))
        elapsed = time.perf_counter() - began
        jvm = _jvm_peak_kb(spark)
    finally:
        spark.stop()

    print(f"{'churn':6} {'N':>6} {'P':>5} | {'zk req':>11} {'zk notif':>8} {'zk stable s':>11} {'confl':>5} "
          f"{'failed':>6} | {'coord req':>9} {'coord stable s':>14} | {'coop req':>8} {'coop s':>6} | "
          f"{'cgp req':>7} {'cgp s':>6} | {'task s':>7} {'peak MB':>8}")
    for r in rows:
        print(f"{r.churn:6} {r.members:>6} {r.partitions:>5} | {r.zk_requests:>11} {r.zk_notifications:>8} "
              f"{_fmt(r.zk_time_to_stable_s):>11} {r.zk_conflicts:>5} {r.zk_failed_attempts:>6} | "
              f"{r.coord_coordination:>9} {_fmt(r.coord_time_to_stable_s):>14} | "
              f"{r.cooperative_coordination:>8} {_fmt(r.cooperative_time_to_stable_s):>6} | "
              f"{r.consumer_coordination:>7} {_fmt(r.consumer_time_to_stable_s):>6} | "
              f"{r.zk_wall_s + r.coord_wall_s + r.cooperative_wall_s + r.consumer_wall_s:>7.1f} "
              f"{r.peak_rss_mb:>8.0f}")
    unsettled = [(r.churn, r.members) for r in rows
                 if not (r.zk_settled and r.coord_settled and r.cooperative_settled and r.consumer_settled)]
    driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nsweep: {len(rows)} combinations in {elapsed:.1f} s on {master} "
          f"(Spark session start {started:.1f} s apart)")
    print(f"peak memory: largest task {max(r.peak_rss_mb for r in rows):.0f} MB, driver {driver:.0f} MB, "
          f"JVM {_fmt(jvm / 1024 if jvm else None, 0)} MB")
    if unsettled:
        print(f"NOT SETTLED: {unsettled}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
