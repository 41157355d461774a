"""Change windows from phase, membership and stable records and the leavers' ownership events, built in Spark by
the oracle (spark_oracle/windows.py) the per-run time frame is checked against."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from spark_oracle.windows import build

from zkconsumer.lab.analysis.schemas import RECORD_FIELDS, TRACE_SCHEMA

pytestmark = pytest.mark.slow

COLUMNS = T.StructType([T.StructField("run_id", T.StringType()), T.StructField("file", T.StringType()),
                        *[f for f in TRACE_SCHEMA.fields if f.name in RECORD_FIELDS]])


def records(spark: SparkSession, *rows: tuple) -> DataFrame:
    """(ts, type, what, members): what is the phase, the action, for `stable` (change number, duration), for an
    ownership event the member_event kind (`members` then names the member)."""
    out: list[dict[str, Any]] = []
    for ts, type_, what, members in rows:
        row: dict[str, Any] = {"run_id": "r", "ts": ts, "type": type_, "design": "zk", "step": len(out)}
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


def rows(df: DataFrame, *columns: str) -> list[tuple]:
    return sorted(tuple(r[c] for c in columns) for r in df.collect())


def test_windows_follow_the_orchestrators_change_numbers(spark) -> None:
    w = build(records(spark,
                      (10.0, "phase", "settled", None), (12.0, "membership", "join", ["m2", "m3"]),
                      (15.0, "membership", "delay", ["m0"]),  # not a change
                      (14.0, "stable", (2, 2.0), None), (18.0, "membership", "resume", ["m1"]),
                      (18.5, "stable", (3, 0.5), None), (30.0, "phase", "done", None),
                      (40.0, "member_event", "fetchers_started", "m0")))
    # churn window, changes as the summary counts them (a resume is not one), membership records, stable max/median/n
    assert rows(w.bounds, *[f for f in w.bounds.columns]) == [("r", 10.0, 30.0, 40.0, 2, 2, 2.0, 1.25, 2)]
    # a stable record names its change by the orchestrator's number, which counts both members of the join
    assert rows(w.changes, "change_index", "change_number", "action", "weight", "counted", "change_ts",
                "window_start", "window_end", "stable_s") == [
        (1, 2, "join", 2, 2, 12.0, 12.0, 18.0, 2.0), (2, 3, "resume", 1, 0, 18.0, 18.0, 30.0, 0.5)]
    assert rows(w.windows, "change_index", "win_start", "win_end", "last") == [
        (0, 10.0, 12.0, False), (1, 12.0, 18.0, False), (2, 18.0, 30.0, True)]


def test_a_leave_starts_at_the_leavers_last_stop(spark) -> None:
    marks = ((10.0, "phase", "settled", None), (12.0, "membership", "join", ["m2"]),
             (20.0, "membership", "leave", ["m2"]), (25.0, "phase", "done", None),
             (12.5, "member_event", "fetchers_started", "m2"))
    stopped = build(records(spark, *marks, (19.8, "member_event", "fetchers_stopped", "m2")))
    assert rows(stopped.windows, "change_index", "win_start", "win_end") == [
        (0, 10.0, 12.0), (1, 12.0, 19.8), (2, 19.8, 25.0)]
    # a leaver whose last event is a start (it never stopped, e.g. it owned nothing to stop) keeps the record's time
    started = build(records(spark, *marks))
    assert rows(started.windows, "change_index", "win_start", "win_end") == [
        (0, 10.0, 12.0), (1, 12.0, 20.0), (2, 20.0, 25.0)]


def test_a_leavers_stop_counts_only_after_the_previous_changes_start(spark) -> None:
    # three leaves in quick succession: each leaver's stop counts when it is later than the previous change's
    # start, which a leave moves: m2's stop (19.9) is before the first leave's record (20.0) but after its moved
    # start (19.75); m3's stop (19.8) is before m2's leave starts (19.9), so m3's leave starts at its record
    w = build(records(spark, (10.0, "phase", "settled", None), (20.0, "membership", "leave", ["m1"]),
                      (20.1, "membership", "leave", ["m2"]), (20.2, "membership", "leave", ["m3"]),
                      (30.0, "phase", "done", None), (19.75, "member_event", "fetchers_stopped", "m1"),
                      (19.9, "member_event", "fetchers_stopped", "m2"),
                      (19.8, "member_event", "fetchers_stopped", "m3")))
    assert rows(w.windows, "change_index", "win_start", "win_end") == [
        (0, 10.0, 19.75), (1, 19.75, 19.9), (2, 19.9, 20.2), (3, 20.2, 30.0)]


def test_a_run_that_never_settled_has_no_quiet_window_and_ends_at_its_last_record(spark) -> None:
    w = build(records(spark, (12.0, "membership", "kill", ["m1"]), (33.0, "member_event", "fetchers_started", "m0")))
    # no churn window: nothing counted per run
    assert rows(w.bounds, *w.bounds.columns) == [("r", None, 33.0, 33.0, 0, 0, None, None, 0)]
    assert rows(w.windows, "change_index", "win_start", "win_end", "last") == [(1, 12.0, 33.0, True)]
    assert rows(w.changes, "counted") == [(1,)]  # but the kill is a change of its own
