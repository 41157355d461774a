"""The hand-built runs analysed once, shared by the tests that check their known answers, and the broker-side
generations' real runs analysed once (generation_runs.py); the fixed set and the hand-built runs read once as the
per-run tests compare them with the Spark oracle (`fixed_ref`, `hand_ref`: per_run_reference.py); the one
SparkSession of the test run is the `spark` fixture of tests/conftest.py."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from analysis_builders import PREDICT_TO, RunBuilder, split_coordinator, split_zk, sweep
from generation_runs import GenerationRuns, make_generation_runs
from per_run_reference import FixedReference, fixed_reference, runs_reference
from pyspark.sql import SparkSession

from zkconsumer.lab.analysis.job import AnalysisResult, analyze
from zkconsumer.lab.runs.servers import LabServers


@pytest.fixture(scope="module", autouse=True)
def _collect_after_module() -> Iterator[None]:
    """Python's cycle collector after each module. A DataFrame caught in a reference cycle keeps its JVM query
    alive (py4j lets go of it when the Python object goes), and with it what the query built on the driver, such as
    its broadcast tables; the generational collector may not get to them for several modules. Run in one session,
    the per-run comparisons (ownership, then counts, then migrate) otherwise left the default 1 GiB driver heap too
    full to broadcast a table ("Not enough memory to build and broadcast")."""
    yield
    gc.collect()


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
def generation_runs(spark, shared_lab_servers: LabServers, tmp_path_factory: pytest.TempPathFactory) -> GenerationRuns:
    """The broker-side generations' real herd runs at N = 2 and their analysis (generation_runs.py), made once, on
    the suite's lab servers (tests/conftest.py) rather than on servers of their own."""
    return make_generation_runs(spark, tmp_path_factory.mktemp("generations"), servers=shared_lab_servers)


@pytest.fixture(scope="session")
def fixed_ref(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> FixedReference:
    """The fixed set (fixed_set.py), extracted and read once for every per-run comparison of the session."""
    return fixed_reference(spark, tmp_path_factory.mktemp("fixed-ref"))


@pytest.fixture(scope="session")
def hand_ref(spark: SparkSession, hand_runs: HandRuns) -> FixedReference:
    """The hand-built runs (`hand_runs`), read once for every per-run comparison of the session."""
    return runs_reference(spark, [hand_runs.root / "split", hand_runs.root / "sweep"])
