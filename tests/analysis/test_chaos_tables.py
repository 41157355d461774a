"""The fault campaign's tables and report section, on a hand-built campaign whose answers are known: two faults,
duplicates and a stall planted in each window, views in one window only, and the checkers' chaos.json."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from analysis_builders import table_rows
from pyspark.sql import SparkSession
from test_report import CHROMIUM, chromium, needs_chromium

from zkconsumer.lab.analysis.job import AnalysisResult, analyze
from zkconsumer.lab.trace import RunDirectory

PREDICTION_TABLES = {"predictions", "prediction_comparison"}

T0 = 1_000.0
VERDICT = {"violations": 1, "checks": [], "table": [
    {"kind": "member_kill", "count": 1, "reconv_median_s": 1.5, "reconv_max_s": 1.5, "duplicates": 2,
     "overlaps": 1, "overlap_max_s": 0.4, "violations": {}},
    {"kind": "zk_ensemble_stop", "count": 1, "reconv_median_s": 6.25, "reconv_max_s": 6.25, "duplicates": 1,
     "overlaps": 0, "overlap_max_s": 0.0, "violations": {"3": 1}}]}


def build_campaign(path: Path) -> Path:
    run = RunDirectory.create(path, scenario="chaos", design="zk", run_id="campaign-1",
                              campaign={"faults": 2, "seed": 1})
    out = run.trace("history", "zk")

    def consume(t: float, partition: int, *offsets: int) -> None:  # one record per message, as zk_member writes
        for i, offset in enumerate(offsets):
            out.write("consume", ts=t + i * 0.01, member="m1", topic="t", partition=partition, first_offset=offset,
                      last_offset=offset, count=1)

    def produce(t: float, partition: int, first: int, last: int) -> None:
        out.write("produce", ts=t, topic="t", partition=partition, first_offset=first, last_offset=last,
                  count=last - first + 1)

    def view(t: float) -> None:
        out.write("group_view", ts=t, ids={"g_m1": {"subscription": {"t": 1}}}, owners={"t/0": "g_m1-0"},
                  offsets={"t/0": 2}, partitions={"t": 2})

    def fault(t: float, fault_id: int, kind: str, phase: str, target: str, hold_s: float) -> None:
        out.write("fault", ts=t, fault_id=fault_id, kind=kind, phase=phase, target=target, params={"hold_s": hold_s})

    out.write("campaign", ts=T0 - 1, phase="start", settings={"members": 1, "faults": 2})
    view(T0)  # before the first fault: in no window
    produce(T0 + 1, 0, 0, 3)
    produce(T0 + 1, 1, 0, 1)
    consume(T0 + 1.2, 1, 0, 1)
    consume(T0 + 1.5, 0, 0, 1, 2, 3)
    # fault 1: window [1002, 1008)
    fault(T0 + 2, 1, "member_kill", "start", "m1", 2.0)
    view(T0 + 2.5)
    produce(T0 + 3, 0, 4, 7)
    consume(T0 + 3.5, 0, 4, 5)  # 6 and 7 left waiting ...
    consume(T0 + 3.6, 0, 2)  # ... and two replays: duplicates, the last consume of t/0 until 1009
    consume(T0 + 3.7, 0, 3)
    fault(T0 + 4, 1, "member_kill", "heal", "m1", 2.0)
    view(T0 + 4.5)
    produce(T0 + 6, 1, 2, 2)
    consume(T0 + 6.5, 1, 2)  # t/1 waits 0.5 s: less than t/0's 4.3 s
    # fault 2: window [1008, 1013], no view in it (ZooKeeper down)
    fault(T0 + 8, 2, "zk_ensemble_stop", "start", "ensemble", 3.0)
    consume(T0 + 9, 0, 6, 7)  # t/0's stall ends 1 s into this window
    produce(T0 + 10, 0, 8, 9)
    fault(T0 + 11, 2, "zk_ensemble_stop", "heal", "ensemble", 3.0)
    consume(T0 + 12, 0, 8, 9)  # waited 2 s: the longest in this window
    consume(T0 + 12.5, 0, 7)  # a replay
    out.write("fault", ts=T0 + 12.8, fault_id=3, kind="member_pause", phase="skipped", target="m9", params={})
    out.write("campaign", ts=T0 + 13, phase="end", settings={"members": 1, "faults": 2})
    out.close()
    (path / "chaos.json").write_text(json.dumps(VERDICT), encoding="utf-8")
    run.finish("completed")
    return path


@dataclass
class Analysed:
    alone: AnalysisResult  # the campaign only
    mixed: AnalysisResult | None = None  # the suite's hand-built runs and the campaign


@pytest.fixture(scope="module")
def campaign(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Analysed:
    root = tmp_path_factory.mktemp("chaos")
    return Analysed(analyze([build_campaign(root / "campaign")], root / "alone", spark, predict_to=None))


@pytest.fixture(scope="module")
def mixed(spark: SparkSession, campaign: Analysed, hand_runs,  # conftest.HandRuns
          tmp_path_factory: pytest.TempPathFactory) -> Analysed:
    """The runs of the suite's `analysed` (conftest.py) plus a campaign, analysed once more: the standard tables
    are compared with `analysed`'s, so the campaign costs this one extra analysis, not two."""
    root = tmp_path_factory.mktemp("mixed")
    runs = [hand_runs.root / "split", hand_runs.root / "sweep", build_campaign(root / "campaign")]
    campaign.mixed = analyze(runs, root / "mixed", spark, predict_to=None)
    return campaign


def rows(spark: SparkSession, result: AnalysisResult, name: str, key: str) -> list[dict]:
    return [r.asDict() for r in result.read(spark, name).orderBy(key).collect()]


@pytest.mark.slow
def test_each_fault_window_counts_what_was_planted(spark: SparkSession, campaign: Analysed) -> None:
    faults = rows(spark, campaign.alone, "chaos_faults", "fault_id")
    assert [f["fault_id"] for f in faults] == [1, 2]  # the skipped fault injected nothing: no window
    first, second = faults
    assert (first["kind"], first["target"], first["start_ts"], first["heal_ts"], first["hold_s"],
            first["window_end"]) == ("member_kill", "m1", T0 + 2, T0 + 4, 2.0, T0 + 8)
    assert (first["produced"], first["consumed"], first["duplicates"], first["group_views"]) == (5, 5, 2, 2)
    assert first["dead_time_s"] == pytest.approx(8 - 3.7)  # t/0: from the last replay to the window's end
    assert (second["kind"], second["start_ts"], second["heal_ts"], second["window_end"]) == (
        "zk_ensemble_stop", T0 + 8, T0 + 11, T0 + 13)
    assert (second["produced"], second["consumed"], second["duplicates"], second["group_views"]) == (2, 5, 1, 0)
    assert second["dead_time_s"] == pytest.approx(12 - 10)


@pytest.mark.slow
def test_per_kind_rows_join_the_checkers_verdict(spark: SparkSession, campaign: Analysed) -> None:
    kinds = {k["kind"]: k for k in rows(spark, campaign.alone, "chaos_kinds", "kind")}
    assert set(kinds) == {"member_kill", "zk_ensemble_stop"}
    kill, stop = kinds["member_kill"], kinds["zk_ensemble_stop"]
    assert (kill["faults"], kill["duplicates"], kill["windows_without_view"], kill["checked_faults"]) == (1, 2, 0, 1)
    assert kill["max_dead_time_s"] == pytest.approx(4.3)
    assert (kill["reconv_median_s"], kill["overlaps"], kill["overlap_max_s"], kill["violations"]) == (1.5, 1, 0.4, 0)
    assert (stop["faults"], stop["duplicates"], stop["windows_without_view"]) == (1, 1, 1)
    assert (stop["reconv_max_s"], stop["violations"], stop["violations_by_invariant"]) == (6.25, 1, "inv3: 1")


@pytest.mark.slow
def test_a_campaign_leaves_the_standard_tables_unchanged(spark: SparkSession, mixed: Analysed,
                                                          analysed: AnalysisResult) -> None:
    result = mixed.mixed
    assert result is not None
    standard = set(analysed.tables) - PREDICTION_TABLES  # the mixed analysis ran without the simulation
    assert set(result.tables) == standard | {"chaos_faults", "chaos_kinds"}
    for name in sorted(standard):
        assert table_rows(analysed.tables[name]) == table_rows(result.tables[name]), name  # columns and rows
    assert result.read(spark, "chaos_faults").count() == 2
    assert "Fault campaign" in result.report.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_section_is_in_the_page(campaign: Analysed) -> None:
    html = campaign.alone.report.read_text(encoding="utf-8")
    assert "<h2 id=fault-campaign>Fault campaign</h2>" in html
    assert "campaign-1: 1 violations" in html and "chaos-check" in html
    assert "Latency" not in html  # a campaign alone: its section only
    row = re.search(r"<tr data-kind='zk_ensemble_stop'>(.*?)</tr>", html).group(1)
    assert re.findall(r"<td>([^<]*)</td>", row)[:4] == ["campaign-1", "zk_ensemble_stop", "1", "6.25"]


@pytest.mark.slow
@needs_chromium
def test_the_section_renders_in_headless_chromium(mixed: Analysed, tmp_path: Path) -> None:
    assert CHROMIUM is not None
    for result in (mixed.alone, mixed.mixed):
        dom = chromium(tmp_path, "--dump-dom", result.report.resolve().as_uri())
        assert dom.returncode == 0, dom.stderr[-2000:]
        assert "the fault campaign: one mark per fault" in dom.stdout  # drawn by plotly, so its script ran
        assert "dead time in the window (s)" in dom.stdout
        assert "zk_ensemble_stop" in dom.stdout


def test_an_invariant_its_checker_could_not_judge_is_not_reported_as_held(tmp_path: Path) -> None:
    """chaos.json of a campaign whose third checker raised (0 violations in the invariants judged): the report's
    verdict says invariant 3 is unknown, not "0 violations" alone."""
    from zkconsumer.lab.analysis.chaos_report import ChaosSection, section_intro
    from zkconsumer.lab.analysis.chaos_tables import unknown_invariants

    (tmp_path / "chaos.json").write_text(json.dumps({"valid": "unknown", "violations": 0, "unknown": [3],
                                                     "table": [], "checks": []}), encoding="utf-8")
    unknown = unknown_invariants(tmp_path)
    assert unknown == [3] and unknown_invariants(tmp_path / "missing") == []
    text = section_intro(ChaosSection([], [], {"c1": 0, "c2": 0}, unknown={"c1": unknown}))
    assert "c1: 0 violations in the invariants judged, invariant 3 UNKNOWN (its checker failed)" in text
    assert "c2: 0 violations." in text  # a campaign judged whole reads as before
