"""Frames computed together and held by the driver: one query for several small frames, their rows fetched once.

The job has two kinds of frame. The trace records are large and stay in Spark. What is derived from them per run
(windows, intervals, counts per change, member or partition) is small, and each such frame is read by several
later steps and by the report. Materialising each one on its own (a query, or a checkpoint, apiece) made the job
cost dozens of planned and compiled queries however small its input (docs/analysis.md, "What the job costs").

`hold` computes the frames of one step as ONE query: a union with one struct column per frame, fetched as Arrow.
Each frame then comes back as a `Held`: its rows (for the report and the Parquet table, which the driver writes
without another query) and, on demand, a local frame (a LocalRelation: its plan is its rows, so the plans built on
it stay small, where a lineage would carry every earlier plan with it).

    step's frames --hold--> one query --Arrow--> Held per frame --frame()--> the next step's input
                                                          \\--write()--> OUT/tables/<name>/part-00000.parquet
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from zkconsumer.lab.analysis.sql_text import literal, quoted

TAG = "_frame"
# Set while the job runs (`planned_whole`), put back after.
QUERY_SETTINGS = {
    # Adaptive execution runs each query stage as a job of its own and re-plans the rest after it: the job is one
    # query of two stages (the parse, then the runs' grouped map after the shuffle), with nothing to re-plan.
    "spark.sql.adaptive.enabled": "false",
    # Expressions evaluated as written, not compiled to Java first: the parse's wide expressions (sql_text.py)
    # take longer to compile (Janino, then the JVM's JIT) than the demo's lines take to run interpreted; at a
    # million trace lines the two take the same time (docs/analysis.md, "What the job costs").
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


@contextmanager
def planned_whole(spark: SparkSession) -> Iterator[None]:
    """QUERY_SETTINGS for the job's queries, the session's own restored after."""
    previous = {key: spark.conf.get(key, None) for key in QUERY_SETTINGS}
    for key, value in QUERY_SETTINGS.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@dataclass
class Held:
    """One frame's rows, held by the driver, with the Spark schema they were computed with."""

    name: str
    schema: T.StructType
    arrow: pa.Table
    _frame: DataFrame | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return self.arrow.num_rows

    def frame(self, spark: SparkSession) -> DataFrame:
        """The rows as a local frame (made once)."""
        if self._frame is None:
            self._frame = spark.createDataFrame(self.arrow, schema=self.schema)
        return self._frame

    def rows(self) -> list[dict[str, Any]]:
        return self.arrow.to_pylist()

    def write(self, path: Path) -> Path:
        """The rows as a Parquet table directory (replaced if there), as Spark reads one."""
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        pq.write_table(self.arrow, path / "part-00000.parquet")
        return path


def hold(spark: SparkSession, frames: dict[str, DataFrame]) -> dict[str, Held]:
    """Every frame of `frames` computed in one query and held (see the module's docstring)."""
    if not frames:
        return {}
    names = list(frames)
    # Every field nullable: a frame's struct is null on the other frames' rows, and Arrow refuses a null parent
    # over a field declared non-null. CASE WHEN without ELSE is nullable; its condition must be one the optimizer
    # cannot fold to true (which would give the non-null column back): spark_partition_id() is not a constant.
    # Each frame's own schema is given back to it below.
    # Written as SQL, one expression per frame: a column at a time through the Column API was a py4j round trip
    # per call, thousands for the job's tables.
    parts = [df.selectExpr(f"{i} AS {TAG}", "named_struct(" + ", ".join(
                 f"{literal(c)}, CASE WHEN spark_partition_id() >= 0 THEN {quoted(c)} END" for c in df.columns)
                 + f") AS _f{i}")
             for i, df in enumerate(frames.values())]
    table = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts).toArrow()
    held = {}
    for i, name in enumerate(names):
        schema = frames[name].schema
        column = table.filter(pc.equal(table[TAG], i))[f"_f{i}"].combine_chunks()
        if isinstance(column, pa.ChunkedArray):  # no chunk at all: an empty frame
            column = pa.array([], type=column.type)
        rows = pa.Table.from_struct_array(column)
        held[name] = Held(name, schema, rows.rename_columns(schema.fieldNames()))
    return held


def held_frame(name: str, rows: list[tuple] | list[dict[str, Any]], schema: T.StructType) -> Held:
    """Rows the driver made itself (a fit, a comparison), held like the others: tuples in the schema's order, or
    dicts by field name."""
    names = schema.fieldNames()
    records = [r if isinstance(r, dict) else dict(zip(names, r, strict=True)) for r in rows]
    return Held(name, schema, pa.Table.from_pylist(records, schema=to_arrow_schema(schema)))


def to_arrow_schema(schema: T.StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema as convert

    return convert(schema)
