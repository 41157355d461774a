"""The fixed set of real runs (fixed_set.py) as the per-run analysis sees it, next to the Spark frames it must
equal: each run's records as one Arrow table, and the Spark oracle's frames of the same records (spark_oracle/).

    fixed_ref, hand_ref                              # conftest.py: the fixed set and the hand-built runs, read once
                                                     # per session (extracting and parsing take seconds)
    ref = runs_reference(spark, [root])              # any other run directories
    joined(a, b)                                     # two references as one
    ref.run_tables["<run_id>"]                       # pa.Table: one run's records (readers.RECORD_FIELDS)
    ref.records                                      # the same records as a Spark frame
    ref.windows_rows, ref.changes_rows, ref.bounds_rows   # Spark's time frame (spark_oracle.windows.build), as dicts
    same(python_rows, spark_frame_or_rows)           # equal as fixed_set.normalise compares tables

The references are shared by every test of the session: treat them as read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fixed_set
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from spark_oracle.metrics import control_records
from spark_oracle.windows import build

from zkconsumer.lab.analysis.chaos_tables import is_campaign
from zkconsumer.lab.analysis.held import hold
from zkconsumer.lab.analysis.readers import RunInfo, load_runs, read_traces, runs_frame


@dataclass
class FixedReference:
    runs_root: Path
    runs: list[RunInfo]  # the standard runs (campaigns left out, as the job does)
    runs_df: DataFrame
    records: DataFrame  # every good record of those runs
    run_tables: dict[str, pa.Table]
    changes_rows: list[dict[str, Any]]
    bounds_rows: list[dict[str, Any]]
    windows_rows: list[dict[str, Any]]

    def of(self, rows: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
        return [r for r in rows if r["run_id"] == run_id]


def fixed_reference(spark: SparkSession, work: Path) -> FixedReference:
    """The fixed set, extracted under `work`."""
    return runs_reference(spark, [fixed_set.extract(work)])


def runs_reference(spark: SparkSession, roots: list[Path], *, time_frame: bool = True) -> FixedReference:
    """Any lab run directories (or trees of them), e.g. the hand-built runs of tests/analysis/conftest.py too.
    Without `time_frame` the windows, changes and bounds rows are left empty: for a test that compares only what
    it computes from the records, so as not to pay for the oracle's time frame, one query of its own."""
    root = roots[0]
    runs = [r for r in load_runs(roots) if not is_campaign(r.scenario)]
    traces = read_traces(spark, runs)
    records = traces.records
    table = records.toArrow()
    run_tables = {run_id: table.filter(pc.equal(table["run_id"], run_id)) for run_id in sorted(
        set(table["run_id"].to_pylist()))}
    if not time_frame:
        return FixedReference(root, runs, runs_frame(spark, runs), records, run_tables, [], [], [])
    frame = build(records.filter(control_records()))
    step1 = hold(spark, {"changes": frame.changes, "bounds": frame.bounds, "windows": frame.windows})
    return FixedReference(root, runs, runs_frame(spark, runs), records, run_tables, step1["changes"].rows(),
                          step1["bounds"].rows(), step1["windows"].rows())


def joined(first: FixedReference, second: FixedReference) -> FixedReference:
    """Both references as one, as if their runs had been read together (their run ids are apart)."""
    assert not set(first.run_tables) & set(second.run_tables)
    return FixedReference(first.runs_root, first.runs + second.runs, first.runs_df.unionByName(second.runs_df),
                          first.records.unionByName(second.records), {**first.run_tables, **second.run_tables},
                          first.changes_rows + second.changes_rows, first.bounds_rows + second.bounds_rows,
                          first.windows_rows + second.windows_rows)


def rows_of(frame: DataFrame | list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(frame, list):
        return frame
    return [r.asDict(recursive=True) for r in frame.collect()]


def same(found: list[dict[str, Any]], want: DataFrame | list[dict[str, Any]], table: str = "t",
         root: Path = Path("/nonexistent")) -> bool:
    """Equal as the fixed set compares tables: rows in any order, doubles to 13 significant digits."""
    return not fixed_set.differences(fixed_set.normalise(table, rows_of(want), root),
                                     fixed_set.normalise(table, found, root))
