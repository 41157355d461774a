"""The job under the real spark-submit on a real Spark standalone cluster (a master and two workers on loopback,
zkconsumer/lab/analysis/standalone.py), with the scale simulation's sweep as tasks on the workers: the tables it
writes are those of the same analysis on local[2] (the `analysed` fixture), and nothing listens beyond 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from analysis_builders import PREDICT_TO, table_rows
from listening import listening_of
from pyspark.sql import SparkSession

from zkconsumer.embedded.process import wait_until
from zkconsumer.lab.analysis.job import AnalysisResult
from zkconsumer.lab.analysis.standalone import QUICK_JVM, group_members, standalone_cluster
from zkconsumer.lab.sim.sweep import TASK_MEASURES

REPO = Path(__file__).resolve().parents[2]
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
# A task's own wall time and peak memory (sweep.TASK_MEASURES): measurements of the run, not results of the analysis.
MEASURED = {"predictions": TASK_MEASURES}
LOOPBACK_WARNING = "resolves to a loopback address"  # Spark's Utils.findLocalInetAddress, when left to guess


def _events(directory: Path) -> list[dict]:
    """The application's event log: one file (not rolled), one JSON object per line (not compressed)."""
    (log,) = [p for p in directory.iterdir() if p.is_file()]
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


class ListeningSampler:
    """Records every socket the cluster's processes and the submitted driver listen on while the job runs: the
    executors and their block managers exist only then."""

    def __init__(self, pids: Callable[[], list[int]]) -> None:
        self.seen: set[tuple[str, int]] = set()
        self._pids = pids
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="listening-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.seen |= listening_of(self._pids())

    def __enter__(self) -> ListeningSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.slow  # three daemon JVMs, a driver JVM and two executor JVMs on two cores
@pytest.mark.timeout(900)  # with the local analysis it is compared to, when no other test has run that yet
@pytest.mark.skipif(not SPARK_SUBMIT.exists(), reason=f"missing tool: spark-submit next to {sys.executable}")
def test_the_job_on_a_standalone_cluster_writes_the_local_tables(
        hand_runs, analysed: AnalysisResult, spark: SparkSession, session_lifeline, tmp_path: Path) -> None:
    out, events = tmp_path / "report", tmp_path / "events"
    events.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_GATEWAY_PORT")}
    # spark-submit starts the driver with `python3` from PATH unless told: use this interpreter (it has the deps),
    # and spark-submit starts its JVM before the job runs: only the environment binds that one to loopback
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    with standalone_cluster(workers=2, cores=1, memory="1g", work_dir=tmp_path, watch=session_lifeline.watch) as cl:
        argv = [str(SPARK_SUBMIT), "--master", cl.master_url, "--conf", "spark.ui.enabled=false",
                # a few rows per table: the JVMs' start and JIT cost most, and C1 alone halves the job's time here
                "--driver-java-options", QUICK_JVM, "--conf", f"spark.executor.extraJavaOptions={QUICK_JVM}",
                # every executor registered before the first task, so both workers take part from the start
                "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
                "--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=300s",
                "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events.as_uri()}",
                "--conf", "spark.eventLog.compress=false", "--conf", "spark.eventLog.rolling.enabled=false",
                "zkconsumer/lab/analysis/job.py", str(hand_runs.root / "split"), str(hand_runs.root / "sweep"),
                "--out", str(out), "--predict-to", str(PREDICT_TO)]
        submit = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True)  # its JVM and the Python driver: one group to stop
        try:
            with ListeningSampler(lambda: [*cl.pids(), *group_members(submit.pid)]) as sampler:
                stdout, stderr = submit.communicate(timeout=600)
        finally:
            if submit.poll() is None:
                os.killpg(submit.pid, signal.SIGKILL)
                submit.wait()
        assert submit.returncode == 0, stderr[-4000:]
        log = _events(events)
        app = next(e["App ID"] for e in log if e["Event"] == "SparkListenerApplicationStart")
        # A worker files its executor under finished only once it has seen the executor's JVM exit, which can be
        # after spark-submit returns: await that, rather than read the workers' state at once.
        finished = wait_until(lambda: all(any(x["appid"] == app for x in w["finishedexecutors"])
                                          for w in cl.worker_states()), timeout=60, interval=0.5)
        workers = cl.worker_states()
        logs = "".join(p.read_text(errors="replace") for p in cl.work_dir.rglob("*") if p.name.endswith(".log")
                       or p.name == "stderr")
    assert f"{analysed.runs} runs" in stdout
    assert f"report: {out / 'report.html'}" in stdout
    assert (out / "report.html").stat().st_size > 1_000_000  # plotly.js inline

    # The same tables as on local[2]: same names, and the same rows, as multisets, whatever their order.
    written = {p.name for p in (out / "tables").iterdir()}
    assert written == set(analysed.tables)
    for name in sorted(written):
        local_columns, local = table_rows(analysed.tables[name], MEASURED.get(name, ()))
        remote_columns, remote = table_rows(out / "tables" / name, MEASURED.get(name, ()))
        assert remote_columns == local_columns, name
        assert remote.total() == local.total(), name
        assert remote == local, name
    assert spark.read.parquet(str(out / "tables" / "predictions")).count() > 0  # the sweep ran, as tasks (below)

    # The tasks ran in executors on both workers, none in the driver.
    ran_on = {e["Task Info"]["Executor ID"] for e in log if e["Event"] == "SparkListenerTaskEnd"}
    executors = {e["Executor ID"]: e["Executor Info"]["Host"] for e in log
                 if e["Event"] == "SparkListenerExecutorAdded"}
    assert len(ran_on) == 2 and ran_on <= set(executors), (ran_on, executors)
    assert set(executors.values()) == {"127.0.0.1"}
    assert finished, workers  # each worker ran one of its executors, and has seen it end
    # Nothing listened beyond loopback: daemons, executors, their Python workers, the driver; nor did Spark guess.
    assert sampler.seen and {address for address, _ in sampler.seen} == {"127.0.0.1"}, sampler.seen
    assert LOOPBACK_WARNING not in stderr and LOOPBACK_WARNING not in logs

