"""Change windows from phase, membership and stable records and the leavers' ownership events, built in Spark by
the oracle (spark_oracle/windows.py) the per-run time frame is checked against."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import types as T
from spark_oracle.windows import build

from zkconsumer.lab.analysis.schemas import RECORD_FIELDS, TRACE_SCHEMA

pytestmark = pytest.mark.slow

COLUMNS = T.StructType([T.StructField("run_id", T.StringType()), T.StructField("file", T.StringType()),
                        *[f for f in TRACE_SCHEMA.fields if f.name in RECORD_FIELDS]])


def records(spark: SparkSession, cases: dict[str, tuple[tuple, ...]]) -> DataFrame:
    """One run per case, its id the case's name; a case's rows are (ts, type, what, members): what is the phase,
    the action, for `stable` (change number, duration), for an ownership event the member_event kind (`members`
    then names the member)."""
    out: list[dict[str, Any]] = []
    for run_id, case in cases.items():
        for step, (ts, type_, what, members) in enumerate(case):
            row: dict[str, Any] = {"run_id": run_id, "ts": ts, "type": type_, "design": "zk", "step": step}
            if type_ == "phase":
                row["phase"] = what
            elif type_ == "membership":
                row.update(action=what, members=members)
            elif type_ == "stable":
                row["generation_or_rebalance"], row["duration_s"] = what
            else:
                row.update(kind=what, member=members, partitions='["t/0"]' if what == "fetchers_stopped" else None)
            out.append(row)
    return spark.createDataFrame([tuple(r.get(f.name) for f in COLUMNS.fields) for r in out], COLUMNS)


LEAVE = ((10.0, "phase", "settled", None), (12.0, "membership", "join", ["m2"]),
         (20.0, "membership", "leave", ["m2"]), (25.0, "phase", "done", None),
         (12.5, "member_event", "fetchers_started", "m2"))

CASES: dict[str, tuple[tuple, ...]] = {
    "numbers": ((10.0, "phase", "settled", None), (12.0, "membership", "join", ["m2", "m3"]),
                (15.0, "membership", "delay", ["m0"]),  # not a change
                (14.0, "stable", (2, 2.0), None), (18.0, "membership", "resume", ["m1"]),
                (18.5, "stable", (3, 0.5), None), (30.0, "phase", "done", None),
                (40.0, "member_event", "fetchers_started", "m0")),
    "stopped": (*LEAVE, (19.8, "member_event", "fetchers_stopped", "m2")),
    "started": LEAVE,
    "leaves": ((10.0, "phase", "settled", None), (20.0, "membership", "leave", ["m1"]),
               (20.1, "membership", "leave", ["m2"]), (20.2, "membership", "leave", ["m3"]),
               (30.0, "phase", "done", None), (19.75, "member_event", "fetchers_stopped", "m1"),
               (19.9, "member_event", "fetchers_stopped", "m2"), (19.8, "member_event", "fetchers_stopped", "m3")),
    "unsettled": ((12.0, "membership", "kill", ["m1"]), (33.0, "member_event", "fetchers_started", "m0")),
}


@dataclass
class Built:
    """The oracle's three frames, collected."""

    bounds: list[Row]
    changes: list[Row]
    windows: list[Row]


@pytest.fixture(scope="module")
def built(spark: SparkSession) -> Built:
    """Every case as a run of its own, built by the oracle in one go: it groups and joins by run id (as it does
    over the fixed set's runs), and each of its queries costs its planning and compiling however few the rows,
    which a build per case paid five times."""
    w = build(records(spark, CASES))
    return Built(w.bounds.collect(), w.changes.collect(), w.windows.collect())


def rows(frame: list[Row], run_id: str, *columns: str) -> list[tuple]:
    """The run's rows, as tuples of `columns` (every column without any)."""
    return sorted(tuple(r[c] for c in columns) if columns else tuple(r) for r in frame if r["run_id"] == run_id)


def test_windows_follow_the_orchestrators_change_numbers(built: Built) -> None:
    # churn window, changes as the summary counts them (a resume is not one), membership records, stable max/median/n
    assert rows(built.bounds, "numbers") == [("numbers", 10.0, 30.0, 40.0, 2, 2, 2.0, 1.25, 2)]
    # a stable record names its change by the orchestrator's number, which counts both members of the join
    assert rows(built.changes, "numbers", "change_index", "change_number", "action", "weight", "counted", "change_ts",
                "window_start", "window_end", "stable_s") == [
        (1, 2, "join", 2, 2, 12.0, 12.0, 18.0, 2.0), (2, 3, "resume", 1, 0, 18.0, 18.0, 30.0, 0.5)]
    assert rows(built.windows, "numbers", "change_index", "win_start", "win_end", "last") == [
        (0, 10.0, 12.0, False), (1, 12.0, 18.0, False), (2, 18.0, 30.0, True)]


def test_a_leave_starts_at_the_leavers_last_stop(built: Built) -> None:
    assert rows(built.windows, "stopped", "change_index", "win_start", "win_end") == [
        (0, 10.0, 12.0), (1, 12.0, 19.8), (2, 19.8, 25.0)]
    # a leaver whose last event is a start (it never stopped, e.g. it owned nothing to stop) keeps the record's time
    assert rows(built.windows, "started", "change_index", "win_start", "win_end") == [
        (0, 10.0, 12.0), (1, 12.0, 20.0), (2, 20.0, 25.0)]


def test_a_leavers_stop_counts_only_after_the_previous_changes_start(built: Built) -> None:
    # three leaves in quick succession: each leaver's stop counts when it is later than the previous change's
    # start, which a leave moves: m2's stop (19.9) is before the first leave's record (20.0) but after its moved
    # start (19.75); m3's stop (19.8) is before m2's leave starts (19.9), so m3's leave starts at its record
    assert rows(built.windows, "leaves", "change_index", "win_start", "win_end") == [
        (0, 10.0, 19.75), (1, 19.75, 19.9), (2, 19.9, 20.2), (3, 20.2, 30.0)]


def test_a_run_that_never_settled_has_no_quiet_window_and_ends_at_its_last_record(built: Built) -> None:
    # no churn window: nothing counted per run
    assert rows(built.bounds, "unsettled") == [("unsettled", None, 33.0, 33.0, 0, 0, None, None, 0)]
    assert rows(built.windows, "unsettled", "change_index", "win_start", "win_end", "last") == [(1, 12.0, 33.0, True)]
    assert rows(built.changes, "unsettled", "counted") == [(1,)]  # but the kill is a change of its own
