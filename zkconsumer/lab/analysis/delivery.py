"""The offset audit: what was consumed (`consume` batches, first_offset..last_offset) against what was there.

What was there is the union of the `produce` records' ranges when the run has any, else every offset from 0 to
the highest one consumed per partition (both designs' members start from the earliest offset, so 0 is where
their consumption begins); `expected_basis` says which.

Everything is done on ranges, never offset by offset, with one sweep per partition: each range becomes two
boundaries (+1 where it starts, -1 after its last offset), and the running sums between consecutive boundaries
give, for each stretch of offsets, how many batches consumed it and whether it was expected:

* duplicates = offsets consumed (counted once per batch) - distinct offsets consumed;
* missing = expected offsets no batch consumed; `delivery_gaps` lists them as ranges.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

KEY = ["run_id", "topic", "partition"]


def _boundaries(ranges: DataFrame, consumed: int, expected: int) -> DataFrame:
    """KEY, pos, dc, de: a range [first, last] opens at first and closes at last + 1."""
    return (ranges.select(*KEY, F.explode(F.array(
        F.struct(F.col("first").alias("pos"), F.lit(consumed).alias("dc"), F.lit(expected).alias("de")),
        F.struct((F.col("last") + 1).alias("pos"), F.lit(-consumed).alias("dc"), F.lit(-expected).alias("de"))))
        .alias("b")).select(*KEY, "b.pos", "b.dc", "b.de"))


def audit(records: DataFrame,
          keep: Callable[[DataFrame], DataFrame] = lambda df: df) -> tuple[DataFrame, DataFrame]:
    """(delivery, delivery_gaps); `keep` materialises the stretches, which both tables read.

    delivery: run_id, design, topic, partition, expected_basis, expected_offsets, consume_batches,
    consumed_offsets, distinct_offsets, duplicates, missing, gap_ranges, members.
    delivery_gaps: run_id, design, topic, partition, gap_first, gap_last, gap_size."""
    rows = (records.filter(F.col("type").isin("consume", "produce"))
            .select(*KEY, "type", "design", "member", F.col("first_offset").alias("first"),
                    F.col("last_offset").alias("last")))
    consumed = rows.filter(F.col("type") == "consume")
    produced = rows.filter(F.col("type") == "produce")
    runs = rows.groupBy("run_id").agg(F.first("design").alias("design"),
                                      F.max(F.when(F.col("type") == "produce", 1).otherwise(0)).alias("has_produce"))
    upto_max = (consumed.groupBy(*KEY).agg(F.max("last").alias("last"))
                .join(F.broadcast(runs.filter(F.col("has_produce") == 1).select("run_id")), "run_id", "left_anti")
                .select(*KEY, F.lit(0).cast("long").alias("first"), "last"))
    bounds = (_boundaries(consumed, 1, 0).unionByName(_boundaries(produced, 0, 1))
              .unionByName(_boundaries(upto_max, 0, 1))
              .groupBy(*KEY, "pos").agg(F.sum("dc").alias("dc"), F.sum("de").alias("de")))
    order = Window.partitionBy(*KEY).orderBy("pos")
    upto = order.rowsBetween(Window.unboundedPreceding, 0)
    stretches = keep(bounds.withColumn("depth_c", F.sum("dc").over(upto))
                     .withColumn("depth_e", F.sum("de").over(upto))
                     .withColumn("length", F.coalesce(F.lead("pos").over(order) - F.col("pos"), F.lit(0))))
    c, e, length = F.col("depth_c"), F.col("depth_e"), F.col("length")

    def total(value: Column) -> Column:
        return F.sum(value).cast("long")

    totals = stretches.groupBy(*KEY).agg(
        total(length * c).alias("consumed_offsets"), total(F.when(c > 0, length).otherwise(0)).alias("distinct"),
        total(F.when(e > 0, length).otherwise(0)).alias("expected_offsets"),
        total(F.when((e > 0) & (c == 0), length).otherwise(0)).alias("missing"))
    gaps = _gap_ranges(stretches.filter((e > 0) & (c == 0) & (length > 0)))
    batches = consumed.groupBy(*KEY).agg(F.count(F.lit(1)).alias("consume_batches"),
                                         F.countDistinct("member").alias("members"))
    gap_count = gaps.groupBy(*KEY).agg(F.count(F.lit(1)).alias("gap_ranges"))
    zero = F.lit(0).cast("long")
    delivery = (totals.join(batches, KEY, "left").join(gap_count, KEY, "left").join(F.broadcast(runs), "run_id")
                .select("run_id", "design", "topic", "partition",
                        F.when(F.col("has_produce") == 1, "produce").otherwise("max_consumed").alias("expected_basis"),
                        "expected_offsets", F.coalesce("consume_batches", zero).alias("consume_batches"),
                        "consumed_offsets", F.col("distinct").alias("distinct_offsets"),
                        (F.col("consumed_offsets") - F.col("distinct")).alias("duplicates"), "missing",
                        F.coalesce("gap_ranges", zero).alias("gap_ranges"),
                        F.coalesce("members", zero).alias("members")))
    gaps = gaps.join(F.broadcast(runs.select("run_id", "design")), "run_id").select(
        "run_id", "design", "topic", "partition", "gap_first", "gap_last", "gap_size")
    return delivery, gaps


def _gap_ranges(stretches: DataFrame) -> DataFrame:
    """Adjacent missing stretches (split where a produce range ends) joined into one range each."""
    order = Window.partitionBy(*KEY).orderBy("first")
    return (stretches.select(*KEY, F.col("pos").alias("first"), (F.col("pos") + F.col("length")).alias("end"))
            .withColumn("new", F.when(F.lag("end").over(order) == F.col("first"), 0).otherwise(1))
            .withColumn("gap", F.sum("new").over(order.rowsBetween(Window.unboundedPreceding, 0)))
            .groupBy(*KEY, "gap").agg(F.min("first").alias("gap_first"), (F.max("end") - 1).alias("gap_last"))
            .select(*KEY, "gap_first", "gap_last", (F.col("gap_last") - F.col("gap_first") + 1).alias("gap_size")))
