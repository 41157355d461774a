"""The third design, "original" (Kafka 0.8.2.2's own connector, zkconsumer/lab/designs.py), through the tables
and the report.

A hand-built run (analysis_builders.split_original) with known answers: it follows the trace contract of
docs/traces.md for the original (no claim, release, fetchers or expiry events; owner nodes only on the wire). Real
0.8.2.2 runs go through the lab driver in tests/lab/test_lab_original.py and tests/interop/."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any  # hand_runs is tests/analysis/conftest.py's HandRuns: `conftest` is ambiguous in one run

import pytest
from analysis_builders import T0, RunBuilder, split_original
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual
from test_report import CHROMIUM, chromium, needs_chromium

from zkconsumer.lab.analysis.job import AnalysisResult, analyze
from zkconsumer.lab.analysis.predictions import comparable_runs, compare


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> RunBuilder:
    return split_original(tmp_path_factory.mktemp("original"))


@pytest.fixture(scope="module")
def three(spark: SparkSession, hand_runs: Any, original: RunBuilder,
          tmp_path_factory: pytest.TempPathFactory) -> AnalysisResult:
    """The split case on all three designs (the zk and coordinator runs are the shared hand-built ones)."""
    return analyze([hand_runs.root / "split", original.root], tmp_path_factory.mktemp("report3"), spark,
                   predict_to=None)


@pytest.mark.slow
def test_owner_nodes_on_the_wire_are_the_originals_ownership(three, spark, original) -> None:
    iv = three.read(spark, "ownership_intervals").filter(F.col("run_id") == original.run_id)
    got = iv.select("member", "tp", (F.col("start") - T0).alias("start"), (F.col("end") - T0).alias("end"),
                    "end_reason", "basis")
    expected = spark.createDataFrame([
        ("m0", "t/0", 4.9, 12.25, "owner deleted"), ("m1", "t/1", 4.95, 12.2, "owner deleted"),
        ("m0", "t/0", 12.4, 20.1, "owner deleted"), ("m1", "t/1", 12.45, 19.8, "session closed"),
        ("m0", "t/0", 20.2, 25.6, "session closed"), ("m2", "t/1", 20.3, 25.6, "session closed")],
        "member string, tp string, start double, end double, end_reason string").withColumn(
        "basis", F.lit("owner node"))
    assertDataFrameEqual(got, expected, rtol=1e-6)
    assert three.read(spark, "overlaps").filter(F.col("run_id") == original.run_id).count() == 0
    # the other designs keep theirs
    bases = {(r["design"], r["basis"]) for r in three.read(spark, "ownership_intervals")
             .select("design", "basis").distinct().collect()}
    assert bases == {("zk", "fetching"), ("coordinator", "generation"), ("original", "owner node")}


@pytest.mark.slow
def test_windows_latency_and_unowned_time_from_the_wire(three, spark, original) -> None:
    changes = three.read(spark, "changes").filter(F.col("run_id") == original.run_id).select(
        "change_index", "action", (F.col("window_start") - T0).alias("window_start"), "stable_s", "convergence_s",
        "unowned_partition_s", "owner_conflicts", "conflicts", "rebalance_failures", "session_expiries")
    expected = spark.createDataFrame([
        # the leave's window starts where the leaver closed its session (19.8), before the record (20.0)
        (1, "join", 12.0, 1.0, 0.45, 0.4, 1, 1, None, None),
        (2, "leave", 19.8, 0.5, 0.5, 0.6, 0, 0, None, None)],
        "change_index int, action string, window_start double, stable_s double, convergence_s double, "
        "unowned_partition_s double, owner_conflicts long, conflicts long, rebalance_failures long, "
        "session_expiries long")
    assertDataFrameEqual(changes, expected, rtol=1e-6)


@pytest.mark.slow
def test_the_runs_table_has_three_designs_and_no_made_up_zeros(three, spark, original, hand_runs) -> None:
    runs = {r["design"]: r for r in three.read(spark, "runs").collect()}
    assert set(runs) == {"zk", "original", "coordinator"}
    orig = runs["original"]
    assert orig["session_timeout_ms"] == 6000  # the scenario's [zk] settings apply to it
    assert (orig["zk_requests_per_change"], orig["zk_notifications_per_change"]) == (4.5, 2.0)
    assert (orig["attempts"], orig["failed_attempts"], orig["conflicts"], orig["owner_conflicts"]) == (6, 1, 1, 1)
    assert orig["rebalance_failures"] is None and orig["session_expiries"] is None  # not reported, not 0
    per_member = three.read(spark, "rebalances").filter(F.col("run_id") == original.run_id)
    assert {r["session_expiries"] for r in per_member.select("session_expiries").collect()} == {None}
    assert (orig["duplicates"], orig["missing"]) == (0, 0)
    assert runs["zk"]["owner_conflicts"] == 0 and runs["zk"]["rebalance_failures"] == 1
    assert runs["coordinator"]["owner_conflicts"] is None  # a ZooKeeper-protocol count


def test_predictions_check_only_the_protocol_on_the_original() -> None:
    """The simulation runs this project's connector: of the original's counts, only the protocol's are checked
    (watch notifications, one per watching incumbent, whatever the client; its requests only rebalance-only and
    conflict-free), as identities; nothing of it is a prediction."""
    run = {"run_id": "o", "case": "herd-members=4-r0", "design": "original", "process_mode": "processes",
           "members": 4, "partitions": 8, "completed": True, "changes": 1, "conflicts": 0,
           "zk_notifications_per_change": 4.0, "zk_requests_per_change": 999.0, "time_to_stable_s": 1.0}
    assert comparable_runs([run], [{"run_id": "o", "counted": 1, "action": "join", "change_members": "m4"}])
    prediction = {"members": 4, "partitions": 8, "zk_notifications": 4, "zk_requests": 1, "zk_conflicts": 0,
                  "zk_time_to_stable_s": 0.5}
    rows = compare([run], [prediction])
    assert [(r.kind, r.metric, r.holds) for r in rows] == [("identity", "watch notifications per join", True)]
    threads = compare([{**run, "process_mode": "threads", "zk_requests_per_change": 25.0 + 55 + 24 + 2}], [])
    assert [(r.metric, r.holds) for r in threads] == [("watch notifications per join", True),
                                                       ("ZooKeeper requests per join", True)]  # M² + 11M + 3P + 2


@pytest.mark.slow
def test_the_report_puts_the_original_between_ours_and_the_coordinator(three: AnalysisResult) -> None:
    text = three.report.read_text(encoding="utf-8")
    table = text[text.index("<table class=cmp>"):]
    table = table[:table.index("</table>")]
    assert re.search(r"<th[^>]*>zk</th><th[^>]*>orig</th><th[^>]*>eager</th>", table)
    assert "n/r" in table  # rebalance failures and expiries of the original: not reported, never 0
    assert "ZooKeeper (original 0.8.2.2)" in text and "owner nodes from the wire" in text
    assert "not reported by the original" in text


@pytest.mark.slow
@needs_chromium
def test_the_three_design_report_renders_in_headless_chromium(three: AnalysisResult, tmp_path: Path) -> None:
    assert CHROMIUM is not None
    html = three.report.read_text(encoding="utf-8")
    figures = int(re.search(r"data-figures='(\d+)'", html).group(1))
    assert figures == 4  # the latency boxes and one timeline per design (no sweep: no herd curve)
    dom = chromium(tmp_path, "--dump-dom", three.report.resolve().as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert len(re.findall(r'<div[^>]*class="[^"]*js-plotly-plot', dom.stdout)) == figures
    assert dom.stdout.count("ownership around one change") >= 3
    # the latency boxes have a legend entry per design, the original's in its own colour
    assert "ZooKeeper (original 0.8.2.2)" in dom.stdout
