"""The simulation's predictions next to real runs: identities apart from predictions, seeds fixed in advance, race
rates with Wilson intervals, out-of-sample latency.

The "real" runs are the per-change counts of real lab runs (tests/sim/lab_counts.json: the lab's summary of herd
runs on a real ZooKeeper and Apache Kafka, `python -m zkconsumer.lab.sim.calibrate real`), never the simulation's
own output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from analysis_builders import PREDICT_TO

from zkconsumer.lab.analysis.calibration import split
from zkconsumer.lab.analysis.job import AnalysisResult
from zkconsumer.lab.analysis.predictions import (
    CAPACITY,
    IDENTITY,
    PREDICTION,
    SEEDS,
    TOLERANCE,
    comparable_runs,
    compare,
    headline,
    identities,
    predictions_table,
    wilson,
)
from zkconsumer.lab.sim.sweep import SweepPoint, predict

LAB_COUNTS = Path(__file__).parents[1] / "sim" / "lab_counts.json"
P = 72


def real_runs() -> list[dict[str, Any]]:
    """The real runs as rows of the analysis' runs table (one join each)."""
    rows = []
    for r in json.loads(LAB_COUNTS.read_text())["runs"]:
        counts = ({"zk_requests_per_change": float(r["zk_requests"]),
                   "zk_notifications_per_change": float(r["zk_notifications"])} if r["design"] == "zk" else
                  {"kafka_coordination_per_change": float(r["kafka_coordination"]), "rebalances": 1})
        rows.append({"run_id": r["run"], "case": r["run"], "design": r["design"], "members": r["members"],
                     "partitions": r["partitions"], "process_mode": "threads" if r["design"] == "zk" else "processes",
                     "completed": True, "changes": r["changes"], "conflicts": r["conflicts"],
                     "time_to_stable_s": r["stable_s"][0], "repeat": 0, **counts})
    return rows


@cache
def simulated(n: int) -> tuple[dict[str, Any], ...]:
    return tuple(predict(SweepPoint(members=n, partitions=P, seed=s, capacity=CAPACITY)) for s in SEEDS)


def by(rows: list, **match: object) -> list:
    return [r for r in rows if all(getattr(r, k) == v for k, v in match.items())]


@pytest.mark.parametrize(("successes", "trials", "low", "high"), [
    (0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (5, 10, 0.2366, 0.7634), (2, 12, 0.0470, 0.4480),
    (1, 1, 0.2065, 1.0)])
def test_wilson_interval_known_values(successes: int, trials: int, low: float, high: float) -> None:
    """Wilson score intervals at 95% (z = 1.96), as statistics tables give them."""
    assert wilson(successes, trials) == (pytest.approx(low, abs=5e-4), pytest.approx(high, abs=5e-4))


def test_wilson_refuses_an_impossible_rate() -> None:
    with pytest.raises(ValueError):
        wilson(3, 2)
    with pytest.raises(ValueError):
        wilson(0, 0)


def test_only_countable_runs_of_single_joins_are_comparable() -> None:
    base = {"design": "zk", "members": 2, "partitions": P, "completed": True}
    runs = [{**base, "run_id": i} for i in "abcdfg"] + [{**base, "run_id": "e", "design": "coordinator"}]
    runs[3]["completed"] = False
    runs[5]["counting_gaps"] = "1 undecodable stream"  # completed, but its counts are short

    def join(run_id: str, members: str = "m09", action: str = "join", counted: int = 1) -> dict:
        return {"run_id": run_id, "counted": counted, "action": action, "change_members": members}

    changes = [join("a"), join("b", "m03,m04"), join("c", action="leave"), join("d"), join("e"), join("f", counted=0),
               join("g")]
    assert [r["run_id"] for r in comparable_runs(runs, changes)] == ["a", "e"]


def test_real_runs_satisfy_every_protocol_identity_and_a_wrong_count_fails_one() -> None:
    """Identities from real wire counts: notifications = N, conflict-free rebalance-only requests = M² + 7M + 3P + 3,
    JoinGroup+SyncGroup+LeaveGroup = 2N + 3, one generation. The join that raced has no request identity."""
    runs = real_runs()
    rows = identities(runs)
    assert rows and all(r.kind == IDENTITY and r.holds for r in rows)
    raced = [r for r in runs if r["conflicts"]]
    assert [r["members"] for r in raced] == [1]  # the real join into a group of one raced
    assert not by(rows, design="zk", members=1, metric="ZooKeeper requests per join")
    assert len(by(rows, design="zk", metric="watch notifications per join")) == 7
    assert len(by(rows, design="zk", metric="ZooKeeper requests per join")) == 6
    assert len(by(rows, design="coordinator")) == 2 * 6
    off = [dict(r) for r in runs]
    next(r for r in off if r["design"] == "zk" and r["members"] == 8)["zk_requests_per_change"] += 1
    next(r for r in off if r["design"] == "coordinator" and r["members"] == 4)["kafka_coordination_per_change"] = 12
    failed = [(r.design, r.members) for r in identities(off) if not r.holds]
    assert failed == [("coordinator", 4), ("zk", 8)]


def test_predictions_use_the_fixed_seeds_whatever_the_real_run_did() -> None:
    """No conditioning: a run that raced and one that did not get the same prediction, the mean over SEEDS with
    the conflicts the simulation itself produced; a sweep missing a seed of SEEDS predicts nothing."""
    sims = list(simulated(1))
    real = next(r for r in real_runs() if r["design"] == "zk" and r["members"] == 1)
    calm = {**real, "run_id": "calm", "conflicts": 0}
    raced_rows, calm_rows = compare([real], sims), compare([calm], sims)
    requests = by(raced_rows, kind=PREDICTION, metric="ZooKeeper requests per join")[0]
    assert requests.predicted == by(calm_rows, kind=PREDICTION, metric="ZooKeeper requests per join")[0].predicted
    assert requests.predicted == pytest.approx(sum(s["zk_requests"] for s in sims) / len(SEEDS))
    assert requests.observed == real["zk_requests_per_change"]
    assert requests.relative_error == pytest.approx((requests.predicted - requests.observed) / requests.observed)
    assert requests.holds == (abs(requests.relative_error) <= TOLERANCE)
    assert not by(compare([real], sims[:-1]), kind=PREDICTION)  # one seed short: no prediction at all
    assert not by(compare([real], [{**s, "seed": s["seed"] + 100} for s in sims]), kind=PREDICTION)


def test_the_race_rate_is_compared_with_intervals_and_a_gap_is_shown() -> None:
    sims = list(simulated(1))
    real = next(r for r in real_runs() if r["design"] == "zk" and r["members"] == 1)
    rate = by(compare([real], sims), metric="joins that raced (an owner conflict)")[0]
    simulated_races = sum(1 for s in sims if s["zk_conflicts"])
    assert (rate.kind, rate.observed, rate.predicted) == (PREDICTION, 1.0, simulated_races / len(SEEDS))
    assert (rate.predicted_low, rate.predicted_high) == wilson(simulated_races, len(SEEDS))
    assert (rate.observed_low, rate.observed_high) == wilson(1, 1)
    # ten real joins that all raced: the interval over the runs narrows to [0.72, 1]
    ten = [{**real, "run_id": f"r{i}", "repeat": i} for i in range(10)]
    many = by(compare(ten, sims), metric="joins that raced (an owner conflict)")[0]
    apart = wilson(simulated_races, len(SEEDS))[1] < wilson(10, 10)[0]
    assert many.holds is (not apart)
    assert ("apart by" in many.why) is apart and f"10 of 10 real, {simulated_races} of 12 simulated" in many.why


def test_the_headline_counts_predictions_only() -> None:
    runs = [r for r in real_runs() if r["members"] in (1, 2)]
    rows = compare(runs, [*simulated(1), *simulated(2)])
    predictions = [r for r in rows if r.kind == PREDICTION]
    # per design and N: zk race rate, requests and time to stable; coordinator coordination requests (the lab
    # summary's rows have no rounds or partition counts, so those are not predicted for them) and time to stable
    assert sorted((r.design, r.members, r.metric) for r in predictions) == sorted(
        [(d, n, m) for n in (1, 2) for d, m in (("zk", "joins that raced (an owner conflict)"),
                                                 ("zk", "ZooKeeper requests per join"), ("zk", "time to stable (s)"),
                                                 ("coordinator", "coordination requests per join"),
                                                 ("coordinator", "time to stable (s)"))])
    held = sum(1 for r in predictions if r.holds)
    checks = [r for r in rows if r.kind == IDENTITY]
    assert headline(rows).startswith(f"{held} of {len(predictions)} predictions hold (counts and times within 25%")
    assert headline(rows).endswith(f"{len(checks)} of {len(checks)} protocol identities hold")
    failing = [r for r in rows if r.kind == IDENTITY][:1]
    broken = [*predictions, *(type(r)(**{**vars(r), "holds": False}) for r in failing)]
    assert headline(broken).endswith("0 of 1 protocol identities hold")
    table = predictions_table(rows)
    assert "Predictions (can come out otherwise)" in table and "Protocol identities" in table
    assert table.index("Predictions (can") < table.index("Protocol identities")


def test_time_to_stable_is_predicted_out_of_sample_on_the_held_out_repeats() -> None:
    """Even repeats calibrate, odd repeats are predicted, decided by the repeat index alone."""
    real = next(r for r in real_runs() if r["design"] == "zk" and r["members"] == 2)
    runs = [{**real, "run_id": f"r{i}", "repeat": i, "time_to_stable_s": 0.5 + i} for i in range(4)]
    holdout = split(runs)
    assert [r["run_id"] for r in holdout.calibration] == ["r0", "r2"]
    assert [r["run_id"] for r in holdout.held_out] == ["r1", "r3"]
    # keyed by N, partitions, heartbeat and session: these runs have no manifest, hence no settings of their own
    calibrated = {(2, P, None, None): {"zk_time_to_stable_s": 2.0, "coord_time_to_stable_s": None}}
    rows = compare(runs, list(simulated(2)), calibrated, {"r1", "r3"}, "out of sample: test")
    stable = by(rows, metric="time to stable (s)")[0]
    assert stable.observed == pytest.approx((1.5 + 3.5) / 2) and stable.predicted == 2.0
    assert stable.relative_error == pytest.approx((2.0 - 2.5) / 2.5) and stable.holds is True
    assert stable.why == "out of sample: test" and stable.samples.startswith("2 held-out run(s)")


@pytest.mark.slow
def test_the_report_puts_predictions_next_to_the_hand_built_sweep(analysed: AnalysisResult) -> None:
    """The hand-built sweep (3·N² requests, 5·N coordination requests, no generations: analysis_builders.py) is
    not what the protocol does, so the coordinator's identities must fail, and the predicted tail must reach the
    size asked for."""
    html = analysed.report.read_text(encoding="utf-8")
    assert "Predicted next to observed: the scale simulation" in html
    assert f"N up to {PREDICT_TO}" in html
    assert "protocol identities hold" in html and "differs" in html
    assert {"predictions", "prediction_comparison"} <= set(analysed.tables)


@pytest.mark.slow
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
