"""The analysis job on a fixed set of real lab runs (fixed_set.py): the same tables as recorded, every trace line
readable, and a bounded number of Spark jobs."""

from __future__ import annotations

import fixed_set
import pytest

pytestmark = pytest.mark.slow

# What the fixed set's analysis may cost in Spark's terms, set from the job as it is built: 5 SQL executions and
# 10 jobs (the runs in one query, metrics.py; the campaign's read and its tables; the modes' table; the
# predictions' sweep and the held-out simulation). A change that brings back a query or a scan per table or per
# step goes past these and fails here.
MAX_SQL_EXECUTIONS = 6
MAX_JOBS = 12


@pytest.fixture(scope="module")
def fixed(spark, tmp_path_factory):
    sc = spark.sparkContext
    group = "fixed-set-analysis"
    executions = spark._jsparkSession.sharedState().statusStore()  # the SQL tab's store, kept with the UI off
    before = executions.executionsCount()
    sc.setJobGroup(group, "the fixed set's analysis")
    try:
        result, runs = fixed_set.run_job(spark, tmp_path_factory.mktemp("fixed-set"))
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    cost = {"sql_executions": executions.executionsCount() - before,
            "jobs": len(sc.statusTracker().getJobIdsForGroup(group))}
    return fixed_set.tables(result, spark, runs), result, cost


def test_every_table_is_the_recorded_one(fixed):
    found, _, _ = fixed
    want = fixed_set.expected()
    assert sorted(found) == sorted(want)
    for name in sorted(want):
        assert not fixed_set.differences(want[name], found[name]), f"table {name} differs from the recorded answers"


def test_real_traces_of_every_design_mode_and_campaign_read_without_a_bad_line(fixed):
    """The runs are real (every design, the opt-in modes, a migrate run, a campaign history): a field the trace
    writes with a type the reader's schema does not expect makes its line bad, and this fails."""
    found, result, _ = fixed
    designs = {r["design"] for r in found["runs"]}
    assert {"zk", "original", "coordinator", "cooperative", "consumer"} <= designs
    assert {r["mode"] for r in found["modes"]} >= {"faithful", "all", "incremental"}
    assert found["migrate_steps"] and found["chaos_faults"]
    assert result.bad_lines == 0, [e for e in found["trace_errors"] if e["bad_lines"]]
    assert all(e["bad_lines"] == 0 for e in found["trace_errors"]) and result.trace_lines > 10_000


def test_the_analysis_runs_a_bounded_number_of_queries_and_jobs(fixed):
    _, _, cost = fixed
    print(f"the fixed set's analysis: {cost}")
    assert cost["sql_executions"] <= MAX_SQL_EXECUTIONS and cost["jobs"] <= MAX_JOBS, cost
