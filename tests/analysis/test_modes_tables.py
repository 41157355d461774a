"""The opt-in modes' table and report section (modes_tables.py, modes_report.py) on hand-built runs whose answers
are known: one membership change each, with planted ZooKeeper requests, times to stable and stop-the-world pauses,
in the faithful mode (two repeats), mode "all", the coordinator design, and a scenario with no faithful run."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from analysis_builders import RunBuilder
from pyspark.sql import SparkSession

from zkconsumer.lab.analysis.job import AnalysisResult, analyze
from zkconsumer.lab.analysis.modes_tables import METRICS, ZOOKEEPER_ONLY
from zkconsumer.lab.analysis.readers import load_runs
from zkconsumer.lab.designs import FAITHFUL, design_label
from zkconsumer.modes import mode_properties

# The module's one analysis (five runs) takes minutes on 2 shared cores under other tests' load (270 s at load 11)
pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]


def near(value: float | None):
    """Times are differences of epoch seconds (~1.7e9) in doubles: equal to within a microsecond, not exactly."""
    return pytest.approx(value, abs=1e-5)


@dataclass
class ModeRun(RunBuilder):
    """A hand-built run in a mode: its directory and manifest as lab/runs/case_run.py writes them (zk+MODE, `mode`)."""

    mode: str = FAITHFUL

    @property
    def run_id(self) -> str:
        return f"{self.case}-{design_label(self.design, self.mode)}-hand"

    @property
    def path(self) -> Path:
        return self.root / self.case / design_label(self.design, self.mode)

    def write(self) -> Path:
        path = super().write()
        if self.mode != FAITHFUL:
            manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
            manifest.update(mode=self.mode, mode_properties=mode_properties(self.mode))
            (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        return path


def one_join(root: Path, scenario: str, case: str, design: str, mode: str, requests: int, stable_s: float,
             pause_s: float) -> ModeRun:
    """m2 joins a group of two at 12 s; `requests` ZooKeeper (or coordination) requests in the churn, the group
    stable `stable_s` later, m0's fetchers stopped for `pause_s`."""
    b = ModeRun(root, case, design, scenario=scenario, mode=mode)
    b.phase(0, "setup")
    b.started(5, "m0", ["t/0", "t/1"])
    b.phase(10, "settled")
    b.membership(12, "join", ["m2"], 0)
    if design == "zk":
        b.zk(12.1, "m0", kind="event", op=None, opcode=None, n=2)
        b.zk(12.2, "m0", n=requests)
    else:
        b.kafka(12.2, "m0", "JoinGroup", 11, n=requests)
    b.stopped(12.3, "m0", ["t/0", "t/1"])
    b.started(12.3 + pause_s, "m0", ["t/0"])
    b.started(12.35, "m2", ["t/1"])
    b.stable(12 + stable_s, 1, stable_s)
    b.phase(15, "done")
    b.write()
    return b


def four_partition_join(root: Path, mode: str, requests: int) -> ModeRun:
    """m2 joins m0 (t/0, t/1) and m1 (t/2, t/3) at 12 s, the group stable 0.6 s later. Faithful: every fetcher
    stops and the partitions are dealt again, m0 t/0, m1 t/1, m2 t/2 and t/3 (3 moved). incremental+sticky: m1 alone
    stops t/3 and m2 gets it (1 moved), every other partition is never paused."""
    b = ModeRun(root, "st-r0", "zk", scenario="st", mode=mode)
    b.phase(0, "setup")
    b.started(5, "m0", ["t/0", "t/1"])
    b.started(5, "m1", ["t/2", "t/3"])
    b.phase(10, "settled")
    b.membership(12, "join", ["m2"], 0)
    b.zk(12.1, "m0", kind="event", op=None, opcode=None, n=2)
    b.zk(12.2, "m0", n=requests)
    if mode == FAITHFUL:
        b.stopped(12.3, "m0", ["t/0", "t/1"])
        b.stopped(12.3, "m1", ["t/2", "t/3"])
        b.started(12.5, "m0", ["t/0"])
        b.started(12.5, "m1", ["t/1"])
        b.started(12.5, "m2", ["t/2", "t/3"])
    else:
        b.stopped(12.3, "m1", ["t/3"])
        b.started(12.4, "m2", ["t/3"])
    b.stable(12.6, 1, 0.6)
    b.phase(15, "done")
    b.write()
    return b


@pytest.fixture(scope="module")
def modal(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> AnalysisResult:
    root = tmp_path_factory.mktemp("modes-runs")
    one_join(root, "sj", "sj-r0", "zk", FAITHFUL, 12, 0.8, 0.5)
    one_join(root, "sj", "sj-r1", "zk", FAITHFUL, 8, 0.4, 0.3)
    one_join(root, "sj", "sj-r0", "zk", "all", 3, 0.3, 0.1)
    one_join(root, "sj", "sj-r0", "coordinator", FAITHFUL, 5, 0.45, 0.2)
    one_join(root, "other", "other-r0", "zk", "incremental", 4, 0.2, 0.1)
    four_partition_join(root, FAITHFUL, 30)
    four_partition_join(root, "incremental+sticky", 9)
    return analyze([root], tmp_path_factory.mktemp("modes-report"), spark, predict_to=None)


def rows_by_label(result: AnalysisResult, spark: SparkSession) -> dict[tuple[str, str], dict]:
    return {(r["scenario"], r["label"]): r.asDict() for r in result.read(spark, "modes").collect()}


def test_one_row_per_scenario_and_design_mode_with_the_means_of_its_runs(modal, spark):
    rows = rows_by_label(modal, spark)
    assert set(rows) == {("sj", "zk"), ("sj", "zk+all"), ("sj", "coordinator"), ("other", "zk+incremental"),
                         ("st", "zk"), ("st", "zk+incremental+sticky")}
    faithful = rows[("sj", "zk")]
    assert faithful["runs"] == 2 and faithful["completed_runs"] == 2 and faithful["mode"] == FAITHFUL
    assert faithful["zk_requests_per_change"] == pytest.approx(10.0)  # (12 + 8) / 2, one change each
    assert faithful["zk_notifications_per_change"] == pytest.approx(2.0)
    assert faithful["time_to_stable_s"] == near(0.6)
    assert faithful["median_pause_s"] == near(0.4)
    assert rows[("sj", "zk+all")]["mode"] == "all" and rows[("sj", "zk+all")]["design"] == "zk"
    assert rows[("sj", "coordinator")]["zk_requests_per_change"] is None


def test_every_metric_is_the_runs_tables_own(modal, spark):
    """Not recomputed: each row's figure is the mean of the runs table's column over the row's runs."""
    runs = {r["run_id"]: r.asDict() for r in modal.read(spark, "runs").collect()}
    rows = rows_by_label(modal, spark)
    members = {("sj", "zk"): ["sj-r0-zk-hand", "sj-r1-zk-hand"], ("sj", "zk+all"): ["sj-r0-zk+all-hand"],
               ("sj", "coordinator"): ["sj-r0-coordinator-hand"]}
    for key, run_ids in members.items():
        for source, column in METRICS:
            if key[1] == "coordinator" and source in ZOOKEEPER_ONLY:
                continue  # no ZooKeeper traffic to count: null in the table (the first test), 0 in runs
            values = [runs[r][source] for r in run_ids if runs[r][source] is not None]
            expected = sum(values) / len(values) if values else None
            assert rows[key][column] == near(expected), (key, column)


def test_ratios_are_against_the_faithful_zk_runs_of_the_same_scenario(modal, spark):
    rows = rows_by_label(modal, spark)
    assert rows[("sj", "zk")]["zk_requests_per_change_x"] == pytest.approx(1.0)
    every = rows[("sj", "zk+all")]
    assert every["zk_requests_per_change_x"] == pytest.approx(0.3)  # 3 against the faithful mean of 10
    assert every["time_to_stable_s_x"] == near(0.5)  # 0.3 against 0.6
    assert every["median_pause_s_x"] == near(0.25)  # 0.1 against 0.4
    assert rows[("sj", "coordinator")]["time_to_stable_s_x"] == near(0.75)
    assert rows[("sj", "coordinator")]["zk_requests_per_change_x"] is None
    # no faithful run of that scenario: nothing to compare with, never another scenario's figures
    assert rows[("other", "zk+incremental")]["zk_requests_per_change_x"] is None


def test_a_sticky_run_shows_its_partitions_moved_beside_the_faithful_mode(modal, spark):
    """The sticky assignor's row (the mode as the lab records it, incremental+sticky): partitions moved per change
    and the ratio to the faithful run's, with the other metrics of the section."""
    rows = rows_by_label(modal, spark)
    faithful, sticky = rows[("st", "zk")], rows[("st", "zk+incremental+sticky")]
    assert sticky["mode"] == "incremental+sticky" and sticky["design"] == "zk"
    assert faithful["partitions_moved_per_change"] == pytest.approx(3.0)
    assert sticky["partitions_moved_per_change"] == pytest.approx(1.0)
    assert sticky["partitions_moved_per_change_x"] == pytest.approx(1 / 3)
    assert sticky["zk_requests_per_change_x"] == pytest.approx(0.3)  # 9 against 30
    assert sticky["time_to_stable_s"] == near(0.6) and sticky["unowned_partition_s"] is not None
    assert faithful["median_pause_s"] is not None
    text = modal.report.read_text(encoding="utf-8")
    row = re.search(r"<tr data-label='zk\+incremental\+sticky' data-scenario='st'>(.*?)</tr>", text).group(1)
    assert "<td>1.0</td><td class=ratio>0.33</td>" in row
    assert "<th>partitions moved per change</th>" in text


def test_the_report_has_the_section_in_the_tables_order(modal):
    text = modal.report.read_text(encoding="utf-8")
    assert "<h2 id=modes>Opt-in modes</h2>" in text
    section = text[text.index("<table class=modes>"):]
    labels = re.findall(r"<tr data-label='([^']+)' data-scenario='([^']+)'>", section[:section.index("</table>")])
    assert labels == [("zk+incremental", "other"), ("zk", "sj"), ("zk+all", "sj"), ("coordinator", "sj"),
                      ("zk", "st"), ("zk+incremental+sticky", "st")]
    row = re.search(r"<tr data-label='zk\+all' data-scenario='sj'>(.*?)</tr>", section).group(1)
    assert "<td class=ratio>0.30</td>" in row


def test_the_other_sections_show_the_faithful_runs_only(modal):
    """A mode's run is the zk design: beside the faithful run of its case it would pass for it."""
    text = modal.report.read_text(encoding="utf-8")
    assert "<p>4 runs (4 completed)" in text  # of seven: zk+all, zk+incremental and zk+incremental+sticky are
    assert "3 runs in an opt-in mode are shown in the section" in text  # the modes section's
    compared = text[text.index("<table class=cmp>"):]
    compared = compared[:compared.index("</table>")]
    assert "<td>sj</td>" in compared and "<td>other</td>" not in compared


def test_runs_without_a_mode_give_no_table(spark, tmp_path):
    one_join(tmp_path, "sj", "sj-r0", "zk", FAITHFUL, 12, 0.8, 0.5)
    one_join(tmp_path, "sj", "sj-r0", "coordinator", FAITHFUL, 5, 0.45, 0.2)
    assert len(load_runs([tmp_path])) == 2
    result = analyze([tmp_path], tmp_path / "report", spark, predict_to=None)
    assert "modes" not in result.tables and "Opt-in modes" not in result.report.read_text(encoding="utf-8")
