"""The opt-in modes (zkconsumer/modes.py, docs/modes.md) side by side: table `modes`, one row per scenario, sweep
value and design+mode, the mean over its repeats of the per-run metrics the `runs` table already holds (metrics.py
computes them: herd.py's requests, notifications and attempts, ownership.py's unowned partition-seconds and
stop-the-world pauses and partitions moved, windows.py's time to stable), and each one's ratio to the faithful zk
runs of the same scenario and sweep value.

A run's mode is its manifest's `mode` (runs/case_run.py writes it for a mode's runs only): a run without one is
faithful.
Runs that are all faithful give no table, and the report no section.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from zkconsumer.lab.analysis.owner_nodes import zookeeper_design
from zkconsumer.lab.analysis.readers import RunInfo
from zkconsumer.lab.designs import FAITHFUL, MODE_DESIGN

KEYS = ("scenario", "sweep_axis", "sweep_value")
# (runs column, modes column): what the comparison shows, each the mean over a row's runs
METRICS = (
    ("zk_requests_per_change", "zk_requests_per_change"),
    ("zk_notifications_per_change", "zk_notifications_per_change"),
    ("owner_conflicts", "owner_conflicts"),
    ("failed_attempts", "failed_attempts"),
    ("time_to_stable_s", "time_to_stable_s"),
    ("unowned_partition_s", "unowned_partition_s"),
    ("median_pause_s", "median_pause_s"),  # a member's stop-the-world: its fetchers stopped to started again
    ("max_pause_s", "max_pause_s"),
    # partitions whose owner changed (per_run/ownership.py `moved`): what the sticky assignor cuts
    ("partitions_moved_per_change", "partitions_moved_per_change"),
)
# the metrics also shown as a ratio to the faithful mode (`<column>_x`): what a mode is meant to cut
# ZooKeeper traffic: none for the coordinator design, whose runs table holds 0 there, which is no figure to compare
ZOOKEEPER_ONLY = ("zk_requests_per_change", "zk_notifications_per_change")
RATIOS = ("zk_requests_per_change", "zk_notifications_per_change", "time_to_stable_s", "unowned_partition_s",
          "median_pause_s", "partitions_moved_per_change")
MODE_SCHEMA = T.StructType([T.StructField("run_id", T.StringType(), False), T.StructField("mode", T.StringType())])


def run_mode(run: RunInfo) -> str:
    """The run's mode, from its manifest; faithful for every run made before modes existed."""
    manifest = json.loads((run.path / "manifest.json").read_text(encoding="utf-8"))
    return manifest.get("mode") or FAITHFUL


def modes_frame(spark: SparkSession, runs: list[RunInfo]) -> DataFrame:
    return spark.createDataFrame([(r.run_id, run_mode(r)) for r in runs], MODE_SCHEMA)


def label(design: Column, mode: Column) -> Column:
    """designs.design_label as a column: `zk`, `zk+incremental`."""
    return F.when(mode == FAITHFUL, design).otherwise(F.concat(design, F.lit("+"), mode))


def modes_table(runs: DataFrame, modes: DataFrame) -> DataFrame:
    """`runs` (the runs table) with each run's mode: one row per KEYS, design and mode."""
    tagged = runs.join(modes, "run_id", "left").fillna(FAITHFUL, subset=["mode"])
    rows = tagged.groupBy(*KEYS, "design", "mode").agg(
        F.count(F.lit(1)).alias("runs"), F.sum(F.col("completed").cast("int")).alias("completed_runs"),
        F.first("members", ignorenulls=True).alias("members"),
        *[F.mean(F.when(zookeeper_design(), F.col(source)) if source in ZOOKEEPER_ONLY else F.col(source))
          .alias(column) for source, column in METRICS])
    base = rows.filter((F.col("design") == MODE_DESIGN) & (F.col("mode") == FAITHFUL)).select(
        *[F.col(k).alias(f"_b_{k}") for k in KEYS], *[F.col(c).alias(f"_b_{c}") for c in RATIOS])
    same = [F.col(k).eqNullSafe(F.col(f"_b_{k}")) for k in KEYS]
    joined = rows.join(F.broadcast(base), same[0] & same[1] & same[2], "left")
    ratios = [F.when(F.col(f"_b_{c}") > 0, F.col(c) / F.col(f"_b_{c}")).alias(f"{c}_x") for c in RATIOS]
    return in_order(joined.select(*KEYS, label(F.col("design"), F.col("mode")).alias("label"), "design", "mode",
                                  "members", "runs", "completed_runs", *[c for _, c in METRICS], *ratios))


def in_order(modes: DataFrame) -> DataFrame:
    """The table's rows as the report shows them (`modes_order`), sorted in Spark."""
    return modes.orderBy(*KEYS, F.col("design") != MODE_DESIGN, "design", F.col("mode") != FAITHFUL, "mode")


def modes_order(row: dict) -> tuple:
    """A row's place in the report: by scenario and sweep value, the faithful zk row first, then the zk modes,
    then the other designs (as `in_order`, nulls first)."""
    def key(value: Any) -> tuple:
        return (value is not None, value)

    return (*[key(row[k]) for k in KEYS], row["design"] != MODE_DESIGN, key(row["design"]),
            row["mode"] != FAITHFUL, key(row["mode"]))
