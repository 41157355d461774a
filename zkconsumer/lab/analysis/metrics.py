"""Every table per run and per change: one grouped map over the trace lines, a run per call (per_run/run.py), then
what is computed across runs (the herd's fit) from the rows the driver holds.

    trace lines --parse (readers.py)--groupBy(run).applyInArrow--> every run's rows of every table --> Held

The whole analysis of the runs is ONE query: the parse and the grouped map. The per-run logic is
sequential (a run's change windows, then who owned what when, then what each change cost), which is a handful of
Python passes over one run's records but dozens of Spark plans over all of them (docs/analysis.md, "How the job
runs").
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from zkconsumer.lab.analysis.held import Held, to_arrow_schema
from zkconsumer.lab.analysis.herd import herd_fit
from zkconsumer.lab.analysis.per_run.run import OUTPUT, grouped_map, runs_row_without_records, split
from zkconsumer.lab.analysis.readers import RunInfo, parsed_lines, reading, trace_files
from zkconsumer.lab.analysis.schemas import MANIFEST_SCHEMA, RUN_FIELDS


def compute(spark: SparkSession, runs: list[RunInfo]) -> dict[str, Held]:
    """name -> table, every one held by the driver (held.py). docs/analysis.md lists every table's columns.

    The runs' trace lines are read, parsed and checked (readers.parsed_lines) and analysed run by run in the same
    query: no cache, no second pass; each run's lines are counted per file (`trace_errors`) where it is analysed."""
    infos = {r.run_id: dict(zip(MANIFEST_SCHEMA.fieldNames(), r.row(), strict=True)) for r in runs}
    files = trace_files(runs)
    if files:
        with reading(spark, runs):
            lines = parsed_lines(spark, runs, RUN_FIELDS)
            # a run's lines are its trace directory's: the group needs no join to learn its run, and its key is
            # a hash of the directory (8 bytes where the path is about a hundred, on every line shuffled)
            directory = F.xxhash64(F.regexp_extract("file_uri", r"^(.*)/[^/]*$", 1))
            analysed = lines.groupBy(directory).applyInArrow(grouped_map(infos, files), OUTPUT).toArrow()
    else:
        analysed = to_arrow_schema(OUTPUT).empty_table()
    tables = split(analysed)
    seen = set(tables["runs"].arrow["run_id"].to_pylist())
    unread = [runs_row_without_records(infos[r.run_id], None) for r in runs if r.run_id not in seen]
    if unread:
        held = tables["runs"]
        tables["runs"] = Held("runs", held.schema, pa.concat_tables(
            [held.arrow, pa.Table.from_pylist(unread, schema=held.arrow.schema)]))
    tables["herd_fit"] = herd_fit(tables["runs"].rows())
    return tables
