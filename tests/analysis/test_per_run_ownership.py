"""The ownership family per run (zkconsumer/lab/analysis/per_run/ownership.py) against the Spark oracle's functions
(spark_oracle/ownership.py) on the same records, run by run: the fixed set of real runs, the hand-built runs, and a few
runs written here with what the real ones lack (lost generations, expiries the orchestrator caused, refused owner nodes,
stale generations, JSON that does not parse, null members and partitions). Each table must equal Spark's as the fixed
set compares tables (per_run_reference.same), with values of the same Python types."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import spark_oracle.ownership as spark_ownership
from per_run_reference import FixedReference, rows_of, same
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from spark_oracle.metrics import control_records
from spark_oracle.windows import build

import zkconsumer.lab.analysis.per_run.ownership as per_run
from zkconsumer.lab.analysis.windows import BOUNDS_SCHEMA, WINDOWS_SCHEMA

pytestmark = pytest.mark.slow

TABLES = ("events", "intervals", "overlaps", "ownership_per_change", "stop_the_world", "moved_per_change",
          "moved_per_run", "revoked_kept", "contention")
Rows = list[dict[str, Any]]


@dataclass
class Inputs:
    """What both sides read: the records (every run's as one Spark frame, each run's as an Arrow table), Spark's
    windows and bounds rows, and each run's manifest partition count."""

    records: DataFrame
    run_tables: dict[str, pa.Table]
    windows_rows: Rows
    bounds_rows: Rows
    partitions: dict[str, int | None]
    root: Path = Path("/nonexistent")


@dataclass
class Compared:
    inputs: Inputs
    spark: dict[str, Rows]  # table -> the Spark functions' rows over every run
    python: dict[str, Rows]  # table -> the per-run functions' rows, run after run


def _inputs(ref: FixedReference) -> Inputs:
    return Inputs(ref.records, ref.run_tables, ref.windows_rows, ref.bounds_rows,
                  {r.run_id: r.partitions for r in ref.runs}, ref.runs_root)


def _frame(spark: SparkSession, rows: Rows, schema: T.StructType) -> DataFrame:
    return spark.createDataFrame([tuple(r[f.name] for f in schema.fields) for r in rows], schema)


def spark_tables(spark: SparkSession, inputs: Inputs) -> dict[str, Rows]:
    """As the Spark job called the oracle's ownership.py: over the control records, with the reference's windows
    and bounds."""
    control = inputs.records.filter(control_records())
    windows = _frame(spark, inputs.windows_rows, WINDOWS_SCHEMA)
    bounds = _frame(spark, inputs.bounds_rows, BOUNDS_SCHEMA)
    runs = spark.createDataFrame(list(inputs.partitions.items()), "run_id string, partitions int")
    events = spark_ownership.ownership_events(control).cache()
    iv = spark_ownership.intervals(events, bounds, control).cache()
    change_spans = windows.filter(F.col("change_index") > 0).select(
        "run_id", "change_index", F.col("win_start").alias("s_start"), F.col("win_end").alias("s_end"))
    churn_spans = bounds.filter(F.col("churn_start").isNotNull()).select(
        "run_id", F.col("churn_start").alias("s_start"), F.col("churn_end").alias("s_end"))
    frames = {
        "events": events,
        "intervals": iv,
        "overlaps": spark_ownership.overlaps(iv, windows),
        "ownership_per_change": spark_ownership.ownership_per_change(iv, events, windows, runs),
        "stop_the_world": spark_ownership.stop_the_world(events, windows),
        "moved_per_change": spark_ownership.moved(iv, change_spans, ("change_index",)),
        "moved_per_run": spark_ownership.moved(iv, churn_spans, ()),
        "revoked_kept": spark_ownership.revoked_kept(iv, bounds),
        "contention": spark_ownership.contention_events(control),
    }
    tables = {name: rows_of(frame) for name, frame in frames.items()}
    iv.unpersist()
    events.unpersist()
    return tables


def python_tables(inputs: Inputs) -> dict[str, Rows]:
    """Every run's tables from its own records, windows and bounds, concatenated."""
    tables: dict[str, Rows] = {name: [] for name in TABLES}
    for run_id, run in inputs.run_tables.items():
        windows = [w for w in inputs.windows_rows if w["run_id"] == run_id]
        bounds = next((b for b in inputs.bounds_rows if b["run_id"] == run_id), None)
        events = per_run.ownership_events(run)
        iv = per_run.intervals(events, bounds, run)
        # the spans per_run/run.py counts the handover over: each change window, and the whole churn
        change_spans = [{"run_id": run_id, "change_index": w["change_index"], "s_start": w["win_start"],
                         "s_end": w["win_end"]} for w in windows if w["change_index"] > 0]
        churn_spans = ([{"run_id": run_id, "s_start": bounds["churn_start"], "s_end": bounds["churn_end"]}]
                       if bounds is not None and bounds["churn_start"] is not None else [])
        found = {
            "events": events,
            "intervals": iv,
            "overlaps": per_run.overlaps(iv, windows),
            "ownership_per_change": per_run.ownership_per_change(iv, events, windows, inputs.partitions.get(run_id)),
            "stop_the_world": per_run.stop_the_world(events, windows),
            "moved_per_change": per_run.moved(iv, change_spans, ("change_index",)),
            "moved_per_run": per_run.moved(iv, churn_spans, ()),
            "revoked_kept": per_run.revoked_kept(iv, bounds),
            "contention": per_run.contention_events(run),
        }
        for name, rows in found.items():
            tables[name].extend(rows)
    return tables


# --- runs written here: what the real runs lack ----------------------------------------------------------------

OWNERS = "/lab/consumers/g/owners/t/"


def _edge_records() -> Rows:
    """Three short runs (settled at 0, done at 20, a join at 5): zk, original and cooperative."""
    rows: Rows = []

    def add(run: str, design: str, type_: str, ts: float, **fields: Any) -> None:
        rows.append({"run_id": f"edge-{design}", "file": run, "type": type_, "ts": 1_700_000_000.0 + ts,
                     "design": design, **fields})

    for design in ("zk", "original", "cooperative"):
        add("run", design, "phase", 0, phase="settled")
        add("run", design, "membership", 5, action="join", members=["m2"], step=1)
        add("run", design, "phase", 20, phase="done")
    zk = "zk"
    add("m0", zk, "member_event", 1, member="m0", kind="fetchers_started", offsets='{"t/0": 1, "t/1": null}')
    add("m1", zk, "member_event", 1, member="m1", kind="fetchers_started", offsets='{"t/0": 1.5}')  # not a long
    add("m1", zk, "member_event", 2, member="m1", kind="fetchers_started", offsets="not json")
    add("m1", zk, "member_event", 3, member="m1", kind="fetchers_started", offsets='{"t/1": 3} and more')
    add("m0", zk, "member_event", 4, member="m0", kind="session_expired")
    add("m2", zk, "member_event", 5.5, member="m2", kind="fetchers_started", offsets='{"t/0": 5}')
    add("m0", zk, "member_event", 6, member="m0", kind="fetchers_stopped", partitions='["t/0", null, "t/0"]')
    for t, result in ((7, None), (7.1, "ok"), (7.2, "error")):
        add("m1", zk, "member_event", t, member="m1", kind="attempt_end", result=result)
    add("run", zk, "membership", 8, action="kill", members=["m1", None], step=2)
    add("run", zk, "membership", 9, action="expire", members=["m0"], step=3)  # ends owner nodes only
    add("run", zk, "wire", 9.5, proto="zk", kind="reply", op="create", path=OWNERS + "1", err=-110, link="m2")
    orig = "original"
    add("run", orig, "wire", 1, proto="zk", kind="reply", op="create", path=OWNERS + "0", err=0, link="m0")
    add("run", orig, "wire", 1, proto="zk", kind="reply", op="create", path=OWNERS + "1", err=0, link=None)
    add("run", orig, "wire", 2, proto="zk", kind="reply", op="create", path=OWNERS + "1", err=0, link="m1")
    add("run", orig, "wire", 3, proto="zk", kind="reply", op="create", path=OWNERS + "0", err=0, link="m2")
    add("run", orig, "wire", 6, proto="zk", kind="reply", op="create", path=OWNERS + "0", err=-110, link="m1")
    add("run", orig, "wire", 10, proto="zk", kind="request", op="closeSession", link="m0")
    add("run", orig, "wire", 10, proto="zk", kind="request", op="closeSession", link=None)
    add("run", orig, "membership", 11, action="expire", members=["m1"], step=2)
    add("run", orig, "wire", 12, proto="zk", kind="reply", op="delete", path=OWNERS + "1", err=0, link="m1")
    coop = "cooperative"
    add("m0", coop, "generation", 1, member="m0", kind="assigned", partitions='["t/0", "t/1"]')
    add("m0", coop, "generation", 6, member="m0", kind="assigned", partitions='["t/0", "t/1"]', added="[]")
    add("m0", coop, "generation", 6, member="m0", kind="revoked", partitions='["t/1"]')
    add("m1", coop, "generation", 6.5, member="m1", kind="assigned", partitions='["t/1"]', added='["t/1"]')
    add("m1", coop, "generation", 8, member="m1", kind="lost", partitions='["t/1"]')
    add("m1", coop, "generation", 9, member="m1", kind="assigned", partitions="garbage", added="garbage")
    add("m0", coop, "generation", 10, member="m0", kind="revoked", partitions='["t/0"]')
    add("m0", coop, "generation", 10.5, member="m0", kind="assigned", partitions='["t/0"]', added='["t/0"]')
    for api in ("Heartbeat", None):
        add("run", coop, "wire", 11, proto="kafka", kind="response", api_name=api, error_name="ILLEGAL_GENERATION",
            link="m1")
    return rows


def _edge_inputs(spark: SparkSession, like: Inputs) -> Inputs:
    """The runs above, in the schemas of the real ones (`like`'s Spark and Arrow records)."""
    rows = _edge_records()
    spark_schema = like.records.schema
    arrow_schema = next(iter(like.run_tables.values())).schema
    records = spark.createDataFrame([tuple(r.get(f.name) for f in spark_schema.fields) for r in rows], spark_schema)
    table = pa.Table.from_pylist([{f.name: r.get(f.name) for f in arrow_schema} for r in rows], schema=arrow_schema)
    runs = sorted({r["run_id"] for r in rows})
    run_tables = {run_id: table.filter(pc.equal(table["run_id"], run_id)) for run_id in runs}
    frame = build(records.filter(control_records()))
    return Inputs(records, run_tables, rows_of(frame.windows), rows_of(frame.bounds),
                  {run_id: 2 if "zk" in run_id else None for run_id in runs})


@pytest.fixture(scope="module")
def compared(spark: SparkSession, fixed_ref: FixedReference, hand_ref: FixedReference) -> dict[str, Compared]:
    """The fixed set, the hand-built runs and the runs written here, each compared on its own, with the Spark
    oracle run once over all three: its tables are per run (every one has a run id, and the oracle groups and
    joins by it), and each of its queries costs its planning and compiling however few the records, which three
    passes paid three times."""
    inputs = {"fixed": _inputs(fixed_ref), "hand": _inputs(hand_ref)}
    inputs["edge"] = _edge_inputs(spark, inputs["hand"])
    every = list(inputs.values())
    assert sum(len(i.run_tables) for i in every) == len({r for i in every for r in i.run_tables})  # ids apart
    union = Inputs(every[0].records.unionByName(every[1].records).unionByName(every[2].records),
                   {r: t for i in every for r, t in i.run_tables.items()},
                   [w for i in every for w in i.windows_rows], [b for i in every for b in i.bounds_rows],
                   {r: n for i in every for r, n in i.partitions.items()})
    oracle = spark_tables(spark, union)
    return {name: Compared(i, {t: [r for r in rows if r["run_id"] in i.run_tables] for t, rows in oracle.items()},
                           python_tables(i)) for name, i in inputs.items()}


@pytest.fixture(scope="module")
def edge(compared: dict[str, Compared]) -> Compared:
    return compared["edge"]


@pytest.fixture(scope="module")
def fixed(compared: dict[str, Compared]) -> Compared:
    return compared["fixed"]


@pytest.fixture(scope="module")
def hand(compared: dict[str, Compared]) -> Compared:
    return compared["hand"]


def _types(rows: Rows) -> set[tuple[str, str]]:
    """(column, type) of every non-null value: an int where Spark has an int, a bool where it has a bool."""
    return {(key, type(value).__name__) for row in rows for key, value in row.items() if value is not None}


def _check(compared: Compared, table: str) -> None:
    found, want = compared.python[table], compared.spark[table]
    assert same(found, want, table, compared.inputs.root), f"{table}: {len(found)} rows here, {len(want)} in Spark"
    assert _types(found) == _types(want)


@pytest.mark.parametrize("table", TABLES)
def test_the_fixed_set_run_by_run(fixed: Compared, table: str) -> None:
    _check(fixed, table)


@pytest.mark.parametrize("table", TABLES)
def test_the_hand_built_runs_run_by_run(hand: Compared, table: str) -> None:
    _check(hand, table)


@pytest.mark.parametrize("table", TABLES)
def test_the_runs_written_here_run_by_run(edge: Compared, table: str) -> None:
    _check(edge, table)


def test_the_comparisons_meet_every_rule(fixed: Compared, hand: Compared, edge: Compared) -> None:
    """Every table has rows, and so does every kind of event, interval end and contention."""
    spark = {table: fixed.spark[table] + hand.spark[table] + edge.spark[table] for table in TABLES}
    assert all(spark[table] for table in TABLES)
    assert {r["reason"] for r in spark["events"]} == {
        "fetchers_started", "fetchers_stopped", "assigned", "revoked", "lost", "owner created", "owner deleted",
        "killed", "session expired", "session closed"}
    assert {r["basis"] for r in spark["intervals"]} == {"owner node", "generation", "fetching"}
    assert any(r["stale_since"] is not None for r in spark["intervals"])
    assert {r["after_expiry"] for r in spark["overlaps"]} == {True, False, None}
    assert any(r["restarted_ts"] is None for r in spark["stop_the_world"])
    assert any(r["convergence_s"] is None for r in spark["ownership_per_change"])
    assert any(r["partitions_moved"] for r in spark["moved_per_run"])
    assert {r["what"].split(" ")[0] for r in spark["contention"]} == {
        "owner", "attempt", "backoff", "rebalance", "session", "lost", "Heartbeat", "ILLEGAL_GENERATION"}
