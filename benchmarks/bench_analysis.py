"""The lab's analysis job at scale: generate 1,000,000 trace events across runs, time the analysis on local[2].

    .venv/bin/python benchmarks/bench_analysis.py [--events 1000000] [--runs 20] [--keep DIR]

The events are synthetic runs of both designs (zkconsumer/lab/analysis/synthetic.py): a realistic mix of wire
records, member events, produce and consume batches, owner snapshots and mntr samples.

Prints the seconds of the analysis (Spark session start apart) and the peak resident memory: the Python driver
(getrusage self), Spark's JVM (its VmHWM while it runs, since it is not a finished child) and getrusage of the
finished children.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from zkconsumer.lab.analysis.job import analyze, session  # noqa: E402
from zkconsumer.lab.analysis.synthetic import generate  # noqa: E402


def jvm_peak_kib(spark) -> int | None:
    """VmHWM of the JVM pyspark started (None when it cannot be read)."""
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    try:
        status = Path(f"/proc/{proc.pid}/status").read_text()
    except (AttributeError, OSError):
        return None
    line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1])


def jvm_cpu_seconds(spark) -> float | None:
    """User + system CPU seconds of the JVM so far: a steadier measure than wall time on a shared machine."""
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    try:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (AttributeError, OSError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--keep", type=Path, help="generate into (and keep) this directory")
    parser.add_argument("--runs-from", type=Path, help="analyse these runs (from an earlier --keep) instead")
    parser.add_argument("--driver-memory", default="2g", help="the JVM heap (spark.driver.memory)")
    parser.add_argument("--master", default=None, metavar="URL",
                        help="a Spark cluster, e.g. spark://host:7077 (default local[2]; docs/analysis.md); the JVM "
                             "figures are then the driver's, its executors apart")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-analysis-"))
    runs = args.runs_from or root / "runs"
    if args.runs_from is None:
        began = time.perf_counter()
        events = generate(runs, args.events, args.runs)
        size = sum(p.stat().st_size for p in runs.glob("**/*.jsonl"))
        print(f"generated {events:,} events in {args.runs} runs ({size / 2**20:.0f} MiB of JSON lines) in "
              f"{time.perf_counter() - began:.1f} s")
    began = time.perf_counter()
    spark = session("bench-analysis", driver_memory=args.driver_memory, master=args.master)
    print(f"Spark session ({spark.sparkContext.master}) started in {time.perf_counter() - began:.1f} s")
    began, cpu = time.perf_counter(), jvm_cpu_seconds(spark)
    result = analyze([runs], root / "out", spark)
    seconds = time.perf_counter() - began
    cpu_used = jvm_cpu_seconds(spark) - cpu if cpu is not None else None
    jvm = jvm_peak_kib(spark)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"analysis: {result.trace_lines:,} lines of {result.runs} runs in {seconds:.1f} s "
          f"({result.trace_lines / seconds:,.0f} lines/s)"
          + (f", JVM CPU {cpu_used:.1f} s (of {2 * seconds:.0f} s on two cores)" if cpu_used is not None else ""))
    jvm_text = f"{jvm / 1024:.0f} MiB" if jvm is not None else "unknown"
    total = own + (jvm or 0) + children
    print(f"peak RSS: driver {own / 1024:.0f} MiB + JVM {jvm_text} + finished children {children / 1024:.0f} MiB "
          f"= {total / 1024:.0f} MiB")
    print(f"report: {result.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
