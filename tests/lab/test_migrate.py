"""The `migrate` churn action on the real servers: a ZooKeeper-design group under load is rolled, member by member, to
coordinator-design members of the same group id (zkconsumer/lab/runs/migrate.py), and the Spark audit of that one run
(zkconsumer/lab/analysis/migrate_tables.py's tables in their Spark form, tests/analysis/spark_oracle/) finds every
produced message consumed, counts the duplicates the two halves make, and measures how long the group consumed nothing
around each step.

The run shares the suite's servers (`lab_servers`, tests/lab/conftest.py) and the test run's one SparkSession.
"""

from __future__ import annotations

import sys
from itertools import pairwise
from pathlib import Path

import pytest

from zkconsumer.lab.analysis.readers import load_runs, read_traces
from zkconsumer.lab.runs.case_run import CaseRun
from zkconsumer.lab.scenarios.loading import ScenarioError, expand_cases, parse_scenario
from zkconsumer.lab.trace import RunDirectory
from zkconsumer.lab.trace import read_traces as read_trace_lines

sys.path.append(str(Path(__file__).resolve().parents[1] / "analysis"))  # tests/ has no packages: the oracle
from spark_oracle.migrate_tables import migrate_tables

pytestmark = pytest.mark.slow

MIGRATE = """
name = "migrate-short"
description = "two ZooKeeper-design members under load, each replaced by a coordinator-design member"
designs = {designs}
duration = 9.0
seed = 20
settle_timeout = 40.0
churn = [
    {{ at = 1.0, action = "migrate", member = 0 }},
    {{ at = 5.0, action = "migrate", member = 1 }},
]
[group]
members = 2
topics = [{{ name = "mig", partitions = 4 }}]
[zk]
"zookeeper.session.timeout.ms" = 4000
"rebalance.backoff.ms" = 200
"rebalance.max.retries" = 20
"auto.offset.reset" = "smallest"
"auto.commit.interval.ms" = 500
# The roll as operators did it: offsets in Kafka, and in ZooKeeper too while ZooKeeper members remain
"offsets.storage" = "kafka"
"dual.commit.enabled" = true
[coordinator]
session_timeout_ms = 2000
heartbeat_interval_ms = 500
[load]
rate = 100.0
keys = 20
"""


def test_migrate_is_refused_on_the_coordinator_design() -> None:
    with pytest.raises(ScenarioError, match=r"churn\[0\]\.action: migrate replaces"):
        parse_scenario(MIGRATE.format(designs='["zk", "coordinator"]'), "inline")


@pytest.fixture(scope="module")
def migrated(lab_servers, tmp_path_factory: pytest.TempPathFactory) -> Path:
    scenario = parse_scenario(MIGRATE.format(designs='["zk"]'), "inline")
    [case] = expand_cases(scenario)
    path = CaseRun(case, "zk", lab_servers, tmp_path_factory.mktemp("migrate")).run()
    manifest = RunDirectory.load(path)
    assert manifest["completed"], manifest.get("error")
    return path


def test_each_member_is_replaced_by_a_coordinator_member_of_the_same_group(migrated: Path) -> None:
    records = list(read_trace_lines(migrated))
    steps = [r for r in records if r["type"] == "membership" and r["action"] == "migrate"]
    assert [s["members"] for s in steps] == [["m0"], ["m1"]]
    # the ZooKeeper members consumed before their step, their replacements after it, in the one group
    consumers = {(r["design"], r["member"]) for r in records if r["type"] == "consume"}
    assert {("zk", "m0"), ("zk", "m1"), ("coordinator", "m0-c"), ("coordinator", "m1-c")} <= consumers
    last_zk = max(r["ts"] for r in records if r["type"] == "consume" and r["member"] == "m1")
    assert last_zk <= steps[1]["ts"] + 5.0  # m1's process was stopped at its step (its leave waits for the exit)
    # the run ends on the coordinator design alone: its final generation assigns every partition to m0-c and m1-c
    assigned = [r for r in records if r["type"] == "generation" and r["kind"] == "assigned"]
    final = max(r["generation"] for r in assigned)
    owned = sorted(p for r in assigned if r["generation"] == final for p in r["partitions"])
    assert {r["member"] for r in assigned if r["generation"] == final} == {"m0-c", "m1-c"}
    assert len(owned) == len(set(owned)) == 4
    stats = RunDirectory.load(migrated)["stats"]
    assert stats["migrated"] == {"m0": "m0-c", "m1": "m1-c"}


def audit_by_hand(records: list[dict]) -> tuple[list[dict], int]:
    """docs/migrate.md's definitions worked out in plain Python from the run's trace records, independently of the
    Spark job: per step (in step order) produced, consumed, duplicates, dead time with its ends and the longest
    partition stall, and the duplicates before the first step."""
    run_end = max(r["ts"] for r in records)
    marks = sorted((r["ts"], r["step"]) for r in records if r["type"] == "membership" and r["action"] == "migrate")
    windows = [(start, marks[i + 1][0] if i + 1 < len(marks) else run_end, i + 1 == len(marks))
               for i, (start, _step) in enumerate(marks)]

    def window_of(t: float) -> int | None:
        for i, (start, end, last) in enumerate(windows):
            if start <= t < end or (last and t == end):
                return i
        return None

    steps = [{"produced": 0, "consumed": 0, "duplicates": 0, "dead_time_s": 0.0, "dead_from": None,
              "dead_to": None, "partition_stall_s": 0.0} for _ in windows]
    before = 0
    seen: set[tuple[str, int, int]] = set()
    flow = sorted((r for r in records if r["type"] in ("produce", "consume")), key=lambda r: (r["ts"], r["type"]))
    for r in flow:
        i = window_of(r["ts"])
        size = r["last_offset"] - r["first_offset"] + 1
        if i is not None:
            steps[i]["produced" if r["type"] == "produce" else "consumed"] += size
        if r["type"] == "consume":
            offsets = {(r["topic"], r["partition"], o) for o in range(r["first_offset"], r["last_offset"] + 1)}
            again = len(offsets & seen)
            seen |= offsets
            if i is not None:
                steps[i]["duplicates"] += again
            elif r["ts"] < windows[0][0]:
                before += again
    consumes = sorted(r["ts"] for r in flow if r["type"] == "consume")
    for dead_from, dead_to in pairwise(consumes):
        i = window_of(dead_to)
        if i is not None and dead_to - dead_from > steps[i]["dead_time_s"]:  # ties: the earliest end
            steps[i].update(dead_time_s=dead_to - dead_from, dead_from=dead_from, dead_to=dead_to)
    # per partition: a stall starts at a consume that leaves messages waiting, or at a produce that makes some
    # wait when none did, and ends at the partition's next consume (or the run's end); at one instant the produce
    # goes first (chaos_tables._stalls)
    for key in {(r["topic"], r["partition"]) for r in flow}:
        events = sorted((r for r in flow if (r["topic"], r["partition"]) == key),
                        key=lambda r: (r["ts"], r["type"] == "consume"))
        produced = consumed = -1
        waiting = False
        for n, r in enumerate(events):
            if r["type"] == "produce":
                produced = max(produced, r["last_offset"])
            else:
                consumed = max(consumed, r["last_offset"])
            was_waiting, waiting = waiting, produced > consumed
            if waiting and (r["type"] == "consume" or not was_waiting):
                end = next((e["ts"] for e in events[n + 1:] if e["type"] == "consume"), run_end)
                for step, (start, window_end, _last) in zip(steps, windows, strict=True):
                    overlap = min(end, window_end) - max(r["ts"], start)
                    step["partition_stall_s"] = max(step["partition_stall_s"], overlap)
    return steps, before


@pytest.mark.timeout(900)  # the run, then Spark's start and the audit's jobs: 4 min at a load average of 10
def test_the_audit_counts_duplicates_and_gaps_and_measures_dead_time(spark, migrated: Path) -> None:
    runs = load_runs([migrated])
    traces = read_traces(spark, runs)
    tables = migrate_tables(traces.records)
    steps = [r.asDict() for r in tables["migrate_steps"].orderBy("step").collect()]
    [total] = [r.asDict() for r in tables["migrate_totals"].collect()]
    records = list(read_trace_lines(migrated))
    produced = sum(r["last_offset"] - r["first_offset"] + 1 for r in records if r["type"] == "produce")
    # every produced message was consumed at least once: no gap
    assert produced > 0 and total["produced"] == produced and total["missing"] == 0
    assert [s["step"] for s in steps] == [0, 1] and [s["member"] for s in steps] == ["m0", "m1"]
    # each step's numbers are the definitions' (docs/migrate.md) worked out from the same records by hand
    by_hand, before = audit_by_hand(records)
    for step, expected in zip(steps, by_hand, strict=True):
        assert (step["produced"], step["consumed"], step["duplicates"]) == (
            expected["produced"], expected["consumed"], expected["duplicates"]), step["step"]
        assert step["dead_time_s"] == pytest.approx(expected["dead_time_s"], abs=1e-6), step["step"]
        assert (step["dead_from"], step["dead_to"]) == (pytest.approx(expected["dead_from"]),
                                                        pytest.approx(expected["dead_to"])), step["step"]
        assert step["partition_stall_s"] == pytest.approx(expected["partition_stall_s"], abs=1e-6), step["step"]
    # while both halves are live each reads every partition (docs/migrate.md): the roll makes duplicates, and
    # every one of them happened in a step's window or before the first step
    assert total["duplicates"] > 0 and total["duplicates_before"] == before
    assert sum(s["duplicates"] for s in steps) + total["duplicates_before"] == total["duplicates"]
    assert total["dead_time_s"] == pytest.approx(sum(s["dead_time_s"] for s in steps))
