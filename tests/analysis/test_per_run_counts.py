"""The per-run counts (zkconsumer/lab/analysis/per_run/counts.py), run by run over Arrow, against the Spark oracle's
frames of the same records (spark_oracle/herd.py, notice_split.py, metrics.py): the fixed set of real runs, the
hand-built runs and a few made-up edge cases, every table equal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from per_run_reference import FixedReference, rows_of, same
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from spark_oracle import herd, notice_split
from spark_oracle.metrics import control_records, wire_gap_counts

from zkconsumer.lab.analysis.per_run import counts
from zkconsumer.lab.analysis.schemas import RECORD_FIELDS, TRACE_SCHEMA
from zkconsumer.lab.analysis.windows import BOUNDS_SCHEMA, CHANGES_SCHEMA, WINDOWS_SCHEMA
from zkconsumer.lab.rules import protocol as protocol_rules

pytestmark = pytest.mark.slow

TABLES = ("wire_counts", "rebalance_counts", "identity_counts", "split_per_change", "split_per_run",
          "answered_epochs", "change_rounds", "churn_rounds", "wire_gap_counts")
# the records' columns as readers.read_traces gives them
RECORDS_SCHEMA = T.StructType([T.StructField("run_id", T.StringType()), T.StructField("file", T.StringType()),
                               *[f for f in TRACE_SCHEMA.fields if f.name in RECORD_FIELDS]])
OWNER_NODE = "/chroot/consumers/g/owners/t/0"


def _frame(spark: SparkSession, rows: list[dict[str, Any]], schema: T.StructType) -> DataFrame:
    return spark.createDataFrame([tuple(r[f.name] for f in schema.fields) for r in rows], schema)


def edge_reference(spark: SparkSession) -> FixedReference:
    """Two made-up runs for what real runs rarely show: windows that overlap (a record in two is counted twice)
    and times in none, members named only by client_id, rules on null values, revocations whose partitions are
    not a JSON list, counting gaps, a tie of the longest time to stable, and a run with no wire and no churn."""
    def wire(ts: float | None, proto: str, kind: str, **fields: Any) -> dict[str, Any]:
        return {"ts": ts, "type": "wire", "proto": proto, "kind": kind, "link": "l1", "client_id": "c1", **fields}

    def event(ts: float, kind: str, member: str | None = "m1", **fields: Any) -> dict[str, Any]:
        return {"ts": ts, "type": "member_event", "kind": kind, "member": member, **fields}

    def generation(ts: float, kind: str, **fields: Any) -> dict[str, Any]:
        return {"ts": ts, "type": "generation", "kind": kind, "member": "m2", **fields}

    cgh = "ConsumerGroupHeartbeat"
    e1 = [
        wire(5.0, "kafka", "response", api_name="JoinGroup", api_key=11, epoch_after=4),  # before the churn
        wire(11.0, "zk", "request", op="getChildren", opcode=8, link=None, client_id="c9"),
        wire(12.0, "zk", "event", op=None, link=None, client_id="c2"),  # a notice of c2's
        wire(16.0, "zk", "request", op="create", opcode=1),  # in windows 1 and 2
        wire(None, "zk", "request", op="exists", opcode=3),  # no time: in no window
        wire(13.0, "kafka", "request", api_name=cgh, api_key=68, member_epoch=0),
        wire(13.5, "kafka", "request", api_name=cgh, api_key=68, member_epoch=5),
        wire(13.6, "kafka", "request", api_name=cgh, api_key=68, member_epoch=5, owned=3),
        wire(13.7, "kafka", "request", api_name=cgh, api_key=68, member_epoch=None, link=None),
        wire(14.0, "kafka", "response", api_name=cgh, api_key=68, assigned=2, epoch_after=7),
        wire(14.1, "kafka", "response", api_name=cgh, api_key=68, assigned=None, epoch_after=4),
        wire(14.2, "kafka", "response", api_name="Heartbeat", api_key=12, error_name="REBALANCE_IN_PROGRESS"),
        wire(14.3, "kafka", "request", api_name="JoinGroup", api_key=11, link="l2"),
        wire(16.5, "kafka", "request", api_name="SyncGroup", api_key=14),
        wire(30.0, "kafka", "request", api_name="FindCoordinator", api_key=10),  # the closed end of the churn
        wire(31.0, "kafka", "request", api_name="LeaveGroup", api_key=13),  # after it
        wire(31.5, "kafka", "response", api_name="JoinGroup", api_key=11, epoch_after=9),
        wire(31.6, "kafka", "response", api_name="JoinGroup", api_key=11, epoch_after=0),  # no epoch
        # notices after change 3, which names l1: l1's is not an incumbent's, nor one without a member or a time
        wire(36.0, "kafka", "response", api_name="Heartbeat", api_key=12, error_name="REBALANCE_IN_PROGRESS"),
        wire(36.5, "zk", "event", link=None, client_id=None), wire(None, "zk", "event", link="l3"),
        wire(37.0, "kafka", "request", api_name="JoinGroup", api_key=11, link="l2"),
        wire(17.0, "kafka", "undecodable"),
        wire(17.1, "kafka", "request", api_name="Heartbeat", api_key=12, dropped=True),
        wire(17.2, "zk", "ping", dropped=True),
        wire(17.3, "zk", "reply", op="getData", dropped=True),
        wire(17.4, "zk", "reply", op="create", path=OWNER_NODE, err=-110),
        wire(17.5, "zk", "reply", op="create", path=OWNER_NODE, err=0),
        wire(17.6, "zk", "reply", op="create", path="/chroot/consumers/g/ids/m1", err=-110),
        event(12.5, "rebalance_begin"), event(12.6, "attempt_end", result=None),
        event(12.7, "attempt_end", result="conflict"), event(12.8, "attempt_end", result="ok"),
        event(16.1, "rebalance_failed"), event(16.2, "session_expired", member=None),
        event(40.0, "rebalance_begin"),  # in no window
        generation(13.0, "assigned", generation=3), generation(13.1, "assigned", generation=3),
        generation(13.2, "assigned", generation=None), generation(13.3, "lost"),
        generation(14.5, "revoked", partitions='["t/0", "t/1"]'), generation(14.6, "revoked", partitions="not json"),
        generation(14.7, "revoked", partitions=None), generation(14.8, "revoked", partitions='{"t/0": 1}'),
        generation(16.3, "revoked", partitions='["t/2"]'),
    ]
    e2 = [{"ts": 1.0, "type": "phase", "phase": "settled"}, event(2.0, "rebalance_begin")]
    records = [{"run_id": run_id, "file": "f", "design": "consumer", **r}
               for run_id, rows in (("e1", e1), ("e2", e2)) for r in rows]
    frame = spark.createDataFrame([tuple(r.get(f.name) for f in RECORDS_SCHEMA.fields) for r in records],
                                  RECORDS_SCHEMA)
    table = frame.toArrow()
    windows = [{"run_id": "e1", "change_index": i, "win_start": a, "win_end": b, "last": last}
               for i, a, b, last in ((0, 10.0, 12.0, False), (1, 12.0, 20.0, False), (2, 15.0, 30.0, True))]
    change = dict.fromkeys(f.name for f in CHANGES_SCHEMA.fields)
    changes = [{**change, "run_id": "e1", "change_index": i, "change_ts": ts, "stable_s": stable,
                "change_members": members}
               for i, ts, stable, members in ((1, 12.0, 3.0, "m9"), (2, 15.0, 3.0, None), (3, 35.0, 9.0, "l1"),
                                              (4, 16.0, None, ""))]
    bound = dict.fromkeys(f.name for f in BOUNDS_SCHEMA.fields)
    bounds = [{**bound, "run_id": "e1", "churn_start": 10.0, "churn_end": 30.0},
              {**bound, "run_id": "e2", "churn_end": 2.0}]
    return FixedReference(Path("/nonexistent"), [], frame, frame,
                          {r: table.filter(pc.equal(table["run_id"], r)) for r in ("e1", "e2")},
                          changes, bounds, windows)


def spark_tables(spark: SparkSession, ref: FixedReference) -> dict[str, list[dict[str, Any]]]:
    """Every table as the Spark oracle makes it, called as the Spark job called it."""
    records = ref.records
    windows = _frame(spark, ref.windows_rows, WINDOWS_SCHEMA)
    changes = _frame(spark, ref.changes_rows, CHANGES_SCHEMA)
    bounds = _frame(spark, ref.bounds_rows, BOUNDS_SCHEMA)
    per_change = notice_split.split_per_change(records, changes)
    epochs = herd.answered_epochs(records)
    change_spans = windows.filter(F.col("change_index") > 0).select(
        "run_id", "change_index", F.col("win_start").alias("s_start"), F.col("win_end").alias("s_end"), "last")
    churn_spans = bounds.filter(F.col("churn_start").isNotNull()).select(
        "run_id", F.col("churn_start").alias("s_start"), F.col("churn_end").alias("s_end"))
    frames = {
        "wire_counts": herd.wire_counts(records, windows),
        # collect_set has no order: sorted, as the per-run rows are
        "rebalance_counts": herd.rebalance_counts(records.filter(control_records()), windows)
        .withColumn("generations", F.array_sort("generations")),
        "identity_counts": herd.identity_counts(records, windows),
        "split_per_change": per_change,
        "split_per_run": notice_split.split_per_run(per_change, changes, bounds),
        "answered_epochs": epochs,
        "change_rounds": herd.epoch_rounds(epochs, change_spans, ("change_index",), F.col("last")),
        "churn_rounds": herd.epoch_rounds(epochs, churn_spans, (), F.lit(True)),
        "wire_gap_counts": wire_gap_counts(records),
    }
    return {name: rows_of(frame) for name, frame in frames.items()}


def run_tables(ref: FixedReference, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """Every table of one run, from its Arrow records and its rows of Spark's time frame."""
    run = ref.run_tables[run_id]
    windows, changes = ref.of(ref.windows_rows, run_id), ref.of(ref.changes_rows, run_id)
    bounds = next(iter(ref.of(ref.bounds_rows, run_id)), None)
    per_change = counts.split_per_change(run, changes)
    epochs = counts.answered_epochs(run)

    def listed(row: dict[str, Any] | None) -> list[dict[str, Any]]:
        return [] if row is None else [row]

    return {
        "wire_counts": counts.wire_counts(run, windows),
        "rebalance_counts": counts.rebalance_counts(run, windows),
        "identity_counts": listed(counts.identity_counts(run, windows)),
        "split_per_change": per_change,
        "split_per_run": listed(counts.split_per_run(per_change, changes, bounds)),
        "answered_epochs": epochs.to_pylist(),
        "change_rounds": counts.epoch_rounds(epochs, counts.change_spans(windows), ("change_index",),
                                             lambda span: span["last"]),
        "churn_rounds": counts.epoch_rounds(epochs, counts.churn_spans(bounds), (), lambda span: True),
        "wire_gap_counts": listed(counts.wire_gap_counts(run)),
    }


def per_run_tables(ref: FixedReference) -> dict[str, list[dict[str, Any]]]:
    """Every table, run by run, concatenated."""
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLES}
    for run_id in ref.run_tables:
        for name, rows in run_tables(ref, run_id).items():
            out[name].extend(rows)
    return out


@pytest.fixture(scope="module", params=["fixed", "hand", "edge"])
def reference(request: pytest.FixtureRequest, spark: SparkSession):
    """(name, reference, Spark's tables, the per-run tables) of the fixed set, the hand-built runs (both read once
    per session: `fixed_ref`, `hand_ref`) or the made-up edge cases, each compared once."""
    if request.param == "edge":
        ref = edge_reference(spark)
    else:
        ref = request.getfixturevalue(f"{request.param}_ref")
    return request.param, ref, spark_tables(spark, ref), per_run_tables(ref)


@pytest.mark.parametrize("table", TABLES)
def test_each_table_is_the_spark_jobs(reference, table: str) -> None:
    name, ref, want, found = reference
    assert len(ref.run_tables) > 1
    # the fixed set and the edge cases have rows in every table (the hand-built runs answer no epochs)
    assert want[table] or name == "hand", f"{table}: Spark gives no rows to compare"
    assert same(found[table], want[table], table, ref.runs_root), table


def test_the_comparison_sees_a_broken_rule(reference, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the consumer protocol's notices (a heartbeat's answer with a new assignment), the wire counts differ
    where a run has them: the comparison above is not blind to the rules."""
    _, ref, want, _ = reference
    notices = [r for r in want["wire_counts"]
               if r["op"] == protocol_rules.TARGET_API and r["category"] == "notification"]
    if not notices:
        pytest.skip("no consumer-protocol notices in these runs")
    monkeypatch.setattr(protocol_rules, "TARGET_API", "no such API")  # the wire's category rule
    broken = [row for run_id in ref.run_tables for row in counts.wire_counts(
        ref.run_tables[run_id], ref.of(ref.windows_rows, run_id))]
    assert not same(broken, want["wire_counts"])
