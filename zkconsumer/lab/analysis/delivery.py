"""The offset audit: what was consumed (`consume` batches, first_offset..last_offset) against what was there.

What was there is the union of the `produce` records' ranges when the run has any, else every offset from 0 to
the highest one consumed per partition (both designs' members start from the earliest offset, so 0 is where
their consumption begins); `expected_basis` says which.

Everything is done on ranges, never offset by offset, with one sweep per partition: each range becomes two
boundaries (+1 where it starts, -1 after its last offset), and the running sums between consecutive boundaries
give, for each stretch of offsets, how many batches consumed it and whether it was expected:

* duplicates = offsets consumed (counted once per batch) - distinct offsets consumed;
* missing = expected offsets no batch consumed; `delivery_gaps` lists them as ranges (adjacent missing
  stretches, split where a produce range ends, joined into one).

The sweep is sequential, so it runs per run, inside the job's grouped map over Arrow on the executors
(`audit_rows`, per_run/run.py, whose rows the migrate tables reuse): one Python call per run over its produce
and consume records, which are a fraction of its lines; it gives both tables' rows at once.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T

PARTITION_ROW, GAP_ROW = "partition", "gap"
_LONG, _TEXT = T.LongType(), T.StringType()
DELIVERY_SCHEMA = T.StructType([
    T.StructField("run_id", _TEXT), T.StructField("design", _TEXT), T.StructField("topic", _TEXT),
    T.StructField("partition", T.IntegerType()), T.StructField("expected_basis", _TEXT),
    *[T.StructField(name, _LONG) for name in ("expected_offsets", "consume_batches", "consumed_offsets",
                                              "distinct_offsets", "duplicates", "missing", "gap_ranges", "members")]])
GAPS_SCHEMA = T.StructType([
    T.StructField("run_id", _TEXT), T.StructField("design", _TEXT), T.StructField("topic", _TEXT),
    T.StructField("partition", T.IntegerType()),
    *[T.StructField(name, _LONG) for name in ("gap_first", "gap_last", "gap_size")]])
def audit_rows(run: pa.Table) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One run's audit from all its records (per_run/run.py): its DELIVERY_SCHEMA and GAPS_SCHEMA rows."""
    import pyarrow.compute as pc

    flow = run.filter(pc.fill_null(pc.is_in(run["type"], value_set=pa.array(["consume", "produce"])), False))
    flow = flow.select(["run_id", "design", "type", "member", "topic", "partition", "first_offset", "last_offset"])
    rows = _audit_records(flow.rename_columns(["run_id", "design", "type", "member", "topic", "partition", "first",
                                               "last"]).to_pylist())
    delivery, found = DELIVERY_SCHEMA.fieldNames(), GAPS_SCHEMA.fieldNames()
    return ([{k: r[k] for k in delivery} for r in rows if r["row"] == PARTITION_ROW],
            [{k: r[k] for k in found} for r in rows if r["row"] == GAP_ROW])


def _audit_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    design = records[0]["design"] if records else None
    has_produce = any(r["type"] == "produce" for r in records)
    by_partition: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_partition[(r["run_id"], r["topic"], r["partition"])].append(r)
    out: list[dict[str, Any]] = []
    for key, mine in by_partition.items():
        out.extend(_audit_partition(key, design, mine, has_produce))
    return out


def _audit_partition(key: tuple, design: str | None, records: list[dict[str, Any]],
                     has_produce: bool) -> list[dict[str, Any]]:
    run_id, topic, partition = key
    consumed = [r for r in records if r["type"] == "consume"]
    expected = ([(r["first"], r["last"]) for r in records if r["type"] == "produce"] if has_produce
                # no produce records in the run: offsets 0..max consumed are what was there
                else [(0, max(r["last"] for r in consumed))] if consumed else [])
    # boundaries: position -> (change in consuming batches, change in expected ranges)
    steps: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for r in consumed:
        steps[r["first"]][0] += 1
        steps[r["last"] + 1][0] -= 1
    for first, last in expected:
        steps[first][1] += 1
        steps[last + 1][1] -= 1
    positions = sorted(steps)
    depth_c = depth_e = 0
    consumed_offsets = distinct = expected_offsets = missing = 0
    gaps: list[list[int]] = []  # [first, end) of each missing range, adjacent stretches joined
    for pos, following in pairwise([*positions, None]):
        depth_c += steps[pos][0]
        depth_e += steps[pos][1]
        length = 0 if following is None else following - pos
        consumed_offsets += length * depth_c
        distinct += length if depth_c > 0 else 0
        expected_offsets += length if depth_e > 0 else 0
        if depth_e > 0 and depth_c == 0:
            missing += length
            if length > 0:
                if gaps and gaps[-1][1] == pos:
                    gaps[-1][1] = pos + length
                else:
                    gaps.append([pos, pos + length])
    common = {"run_id": run_id, "design": design, "topic": topic, "partition": partition}
    row = {"row": PARTITION_ROW, **common, "expected_basis": "produce" if has_produce else "max_consumed",
           "expected_offsets": expected_offsets, "consume_batches": len(consumed),
           "consumed_offsets": consumed_offsets, "distinct_offsets": distinct,
           "duplicates": consumed_offsets - distinct, "missing": missing, "gap_ranges": len(gaps),
           "members": len({r["member"] for r in consumed if r["member"] is not None})}
    return [row, *({"row": GAP_ROW, **common, "gap_first": first, "gap_last": end - 1, "gap_size": end - first}
                   for first, end in gaps)]
