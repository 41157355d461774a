"""The main job (`make demo`, `zkconsumer demo`): the comparison this project exists for, start to finish.

1. the herd scenario (one member joins a settled group of N) on four generations of group rebalancing (the
   ZooKeeper design, the classic eager protocol, cooperative-sticky and Kafka 4's consumer protocol: designs.py)
   against the embedded servers, which `zkconsumer lab run` starts and stops itself (docs/lab.md);
2. the PySpark analysis of those runs, with the scale simulation's predictions next to them (docs/analysis.md,
   docs/simulation.md), written as Parquet tables and one self-contained HTML report;
3. a summary table and the verdict (analysis/verdict.py) on the terminal, and the report's path.

ZooKeeper-design members run as rebalance-only threads by default (`--members threads`): that keeps the job
within a few minutes on two cores, and it is what the simulation executes, so the deterministic counts of the
two can be compared exactly. `--members processes` runs full consumers with fetchers instead.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

# One join costs the ZooKeeper design M² + 7·M + 3·P + 3 requests (docs/join-cost.md): with the herd's P = 72 the
# 3·P term hides M² up to N ≈ 14, so the sweep must go well past it for the herd to show (N = 32: M² = 1,089 of
# 1,539; N = 64: 4,225 of 4,899), and the simulation goes on to `predict_to`. Both designs run the same sizes. As
# threads, a design's members share the lab's 2 cores: with the machine loaded by other work (load 15-20) the
# ZooKeeper design's initial group of 128 ran out of rebalance retries and 256 coordinator threads in one process
# could not bootstrap (128 of them did, in 1-2 min), while this job took 4 min at load 1-4 (docs/lab.md).
DEFAULT_VALUES = "1,4,16,32,64"
DEFAULT_PREDICT_TO = 1024


def run_main_job(out_dir: Path, *, values: str = DEFAULT_VALUES, process_mode: str = "threads",
                 predict_to: int = DEFAULT_PREDICT_TO, console: Console | None = None) -> Path:
    """Run, analyse, report. Returns the report's path; the run directories are under OUT/runs."""
    from zkconsumer.lab.runs.session import LabSession, select_cases
    from zkconsumer.lab.scenarios.loading import find_scenario
    from zkconsumer.lab.terminal import run_in_terminal

    console = console or Console(stderr=True)
    began = time.monotonic()
    runs_dir, report_dir = out_dir / "runs", out_dir / "report"
    for stale in (runs_dir, report_dir):  # a report of this job only, not of an earlier one's leftovers
        if stale.exists():
            shutil.rmtree(stale)
    scenario = find_scenario("herd")
    cases = select_cases(scenario, values, 1)
    designs = demo_designs(scenario.designs)
    console.rule(f"1/3 lab: herd, N = {values}, designs {', '.join(designs)}, members as {process_mode}")
    run_in_terminal(LabSession(scenario, cases, designs, runs_dir, process_mode=process_mode))

    console.rule("2/3 analysis: PySpark local[2], with the scale simulation up to N = " f"{predict_to}")
    from zkconsumer.lab.analysis.job import analyze

    with console.status("Spark: reading traces, computing herd / split-brain / latency / delivery tables, "
                        "simulating ...", spinner="dots"):
        result = analyze([runs_dir], report_dir, predict_to=predict_to)
    console.print(f"{result.runs} runs, {result.trace_lines} trace lines ({result.bad_lines} bad) "
                  f"analysed in {result.seconds:.0f} s")

    console.rule("3/3 summary")
    from zkconsumer.lab.analysis.job import session

    spark = session()
    runs = [r.asDict() for r in result.read(spark, "runs").collect()]
    predicted = ([r.asDict() for r in result.read(spark, "predictions").collect()]
                 if "predictions" in result.tables else [])
    Console(width=200).print(summary_table(runs, predicted))
    from zkconsumer.lab.analysis.verdict import verdict

    for finding in verdict(runs):
        console.print(f"verdict: {finding.text}", markup=False)
    headline = _prediction_headline(spark, result)
    spark.stop()  # the Spark JVM is ours too: stopped here, not left to the interpreter's exit
    console.print("[brackets]: the simulation, mean over its seeds fixed in advance (predictions.SEEDS); it does not "
                  "model connection losses, whose re-sent requests are in the observed counts only", markup=False)
    if headline is not None:
        console.print(f"simulation: {headline}", markup=False)
    console.print(f"done in {time.monotonic() - began:.0f} s; every server this job started is stopped")
    print(f"report: {result.report}")
    return result.report


def demo_designs(scenario_designs: list[str]) -> list[str]:
    """Every generation this machine can run, but the two reference clients, the original 0.8.2.2 consumer and
    Kafka's Java consumer of the consumer protocol: each is a design the job runs already, with another client (the
    references the lab's own clients are measured against, docs/interop.md), and a JVM per member would double the
    job."""
    from zkconsumer.lab.designs import select_designs

    return [d for d in select_designs(scenario_designs, "all") if d not in ("original", "consumer-java")]


def _prediction_headline(spark: Any, result: Any) -> str | None:
    """The line predictions.headline writes: "X of Y predictions hold ...; k of k protocol identities hold"."""
    if "prediction_comparison" not in result.tables:
        return None
    from zkconsumer.lab.analysis.predictions import headline

    return headline(result.read(spark, "prediction_comparison").collect())


def summary_table(runs: list[dict[str, Any]], predicted: list[dict[str, Any]]) -> Table:
    """Per N: each design's cost of one join, observed (and predicted where the simulation ran): the ZooKeeper
    design's requests (with its connection losses and the requests re-sent after them), notifications and conflicts,
    and per broker-side design its coordination requests
    (protocol_rules.is_coordination_request) and time to stable; for every design the partitions "stopped": revoked
    from a member that got them back (rules/handover.py), the stop-the-world of the eager protocols."""
    from zkconsumer.lab.analysis.predictions import SIM_PREFIX, STABLE, mean_by_size
    from zkconsumer.lab.analysis.report import SHORT
    from zkconsumer.lab.designs import BROKER_SIDE_DESIGNS

    by_n: dict[int, dict[str, dict[str, Any]]] = {}
    for run in runs:
        by_n.setdefault(run["members"], {})[run["design"]] = run
    broker_side = [d for d in BROKER_SIDE_DESIGNS if any(r["design"] == d for r in runs)]
    prediction = mean_by_size(predicted)  # per N: the mean over the fixed seeds
    table = Table(title="one join into a group of N (per membership change; predicted in brackets)")
    for column in ("N", "zk requests", "zk losses / re-sent", "zk notifications", "zk conflicts", "zk stable s",
                   "zk stopped",
                   *(f"{SHORT[d]} {label}" for d in broker_side for label in ("coord req", "stable s", "stopped"))):
        table.add_column(column, justify="right")

    def cell(run: dict[str, Any] | None, column: str, predicted_column: str | None, n: int, digits: int = 0) -> str:
        observed = "-" if run is None or run.get(column) is None else f"{run[column]:.{digits}f}"
        p = prediction.get(n)
        if predicted_column is None or p is None or p.get(predicted_column) is None:
            return observed
        return f"{observed} [{p[predicted_column]:.{digits}f}]"

    # the simulation's columns for each broker-side design it models (predictions.py): those get brackets
    predicted_columns = {design: (f"{prefix}_coordination", STABLE[design]) for design, prefix in SIM_PREFIX.items()}
    for n in sorted(set(by_n) | set(prediction)):
        zk = by_n.get(n, {}).get("zk")
        cells = []
        for design in broker_side:
            run = by_n.get(n, {}).get(design)
            coordination, stable = predicted_columns.get(design, (None, None))
            cells += [cell(run, "kafka_coordination_per_change", coordination, n),
                      cell(run, "time_to_stable_s", stable, n, 1), cell(run, "revoked_kept_per_change", None, n)]
        # the join's ZooKeeper connection losses and the requests re-sent after them (in the requests; not simulated)
        losses = ("-" if zk is None or zk.get("connection_losses") is None
                  else f"{zk['connection_losses']} / {zk.get('resent_requests_per_change') or 0:.0f}")
        table.add_row(str(n), cell(zk, "zk_requests_per_change", "zk_requests", n), losses,
                      cell(zk, "zk_notifications_per_change", "zk_notifications", n),
                      cell(zk, "conflicts", "zk_conflicts", n),
                      cell(zk, "time_to_stable_s", "zk_time_to_stable_s", n, 1),
                      cell(zk, "revoked_kept_per_change", None, n), *cells)
    return table
