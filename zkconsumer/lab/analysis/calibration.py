"""Time to stable predicted out of sample: latency tables fitted from some runs, predictions checked on others.

The split is by repeat index, fixed before any outcome is seen: runs of an even repeat (r0, r2, ...) calibrate, runs
of an odd repeat (r1, r3, ...) are predicted. The tables are `zkconsumer.lab.sim.calibrate.fit_tables` of the
calibration runs (every ZooKeeper reply and every Kafka group request the coordinator answers at once, by
operation); the simulation then runs every seed of `predictions.SEEDS` at each held-out run's N with those tables
in place of the packaged ones, without the capacity model: tables fitted from these runs already hold the queueing
the runs met, which the capacity model would add a second time. With a single repeat there is nothing to hold out,
and the report says the sweep's own prediction (capacity model over the packaged tables) was used instead.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any

from zkconsumer.lab.analysis.predictions import PREDICTED_DESIGNS, SEEDS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Tables = dict[str, tuple[float, ...]]


@dataclass(frozen=True)
class Holdout:
    calibration: list[dict[str, Any]]
    held_out: list[dict[str, Any]]


def split(runs: list[dict[str, Any]]) -> Holdout:
    """Even repeats calibrate, odd repeats are predicted (a run without a repeat index calibrates)."""
    odd = [r for r in runs if (r.get("repeat") or 0) % 2 == 1]
    return Holdout([r for r in runs if (r.get("repeat") or 0) % 2 == 0], odd)


def fit(runs: list[dict[str, Any]]) -> dict[str, Tables]:
    """Quantile tables per design ("zk" by opcode, "kafka" by API) from the runs' wire records."""
    from zkconsumer.lab.sim.calibrate import fit_tables

    fitted = fit_tables([Path(r["path"]) for r in runs if r.get("path")])
    return {design: {op: tuple(q) for op, q in fitted[design].items()} for design in ("zk", "kafka")}


def simulate(task: tuple[int, int, int, Tables | None, Tables | None]) -> tuple[int, int, int, float | None,
                                                                                 float | None]:
    """One (N, partitions, seed) of both designs with the given tables; None for a design without tables. The
    configuration is `zkconsumer.lab.sim.sweep.predict`'s but for the latency tables, which it cannot take."""
    from zkconsumer.lab.sim.coordinator import CoordinatorSimConfig, kafka_latency, simulate_coordinator
    from zkconsumer.lab.sim.latency import LatencyModel
    from zkconsumer.lab.sim.zk_sim import ZkSimConfig, simulate_zk

    members, partitions, seed, zk_tables, kafka_tables = task
    zk = co = None
    if zk_tables:
        zk = simulate_zk(ZkSimConfig(members=members, partitions=partitions, seed=seed,
                                     latency=LatencyModel(tables=zk_tables))).time_to_stable_s
    if kafka_tables:
        co = simulate_coordinator(CoordinatorSimConfig(
            members=members, partitions=partitions, seed=seed,
            latency=replace(kafka_latency(), tables=kafka_tables))).time_to_stable_s
    return members, partitions, seed, zk, co


def predict_held_out(spark: SparkSession, runs: list[dict[str, Any]]
                     ) -> tuple[dict[tuple[int, int], dict[str, float | None]], set[str], str] | None:
    """(per (N, partitions): mean time to stable over SEEDS per design with tables fitted from the calibration
    runs, the held-out run ids, a note naming the split), or None when no run is held out or nothing calibrates."""
    holdout = split([r for r in runs if r["design"] in PREDICTED_DESIGNS])
    if not holdout.held_out or not holdout.calibration:
        return None
    tables = fit(holdout.calibration)
    if not tables["zk"] and not tables["kafka"]:
        return None
    sizes = sorted({(r["members"], r["partitions"]) for r in holdout.held_out})
    tasks = [(n, p, s, tables["zk"] or None, tables["kafka"] or None) for n, p in sizes for s in SEEDS]
    context = spark.sparkContext
    context.pythonExec = sys.executable  # the workers need this interpreter (the project), as sweep.py does
    # one small row per simulated (N, seed): the simulation's tasks, not trace events
    results = context.parallelize(tasks, numSlices=min(len(tasks), 2 * len(sizes))).map(simulate).collect()
    means: dict[tuple[int, int], dict[str, float | None]] = {}
    for n, p in sizes:
        mine = [r for r in results if (r[0], r[1]) == (n, p)]
        means[(n, p)] = {"zk_time_to_stable_s": _mean([r[3] for r in mine]),
                         "coord_time_to_stable_s": _mean([r[4] for r in mine])}
    repeats = sorted({r.get("repeat") or 0 for r in holdout.calibration})
    note = (f"out of sample: latency tables fitted from the {len(holdout.calibration)} runs of repeats "
            f"{', '.join(f'r{i}' for i in repeats)} (even repeats), predicting the odd repeats")
    return means, {r["run_id"] for r in holdout.held_out}, note


def _mean(values: list[float | None]) -> float | None:
    return fmean(values) if values and all(v is not None for v in values) else None  # type: ignore[arg-type]
