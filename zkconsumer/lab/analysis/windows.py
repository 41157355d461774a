"""The time frame every metric is counted in: each run's churn window and its membership changes.

The churn window runs from the `settled` phase to `done`, as in the lab's summary (zkconsumer/lab/runs/summary.py), so
the per-run figures here are the summary's. Inside it, each membership change owns the time from its action to
the next change (the last one to `done`): change window i >= 1. Window 0 is the quiet time from `settled` to the
first change. Records outside the churn (setup, the initial group, shutdown) get no change index.

Change numbers follow the orchestrator's (zkconsumer/lab/runs/case_run.py): each record of a join, leave, kill, expire,
pause, resume or add_partitions adds max(1, members) to the count, and `stable` records name the change they
settle by that number. The per-change normalisation uses the summary's `changes` (join, leave, kill, expire,
pause).

A leave's record is written when the orchestrator has seen the member stop (it waits for the graceful stop), so
the leaver gave its partitions up before the record's time. A leave's window therefore starts at the leaver's
last ownership event before the record when that event is a stop (`window_start` <= `change_ts`); every other
change's window starts at its record.

per_run/frame.py computes them, run by run in Python over Arrow, as rows of the schemas here; a record's change
window is per_run/core.in_window's. The tests check both against a Spark form of the same rules, written apart
(tests/analysis/spark_oracle/windows.py).
"""

from __future__ import annotations

from pyspark.sql import types as T

WINDOW_ACTIONS = ("join", "leave", "kill", "expire", "pause", "resume", "add_partitions")
COUNTED_ACTIONS = ("join", "leave", "kill", "expire", "pause")
RECOVERY_MARGIN_S = 1.0  # a timeline shows this much of the steady state after the group recovered

BOUNDS_SCHEMA = T.StructType([
    T.StructField("run_id", T.StringType()), T.StructField("churn_start", T.DoubleType()),
    T.StructField("churn_end", T.DoubleType()), T.StructField("run_end", T.DoubleType()),
    # counted as the summary counts them: records from `settled` to `done` (none when the run never settled)
    T.StructField("changes", T.IntegerType()), T.StructField("membership_records", T.IntegerType()),
    T.StructField("time_to_stable_s", T.DoubleType()), T.StructField("median_stable_s", T.DoubleType()),
    T.StructField("stable_records", T.IntegerType())])
CHANGES_SCHEMA = T.StructType([
    T.StructField("run_id", T.StringType()), T.StructField("design", T.StringType()),
    T.StructField("change_index", T.IntegerType()), T.StructField("change_number", T.IntegerType()),
    T.StructField("action", T.StringType()), T.StructField("change_members", T.StringType()),
    T.StructField("step", T.IntegerType()), T.StructField("weight", T.IntegerType()),
    T.StructField("counted", T.IntegerType()), T.StructField("change_ts", T.DoubleType()),
    T.StructField("window_start", T.DoubleType()), T.StructField("window_end", T.DoubleType()),
    T.StructField("stable_s", T.DoubleType()), T.StructField("stable_ts", T.DoubleType())])
WINDOWS_SCHEMA = T.StructType([
    T.StructField("run_id", T.StringType()), T.StructField("change_index", T.IntegerType()),
    T.StructField("win_start", T.DoubleType()), T.StructField("win_end", T.DoubleType()),
    T.StructField("last", T.BooleanType())])


def recovery_span(changes: list[dict], change: dict, margin_s: float = RECOVERY_MARGIN_S) -> tuple[float, float]:
    """(start, end) of the churn step `change` belongs to, from one run's `changes` rows: from the step's first
    window to the moment the group recovered from its last change, plus `margin_s`, never past that change's
    window.

    A step can be several changes at once (three expiries in one step: each its own record and window, a few
    milliseconds long), and the group is stable again only after the last of them: its `stable` record, or its
    last ownership event (`convergence_s`, from its window's start) when that comes later. A step that never
    recovered runs to the end of its last window."""
    step = sorted((c for c in changes if c["step"] == change["step"]), key=lambda c: c["change_index"]) or [change]
    last = step[-1]
    recovered = [last["stable_ts"]] if last.get("stable_ts") is not None else []
    if last.get("convergence_s") is not None:
        recovered.append(last["window_start"] + last["convergence_s"])
    end = last["window_end"]
    if recovered:
        end = min(end, max(recovered) + margin_s)
    return step[0]["window_start"], end


