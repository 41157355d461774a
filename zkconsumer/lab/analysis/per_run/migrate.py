"""The migrate tables of one run (`migrate_steps`, `migrate_totals`, `migrate_partitions`) in Python over Arrow.

What the tables mean, the step windows and every column are defined in migrate_tables.py; the tests hold this
equal, row for row, to the Spark form of those tables (tests/analysis/spark_oracle/migrate_tables.py, whose names
the docstrings here use). The partition stalls are chaos_tables._stalls' and `migrate_partitions` is the
delivery audit's per-partition rows (delivery.audit_rows), which the run's analysis has already made.

The produce and consume records, most of a run's lines, are taken from Arrow as numpy columns and worked on as
ranges: no offset becomes a Python object, and only the migrate records become dicts. The records are the
reader's good ones (readers.read_traces), so `ts` and `type` are never null, nor the topic, partition and offsets
of a produce or consume record, nor a membership record's `members` and `step`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from zkconsumer.lab.analysis import delivery
from zkconsumer.lab.analysis.migrate_tables import MIGRATE, MIGRATE_TABLES
from zkconsumer.lab.analysis.per_run.core import Row, equals, is_in, picked

FLOW_TYPES = ("produce", "consume")


def migrate_tables(run: pa.Table, audited: list[Row] | None = None) -> dict[str, list[Row]]:
    """MIGRATE_TABLES' rows of one run (its records: run_id, file and readers.RECORD_FIELDS); {} when the run has
    no migrate step. `audited`: the run's delivery audit rows (delivery.audit_rows), made from `run` when not
    given."""
    steps = picked(run, pc.and_(equals(run, "type", "membership"), equals(run, "action", MIGRATE)),
                   ("run_id", "step", "members", "ts"))
    if not steps:
        return {}
    windows = _Windows(steps, pc.max(run["ts"]).as_py())
    flow = _Flow.of(run)
    repeats = _repeats(flow)
    step_rows = _step_rows(windows, flow, repeats)
    partitions = delivery.audit_rows(run)[0] if audited is None else audited
    # `before` counts every repeat earlier than the first step's record (not through the windows)
    before = int(repeats[flow.ts < windows.starts.min()].sum())
    totals = _totals(steps[0]["run_id"], step_rows, partitions, before)
    return dict(zip(MIGRATE_TABLES, (step_rows, totals, partitions), strict=True))


class _Windows:
    """The migrate steps in the Spark form's `_windows` order (start_ts, then step), each window running to the next
    step's record, the last one to the run's last record."""

    def __init__(self, steps: list[Row], run_end: float) -> None:
        ordered = sorted(steps, key=lambda r: (r["ts"], r["step"]))
        # members[0] of an empty list: None here, while Spark's getItem(0) (ANSI mode) fails the whole job
        self.rows = [{"run_id": r["run_id"], "step": r["step"], "member": (r["members"] or [None])[0],
                      "start_ts": r["ts"]} for r in ordered]
        self.starts = np.array([r["start_ts"] for r in self.rows], dtype=np.float64)
        self.ends = np.append(self.starts[1:], run_end)  # lead(start_ts), the last coalesced to the run's end
        for row, end in zip(self.rows, self.ends.tolist(), strict=True):
            row["window_end"] = end

    def __len__(self) -> int:
        return len(self.rows)

    def index(self, ts: np.ndarray) -> np.ndarray:
        """The window each time falls in (-1: none, before the first step): the Spark form's `_step_of` rule,
        [start, end) and the last window closed."""
        # only the latest window starting at or before t can hold it: every earlier one ends at a later start.
        # Two steps at one instant make the first an empty window [s, s); side="right" passes over it, as Spark does
        i = np.searchsorted(self.starts, ts, side="right") - 1
        found = i >= 0
        end = self.ends[np.where(found, i, 0)]
        last = i == len(self) - 1
        return np.where(found & ((ts < end) | (last & (ts <= end))), i, -1)

    def per_step(self, per_window: list[Any], combine: Callable[[Any, Any], Any]) -> list[Any]:
        """Each window's value as Spark gives it: grouped by (run_id, step) and joined back to the windows, so
        windows with one step number (real runs have none) share the combined value. None is nothing found."""
        by_step: dict[int, Any] = {}
        for row, value in zip(self.rows, per_window, strict=True):
            if value is not None:
                had = by_step.get(row["step"])
                by_step[row["step"]] = value if had is None else combine(had, value)
        return [by_step.get(row["step"]) for row in self.rows]


@dataclass(frozen=True)
class _Flow:
    """The run's produce and consume records as columns, in _stalls' order: by partition, then time, and at one
    instant a produce before a consume."""

    part: np.ndarray  # a number per (topic, partition)
    ts: np.ndarray
    consume: np.ndarray  # True: a consume record, False: a produce record
    first: np.ndarray
    last: np.ndarray

    @classmethod
    def of(cls, run: pa.Table) -> _Flow:
        table = run.filter(is_in(run, "type", FLOW_TYPES))
        topic = pc.dictionary_encode(table["topic"].combine_chunks()).indices.to_numpy(zero_copy_only=False)
        # one number per (topic, partition): a partition is a 32-bit integer, so it fits beside the topic's index
        part = (topic.astype(np.int64) << 32) + table["partition"].to_numpy().astype(np.int64)
        consume = pc.equal(table["type"], "consume").to_numpy()
        ts = table["ts"].to_numpy()
        order = np.lexsort((consume, ts, part))  # stable: records equal in all three keep the run's order
        return cls(part[order], ts[order], consume[order],
                   table["first_offset"].to_numpy()[order], table["last_offset"].to_numpy()[order])

    def partitions(self) -> list[slice]:
        edges = [0, *(np.flatnonzero(np.diff(self.part)) + 1).tolist(), len(self.part)]
        return [slice(a, b) for a, b in pairwise(edges) if b > a]

    def sizes(self) -> np.ndarray:
        return self.last - self.first + 1  # _size(): negative if a record had first > last, as in Spark


class _Consumed:
    """The offsets of one partition consumed so far, as sorted ranges lo..hi, apart and not touching."""

    def __init__(self) -> None:
        self.los: list[int] = []
        self.his: list[int] = []

    def add(self, lo: int, hi: int) -> int:
        """Adds lo..hi; returns how many of its offsets were consumed before."""
        i = bisect_left(self.his, lo - 1)  # ranges before i end before lo - 1: untouched
        j = bisect_right(self.los, hi + 1)  # ranges from j start after hi + 1: untouched
        seen = sum(max(0, min(h, hi) - max(lo_, lo) + 1)
                   for lo_, h in zip(self.los[i:j], self.his[i:j], strict=True))
        if i < j:  # the ranges it overlaps or touches become one with it
            lo, hi = min(lo, self.los[i]), max(hi, self.his[j - 1])
        self.los[i:j] = [lo]
        self.his[i:j] = [hi]
        return seen


def _repeats(flow: _Flow) -> np.ndarray:
    """Per record (0 for a produce), how many of the offsets it consumed an earlier consume record of its
    partition already had: the offsets Spark's row_number over (partition, offset) by ts numbers 2 and up.

    Which of two records at one instant counts the repeats is Spark's choice (a tie of row_number), but both
    have the same ts, so every window and the `before` count get the same number either way."""
    repeats = np.zeros(len(flow.ts), dtype=np.int64)
    for part in flow.partitions():
        consumed = _Consumed()
        rows = zip(flow.consume[part].tolist(), flow.first[part].tolist(), flow.last[part].tolist(), strict=True)
        for i, (is_consume, first, last) in enumerate(rows, start=part.start):
            if is_consume:  # F.sequence counts down when first > last: the same offsets
                repeats[i] = consumed.add(min(first, last), max(first, last))
    return repeats


def _window_sums(windows: _Windows, index: np.ndarray, values: np.ndarray) -> list[int]:
    inside = index >= 0
    sums = np.zeros(len(windows), dtype=np.int64)
    np.add.at(sums, index[inside], values[inside])
    return sums.tolist()


def _longest_gaps(windows: _Windows, flow: _Flow) -> list[tuple[float, float, float] | None]:
    """Per window, (dead_time_s, dead_from, dead_to) of the longest stretch between two consecutive consume
    records of the run that ends in it (the window's step's, as `per_step` says)."""
    ts = np.sort(flow.ts[flow.consume])
    dead_from, dead_to = ts[:-1], ts[1:]
    dead = dead_to - dead_from
    index = windows.index(dead_to)
    found: list[tuple[float, float, float] | None] = []
    for k in range(len(windows)):
        mine = np.flatnonzero(index == k)
        if len(mine) == 0:
            found.append(None)
            continue
        # argmax gives the first of the longest, the earliest dead_to: Spark's order (dead_time_s desc, dead_to)
        j = mine[np.argmax(dead[mine])]
        found.append((float(dead[j]), float(dead_from[j]), float(dead_to[j])))
    return windows.per_step(found, lambda a, b: min(a, b, key=lambda g: (-g[0], g[2])))


def _partition_stalls(ts: np.ndarray, consume: np.ndarray, last: np.ndarray, run_end: float
                      ) -> tuple[np.ndarray, np.ndarray]:
    """chaos_tables._stalls of one partition, its records in _Flow's order: (stall_start, stall_end) arrays."""
    # running maxima over the rows so far; a kind not seen yet is null in Spark, told apart here by a flag
    produced_yet = np.logical_or.accumulate(~consume)
    consumed_yet = np.logical_or.accumulate(consume)
    low = np.iinfo(np.int64).min
    max_produced = np.maximum.accumulate(np.where(consume, low, last))
    max_consumed = np.where(consumed_yet, np.maximum.accumulate(np.where(consume, last, low)), -1)
    waiting = produced_yet & (max_produced > max_consumed)
    was_waiting = np.concatenate([[False], waiting[:-1]])
    starts = np.flatnonzero(waiting & (consume | ~was_waiting))
    # each stall ends at the partition's next consume record after its row (a consume at the same instant
    # included: a zero stall, which no window counts), or at the run's end
    consumes = np.flatnonzero(consume)
    following = np.append(ts[consumes], run_end)  # the consume records' times, then the run's end
    return ts[starts], following[np.searchsorted(consumes, starts, side="right")]


def _partition_stall(windows: _Windows, flow: _Flow) -> list[float | None]:
    """Per window, the longest overlap with it of any partition's stall (only overlaps above 0 count)."""
    run_end = float(windows.ends[-1])
    stalls = [_partition_stalls(flow.ts[p], flow.consume[p], flow.last[p], run_end) for p in flow.partitions()]
    start = np.concatenate([s for s, _ in stalls]) if stalls else np.empty(0)
    end = np.concatenate([e for _, e in stalls]) if stalls else np.empty(0)
    found: list[float | None] = []
    for ws, we in zip(windows.starts, windows.ends, strict=True):
        overlap = np.minimum(end, we) - np.maximum(start, ws)
        overlap = overlap[overlap > 0]
        found.append(float(overlap.max()) if len(overlap) else None)
    return windows.per_step(found, max)


def _step_rows(windows: _Windows, flow: _Flow, repeats: np.ndarray) -> list[Row]:
    index = windows.index(flow.ts)
    sizes = flow.sizes()

    def summed(values: np.ndarray) -> list[int]:  # 0 where nothing was: Spark's null sum, coalesced to 0
        return windows.per_step(_window_sums(windows, index, values), lambda a, b: a + b)

    produced = summed(np.where(flow.consume, 0, sizes))
    consumed = summed(np.where(flow.consume, sizes, 0))
    duplicates = summed(repeats)
    gaps = _longest_gaps(windows, flow)
    stall = _partition_stall(windows, flow)
    rows = []
    for k, w in enumerate(windows.rows):
        dead_time, dead_from, dead_to = gaps[k] or (0.0, None, None)
        rows.append({**w, "produced": produced[k], "consumed": consumed[k], "duplicates": duplicates[k],
                     "dead_time_s": dead_time, "dead_from": dead_from, "dead_to": dead_to,
                     "partition_stall_s": stall[k] if stall[k] is not None else 0.0})
    return rows


def _totals(run_id: str, steps: list[Row], partitions: list[Row], duplicates_before: int) -> list[Row]:
    if not partitions:  # an inner join with the audit: a run without produce or consume records has no row
        return []
    return [{"run_id": run_id,
             "produced": sum(p["expected_offsets"] for p in partitions),
             "duplicates": sum(p["duplicates"] for p in partitions),
             "missing": sum(p["missing"] for p in partitions),
             "partitions": len(partitions),
             "steps": len(steps),
             "dead_time_s": sum(s["dead_time_s"] for s in steps),
             "max_dead_time_s": max(s["dead_time_s"] for s in steps),
             "partition_stall_s": max(s["partition_stall_s"] for s in steps),
             "duplicates_before": duplicates_before}]
