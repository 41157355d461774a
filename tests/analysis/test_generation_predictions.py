"""The simulation's predictions for the newer generations next to real runs of them: one member joining a group of
two (the herd scenario at N = 2) on the eager classic protocol, cooperative-sticky (KIP-429) and the consumer
protocol (KIP-848), each predicted with the run's own `[coordinator]` heartbeat and session (docs/analysis.md,
docs/simulation.md).

What is asserted is what the protocols fix whatever the machine's latencies: coordination requests, rounds,
partitions moved and revoked-and-given-back, and that each verdict follows from its numbers. No assertion is on
how close a predicted time comes to a measured one: that is the report's finding, not a test's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest
from generation_runs import GENERATIONS, GenerationRuns, N, undisturbed
from pyspark.sql import SparkSession

from zkconsumer.lab.analysis.closed_forms import closed_form
from zkconsumer.lab.analysis.predictions import (
    CAPACITY,
    LABELS,
    PREDICTION,
    SEEDS,
    STABLE,
    TOLERANCE,
    Comparison,
    comparable_runs,
    compare,
    coordinator_settings,
)
from zkconsumer.lab.runs.summary import RunSummary
from zkconsumer.lab.scenarios.loading import find_scenario
from zkconsumer.lab.sim.sweep import SweepPoint, predict

pytestmark = pytest.mark.slow

STICKY = ("cooperative", "consumer")
COUNT_METRICS = (LABELS["kafka_coordination_per_change"], LABELS["rounds"], LABELS["partitions_moved"],
                 LABELS["revoked_kept"])
STABLE_METRIC = LABELS["stable"]
# Not the herd scenario's 2000 ms: the consumer protocol's shipped broker default (shipped.CONSUMER_PROTOCOL), a
# setting a run of this scenario never has.
OTHER_HEARTBEAT_MS = 5000


@dataclass
class Predicted:
    summaries: dict[str, RunSummary]
    runs: list[dict[str, Any]]  # the comparable runs, as rows of the runs table
    rows: list[dict[str, Any]]  # the prediction_comparison table's prediction rows


@pytest.fixture(scope="module")
def predicted(spark: SparkSession, generation_runs: GenerationRuns) -> Predicted:
    """The generations' shared runs (generation_runs.py), analysed with the simulation up to N: no tail past the
    real runs, only the predictions compared with them."""
    result = generation_runs.result
    runs = [r.asDict() for r in result.read(spark, "runs").collect()]
    changes = [r.asDict() for r in result.read(spark, "changes").collect()]
    rows = [r.asDict() for r in result.read(spark, "prediction_comparison").filter(f"kind = '{PREDICTION}'")
            .collect()]
    return Predicted(generation_runs.summaries, comparable_runs(runs, changes), rows)


def require_undisturbed(predicted: Predicted) -> None:
    """Disturbed twice, the claims fail rather than pass unchecked (as tests/analysis/test_generations.py)."""
    disturbed = [d for d, s in predicted.summaries.items() if not undisturbed(s)]
    assert not disturbed, f"disturbed runs, twice: {disturbed}"


def row(predicted: Predicted, design: str, metric: str) -> dict[str, Any]:
    [found] = [r for r in predicted.rows if r["design"] == design and r["metric"] == metric]
    return found


def test_every_generation_is_predicted_on_time_to_stable_and_its_counts(predicted: Predicted) -> None:
    for design in GENERATIONS:
        for metric in (STABLE_METRIC, *COUNT_METRICS):
            found = row(predicted, design, metric)
            assert found["observed"] is not None and found["predicted"] is not None, (design, metric)
            assert found["members"] == N, (design, metric)
    # the consumer protocol's time row says where its heartbeat latencies come from
    assert "no KIP-848 latency table" in row(predicted, "consumer", STABLE_METRIC)["why"]


def test_predictions_are_made_with_the_runs_own_heartbeat_and_session(predicted: Predicted) -> None:
    """Every run's settings come from its manifest, and its time row names them."""
    scenario = find_scenario("herd").coordinator
    for run in predicted.runs:
        assert coordinator_settings(run) == (scenario.heartbeat_interval_ms, scenario.session_timeout_ms)
    for design in GENERATIONS:
        why = row(predicted, design, STABLE_METRIC)["why"]
        assert f"heartbeat {scenario.heartbeat_interval_ms} ms, session {scenario.session_timeout_ms} ms" in why


def test_cooperative_counts_agree_with_the_observed(predicted: Predicted) -> None:
    """The identities fix the cooperative join's coordination requests and its two generations; the simulation's
    mean over the seeds must agree within the tolerance."""
    require_undisturbed(predicted)
    coordination = row(predicted, "cooperative", LABELS["kafka_coordination_per_change"])
    form = closed_form("cooperative", coordination["process_mode"], "kafka_coordination_per_change", N,
                       coordination["partitions"])
    assert form is not None
    assert coordination["observed"] == form.value
    for metric in (LABELS["kafka_coordination_per_change"], LABELS["rounds"]):
        found = row(predicted, "cooperative", metric)
        assert found["holds"] is True, found
        assert abs(found["relative_error"]) <= TOLERANCE


def test_sticky_designs_are_predicted_to_move_the_joiners_share_and_revoke_nothing_they_keep(
        predicted: Predicted) -> None:
    require_undisturbed(predicted)
    for design in STICKY:
        moved = row(predicted, design, LABELS["partitions_moved"])
        share = moved["partitions"] / (N + 1)
        # the minimum a join can move: the joiner's fair share, and exactly that in the model and on the wire
        assert moved["observed"] in (math.floor(share), math.ceil(share)), design
        assert moved["predicted"] == moved["observed"] and moved["holds"] is True, design
        kept = row(predicted, design, LABELS["revoked_kept"])
        assert kept["observed"] == 0.0 and kept["predicted"] == 0.0 and kept["holds"] is True, design
    # the eager join is predicted to revoke and give back, so a zero there would be a wrong model, not a rule
    assert row(predicted, "coordinator", LABELS["revoked_kept"])["predicted"] > 0


def test_every_verdict_follows_from_its_numbers(predicted: Predicted) -> None:
    for found in predicted.rows:
        if found["observed"] == 0:
            assert found["holds"] is (found["predicted"] == 0), found
        elif found["relative_error"] is not None:
            error = (found["predicted"] - found["observed"]) / found["observed"]
            assert found["relative_error"] == pytest.approx(error)
            assert found["holds"] is (abs(error) <= TOLERANCE), found


def other_heartbeat(run: dict[str, Any], relabel: bool) -> list[dict[str, Any]]:
    """The sweep rows of `run`'s N and session at OTHER_HEARTBEAT_MS; `relabel` marks them as made with the run's
    own heartbeat (a prediction that took its heartbeat from elsewhere)."""
    heartbeat, session = coordinator_settings(run)
    rows = [predict(SweepPoint(members=run["members"], partitions=run["partitions"], seed=s, capacity=CAPACITY,
                               heartbeat_interval_ms=OTHER_HEARTBEAT_MS, session_timeout_ms=session))
            for s in SEEDS]
    return [{**r, "heartbeat_interval_ms": heartbeat} for r in rows] if relabel else rows


def times(rows: list[Comparison], design: str) -> Comparison:
    [found] = [r for r in rows if r.kind == PREDICTION and r.design == design and r.metric == STABLE_METRIC]
    return found


def test_a_prediction_made_with_another_heartbeat_is_not_compared_and_would_judge_otherwise(
        predicted: Predicted) -> None:
    """Predictions at another heartbeat are not compared with the run at all; passed off as the run's, they
    predict another time to stable, more than the tolerance apart on either side, so at most one of the two
    verdicts can hold whatever the run measured."""
    [run] = [r for r in predicted.runs if r["design"] == "consumer"]
    assert coordinator_settings(run)[0] != OTHER_HEARTBEAT_MS
    assert not [r for r in compare([run], other_heartbeat(run, relabel=False)) if r.kind == PREDICTION]
    own = row(predicted, "consumer", STABLE_METRIC)
    other = times(compare([run], other_heartbeat(run, relabel=True)), "consumer")
    assert other.observed == own["observed"]
    assert other.predicted > own["predicted"] * (1 + TOLERANCE) / (1 - TOLERANCE)
    assert not (other.holds and own["holds"])
    assert other.holds is (abs(other.relative_error) <= TOLERANCE)
    # the sweep's column of that time is the one STABLE names for the design
    assert other.predicted == pytest.approx(sum(r[STABLE["consumer"]] for r in other_heartbeat(run, True))
                                            / len(SEEDS))
