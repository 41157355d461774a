"""Time to stable split into noticing and rebalancing (zkconsumer/lab/rules/noticing.py), by the lab's summary, on
hand-made trace records: which records count as an incumbent hearing of a change, and which do not."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from zkconsumer.lab.rules.noticing import notice_member, split
from zkconsumer.lab.runs.summary import summarize

sys.path.append(str(Path(__file__).resolve().parents[1] / "analysis"))  # tests/ has no packages: the Spark oracle

T0 = 1_700_000_000.0


def write_run(path: Path, design: str, records: list[dict]) -> Path:
    (path / "traces").mkdir(parents=True)
    manifest = {"design": design, "case": "c-r0", "sweep": {}, "completed": True,
                "scenario_definition": {"group": {"members": 3}}}
    (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    lines = [json.dumps({"v": 1, "design": design, **r}) for r in records]
    (path / "traces" / "run.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def phase(t: float, name: str) -> dict:
    return {"type": "phase", "ts": T0 + t, "phase": name}


def change(t: float, action: str, *members: str) -> dict:
    return {"type": "membership", "ts": T0 + t, "action": action, "members": list(members), "step": 0}


def stable(t: float, number: int, duration: float) -> dict:
    return {"type": "stable", "ts": T0 + t, "generation_or_rebalance": number, "duration_s": duration,
            "polled_s": duration + 0.05, "basis": "events"}


def kafka(t: float, link: str, kind: str, api: str, error: str | None = None) -> dict:
    return {"type": "wire", "ts": T0 + t, "proto": "kafka", "link": link, "kind": kind, "api_name": api,
            "error_name": error, "error_code": 27 if error == "REBALANCE_IN_PROGRESS" else 0}


def zk_event(t: float, link: str) -> dict:
    return {"type": "wire", "ts": T0 + t, "proto": "zk", "link": link, "kind": "event", "op": None}


def test_coordinator_noticing_is_the_last_incumbents_first_rebalance_notice_or_rejoin(tmp_path):
    run = write_run(tmp_path / "coordinator", "coordinator", [
        phase(0.0, "settled"),
        kafka(0.5, "m1", "response", "Heartbeat", "REBALANCE_IN_PROGRESS"),  # before the change: not its notice
        change(1.0, "join", "m3"),
        kafka(1.05, "m3", "request", "JoinGroup"),  # the joiner: not an incumbent
        kafka(1.06, "m3", "response", "SyncGroup", "REBALANCE_IN_PROGRESS"),
        kafka(1.3, "m0", "response", "Heartbeat", "NONE"),  # a heartbeat answered without error: not a notice
        kafka(1.6, "m0", "response", "Heartbeat", "REBALANCE_IN_PROGRESS"),
        kafka(1.65, "m0", "request", "JoinGroup"),  # m0 heard at 1.6 already
        kafka(1.8, "m1", "response", "Heartbeat", "REBALANCE_IN_PROGRESS"),
        kafka(1.95, "m2", "request", "JoinGroup"),  # m2 rejoined without a notice on the wire: it heard by then
        kafka(2.5, "m1", "response", "Heartbeat", "REBALANCE_IN_PROGRESS"),  # after stable: another story
        stable(2.3, 1, 1.2),
        phase(6.0, "done"),
    ])
    summary = summarize(run)
    assert summary.stable_s == [1.2]
    assert summary.noticing_s == [pytest.approx(0.95)] and summary.rebalancing_s == [pytest.approx(0.25)]
    assert summary.stable_split == (pytest.approx(0.95), pytest.approx(0.25))


def test_zookeeper_noticing_is_the_last_incumbents_first_watch_notification_per_change(tmp_path):
    run = write_run(tmp_path / "zk", "zk", [
        phase(0.0, "settled"),
        change(1.0, "join", "m3"),
        zk_event(1.02, "m0"), zk_event(1.03, "m1"), zk_event(1.04, "m3"), zk_event(1.1, "m2"),
        zk_event(1.2, "m0"),  # m0's second notification: its first one counts
        stable(1.6, 1, 0.5),
        change(3.0, "leave", "m0"),
        zk_event(3.01, "m0"),  # the leaver
        zk_event(3.05, "m1"), zk_event(3.2, "m2"), zk_event(3.3, "m3"),
        stable(3.5, 2, 0.4),
        change(4.0, "join", "m4"),  # nobody notices inside its time to stable: noticing 0
        zk_event(4.9, "m1"),
        stable(4.5, 3, 0.3),
        phase(6.0, "done"),
    ])
    summary = summarize(run)
    assert summary.noticing_s == [pytest.approx(0.1), pytest.approx(0.3), 0.0]
    assert summary.rebalancing_s == [pytest.approx(0.4), pytest.approx(0.1), pytest.approx(0.3)]
    assert summary.stable_split == (pytest.approx(0.1), pytest.approx(0.4))  # of the longest change (0.5 s)


def test_change_numbers_follow_the_orchestrators_count_of_members(tmp_path):
    # A kill of two members counts two (runs/case_run.py): the join after it is change 3, and its stable record says so.
    run = write_run(tmp_path / "zk", "zk", [
        phase(0.0, "settled"),
        change(1.0, "kill", "m1", "m2"),
        zk_event(1.5, "m0"), zk_event(1.6, "m2"),  # m2 is one of the killed: not an incumbent
        stable(2.0, 2, 0.8),
        change(3.0, "join", "m4"),
        zk_event(3.2, "m0"),
        stable(3.5, 3, 0.4),
        phase(6.0, "done"),
    ])
    summary = summarize(run)
    assert summary.noticing_s == [pytest.approx(0.5), pytest.approx(0.2)]
    assert summary.rebalancing_s == [pytest.approx(0.3), pytest.approx(0.2)]
    parts = split(T0 + 3.0, 0.4, ["m0"], [(T0 + 3.2, "m0")])
    assert (parts.noticing_s, parts.rebalancing_s, parts.incumbents) == (0.0, 0.4, 0)


def test_only_wire_records_of_a_notice_count():
    assert notice_member(zk_event(0, "m1")) == "m1"
    assert notice_member({"type": "wire", "proto": "zk", "kind": "request", "link": "m1"}) is None
    assert notice_member(kafka(0, "m2", "response", "Heartbeat", "REBALANCE_IN_PROGRESS")) == "m2"
    assert notice_member(kafka(0, "m2", "request", "JoinGroup")) == "m2"
    assert notice_member(kafka(0, "m2", "response", "JoinGroup")) is None
    assert notice_member(kafka(0, "m2", "request", "Heartbeat")) is None
    assert notice_member({**kafka(0, "m2", "response", "ConsumerGroupHeartbeat"), "assigned": 0}) == "m2"
    assert notice_member({**kafka(0, "m2", "response", "ConsumerGroupHeartbeat"), "assigned": None}) is None
    assert notice_member({"type": "member_event", "member": "m2", "kind": "rebalance_begin"}) is None


@pytest.mark.slow
def test_spark_splits_each_change_as_the_summary_does(tmp_path, spark):
    """The Spark oracle's noticing_s and rebalancing_s (tests/analysis/spark_oracle/notice_split.py) on the same
    hand-made records as the summary: the two readings of zkconsumer/lab/rules/noticing.py must agree, change by change
    and per run."""
    from spark_oracle.notice_split import split_per_change, split_per_run

    made = [
        phase(0.0, "settled"),
        change(1.0, "join", "m3"),
        kafka(1.05, "m3", "request", "JoinGroup"),
        kafka(1.6, "m0", "response", "Heartbeat", "REBALANCE_IN_PROGRESS"),
        kafka(1.8, "m1", "response", "Heartbeat", "REBALANCE_IN_PROGRESS"),
        kafka(1.95, "m2", "request", "JoinGroup"),
        kafka(2.5, "m1", "response", "Heartbeat", "REBALANCE_IN_PROGRESS"),
        stable(2.3, 1, 1.2),
        change(4.0, "leave", "m3"),
        kafka(4.5, "m0", "response", "Heartbeat", "REBALANCE_IN_PROGRESS"),
        kafka(4.6, "m3", "response", "Heartbeat", "REBALANCE_IN_PROGRESS"),
        # the consumer protocol's notice: a heartbeat answer carrying a new assignment (one without is none)
        {**kafka(4.55, "m2", "response", "ConsumerGroupHeartbeat"), "assigned": 2},
        {**kafka(4.65, "m1", "response", "ConsumerGroupHeartbeat"), "assigned": None},
        stable(5.0, 2, 0.7),
        phase(6.0, "done"),
    ]
    summary = summarize(write_run(tmp_path / "coordinator", "coordinator", made))
    columns = "run_id string, type string, ts double, proto string, kind string, link string, client_id string, " \
              "api_name string, error_name string, assigned int"
    records = spark.createDataFrame(
        [("r", r["type"], r["ts"], r.get("proto"), r.get("kind"), r.get("link"), r.get("link"), r.get("api_name"),
          r.get("error_name"), r.get("assigned")) for r in made], columns)
    changes = spark.createDataFrame(
        [("r", 1, T0 + 1.0, "m3", 1.2), ("r", 2, T0 + 4.0, "m3", 0.7), ("r", 3, T0 + 5.5, "m4", None)],
        "run_id string, change_index int, change_ts double, change_members string, stable_s double")
    bounds = spark.createDataFrame([("r", T0, T0 + 6.0)], "run_id string, churn_start double, churn_end double")
    per_change = split_per_change(records, changes)
    rows = {r["change_index"]: r for r in per_change.collect()}
    assert sorted(rows) == [1, 2]  # a change that never became stable has nothing to split
    assert [rows[i]["noticing_s"] for i in (1, 2)] == [pytest.approx(n) for n in summary.noticing_s]
    assert [rows[i]["rebalancing_s"] for i in (1, 2)] == [pytest.approx(r) for r in summary.rebalancing_s]
    assert [rows[i]["noticed_by"] for i in (1, 2)] == [3, 2]  # change 2: m0, and m2 by its new assignment
    assert summary.noticing_s[1] == pytest.approx(0.55)
    [run] = split_per_run(per_change, changes, bounds).collect()
    assert (run["noticing_s"], run["rebalancing_s"]) == (pytest.approx(0.95), pytest.approx(0.25))
    assert summary.stable_split == (pytest.approx(0.95), pytest.approx(0.25))


@pytest.mark.slow
def test_spark_per_run_split_takes_the_earliest_of_tied_longest_changes(spark):
    """Eight changes stable after the same 1.0 s: the run's split is the first change's, as the summary's max()
    over its stable records in order picks it (max_by alone keeps whichever tied row it meets first: here, with
    the rows listed latest first over two partitions, another change's)."""
    from spark_oracle.notice_split import split_per_run

    bounds = spark.createDataFrame([("r", T0, T0 + 60.0)], "run_id string, churn_start double, churn_end double")
    # several layouts of the same rows: which tied row max_by meets first depends on the order and partitioning
    for order in (list(range(8, 0, -1)), [2, 3, 1, 5, 4, 8, 6, 7]):
        for parts in (1, 2, 4):
            changes = spark.createDataFrame([("r", i, T0 + i, 1.0) for i in order],
                                            "run_id string, change_index int, change_ts double, stable_s double")
            per_change = spark.createDataFrame(
                [("r", i, 0.1 * i, 1.0 - 0.1 * i) for i in order],
                "run_id string, change_index int, noticing_s double, rebalancing_s double")
            [run] = split_per_run(per_change.repartition(parts), changes.repartition(parts), bounds).collect()
            assert (run["noticing_s"], run["rebalancing_s"]) == (pytest.approx(0.1), pytest.approx(0.9)), (order,
                                                                                                           parts)
