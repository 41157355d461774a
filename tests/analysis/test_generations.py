"""The Spark analysis tells the broker-side generations apart, on a real run of each: the eager classic protocol
(kafka-python), cooperative-sticky (KIP-429, librdkafka) and the consumer group protocol (KIP-848, librdkafka on a
KRaft broker), one member joining a group of two (the herd scenario at N = 2, docs/lab.md).

What separates them is what a join costs the partitions (docs/analysis.md): the incremental protocols move only
the joiner's share and revoke nothing they give back; the eager one revokes everything and hands most of it back.
The Spark tables must say so, agree with the lab's one-screen summary (zkconsumer/lab/runs/summary.py,
rules/handover.py) on
the same runs, put it in the verdict, and check each design's protocol identities (zkconsumer/lab/rules/identities.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest
from generation_runs import GENERATIONS, GenerationRuns, N, undisturbed
from pyspark.sql import SparkSession

from zkconsumer.lab.analysis.closed_forms import closed_form
from zkconsumer.lab.analysis.herd_view import COORDINATION_LABEL, HERD_METRICS, herd_figure
from zkconsumer.lab.analysis.job import AnalysisResult
from zkconsumer.lab.analysis.verdict import verdict
from zkconsumer.lab.designs import BROKER_SIDE_DESIGNS, DESIGNS, LABELS
from zkconsumer.lab.runs.summary import RunSummary

INCREMENTAL = ("cooperative", "consumer")


@dataclass
class Analysed:
    summaries: dict[str, RunSummary]  # design -> the lab's own summary of its run
    result: AnalysisResult
    runs: dict[str, dict[str, Any]]  # design -> its row of the runs table
    changes: dict[str, list[dict[str, Any]]]  # design -> its rows of the changes table
    identities: list[dict[str, Any]]  # the prediction_comparison table's identity rows


@pytest.fixture(scope="module")
def analysed(spark: SparkSession, generation_runs: GenerationRuns) -> Analysed:
    """The generations' shared runs (generation_runs.py) and this module's reading of their tables."""
    result = generation_runs.result
    runs = {r["design"]: r.asDict() for r in result.read(spark, "runs").collect()}
    changes: dict[str, list[dict[str, Any]]] = {}
    for row in result.read(spark, "changes").collect():
        changes.setdefault(row["design"], []).append(row.asDict())
    identities = [r.asDict() for r in result.read(spark, "prediction_comparison").filter("kind = 'identity'")
                  .collect()]
    return Analysed(generation_runs.summaries, result, runs, changes, identities)


def require_undisturbed(analysed: Analysed, *designs: str) -> None:
    """The protocol's claims are about a clean join. A run the lab itself flags as disturbed (a member that missed
    its session under load forces another round) is made once more; disturbed twice, the claims fail rather than
    pass unchecked: a skipped claim would hide a protocol that really takes another round."""
    disturbed = [f"{d} ({_why(analysed.summaries[d])})" for d in designs if not undisturbed(analysed.summaries[d])]
    assert not disturbed, f"disturbed runs, twice: {', '.join(disturbed)}"


def _why(summary: RunSummary) -> str:
    if not summary.completed:
        return "did not complete"
    if summary.counting_gaps:
        return summary.counting_gaps
    return "identities " + ", ".join(str(i) for i in summary.identities if not i.holds)


@pytest.mark.slow
def test_the_spark_tables_agree_with_the_lab_summary_on_moved_revoked_kept_and_rounds(analysed: Analysed) -> None:
    for design, summary in analysed.summaries.items():
        run = analysed.runs[design]
        assert (run["partitions_moved"], run["revoked_kept"], run["rounds"]) == (
            summary.moved, summary.revoked_kept, summary.rebalances), design
        assert run["rebalances"] == summary.rebalances, design
        # one change: its window holds the whole cost
        [change] = analysed.changes[design]
        assert (change["partitions_moved"], change["revoked_kept"], change["rounds"]) == (
            summary.moved, summary.revoked_kept, summary.rebalances), design


@pytest.mark.slow
def test_incremental_designs_move_only_the_joiners_share_and_revoke_nothing_they_give_back(
        analysed: Analysed) -> None:
    """A join into N with P partitions has to move a fair share to the joiner, ⌊P/(N+1)⌋ or ⌈P/(N+1)⌉, and no
    more; the eager protocol revokes everything first, so partitions come back to the member that had them."""
    require_undisturbed(analysed, *GENERATIONS)
    for design in INCREMENTAL:
        run = analysed.runs[design]
        share = run["partitions"] / (N + 1)
        assert run["partitions_moved"] in (math.floor(share), math.ceil(share)), (design, run["partitions_moved"])
        assert run["revoked_kept"] == 0 and run["revoked_kept_per_change"] == 0.0, design
        # they did revoke: what moved, and only that
        assert 0 < run["revoked_partitions"] <= run["partitions_moved"], design
    eager = analysed.runs["coordinator"]
    assert eager["revoked_kept"] > 0
    # everything the incumbents owned was revoked: what came back plus what moved away from them
    assert eager["revoked_partitions"] == eager["partitions"]
    assert eager["revoked_kept"] + eager["partitions_moved"] >= eager["partitions"]


@pytest.mark.slow
def test_rounds_come_from_the_wire_where_librdkafka_cannot_tell_its_generation(analysed: Analysed) -> None:
    """The eager members report their generation; librdkafka's do not (null), so their rounds are the
    generations and epochs the coordinator answered: two for the cooperative join (a second generation after the
    revoke), one group epoch for the consumer protocol."""
    require_undisturbed(analysed, *GENERATIONS)
    assert {d: analysed.runs[d]["rounds"] for d in GENERATIONS} == {"coordinator": 1, "cooperative": 2,
                                                                   "consumer": 1}


@pytest.mark.slow
def test_herd_metrics_cover_every_broker_side_design(analysed: Analysed) -> None:
    for design in GENERATIONS:
        run = analysed.runs[design]
        for kind in ("requests", "notifications"):
            column, _ = HERD_METRICS[kind][design]
            assert run[column] is not None and run[column] > 0, (design, kind)
    assert HERD_METRICS["requests"]["consumer"][1] == COORDINATION_LABEL
    assert "group-changing ConsumerGroupHeartbeats" in COORDINATION_LABEL
    require_undisturbed(analysed, "consumer")
    # the consumer protocol sends no classic coordination request: its requests are the heartbeats that join
    # and acknowledge, its notifications the heartbeat answers carrying a new assignment
    consumer = analysed.runs["consumer"]
    assert consumer["join_group_requests"] == consumer["sync_group_requests"] == 0
    assert consumer["kafka_coordination"] > consumer["epoch_zero_heartbeats"] == 1


@pytest.mark.slow
def test_the_verdict_compares_every_generation_on_moved_and_revoked_kept(analysed: Analysed) -> None:
    require_undisturbed(analysed, *GENERATIONS)
    findings = {f.metric: f for f in verdict(list(analysed.runs.values()))}
    for key, words in (("moved", "Partitions moved per change"),
                       ("revoked_kept", "Partitions revoked and given back per change (stop-the-world)")):
        finding = findings[key]
        assert finding.text.startswith(words), finding.text
        assert finding.lowest == INCREMENTAL, finding.text
        for design in GENERATIONS:
            assert LABELS[design] in finding.text, (design, finding.text)
    assert f"{LABELS['cooperative']} and {LABELS['consumer']} tie lowest" in findings["revoked_kept"].text
    report = analysed.result.report.read_text(encoding="utf-8")
    assert "Partitions revoked and given back per change (stop-the-world): " in report
    # the side-by-side table has a column per design under every heading, the new ones included
    for heading in ("moved/chg", "revoked &amp; given back/chg", "rounds"):
        assert f">{heading}</th>" in report, heading
    assert report.count("<th title='Cooperative-sticky (KIP-429)'>coop</th>") >= 3


@pytest.mark.slow
def test_each_generations_protocol_identities_hold_with_their_closed_forms(analysed: Analysed) -> None:
    require_undisturbed(analysed, *GENERATIONS)
    rows = analysed.identities
    by = {(r["design"], r["metric"]): r for r in rows}
    assert rows and all(r["holds"] for r in rows), [r for r in rows if not r["holds"]]
    expected = {
        ("coordinator", "coordination requests per join"): (2 * N + 3, "= 2·N + 3"),
        ("coordinator", "JoinGroup per join"): (N + 2, "= N + 2"),
        ("coordinator", "generations per join"): (1, "= 1"),
        ("cooperative", "coordination requests per join"): (4 * N + 5, "= 4·N + 5"),
        ("cooperative", "JoinGroup per join"): (2 * N + 3, "= 2·N + 3"),
        ("cooperative", "SyncGroup per join"): (2 * N + 2, "= 2·N + 2"),
        ("cooperative", "generations per join"): (2, "= 2"),
        ("consumer", "JoinGroup+SyncGroup+LeaveGroup per join"): (0, "= 0"),
        ("consumer", "epoch-0 heartbeats per join"): (1, "= 1"),
        ("consumer", "group epochs per join"): (1, "= 1"),
    }
    for key, (value, why) in expected.items():
        assert (by[key]["observed"], by[key]["predicted"], by[key]["why"]) == (value, value, why), key
    report = analysed.result.report.read_text(encoding="utf-8")
    assert "4·N + 5" in report and "group epochs per join" in report


def test_the_herd_charts_draw_every_design_with_its_closed_form() -> None:
    """Rows of every design at two group sizes: each gets its requests series, the cooperative design its
    4·N + 5 line, and the notifications one panel per design."""
    runs = []
    for design in DESIGNS:
        for n in (2, 4):
            row = {"run_id": f"{design}-{n}", "scenario": "herd", "process_mode": "processes", "design": design,
                   "members": n, "partitions": 72, "conflicts": 0, "owner_conflicts": None}
            for kind in ("requests", "notifications"):
                column, _ = HERD_METRICS[kind][design]
                row[column] = float(n + 1)
            runs.append(row)
    changes = [{"run_id": r["run_id"], "counted": 1, "action": "join", "change_members": "m9"} for r in runs]
    requests = herd_figure(runs, [], "requests", changes)
    names = [t.name for t in requests.data]
    for design in DESIGNS:
        assert any(LABELS[design] in name for name in names), design
    assert "closed form 4·N + 5 (processes)" in names
    assert closed_form("consumer", "processes", "kafka_coordination_per_change", 2, 72) is None
    notifications = herd_figure(runs, [], "notifications", changes)
    titles = [a.text for a in notifications.layout.annotations]
    assert titles == [LABELS[d] for d in DESIGNS]
    assert set(BROKER_SIDE_DESIGNS) <= set(HERD_METRICS["notifications"])
