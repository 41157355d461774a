"""The simulation's predictions next to real runs: which runs are comparable, and how a count is judged."""

from __future__ import annotations

import subprocess
import sys

import pytest
from analysis_builders import PREDICT_TO

from zkconsumer.lab.analysis import AnalysisResult
from zkconsumer.lab.analysis.predictions import comparable_runs, compare, predictions_table
from zkconsumer.lab.join_cost import join_notifications, join_requests
from zkconsumer.lab.sim.sweep import SweepPoint, predict

P = 72


def run(run_id: str, design: str, n: int, **fields: object) -> dict:
    return {"run_id": run_id, "case": f"herd-members={n}-r0", "design": design, "process_mode": "threads",
            "members": n, "partitions": P, "completed": True, "changes": 1, "conflicts": 0, **fields}


def join(run_id: str, members: str = "m9", action: str = "join") -> dict:
    return {"run_id": run_id, "counted": 1, "action": action, "change_members": members}


def test_only_completed_runs_of_single_joins_are_comparable() -> None:
    runs = [run("a", "zk", 2), run("b", "zk", 2), run("c", "zk", 2), run("d", "zk", 2, completed=False),
            run("e", "coordinator", 2), run("f", "zk", 2)]
    changes = [join("a"), join("b", "m3,m4"), join("c", action="leave"), join("d"), join("e"),
               {**join("f"), "counted": 0}]
    assert [r["run_id"] for r in comparable_runs(runs, changes)] == ["a", "e"]


@pytest.mark.parametrize("n", [1, 4])
def test_a_conflict_free_join_matches_exactly_and_a_conflict_is_named(n: int) -> None:
    predicted = predict(SweepPoint(members=n, partitions=P, seed=0))
    assert predicted["zk_conflicts"] == 0
    exact_count = join_requests(n + 1, P)
    assert predicted["zk_requests"] == exact_count  # the closed form of docs/join-cost.md (no chroot in the lab)
    runs = [run("calm", "zk", n, zk_requests_per_change=float(exact_count),
                zk_notifications_per_change=float(join_notifications(n + 1)), time_to_stable_s=1.0),
            run("raced", "zk", n, process_mode="processes", conflicts=1,
                zk_requests_per_change=float(exact_count + 40), zk_notifications_per_change=float(n),
                time_to_stable_s=2.0),
            run("co", "coordinator", n, kafka_coordination_per_change=float(2 * n + 3), time_to_stable_s=4.0)]
    rows = {(r.run_id, r.metric): r for r in compare(runs, [predicted])}
    assert rows[("calm", "ZooKeeper requests")].exact is True
    assert rows[("calm", "watch notifications")].exact is True
    raced = rows[("raced", "ZooKeeper requests")]
    # seeds are tried for a prediction that races as the real run did (at N > 1 the simulated incumbents, which
    # have no fetchers to stop and no offsets to commit, practically never race); the fetchers are named either way
    assert raced.exact is False and "1 conflict(s) as the real" in raced.why and "fetchers" in raced.why
    assert rows[("raced", "watch notifications")].exact is True
    assert rows[("co", "JoinGroup+SyncGroup+LeaveGroup")].exact is True  # 2N + 3, as the lab measured
    latency = rows[("calm", "time to stable (s)")]
    assert latency.exact is None
    assert latency.relative_error == pytest.approx(predicted["zk_time_to_stable_s"] - 1.0)
    table = predictions_table(list(rows.values()))
    assert "<b>4 of 5</b> deterministic counts predicted exactly" in table


def test_a_real_race_is_predicted_exactly_with_a_seed_that_races_too() -> None:
    """A join into a group of one often races the incumbent's release on a real ZooKeeper (a conflict, a retry):
    the conditioned prediction must then equal that run's count, not the conflict-free formula."""
    first = predict(SweepPoint(members=1, partitions=P, seed=0))
    assert first["zk_conflicts"] == 0
    raced = next(p for seed in range(1, 40) if (p := predict(SweepPoint(members=1, partitions=P, seed=seed)))
                 ["zk_conflicts"] == 1)
    real = run("r", "zk", 1, conflicts=1, zk_requests_per_change=float(raced["zk_requests"]),
               zk_notifications_per_change=1.0, time_to_stable_s=1.0)
    rows = {r.metric: r for r in compare([real], [first])}
    assert rows["ZooKeeper requests"].exact is True
    assert rows["ZooKeeper requests"].predicted > join_requests(2, P)
    assert "1 conflict(s) as the real one did" in rows["ZooKeeper requests"].why


def test_the_report_puts_predictions_next_to_the_hand_built_sweep(analysed: AnalysisResult) -> None:
    """The hand-built sweep (3·N² requests per join, docs: analysis_builders.py) is not what the code does, so
    every ZooKeeper request count must be flagged, and the predicted tail must reach the size asked for."""
    html = analysed.report.read_text(encoding="utf-8")
    assert "Predicted next to observed: the scale simulation" in html
    assert f"N up to {PREDICT_TO}" in html
    assert "differs" in html and "unexplained: see docs/simulation.md" in html
    assert {"predictions", "prediction_comparison"} <= set(analysed.tables)


def test_lab_analyze_without_runs_is_a_one_line_usage_error(tmp_path) -> None:
    """The CLI names what it looked for and what to give, and starts no Spark JVM for nothing."""
    empty = tmp_path / "no-runs"
    empty.mkdir()
    proc = subprocess.run([sys.executable, "-m", "zkconsumer", "lab", "analyze", str(empty), "--out",
                           str(tmp_path / "report")], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1  # an InputError: one line and exit 1, as every UserError (zkconsumer/errors.py)
    assert f"no run directory (with a manifest.json) under {empty}" in proc.stderr
    assert "lab run --out" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "report").exists()
