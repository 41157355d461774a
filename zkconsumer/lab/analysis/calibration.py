"""Time to stable predicted out of sample: latency tables fitted from some runs, predictions checked on others.

The split is by repeat index, fixed before any outcome is seen: runs of an even repeat (r0, r2, ...) calibrate, runs
of an odd repeat (r1, r3, ...) are predicted. The tables are `zkconsumer.lab.sim.calibrate.fit_tables` of the
calibration runs (every ZooKeeper reply and every Kafka group request the coordinator answers at once, by
operation), fitted per design: each broker-side design's from its own runs, since each is another client
(kafka-python, librdkafka) and the consumer protocol another API. The simulation then runs every seed of
`predictions.SEEDS` at each held-out run's N, heartbeat and session (`predictions.run_key`) with those tables in
place of the packaged ones, without the capacity model: tables fitted from these runs already hold the queueing
the runs met, which the capacity model would add a second time. With a single repeat there is nothing to hold out,
and the report says the sweep's own prediction (capacity model over the packaged tables) was used instead.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any

from zkconsumer.lab.analysis.predictions import PREDICTED_DESIGNS, SEEDS, STABLE, Key, run_key
from zkconsumer.lab.rules.protocol import GROUP_HEARTBEAT_API

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Tables = dict[str, tuple[float, ...]]
HEARTBEATS = ("Heartbeat", GROUP_HEARTBEAT_API)


@dataclass(frozen=True)
class Holdout:
    calibration: list[dict[str, Any]]
    held_out: list[dict[str, Any]]


def split(runs: list[dict[str, Any]]) -> Holdout:
    """Even repeats calibrate, odd repeats are predicted (a run without a repeat index calibrates)."""
    odd = [r for r in runs if (r.get("repeat") or 0) % 2 == 1]
    return Holdout([r for r in runs if (r.get("repeat") or 0) % 2 == 0], odd)


def fit(runs: list[dict[str, Any]]) -> dict[str, Tables]:
    """Quantile tables per predicted design from that design's runs: the ZooKeeper design's by opcode, each
    broker-side design's by API (empty where the design has no calibration run)."""
    from zkconsumer.lab.sim.calibrate import fit_tables

    tables = {}
    for design in PREDICTED_DESIGNS:
        paths = [Path(r["path"]) for r in runs if r["design"] == design and r.get("path")]
        family = "zk" if design == "zk" else "kafka"
        tables[design] = {op: tuple(q) for op, q in fit_tables(paths)[family].items()} if paths else {}
    return tables


def simulate(task: tuple[str, Key, int, Tables]) -> tuple[str, Key, int, float | None]:
    """One (design, run key, seed) with the design's fitted tables. The configuration is
    `zkconsumer.lab.sim.sweep.predict`'s but for the latency tables, which it cannot take."""
    from zkconsumer.lab.sim.coordinator import CoordinatorSimConfig, kafka_latency, simulate_coordinator
    from zkconsumer.lab.sim.latency import LatencyModel
    from zkconsumer.lab.sim.sweep import NEWER_MODELS, broker_settings
    from zkconsumer.lab.sim.zk_sim import ZkSimConfig, simulate_zk

    design, key, seed, tables = task
    members, partitions, heartbeat, session = key
    if design == "zk":
        return design, key, seed, simulate_zk(ZkSimConfig(members=members, partitions=partitions, seed=seed,
                                                          latency=LatencyModel(tables=tables))).time_to_stable_s
    model = NEWER_MODELS.get(design, simulate_coordinator)
    # An API the design's runs have no round trip of is drawn from its heartbeat's (classic or KIP-848: a
    # consumer-protocol run has no classic Heartbeat to fall back on)
    config = CoordinatorSimConfig(members=members, partitions=partitions, seed=seed,
                                  latency=replace(kafka_latency(), tables=tables, fallback=heartbeat_api(tables)),
                                  **broker_settings(heartbeat, session))
    return design, key, seed, model(config).time_to_stable_s


def heartbeat_api(tables: Tables) -> str:
    """The heartbeat a design's fitted tables hold: the classic protocol's, else the consumer protocol's."""
    found = next((api for api in HEARTBEATS if api in tables), None)
    if found is None:
        raise ValueError(f"tables of {', '.join(sorted(tables)) or 'no API'} hold no heartbeat round trip")
    return found


def predict_held_out(spark: SparkSession, runs: list[dict[str, Any]]
                     ) -> tuple[dict[Key, dict[str, float | None]], set[str], str] | None:
    """(per run key: mean time to stable over SEEDS per design (`STABLE`'s columns) with tables fitted from that
    design's calibration runs, the held-out run ids, a note naming the split), or None when no run is held out or
    nothing calibrates."""
    holdout = split([r for r in runs if r["design"] in PREDICTED_DESIGNS])
    if not holdout.held_out or not holdout.calibration:
        return None
    tables = fit(holdout.calibration)
    # a broker-side design's tables need a heartbeat's round trips (`heartbeat_api`); the ZooKeeper design's none
    usable = {design for design, found in tables.items()
              if found and (design == "zk" or any(api in found for api in HEARTBEATS))}
    wanted = sorted({(r["design"], run_key(r)) for r in holdout.held_out if r["design"] in usable}, key=repr)
    if not wanted:
        return None
    tasks = [(design, key, s, tables[design]) for design, key in wanted for s in SEEDS]
    context = spark.sparkContext
    context.pythonExec = sys.executable  # the workers need this interpreter (the project), as sweep.py does
    # one small row per simulated (design, run key, seed): the simulation's tasks, not trace events
    results = context.parallelize(tasks, numSlices=min(len(tasks), 2 * len(wanted))).map(simulate).collect()
    means: dict[Key, dict[str, float | None]] = {}
    for design, key in wanted:
        means.setdefault(key, {})[STABLE[design]] = _mean([r[3] for r in results if (r[0], r[1]) == (design, key)])
    repeats = sorted({r.get("repeat") or 0 for r in holdout.calibration})
    note = (f"out of sample: latency tables fitted from the {len(holdout.calibration)} runs of repeats "
            f"{', '.join(f'r{i}' for i in repeats)} (even repeats), predicting the odd repeats")
    return means, {r["run_id"] for r in holdout.held_out}, note


def _mean(values: list[float | None]) -> float | None:
    return fmean(values) if values and all(v is not None for v in values) else None  # type: ignore[arg-type]
