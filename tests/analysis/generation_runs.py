"""One real herd run of each broker-side generation at N = 2, analysed once, shared by the analysis tests of the
generations (test_generations.py: the tables and the verdict; test_generation_predictions.py: the simulation's
predictions): the same runs answer both, so they are made once per session.

The eager classic protocol (kafka-python), cooperative-sticky (KIP-429, librdkafka) and the consumer group protocol
(KIP-848, librdkafka on a KRaft broker); on the given lab servers (the suite's `shared_lab_servers`), or without
them on servers each lab session starts and stops. A run the lab flags as disturbed (on a loaded machine a member
can miss its session and force another round) is made once more; the tests' protocol claims then fail on a run
disturbed twice rather than pass unchecked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from zkconsumer.lab.analysis.job import AnalysisResult, analyze
from zkconsumer.lab.runs.servers import LabServers
from zkconsumer.lab.runs.session import LabSession, select_cases
from zkconsumer.lab.runs.summary import RunSummary
from zkconsumer.lab.scenarios.loading import find_scenario

GENERATIONS = ("coordinator", "cooperative", "consumer")
N = 2


@dataclass
class GenerationRuns:
    summaries: dict[str, RunSummary]  # design -> the lab's own summary of its (last) run
    result: AnalysisResult  # the analysis of those runs, simulated up to N: no tail past the real runs


def undisturbed(summary: RunSummary) -> bool:
    """The join ran as the protocol describes it: the run completed, was counted in full, and its protocol
    identities hold."""
    return summary.completed and summary.counting_gaps is None and summary.identities_hold is True


def make_generation_runs(spark: SparkSession, out: Path, servers: LabServers | None = None) -> GenerationRuns:
    scenario = find_scenario("herd")
    chosen: dict[str, RunSummary] = {}
    for attempt in range(2):
        todo = [d for d in GENERATIONS if d not in chosen or not undisturbed(chosen[d])]
        if not todo:
            break
        session = LabSession(scenario, select_cases(scenario, str(N), 1), todo, out / f"runs-{attempt}",
                             servers=servers)
        for summary in session.run():
            chosen[summary.design] = summary
    return GenerationRuns(chosen, analyze([s.path for s in chosen.values()], out / "report", spark, predict_to=N))
