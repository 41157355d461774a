"""One SparkSession for every analysis test (local[2], no UI, 2 shuffle partitions: a session costs ~9 s to
start), and the hand-built runs analysed once, shared by the tests that check their known answers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from analysis_builders import RunBuilder, split_coordinator, split_zk, sweep
from pyspark.sql import SparkSession

from zkconsumer.lab.analysis import AnalysisResult, analyze


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = (SparkSession.builder.master("local[2]").appName("zkconsumer-analysis-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


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
    return analyze([hand_runs.root / "split", hand_runs.root / "sweep"], tmp_path_factory.mktemp("report"), spark)
