"""The time frame every metric is counted in: each run's churn window and its membership changes.

The churn window runs from the `settled` phase to `done`, as in the lab's summary (zkconsumer/lab/summary.py), so
the per-run figures here are the summary's. Inside it, each membership change owns the time from its action to
the next change (the last one to `done`): change window i >= 1. Window 0 is the quiet time from `settled` to the
first change. Records outside the churn (setup, the initial group, shutdown) get no change index.

Change numbers follow the orchestrator's (zkconsumer/lab/run.py): each record of a join, leave, kill, expire,
pause, resume or add_partitions adds max(1, members) to the count, and `stable` records name the change they
settle by that number. The per-change normalisation uses the summary's `changes` (join, leave, kill, expire,
pause).

A leave's record is written when the orchestrator has seen the member stop (it waits for the graceful stop), so
the leaver gave its partitions up before the record's time. A leave's window therefore starts at the leaver's
last ownership event before the record when that event is a stop (`window_start` <= `change_ts`); every other
change's window starts at its record.

A run has a handful of these records, so they are collected in one query and the windows are built here, in
plain Python, then handed back to Spark as small tables.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from zkconsumer.lab.analysis import owner_nodes as wire

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


@dataclass
class Windows:
    bounds: DataFrame  # per run (BOUNDS_SCHEMA): churn_start (settled), churn_end (done, else the last record), ...
    changes: DataFrame  # one row per change-starting membership record (CHANGES_SCHEMA), with its `stable`
    windows: DataFrame  # run_id, change_index (0 = settled to the first change), win_start, win_end, last
    window_rows: list[tuple]  # the same windows as Python tuples (WINDOWS_SCHEMA)


def build(spark: SparkSession, records: DataFrame) -> Windows:
    kind, type_ = F.col("kind"), F.col("type")
    marker = type_.isin("phase", "membership", "stable")
    # each member's ownership events, to find a leaver's last one (1 = a start, 0 = a stop)
    # (the original design's members report none: its owner-node creates and deletes on the wire stand in,
    # owner_nodes.py, and so does its closing the session, which deletes them)
    own = (F.when((type_ == "member_event") & (kind == "fetchers_started"), 1)
           .when((type_ == "member_event") & (kind == "fetchers_stopped") & (F.col("partitions") != "[]"), 0)
           .when((type_ == "generation") & (kind == "assigned"), 1)
           .when((type_ == "generation") & kind.isin("revoked", "lost"), 0)
           .when(wire.from_wire() & wire.claimed(), 1)
           .when(wire.from_wire() & (wire.deleted() | wire.session_closed()), 0))
    # Two light queries rather than one: collecting lists while aggregating every line costs more than a filter.
    ends = dict(records.groupBy("run_id").agg(F.max("ts")).collect())
    rows = (records.filter(marker | own.isNotNull())
            .select("run_id", "ts", "type", "phase", "design", "action", "members", "step", "generation_or_rebalance",
                    "duration_s", F.coalesce("member", "link").alias("member"), own.alias("start")).collect())
    marks: dict[str, list[dict]] = {run_id: [] for run_id in ends}
    ownership: dict[str, dict[str, list[tuple[float, int]]]] = {run_id: {} for run_id in ends}
    for row in rows:
        if row["start"] is None:
            marks[row["run_id"]].append(row.asDict())
        else:
            ownership[row["run_id"]].setdefault(row["member"], []).append((row["ts"], row["start"]))
    bounds, changes, windows = [], [], []
    for run_id, run_end in ends.items():
        b, c, w = run_windows(run_id, run_end, marks[run_id], ownership[run_id])
        bounds.append(b)
        changes += c
        windows += w
    return Windows(spark.createDataFrame(bounds, BOUNDS_SCHEMA), spark.createDataFrame(changes, CHANGES_SCHEMA),
                   spark.createDataFrame(windows, WINDOWS_SCHEMA), windows)


def run_windows(run_id: str, run_end: float, marks: list[dict],
                ownership: dict[str, list[tuple[float, int]]] | None = None) -> tuple[tuple, list[tuple], list[tuple]]:
    """One run's (bounds row, change rows, window rows) from its phase, membership and stable records and its
    members' ownership events (member -> [(ts, 1 for a start, 0 for a stop)])."""
    def phase(name: str) -> float | None:
        return min((m["ts"] for m in marks if m["type"] == "phase" and m["phase"] == name), default=None)

    ownership = ownership or {}
    settled, done = phase("settled"), phase("done")
    churn_end = done if done is not None else run_end
    members = sorted((m for m in marks if m["type"] == "membership" and m["action"] in WINDOW_ACTIONS),
                     key=lambda m: (m["ts"], m["step"] if m["step"] is not None else 0))
    starts: list[float] = []
    for m in members:
        floor = starts[-1] if starts else (settled if settled is not None else float("-inf"))
        start = m["ts"]
        if m["action"] == "leave":
            for name in m["members"] or ():
                last = max((e for e in ownership.get(name, ()) if floor < e[0] <= m["ts"]), default=None)
                if last is not None and last[1] == 0:
                    start = min(start, last[0])
        starts.append(start)
    stable: dict[int, tuple[float, float]] = {}  # change number -> (duration_s, ts) of the first stable record
    for m in sorted((m for m in marks if m["type"] == "stable"), key=lambda m: m["ts"]):
        stable.setdefault(m["generation_or_rebalance"], (m["duration_s"], m["ts"]))
    changes, windows = [], []
    number = 0
    for i, m in enumerate(members, start=1):
        weight = max(1, len(m["members"] or ()))
        number += weight
        start = starts[i - 1]
        end = starts[i] if i < len(members) else max(churn_end, start)
        changes.append((run_id, m["design"], i, number, m["action"], ",".join(m["members"] or ()), m["step"], weight,
                        weight if m["action"] in COUNTED_ACTIONS else 0, m["ts"], start, end,
                        *stable.get(number, (None, None))))
        windows.append((run_id, i, start, end, i == len(members)))
    if settled is not None:
        first = starts[0] if members else churn_end
        windows.insert(0, (run_id, 0, settled, max(first, settled), not members))
    def in_churn(ts: float) -> bool:
        return settled is not None and settled <= ts and (done is None or ts <= done)

    counted = [c for c in changes if in_churn(c[9])]
    durations = sorted(m["duration_s"] for m in marks if m["type"] == "stable" and in_churn(m["ts"]))
    facts = (sum(c[8] for c in counted), len(counted), max(durations, default=None),
             statistics.median(durations) if durations else None, len(durations))
    return (run_id, settled, churn_end, run_end, *facts), changes, windows


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


def attach_change(df: DataFrame, windows: DataFrame, ts: str = "ts") -> DataFrame:
    """df plus change_index: the change window its `ts` falls in (half-open; the churn's last one is closed), or
    null outside the churn."""
    w = F.broadcast(windows.select(F.col("run_id").alias("_w_run"), F.col("change_index"),
                                   F.col("win_start").alias("_w_start"), F.col("win_end").alias("_w_end"),
                                   F.col("last").alias("_w_last")))
    t = F.col(ts)
    inside = (t >= F.col("_w_start")) & ((t < F.col("_w_end")) | (F.col("_w_last") & (t == F.col("_w_end"))))
    return (df.join(w, (F.col("run_id") == F.col("_w_run")) & inside, "left")
            .drop("_w_run", "_w_start", "_w_end", "_w_last"))
