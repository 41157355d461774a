"""The job as a script under the real spark-submit, the way it is meant to be run from the repository root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"


@pytest.mark.slow  # a second JVM and Python driver: about 20-40 s
@pytest.mark.skipif(not SPARK_SUBMIT.exists(), reason=f"no spark-submit next to {sys.executable}")
def test_spark_submit_runs_the_job(hand_runs, tmp_path: Path) -> None:
    out = tmp_path / "report"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_GATEWAY_PORT")}
    # spark-submit starts the driver with `python3` from PATH unless told: use this interpreter (it has the deps)
    # and spark-submit starts its JVM before the job runs: only the environment binds that one to loopback
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run(
        [str(SPARK_SUBMIT), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
         "zkconsumer/lab/analysis/job.py", str(hand_runs.zk.path), str(hand_runs.coordinator.path), "--out", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "2 runs" in proc.stdout
    assert f"report: {out / 'report.html'}" in proc.stdout
    assert (out / "report.html").stat().st_size > 1_000_000  # plotly.js inline
    for name in ("runs", "changes", "overlaps", "delivery", "trace_errors"):
        assert any((out / "tables" / name).glob("*.parquet")), name
