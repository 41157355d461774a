"""The fault campaign's tables: what each fault window cost the group, from the campaign's history, in Spark.

A campaign directory (manifest `scenario` "chaos", written by `zkconsumer lab chaos`) holds one history: `fault`
records (start, heal), the load producer's `produce` ranges, the members' `consume` records and the observer's
`group_view` snapshots. Fault k's **window** runs from its start to fault k+1's start (the last one to the
history's last record), so every record after the first fault belongs to exactly one window:

* `produced`, `consumed`: offsets in the `produce` / `consume` ranges written in the window;
* `duplicates`: consumptions of an offset already consumed earlier in the history (the second and later ones,
  each counted in the window it happened in);
* `dead_time_s`: per partition, the longest stretch inside the window with messages waiting (produced beyond the
  highest offset consumed) and no `consume` record of that partition; the maximum over partitions;
* `group_views`: the observer's snapshots in the window (0: ZooKeeper was down or unreadable all along).

`chaos_kinds` aggregates them per fault kind and joins the checkers' verdict per kind from the campaign's
`chaos.json` (re-convergence, overlap windows, violations: zkconsumer/lab/chaos/table.py), read in Python: it
is small. Nothing here collects trace records to the driver.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from zkconsumer.lab.analysis.chaos_report import ChaosSection
from zkconsumer.lab.analysis.held import Held, hold
from zkconsumer.lab.analysis.readers import RunInfo

log = logging.getLogger(__name__)

CAMPAIGN_SCENARIO = "chaos"  # the manifest's scenario of a campaign directory (zkconsumer/lab/chaos/campaign.py)
VERDICT_FILE = "chaos.json"
PARTITION_KEY = ["run_id", "topic", "partition"]

VERDICT_SCHEMA = T.StructType([  # one row of chaos.json's "table" per campaign and fault kind
    T.StructField("run_id", T.StringType()),
    T.StructField("kind", T.StringType()),
    T.StructField("checked_faults", T.LongType()),
    T.StructField("reconv_median_s", T.DoubleType()),
    T.StructField("reconv_max_s", T.DoubleType()),
    T.StructField("checked_duplicates", T.LongType()),
    T.StructField("overlaps", T.LongType()),
    T.StructField("overlap_max_s", T.DoubleType()),
    T.StructField("violations", T.LongType()),
    T.StructField("violations_by_invariant", T.StringType()),  # "inv3: 2, inv4: 1"
])


def is_campaign(scenario: str | None) -> bool:
    return scenario == CAMPAIGN_SCENARIO


def _num(value: Any, kind: type) -> Any:
    return kind(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def unknown_invariants(run_dir: Path) -> list[Any]:
    """The invariants chaos.json says its checkers could not judge (a checker that raised): none without it."""
    try:
        unknown = json.loads((run_dir / VERDICT_FILE).read_text(encoding="utf-8")).get("unknown")
    except (OSError, ValueError, AttributeError):
        return []
    return list(unknown) if isinstance(unknown, list) else []


def verdict_rows(run_id: str, run_dir: Path) -> tuple[list[tuple], int | None]:
    """chaos.json's per-kind rows as VERDICT_SCHEMA tuples, and its total of violations (None: no file, or not
    the checkers' JSON)."""
    path = run_dir / VERDICT_FILE
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [], None
    except (OSError, ValueError) as exc:
        log.warning("%s: unreadable (%s); the campaign's tables go without the checkers' verdict", path, exc)
        return [], None
    rows = []
    for row in document.get("table") or []:
        by_invariant = row.get("violations") or {}
        if not isinstance(by_invariant, dict):  # a plain count
            by_invariant = {"all": by_invariant}
        rows.append((run_id, str(row.get("kind")), _num(row.get("count"), int),
                     _num(row.get("reconv_median_s"), float), _num(row.get("reconv_max_s"), float),
                     _num(row.get("duplicates"), int), _num(row.get("overlaps"), int),
                     _num(row.get("overlap_max_s"), float),
                     sum(int(v) for v in by_invariant.values() if isinstance(v, int | float)),
                     ", ".join(f"inv{k}: {v}" for k, v in sorted(by_invariant.items()) if v) or None))
    return rows, _num(document.get("violations"), int)


def _windows(records: DataFrame) -> DataFrame:
    """One row per fault started: run_id, fault_id, kind, target, start_ts, heal_ts, hold_s, window_end."""
    faults = records.filter(F.col("type") == "fault")
    starts = faults.filter(F.col("phase") == "start").select(
        "run_id", "fault_id", "kind", "target", F.col("ts").alias("start_ts"),
        F.get_json_object("params", "$.hold_s").cast("double").alias("hold_s"))
    heals = (faults.filter(F.col("phase") == "heal").groupBy("run_id", "fault_id")
             .agg(F.min("ts").alias("heal_ts")))
    ends = records.groupBy("run_id").agg(F.max("ts").alias("run_end"))
    order = Window.partitionBy("run_id").orderBy("start_ts", "fault_id")
    return (starts.join(heals, ["run_id", "fault_id"], "left").join(ends, "run_id")
            .withColumn("window_end", F.coalesce(F.lead("start_ts").over(order), F.col("run_end")))
            .drop("run_end"))


def _in_window(df: DataFrame, windows: DataFrame) -> DataFrame:
    """`df` (with run_id and ts) joined to the fault window its ts falls in; rows before the first fault drop."""
    w = F.broadcast(windows.select("run_id", "fault_id", F.col("start_ts").alias("_ws"),
                                   F.col("window_end").alias("_we"), F.col("_last")))
    ts = F.col("ts")
    return (df.join(w, "run_id")
            .filter((ts >= F.col("_ws")) & ((ts < F.col("_we")) | (F.col("_last") & (ts <= F.col("_we")))))
            .drop("_ws", "_we", "_last"))


def _size(first: str = "first_offset", last: str = "last_offset") -> Column:
    return (F.col(last) - F.col(first) + 1).cast("long")


def _stalls(records: DataFrame) -> DataFrame:
    """Per partition, each stretch with messages waiting and no consume record: run_id, topic, partition,
    stall_start, stall_end. It starts at the consume that left a backlog, or at the produce that made one after
    the backlog was cleared; it ends at the partition's next consume record (or the history's end)."""
    events = records.filter(F.col("type").isin("produce", "consume")).select(
        *PARTITION_KEY, "ts", "type", "last_offset")
    ends = records.groupBy("run_id").agg(F.max("ts").alias("run_end"))
    # at one instant a produce goes before a consume: a message cannot be consumed before it was produced
    order = Window.partitionBy(*PARTITION_KEY).orderBy("ts", F.desc("type"))
    upto = order.rowsBetween(Window.unboundedPreceding, 0)
    after = order.rowsBetween(1, Window.unboundedFollowing)
    is_consume = F.col("type") == "consume"
    state = (events
             .withColumn("max_produced", F.max(F.when(~is_consume, F.col("last_offset"))).over(upto))
             .withColumn("max_consumed", F.max(F.when(is_consume, F.col("last_offset"))).over(upto))
             .withColumn("waiting", F.coalesce(F.col("max_produced") > F.coalesce(F.col("max_consumed"), F.lit(-1)),
                                               F.lit(False)))
             .withColumn("was_waiting", F.coalesce(F.lag("waiting").over(order), F.lit(False)))
             .withColumn("next_consume", F.first(F.when(is_consume, F.col("ts")), ignorenulls=True).over(after)))
    starts = state.filter(F.col("waiting") & (is_consume | ~F.col("was_waiting")))
    return (starts.join(ends, "run_id")
            .select(*PARTITION_KEY, F.col("ts").alias("stall_start"),
                    F.coalesce("next_consume", "run_end").alias("stall_end")))


def chaos_tables(spark: SparkSession, records: DataFrame, campaigns: list[tuple[str, Path]]
                 ) -> dict[str, DataFrame]:
    """`chaos_faults` (one row per fault) and `chaos_kinds` (per campaign and fault kind) from the campaigns'
    good trace records (readers.read_traces) and their directories (run_id, path)."""
    windows = _windows(records)
    last = Window.partitionBy("run_id")
    windows = windows.withColumn("_last", F.col("start_ts") == F.max("start_ts").over(last))
    flow = records.filter(F.col("type").isin("produce", "consume", "group_view")).select(
        "run_id", "ts", "type", "first_offset", "last_offset")
    counted = (_in_window(flow, windows).groupBy("run_id", "fault_id").agg(
        F.sum(F.when(F.col("type") == "produce", _size())).alias("produced"),
        F.sum(F.when(F.col("type") == "consume", _size())).alias("consumed"),
        F.count(F.when(F.col("type") == "group_view", 1)).alias("group_views")))
    # every offset consumed, numbered by the time it was consumed: the second and later are duplicates
    offsets = (records.filter(F.col("type") == "consume")
               .select(*PARTITION_KEY, "ts", F.explode(F.sequence("first_offset", "last_offset")).alias("offset")))
    nth = F.row_number().over(Window.partitionBy(*PARTITION_KEY, "offset").orderBy("ts"))
    duplicates = (_in_window(offsets.withColumn("nth", nth).filter(F.col("nth") > 1), windows)
                  .groupBy("run_id", "fault_id").agg(F.count(F.lit(1)).alias("duplicates")))
    w = F.broadcast(windows.select("run_id", "fault_id", "start_ts", "window_end"))
    overlap = F.least("stall_end", "window_end") - F.greatest("stall_start", "start_ts")
    dead = (_stalls(records).join(w, "run_id").filter(overlap > 0)
            .groupBy("run_id", "fault_id").agg(F.max(overlap).alias("dead_time_s")))
    zero = F.lit(0).cast("long")
    faults = (windows.drop("_last").join(counted, ["run_id", "fault_id"], "left")
              .join(duplicates, ["run_id", "fault_id"], "left").join(dead, ["run_id", "fault_id"], "left")
              .select("run_id", "fault_id", "kind", "target", "start_ts", "heal_ts", "hold_s", "window_end",
                      F.coalesce("produced", zero).alias("produced"), F.coalesce("consumed", zero).alias("consumed"),
                      F.coalesce("duplicates", zero).alias("duplicates"),
                      F.coalesce("dead_time_s", F.lit(0.0)).alias("dead_time_s"),
                      F.coalesce("group_views", zero).alias("group_views")))
    per_kind = faults.groupBy("run_id", "kind").agg(
        F.count(F.lit(1)).alias("faults"), F.sum("produced").alias("produced"), F.sum("consumed").alias("consumed"),
        F.sum("duplicates").alias("duplicates"), F.max("dead_time_s").alias("max_dead_time_s"),
        F.percentile_approx("dead_time_s", 0.5).alias("median_dead_time_s"),
        F.sum(F.when(F.col("group_views") == 0, 1).otherwise(0)).alias("windows_without_view"))
    verdicts: list[tuple] = []
    for run_id, path in campaigns:
        verdicts += verdict_rows(run_id, path)[0]
    checked = spark.createDataFrame(verdicts, VERDICT_SCHEMA)
    kinds = per_kind.join(checked, ["run_id", "kind"], "full_outer").withColumn(
        "checked", F.col("checked_faults").isNotNull())
    return {"chaos_faults": faults, "chaos_kinds": kinds}


def analyze_campaigns(spark: SparkSession, records: DataFrame, campaigns: list[RunInfo], bad_lines: int = 0
                      ) -> tuple[dict[str, Held], ChaosSection]:
    """The job's campaign part, from the campaigns' good trace records (read with the runs', readers.py): the
    chaos_faults and chaos_kinds tables, held (held.py: one query for both), with the report section's rows (one
    per fault and kind)."""
    tables = hold(spark, chaos_tables(spark, records, [(c.run_id, c.path) for c in campaigns]))

    def rows(name: str, *order: str) -> list[dict[str, Any]]:  # per fault or kind: a campaign's few hundred rows
        return sorted(tables[name].rows(), key=lambda r: tuple((r[k] is not None, r[k]) for k in order))

    totals = {c.run_id: verdict_rows(c.run_id, c.path)[1] for c in campaigns}
    return tables, ChaosSection(faults=rows("chaos_faults", "run_id", "start_ts"),
                                kinds=rows("chaos_kinds", "run_id", "kind"), violations=totals,
                                bad_lines=bad_lines,
                                unknown={c.run_id: u for c in campaigns if (u := unknown_invariants(c.path))})
