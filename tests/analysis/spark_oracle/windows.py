"""Every run's time frame built in Spark, run by run: the oracle of per_run/frame.py (bounds, changes, windows) and
of per_run/core.py's change-window rule (`attach_change`). What the churn window, a change, its number and its
window are: zkconsumer/lab/analysis/windows.py, which keeps the schemas and the actions read here.

A run has a handful of changes, and nothing of it goes to the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

import spark_oracle.owner_nodes as wire
from zkconsumer.lab.analysis.windows import COUNTED_ACTIONS, WINDOW_ACTIONS, WINDOWS_SCHEMA


@dataclass
class Windows:
    bounds: DataFrame  # per run (BOUNDS_SCHEMA): churn_start (settled), churn_end (done, else the last record), ...
    changes: DataFrame  # one row per change-starting membership record (CHANGES_SCHEMA), with its `stable`
    windows: DataFrame  # run_id, change_index (0 = settled to the first change), win_start, win_end, last


def build(records: DataFrame, keep: Callable[[DataFrame], DataFrame] = lambda df: df) -> Windows:
    """Every run's bounds, changes and windows, built in Spark from its phase, membership and stable records and
    its members' ownership events; `keep` materialises the three small frames, which every table reads."""
    type_ = F.col("type")
    phase = F.struct(
        F.max("ts").alias("run_end"),
        F.min(F.when((type_ == "phase") & (F.col("phase") == "settled"), F.col("ts"))).alias("settled"),
        F.min(F.when((type_ == "phase") & (F.col("phase") == "done"), F.col("ts"))).alias("done"))
    runs = records.groupBy("run_id").agg(phase.alias("p")).select("run_id", "p.*")
    runs = runs.withColumn("churn_end", F.coalesce("done", "run_end"))
    numbered = _numbered(records)
    starts = _starts(records, numbered, runs)
    changes = keep(_changes(records, numbered, starts, runs))
    return Windows(keep(_bounds(records, changes, runs)), changes, keep(_windows(changes, runs)))


def _numbered(records: DataFrame) -> DataFrame:
    """The change-starting membership records, numbered as the orchestrator numbers them: change_index in time
    order (then step), and change_number, where each record adds max(1, members)."""
    order = Window.partitionBy("run_id").orderBy("ts", F.coalesce("step", F.lit(0)), "action",
                                                 F.array_join("members", ","))
    weight = F.when(F.col("members").isNull(), 1).otherwise(F.greatest(F.lit(1), F.size("members")))
    return (records.filter((F.col("type") == "membership") & F.col("action").isin(*WINDOW_ACTIONS))
            .select("run_id", "design", "ts", "action", "members", "step", weight.alias("weight"))
            .withColumn("change_index", F.row_number().over(order))
            .withColumn("change_number", F.sum("weight").over(order.rowsBetween(Window.unboundedPreceding, 0))))


def _starts(records: DataFrame, numbered: DataFrame, runs: DataFrame) -> DataFrame:
    """run_id, starts (each change's window start, by change_index - 1).

    A leave starts at a leaver's last ownership event before its record when that event is a stop and later than
    the previous change's start (or `settled`). That floor is the previous start, itself possibly moved, so the
    starts are folded over each run's changes in order (a handful per run)."""
    kind, type_ = F.col("kind"), F.col("type")
    # each member's ownership events, to find a leaver's last one (1 = a start, 0 = a stop)
    # (the original design's members report none: its owner-node creates and deletes on the wire stand in,
    # owner_nodes.py, and so does its closing the session, which deletes them)
    own = (F.when((type_ == "member_event") & (kind == "fetchers_started"), 1)
           .when((type_ == "member_event") & (kind == "fetchers_stopped") & (F.col("partitions") != "[]"), 0)
           .when((type_ == "generation") & (kind == "assigned"), 1)
           .when((type_ == "generation") & kind.isin("revoked", "lost"), 0)
           .when(wire.from_wire() & wire.claimed(), 1)
           .when(wire.from_wire() & (wire.deleted() | wire.session_closed()), 0))
    events = (records.filter(own.isNotNull())
              .select("run_id", F.coalesce("member", "link").alias("member"), F.col("ts").alias("e_ts"),
                      own.alias("start")))
    leavers = (numbered.filter(F.col("action") == "leave")
               .select("run_id", "change_index", "ts", F.explode("members").alias("member")))
    # a leaver's last event at or before the record (the latest; a start wins a tie, as in a tuple's max)
    last = (leavers.join(events, ["run_id", "member"]).filter(F.col("e_ts") <= F.col("ts"))
            .groupBy("run_id", "change_index", "member")
            .agg(F.max(F.struct(F.col("e_ts").alias("ts"), "start")).alias("last"))
            .groupBy("run_id", "change_index").agg(F.collect_list("last").alias("lasts")))
    per_run = (numbered.join(last, ["run_id", "change_index"], "left")
               .groupBy("run_id")
               .agg(F.array_sort(F.collect_list(F.struct("change_index", "ts", "lasts"))).alias("changes"))
               .join(runs.select("run_id", "settled"), "run_id"))
    initial = F.struct(F.coalesce("settled", F.lit(float("-inf"))).alias("floor"),
                       F.array().cast("array<double>").alias("starts"))

    def fold(acc: Column, change: Column) -> Column:
        stops = F.filter(F.coalesce(change["lasts"], F.array()),
                         lambda e: (e["start"] == 0) & (e["ts"] > acc["floor"]))
        start = F.least(change["ts"], F.array_min(F.transform(stops, lambda e: e["ts"])))
        return F.struct(start.alias("floor"), F.concat(acc["starts"], F.array(start)).alias("starts"))

    return per_run.select("run_id", F.aggregate("changes", initial, fold)["starts"].alias("starts"))


def _changes(records: DataFrame, numbered: DataFrame, starts: DataFrame, runs: DataFrame) -> DataFrame:
    """CHANGES_SCHEMA: each change with its window (to the next change's start; the last to `done`) and its first
    `stable` record, which names it by its change number."""
    stable = (records.filter(F.col("type") == "stable")
              .groupBy("run_id", F.col("generation_or_rebalance").alias("change_number"))
              .agg(F.min(F.struct("ts", "duration_s")).alias("s")))
    index = F.col("change_index")
    start = F.element_at("starts", index)
    end = F.when(index < F.size("starts"), F.element_at("starts", index + 1)).otherwise(
        F.greatest("churn_end", start))
    counted = F.when(F.col("action").isin(*COUNTED_ACTIONS), F.col("weight")).otherwise(0)
    return (numbered.join(starts, "run_id").join(runs.select("run_id", "churn_end"), "run_id")
            .join(stable, ["run_id", "change_number"], "left")
            .select("run_id", "design", index.cast("int").alias("change_index"),
                    F.col("change_number").cast("int").alias("change_number"), "action",
                    F.coalesce(F.array_join("members", ","), F.lit("")).alias("change_members"),
                    F.col("step").cast("int").alias("step"), F.col("weight").cast("int").alias("weight"),
                    counted.cast("int").alias("counted"), F.col("ts").alias("change_ts"),
                    start.alias("window_start"), end.alias("window_end"),
                    F.col("s.duration_s").alias("stable_s"), F.col("s.ts").alias("stable_ts")))


def _in_churn(ts: Column) -> Column:
    return F.col("settled").isNotNull() & (F.col("settled") <= ts) & (F.col("done").isNull() | (ts <= F.col("done")))


def _bounds(records: DataFrame, changes: DataFrame, runs: DataFrame) -> DataFrame:
    """BOUNDS_SCHEMA: the churn window, and what the summary counts in it (changes, stable records)."""
    counted = (changes.join(runs, "run_id").filter(_in_churn(F.col("change_ts"))).groupBy("run_id")
               .agg(F.sum("counted").alias("changes"), F.count(F.lit(1)).alias("membership_records")))
    stable = (records.filter(F.col("type") == "stable").join(runs, "run_id").filter(_in_churn(F.col("ts")))
              .groupBy("run_id").agg(F.max("duration_s").alias("time_to_stable_s"),
                                     F.median("duration_s").alias("median_stable_s"),
                                     F.count("duration_s").alias("stable_records")))
    zero = F.lit(0)
    return (runs.join(counted, "run_id", "left").join(stable, "run_id", "left")
            .select("run_id", F.col("settled").alias("churn_start"), "churn_end", "run_end",
                    F.coalesce("changes", zero).cast("int").alias("changes"),
                    F.coalesce("membership_records", zero).cast("int").alias("membership_records"),
                    "time_to_stable_s", "median_stable_s",
                    F.coalesce("stable_records", zero).cast("int").alias("stable_records")))


def _windows(changes: DataFrame, runs: DataFrame) -> DataFrame:
    """WINDOWS_SCHEMA: each change's window, and window 0, the quiet time from `settled` to the first change."""
    per_run = changes.groupBy("run_id").agg(F.count(F.lit(1)).alias("n"),
                                            F.min_by("window_start", "change_index").alias("first"))
    quiet = (runs.filter(F.col("settled").isNotNull()).join(per_run, "run_id", "left")
             .select("run_id", F.lit(0).alias("change_index"), F.col("settled").alias("win_start"),
                     F.greatest(F.coalesce("first", "churn_end"), "settled").alias("win_end"),
                     F.col("n").isNull().alias("last")))
    moving = (changes.join(per_run, "run_id")
              .select("run_id", "change_index", F.col("window_start").alias("win_start"),
                      F.col("window_end").alias("win_end"), (F.col("change_index") == F.col("n")).alias("last")))
    return quiet.unionByName(moving).select(*[F.col(f.name).cast(f.dataType) for f in WINDOWS_SCHEMA.fields])


def attach_change(df: DataFrame, windows: DataFrame, ts: str = "ts") -> DataFrame:
    """df plus change_index: the change window its `ts` falls in (half-open; the churn's last one is closed), or
    null outside the churn."""
    w = F.broadcast(windows.select(F.col("run_id").alias("_w_run"), F.col("change_index"),
                                   F.col("win_start").alias("_w_start"), F.col("win_end").alias("_w_end"),
                                   F.col("last").alias("_w_last")))
    t = F.col(ts)
    inside = (t >= F.col("_w_start")) & ((t < F.col("_w_end")) | (F.col("_w_last") & (t == F.col("_w_end"))))
    return (df.join(w, (F.col("run_id") == F.col("_w_run")) & inside, "left")
            .drop("_w_run", "_w_start", "_w_end", "_w_last"))

