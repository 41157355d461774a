"""The `migrate` scenario's tables built in Spark over every run: the oracle of per_run/migrate.py. What the step
windows and every column are: zkconsumer/lab/analysis/migrate_tables.py, which keeps MIGRATE and MIGRATE_TABLES.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark_oracle.delivery import audit
from zkconsumer.lab.analysis.chaos_tables import _stalls
from zkconsumer.lab.analysis.migrate_tables import MIGRATE, MIGRATE_TABLES

PARTITION_KEY = ["run_id", "topic", "partition"]


def migrate_runs(records: DataFrame) -> DataFrame:
    """run_id of every run with a migrate step."""
    return (records.filter((F.col("type") == "membership") & (F.col("action") == MIGRATE))
            .select("run_id").distinct())


def _windows(records: DataFrame) -> DataFrame:
    """One row per migrate step: run_id, step, member, start_ts, window_end, last (the run's last step)."""
    steps = (records.filter((F.col("type") == "membership") & (F.col("action") == MIGRATE))
             .select("run_id", "step", F.col("members").getItem(0).alias("member"), F.col("ts").alias("start_ts")))
    ends = records.groupBy("run_id").agg(F.max("ts").alias("run_end"))
    order = Window.partitionBy("run_id").orderBy("start_ts", "step")
    return (steps.join(ends, "run_id")
            .withColumn("window_end", F.coalesce(F.lead("start_ts").over(order), F.col("run_end")))
            .withColumn("last", F.lead("start_ts").over(order).isNull())
            .drop("run_end"))


def _step_of(df: DataFrame, windows: DataFrame, ts: str = "ts") -> DataFrame:
    """`df` (run_id and a time column) joined to the step whose window holds that time; earlier rows drop."""
    w = F.broadcast(windows.select("run_id", "step", F.col("start_ts").alias("_ws"),
                                   F.col("window_end").alias("_we"), F.col("last").alias("_last")))
    t = F.col(ts)
    return (df.join(w, "run_id")
            .filter((t >= F.col("_ws")) & ((t < F.col("_we")) | (F.col("_last") & (t <= F.col("_we")))))
            .drop("_ws", "_we", "_last"))


def _size() -> Any:
    return (F.col("last_offset") - F.col("first_offset") + 1).cast("long")


def migrate_tables(records: DataFrame) -> dict[str, DataFrame]:
    """`migrate_steps`, `migrate_totals` and `migrate_partitions` from good trace records (readers.read_traces)
    of any runs: only the runs with a migrate step are kept."""
    records = records.join(F.broadcast(migrate_runs(records)), "run_id")
    windows = _windows(records)
    # every offset consumed, numbered by the time it was consumed: the second and later are duplicates
    offsets = (records.filter(F.col("type") == "consume")
               .select(*PARTITION_KEY, "ts", F.explode(F.sequence("first_offset", "last_offset")).alias("offset")))
    nth = F.row_number().over(Window.partitionBy(*PARTITION_KEY, "offset").orderBy("ts"))
    repeated = offsets.withColumn("nth", nth).filter(F.col("nth") > 1)
    duplicates = _step_of(repeated, windows).groupBy("run_id", "step").agg(F.count(F.lit(1)).alias("duplicates"))
    first_step = windows.groupBy("run_id").agg(F.min("start_ts").alias("first_ts"))
    before = (repeated.join(first_step, "run_id").filter(F.col("ts") < F.col("first_ts"))
              .groupBy("run_id").agg(F.count(F.lit(1)).alias("duplicates_before")))
    flow = records.filter(F.col("type").isin("produce", "consume")).select("run_id", "ts", "type", "first_offset",
                                                                            "last_offset")
    counted = _step_of(flow, windows).groupBy("run_id", "step").agg(
        F.sum(F.when(F.col("type") == "produce", _size())).alias("produced"),
        F.sum(F.when(F.col("type") == "consume", _size())).alias("consumed"))
    # the group's stretches without a consume record, each ending at the record that closed it
    consumes = records.filter(F.col("type") == "consume").select("run_id", "ts")
    gaps = (consumes.withColumn("dead_from", F.lag("ts").over(Window.partitionBy("run_id").orderBy("ts")))
            .filter(F.col("dead_from").isNotNull())
            .select("run_id", "dead_from", F.col("ts").alias("dead_to"),
                    (F.col("ts") - F.col("dead_from")).alias("dead_time_s")))
    longest = (_step_of(gaps, windows, "dead_to")
               .withColumn("rank", F.row_number().over(Window.partitionBy("run_id", "step")
                                                       .orderBy(F.desc("dead_time_s"), "dead_to")))
               .filter(F.col("rank") == 1).drop("rank"))
    w = F.broadcast(windows.select("run_id", "step", "start_ts", "window_end"))
    overlap = F.least("stall_end", "window_end") - F.greatest("stall_start", "start_ts")
    stalls = (_stalls(records).join(w, "run_id").filter(overlap > 0)
              .groupBy("run_id", "step").agg(F.max(overlap).alias("partition_stall_s")))
    zero = F.lit(0).cast("long")
    key = ["run_id", "step"]
    steps = (windows.join(counted, key, "left").join(duplicates, key, "left").join(longest, key, "left")
             .join(stalls, key, "left")
             .select("run_id", "step", "member", "start_ts", "window_end",
                     F.coalesce("produced", zero).alias("produced"), F.coalesce("consumed", zero).alias("consumed"),
                     F.coalesce("duplicates", zero).alias("duplicates"),
                     F.coalesce("dead_time_s", F.lit(0.0)).alias("dead_time_s"), "dead_from", "dead_to",
                     F.coalesce("partition_stall_s", F.lit(0.0)).alias("partition_stall_s")))
    delivery, _gaps = audit(records)
    audited = delivery.groupBy("run_id").agg(
        F.sum("expected_offsets").alias("produced"), F.sum("duplicates").alias("duplicates"),
        F.sum("missing").alias("missing"), F.count(F.lit(1)).alias("partitions"))
    per_step = steps.groupBy("run_id").agg(
        F.count(F.lit(1)).alias("steps"), F.sum("dead_time_s").alias("dead_time_s"),
        F.max("dead_time_s").alias("max_dead_time_s"), F.max("partition_stall_s").alias("partition_stall_s"))
    totals = (audited.join(per_step, "run_id").join(before, "run_id", "left")
              .withColumn("duplicates_before", F.coalesce("duplicates_before", zero)))
    return dict(zip(MIGRATE_TABLES, (steps, totals, delivery), strict=True))

