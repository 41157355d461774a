"""The hand-built runs' counting gaps in the analysis: the ZooKeeper split run has bad trace lines (a torn last line
and lines that do not follow the schema), so its row of the runs table names them and the report flags it; the
runs without any gap are not flagged."""

from __future__ import annotations

import pytest
from analysis_builders import BAD_LINES

from zkconsumer.lab.analysis.job import AnalysisResult

pytestmark = pytest.mark.slow


def test_a_run_with_bad_lines_is_flagged_in_the_runs_table_and_the_report(analysed: AnalysisResult, spark,
                                                                         hand_runs) -> None:
    runs = {r["run_id"]: r for r in analysed.read(spark, "runs").collect()}
    reason = f"{len(BAD_LINES) + 1} bad trace lines"
    zk = runs[hand_runs.zk.run_id]
    assert (zk["counting_gaps"], zk["undecodable_streams"], zk["blackholed_requests"]) == (reason, 0, 0)
    assert [r["counting_gaps"] for r in runs.values() if r["run_id"] != hand_runs.zk.run_id] == [None] * (len(runs) - 1)
    page = analysed.report.read_text(encoding="utf-8")
    assert f"Counting gaps: 1 of {len(runs)} runs were not counted in full" in page
    assert f"<td>{hand_runs.zk.run_id}</td><td>zk</td><td>{reason}</td>" in page
