"""The hand-built runs analysed once, shared by the tests that check their known answers, and the broker-side
generations' real runs analysed once (generation_runs.py); the one SparkSession of the test run is the `spark`
fixture of tests/conftest.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from analysis_builders import PREDICT_TO, RunBuilder, split_coordinator, split_zk, sweep
from generation_runs import GenerationRuns, make_generation_runs
from pyspark.sql import SparkSession

from zkconsumer.lab.analysis.job import AnalysisResult, analyze


@dataclass
class HandRuns:
    root: Path
    zk: RunBuilder
    coordinator: RunBuilder
    sweep: list[RunBuilder]
    first_bad_line: int


@pytest.fixture(scope="session")
def hand_runs(tmp_path_factory: pytest.TempPathFactory) -> HandRuns:
    root = tmp_path_factory.mktemp("runs")
    zk, first_bad = split_zk(root / "split")
    coordinator = split_coordinator(root / "split")
    return HandRuns(root, zk, coordinator, sweep(root / "sweep"), first_bad)


@pytest.fixture(scope="session")
def analysed(spark: SparkSession, hand_runs: HandRuns, tmp_path_factory: pytest.TempPathFactory) -> AnalysisResult:
    return analyze([hand_runs.root / "split", hand_runs.root / "sweep"], tmp_path_factory.mktemp("report"), spark,
                   predict_to=PREDICT_TO)


@pytest.fixture(scope="session")
def generation_runs(spark, tmp_path_factory: pytest.TempPathFactory) -> GenerationRuns:
    """The broker-side generations' real herd runs at N = 2 and their analysis (generation_runs.py), made once."""
    return make_generation_runs(spark, tmp_path_factory.mktemp("generations"))
