"""The time frame per run (per_run/frame.py) against the Spark oracle's windows.build: every run of the fixed set and of
the hand-built runs gives Spark's bounds, changes and windows rows; and the leave-start fold pinned without Spark."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from per_run_reference import FixedReference, same
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from zkconsumer.lab.analysis.per_run.frame import time_frame
from zkconsumer.lab.analysis.schemas import RECORD_FIELDS, TRACE_SCHEMA


@pytest.fixture(scope="module")
def fixed(fixed_ref: FixedReference) -> FixedReference:
    return fixed_ref


@pytest.fixture(scope="module")
def hand(hand_ref: FixedReference) -> FixedReference:
    return hand_ref


def frames(ref: FixedReference) -> tuple[list[dict], list[dict], list[dict]]:
    """time_frame over every run, its rows concatenated as Spark's frames hold every run's."""
    bounds, changes, windows = [], [], []
    for table in ref.run_tables.values():
        b, c, w = time_frame(table)
        bounds += [b] if b is not None else []
        changes += c
        windows += w
    return bounds, changes, windows


def exactly(rows: list[dict]) -> list[dict]:
    """Rows in one order, values as they are. `same` rounds doubles to 9 significant digits, which for an epoch
    time (1.7e9 s) is a whole second: a window start moved by 0.2 s would pass. No double here is a sum (each is a
    record's time or duration, or the median's one interpolation, done as Spark does it), so they must be equal."""
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


@pytest.mark.slow
@pytest.mark.parametrize("which", ["fixed", "hand"])
def test_every_run_gives_sparks_time_frame(which: str, request: pytest.FixtureRequest) -> None:
    ref: FixedReference = request.getfixturevalue(which)
    bounds, changes, windows = frames(ref)
    assert len(ref.run_tables) > 1 and ref.changes_rows and ref.windows_rows  # something to compare
    for found, want, table in ((bounds, ref.bounds_rows, "bounds"), (changes, ref.changes_rows, "changes"),
                               (windows, ref.windows_rows, "windows")):
        assert same(found, want, table)
        assert exactly(found) == exactly(want)


# --- the leave-start fold, on a run made by hand ---------------------------------------------------------------

COLUMNS = to_arrow_schema(T.StructType([T.StructField("run_id", T.StringType()), T.StructField("file", T.StringType()),
                                        *[f for f in TRACE_SCHEMA.fields if f.name in RECORD_FIELDS]]))


def run_of(*records: dict[str, Any]) -> pa.Table:
    rows = [{"run_id": "r", "design": "zk", **r} for r in records]
    return pa.Table.from_pylist([{name: row.get(name) for name in COLUMNS.names} for row in rows], schema=COLUMNS)


def stopped(ts: float, member: str) -> dict[str, Any]:
    return {"ts": ts, "type": "member_event", "kind": "fetchers_stopped", "member": member, "partitions": '["t/0"]'}


def started(ts: float, member: str) -> dict[str, Any]:
    return {"ts": ts, "type": "member_event", "kind": "fetchers_started", "member": member}


BASE = ({"ts": 10.0, "type": "phase", "phase": "settled"}, {"ts": 30.0, "type": "phase", "phase": "done"},
        {"ts": 12.0, "type": "membership", "action": "join", "members": ["m2", "m3"], "step": 1},
        {"ts": 20.0, "type": "membership", "action": "leave", "members": ["m2"], "step": 2})


def starts(*records: dict[str, Any]) -> list[tuple[int, float, float]]:
    """(change_index, window_start, window_end) of BASE's changes with `records` added."""
    _, changes, _ = time_frame(run_of(*BASE, *records))
    return [(c["change_index"], c["window_start"], c["window_end"]) for c in changes]


def test_a_leavers_last_stop_moves_its_leaves_window_start() -> None:
    # the leaver stopped before the record: its window starts there, and the join's window ends there
    moved = (started(12.5, "m2"), stopped(19.5, "m2"))
    assert starts(*moved) == [(1, 12.0, 19.5), (2, 19.5, 30.0)]
    bounds, _, windows = time_frame(run_of(*BASE, *moved))
    assert bounds is not None and (bounds["churn_start"], bounds["churn_end"], bounds["changes"]) == (10.0, 30.0, 3)
    assert [(w["change_index"], w["win_start"], w["win_end"], w["last"]) for w in windows] == [
        (0, 10.0, 12.0, False), (1, 12.0, 19.5, False), (2, 19.5, 30.0, True)]


def test_a_leave_starts_at_its_record_unless_its_leavers_last_event_is_a_stop() -> None:
    unmoved = [(1, 12.0, 20.0), (2, 20.0, 30.0)]
    # the last event a start: after a stop, or at the same instant as one (a start wins the tie)
    assert starts(started(12.5, "m2"), stopped(15.0, "m2"), started(16.0, "m2")) == unmoved
    assert starts(started(12.5, "m2"), stopped(18.0, "m2"), started(18.0, "m2")) == unmoved
    # a stop after the record is not the leaver giving up before it; another member's stop is not the leaver's
    assert starts(started(12.5, "m2"), stopped(21.0, "m2")) == unmoved
    assert starts(started(12.5, "m2"), stopped(19.5, "m3")) == unmoved


def test_a_stop_counts_only_after_the_previous_changes_start() -> None:
    # no later than the previous change's start (the join at 12.0): not this leave's
    assert starts(stopped(11.0, "m2")) == [(1, 12.0, 20.0), (2, 20.0, 30.0)]
    # the floor is the previous start as moved: m2 left at 19.5, so m3's stop at 19.2 belongs to m2's leave
    second = {"ts": 20.0, "type": "membership", "action": "leave", "members": ["m3"], "step": 3}
    assert starts(second, stopped(19.5, "m2"), stopped(19.2, "m3")) == [
        (1, 12.0, 19.5), (2, 19.5, 20.0), (3, 20.0, 30.0)]
    assert starts(second, stopped(19.5, "m2"), stopped(19.7, "m3")) == [
        (1, 12.0, 19.5), (2, 19.5, 19.7), (3, 19.7, 30.0)]


def test_the_run_ends_at_its_last_control_record() -> None:
    # run_end is over the records the oracle's windows.build is given (its metrics.control_records): a late
    # produce, consume or plain wire record is not one; an owner node's delete on the wire is
    late = ({"ts": 40.0, "type": "produce"}, {"ts": 41.0, "type": "consume"},
            {"ts": 42.0, "type": "wire", "proto": "zk", "kind": "reply", "op": "getData", "path": "/x"})
    bounds, _, _ = time_frame(run_of(*BASE, *late))
    assert bounds is not None and bounds["run_end"] == 30.0
    delete = {"ts": 43.0, "type": "wire", "proto": "zk", "kind": "reply", "op": "delete",
              "path": "/chroot/consumers/g/owners/t/0"}
    bounds, _, _ = time_frame(run_of(*BASE, *late, delete))
    assert bounds is not None and bounds["run_end"] == 43.0
    assert time_frame(run_of(*late)) == (None, [], [])
