"""The `migrate` churn action on the real servers: a ZooKeeper-design group under load is rolled, member by member,
to coordinator-design members of the same group id (zkconsumer/lab/migrate.py), and the Spark audit of that one run
(zkconsumer/lab/analysis/migrate_tables.py) finds every produced message consumed, counts the duplicates the two
halves make, and measures how long the group consumed nothing around each step.

The run shares the suite's servers (`lab_servers`, tests/lab/conftest.py) and the test run's one SparkSession.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from zkconsumer.lab.analysis.migrate_tables import migrate_tables
from zkconsumer.lab.analysis.readers import load_runs, read_traces
from zkconsumer.lab.run import CaseRun
from zkconsumer.lab.scenario import ScenarioError, expand_cases, parse_scenario
from zkconsumer.lab.trace import RunDirectory
from zkconsumer.lab.trace import read_traces as read_trace_lines

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


@pytest.mark.timeout(900)  # the run, then Spark's start and the audit's jobs: 4 min at a load average of 10
def test_the_audit_counts_duplicates_and_gaps_and_measures_dead_time(spark, migrated: Path) -> None:
    runs = load_runs([migrated])
    traces = read_traces(spark, runs)
    tables = migrate_tables(traces.records)
    steps = [r.asDict() for r in tables["migrate_steps"].orderBy("step").collect()]
    [total] = [r.asDict() for r in tables["migrate_totals"].collect()]
    records = list(read_trace_lines(migrated))
    produced = sum(r["last_offset"] - r["first_offset"] + 1 for r in records if r["type"] == "produce")
    consumed = sum(r["last_offset"] - r["first_offset"] + 1 for r in records if r["type"] == "consume")
    # every produced message was consumed at least once: no gap, and the duplicates are the rest
    assert produced > 0 and total["produced"] == produced and total["missing"] == 0
    assert total["duplicates"] == consumed - produced >= 0
    assert [s["step"] for s in steps] == [0, 1] and [s["member"] for s in steps] == ["m0", "m1"]
    # every duplicate happened in a step's window or before the first step
    assert sum(s["duplicates"] for s in steps) + total["duplicates_before"] == total["duplicates"]
    for step in steps:
        # the longest stretch without a consume record is a real stretch between two records around the step
        assert step["dead_time_s"] > 0 and step["dead_from"] <= step["dead_to"]
        assert step["dead_to"] - step["dead_from"] == pytest.approx(step["dead_time_s"])
        assert step["partition_stall_s"] >= 0
    assert total["dead_time_s"] == pytest.approx(sum(s["dead_time_s"] for s in steps))
