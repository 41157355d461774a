"""The class-data archive's training run (class_archive.py): an analysis of synthetic runs of both designs, with
the simulation, in a driver JVM that writes the classes it loaded to the file given when it exits.

    python -m zkconsumer.lab.analysis.class_training OUT.jsa

Run by `class_archive.build` as a child process, which publishes OUT only after this process (and so its JVM)
has exited.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from pyspark import SparkContext

from zkconsumer.lab.analysis.class_archive import QUIET
from zkconsumer.lab.analysis.job import analyze, session
from zkconsumer.lab.analysis.synthetic import generate

EVENTS = 40_000
RUNS = 10
PREDICT_TO = 64
_EXIT_TIMEOUT_S = 300


def train(out: Path) -> None:
    """The training analysis: synthetic runs of both designs, with the simulation, in a JVM that writes the
    classes it loaded to `out` when it exits."""
    with tempfile.TemporaryDirectory(prefix="zkconsumer-cds-") as scratch:
        root = Path(scratch)
        generate(root / "runs", EVENTS, RUNS)
        spark = session("zkconsumer-class-archive", java_options=f"-XX:ArchiveClassesAtExit={out} {QUIET}")
        analyze([root / "runs"], root / "out", spark, predict_to=PREDICT_TO)
        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None)
        spark.stop()
        if gateway is not None:
            gateway.shutdown()
        if proc is not None:
            # Spark's gateway server exits when its stdin closes (PythonGatewayServer); the archive is written as it
            # does, so wait for it here rather than leave it to this process's exit
            proc.stdin.close()
            proc.wait(timeout=_EXIT_TIMEOUT_S)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m zkconsumer.lab.analysis.class_training OUT.jsa")
    train(Path(sys.argv[1]))
