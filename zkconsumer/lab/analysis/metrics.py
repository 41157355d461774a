"""Every table per run and per change: one grouped map over the records, a run per call (per_run/run.py), then
what is computed across runs (the herd's fit) from the rows the driver holds.

    records --groupBy(run_id).applyInArrow--> every run's rows of every table --> Held per table (held.py)

The whole analysis of the runs is ONE query: the parse (readers.py) and the grouped map. The per-run logic is
sequential (a run's change windows, then who owned what when, then what each change cost), which is a handful of
Python passes over one run's records but dozens of Spark plans over all of them (docs/analysis.md, "How the job
runs").
"""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from zkconsumer.lab import gaps
from zkconsumer.lab.analysis.held import Held, held_frame
from zkconsumer.lab.analysis.herd import herd_fit
from zkconsumer.lab.analysis.owner_nodes import OWNER_PATH
from zkconsumer.lab.analysis.readers import RunInfo
from zkconsumer.lab.analysis.schemas import MANIFEST_SCHEMA, TRACE_ERROR_SCHEMA


def compute(records: DataFrame, runs: list[RunInfo], trace_errors: list[tuple]) -> dict[str, Held]:
    """name -> table, every one held by the driver (held.py). docs/analysis.md lists every table's columns.

    `records`: the runs' good trace records (readers.read_traces); `trace_errors`: TRACE_ERROR_SCHEMA rows of
    their trace files."""
    from zkconsumer.lab.analysis.per_run.run import OUTPUT, grouped_map, runs_row_without_records, split

    infos = {r.run_id: dict(zip(MANIFEST_SCHEMA.fieldNames(), r.row(), strict=True)) for r in runs}
    lines: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for error in trace_errors:
        lines[error[0]][0] += error[2]
        lines[error[0]][1] += error[3]
    per_run = {run_id: (n, bad) for run_id, (n, bad) in lines.items()}
    analysed = records.groupBy("run_id").applyInArrow(grouped_map(infos, per_run), OUTPUT).toArrow()
    tables = split(analysed)
    seen = set(tables["runs"].arrow["run_id"].to_pylist())
    unread = [runs_row_without_records(infos[r.run_id], per_run.get(r.run_id)) for r in runs if r.run_id not in seen]
    if unread:
        held = tables["runs"]
        tables["runs"] = Held("runs", held.schema, pa.concat_tables(
            [held.arrow, pa.Table.from_pylist(unread, schema=held.arrow.schema)]))
    tables["trace_errors"] = held_frame("trace_errors", trace_errors, TRACE_ERROR_SCHEMA)
    tables["herd_fit"] = herd_fit(tables["runs"].rows())
    return tables


# The Spark forms of the per-run rules, kept as the oracle the per-run Python is checked against
# (tests/analysis/per_run_reference.py) and for the counting-gap tests.
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
    counts are incomplete (with `bad_lines`: zkconsumer/lab/gaps.py, the same phrase as the lab summary), or null."""
    joined = per_run.join(found, "run_id", "left").fillna(0, subset=["undecodable_streams", "blackholed_requests"])
    counts = {"undecodable": F.col("undecodable_streams"), "blackholed": F.col("blackholed_requests"),
              "bad_lines": F.coalesce(F.col("bad_lines"), F.lit(0))}
    # gaps.describe's phrase, in the words gaps.WORDS gives it
    parts = F.array_compact(F.array(*[
        F.when(counts[key] == 1, F.lit(f"1 {one}")).when(counts[key] > 1, F.concat(counts[key].cast("string"),
                                                                                  F.lit(f" {many}")))
        for key, one, many in gaps.WORDS]))
    return joined.withColumn("counting_gaps", F.when(F.size(parts) > 0, F.array_join(parts, ", ")))
