"""Three per-run rules built in Spark over every run: the time frame's records (`control_records`, the oracle of
per_run/frame.py's `_control`) and the counting gaps (`wire_gap_counts` and `with_counting_gaps`, the oracles of
per_run/counts.py's and per_run/tables.py's). What a counting gap is: zkconsumer/lab/rules/gaps.py.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from zkconsumer.lab.analysis.owner_nodes import OWNER_PATH
from zkconsumer.lab.rules import gaps


def control_records() -> Column:
    """Every record the time frame (windows.py), ownership, rebalance counts and contention events read (a
    superset: each applies its own filter): every record but the wire, produce and consume ones, and of the wire
    the owner-node creates and deletes, session closes (owner_nodes.py) and the coordinator's error answers."""
    type_, proto, kind = F.col("type"), F.col("proto"), F.col("kind")
    zk_owner_node = ((proto == "zk") & (kind == "reply") & F.col("op").isin("create", "delete")
                     & F.col("path").rlike(OWNER_PATH))
    zk_close = (proto == "zk") & (kind == "request") & (F.col("op") == "closeSession")
    kafka_error = (proto == "kafka") & (kind == "response") & F.col("error_name").isNotNull()
    wire = (type_ == "wire") & (zk_owner_node | zk_close | kafka_error)
    return F.coalesce(~type_.isin("wire", "produce", "consume") | wire, F.lit(False))


def wire_gap_counts(records: DataFrame) -> DataFrame:
    """run_id, undecodable_streams and blackholed_requests over the whole run: what `with_counting_gaps` reports."""
    wire = records.filter(F.col("type") == "wire")
    return wire.groupBy("run_id").agg(
        F.sum(F.when(F.col("kind") == "undecodable", 1).otherwise(0)).alias("undecodable_streams"),
        F.sum(F.when(F.coalesce(F.col("dropped"), F.lit(False)) & F.col("kind").isin(*gaps.CLIENT_KINDS), 1)
              .otherwise(0)).alias("blackholed_requests"))


def with_counting_gaps(per_run: DataFrame, found: DataFrame) -> DataFrame:
    """`undecodable_streams` and `blackholed_requests` (`wire_gap_counts`), and `counting_gaps`, the reason its
    counts are incomplete (with `bad_lines`: zkconsumer/lab/rules/gaps.py, the same phrase as the lab summary), or
    null."""
    joined = per_run.join(found, "run_id", "left").fillna(0, subset=["undecodable_streams", "blackholed_requests"])
    counts = {"undecodable": F.col("undecodable_streams"), "blackholed": F.col("blackholed_requests"),
              "bad_lines": F.coalesce(F.col("bad_lines"), F.lit(0))}
    # gaps.describe's phrase, in the words gaps.WORDS gives it
    parts = F.array_compact(F.array(*[
        F.when(counts[key] == 1, F.lit(f"1 {one}")).when(counts[key] > 1, F.concat(counts[key].cast("string"),
                                                                                  F.lit(f" {many}")))
        for key, one, many in gaps.WORDS]))
    return joined.withColumn("counting_gaps", F.when(F.size(parts) > 0, F.array_join(parts, ", ")))

