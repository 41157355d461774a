"""A run's trace files as the reader saw them: each file's lines, bad lines and first bad line (`trace_errors`,
TRACE_ERROR_SCHEMA), from the rows readers.parsed_lines gives for the run's files, good and bad alike.

A line's number comes from where the scan put it: within one input partition the row ids of a file's lines are
consecutive, and Spark splits a large file into partitions in offset order, numbered in that order
(readers._file_mapping reads line numbers the same way).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

Row = dict[str, Any]


def trace_errors(run_id: str, lines: pa.Table, names: dict[str, str]) -> list[Row]:
    """One row per trace file of the run (`lines`: file_uri, _pid, _mid, bad, reason, text; `names`: file URI ->
    file name)."""
    per_split = lines.group_by(["file_uri", "_pid"]).aggregate([("_mid", "min"), ("_mid", "count")]).to_pylist()
    splits: dict[str, list[Row]] = defaultdict(list)
    for split in per_split:
        splits[split["file_uri"]].append(split)
    base: dict[tuple[str, int], tuple[int, int]] = {}  # (file, partition) -> (lines before it, its first row id)
    total: dict[str, int] = {}
    for uri, found in splits.items():
        before = 0
        for split in sorted(found, key=lambda s: s["_pid"]):
            base[(uri, split["_pid"])] = (before, split["_mid_min"])
            before += split["_mid_count"]
        total[uri] = before
    bad: dict[str, list[tuple[int, str | None, str | None]]] = defaultdict(list)
    for row in lines.filter(pc.fill_null(lines["bad"], True)).select(
            ["file_uri", "_pid", "_mid", "reason", "text"]).to_pylist():
        before, first = base[(row["file_uri"], row["_pid"])]
        bad[row["file_uri"]].append((before + row["_mid"] - first + 1, row["reason"], row["text"]))
    out = []
    for uri in sorted(total):
        found = sorted(bad.get(uri, []), key=lambda b: b[0])
        first = found[0] if found else (None, None, None)
        out.append({"run_id": run_id, "file": names[uri], "lines": total[uri], "bad_lines": len(found),
                    "first_bad_line": first[0], "first_bad_reason": first[1], "first_bad_text": first[2]})
    return out
