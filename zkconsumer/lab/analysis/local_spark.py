"""Where the project's Spark drivers listen, and which Python their executors run.

Left alone, Spark's driver picks the machine's first non-loopback address for its RPC and block-manager ports
(here 192.0.2.2, reachable from the network) after warning that the hostname resolves to a loopback address,
although every executor of `local[n]`, and of a standalone cluster on this machine, is local. Every place the
project builds a SparkSession goes through `configure_driver`, so nothing listens beyond 127.0.0.1 unless the
caller exported `SPARK_LOCAL_IP` with another address: a driver whose executors run on other machines must be
reachable from them (docs/analysis.md, "On a Spark cluster").

`SPARK_LOCAL_IP` is read by the launcher scripts when a JVM starts (spark-class, and Spark's own
`Utils.findLocalInetAddress`); `spark.driver.host` and `spark.driver.bindAddress` cover a JVM that was already
started (spark-submit's, where the caller must export `SPARK_LOCAL_IP` too: docs/analysis.md).

Executors start their Python workers with the interpreter the driver names (`PYSPARK_PYTHON`, read by pyspark's
SparkContext when it starts; Spark's default is `python3` from PATH, which lacks the project's dependencies).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOOPBACK = "127.0.0.1"
LOCAL_MASTER = "local[2]"  # the project's default: the lab's machine has two cores
# A batch job's collector: the throughput one leaves both cores to the job, where G1's concurrent marking competes
# with it; a million lines analyse 1.3-1.7 s sooner (docs/analysis.md, "What the job costs")
COLLECTOR = "-XX:+UseParallelGC"
# The JIT's last tier (C2) later than HotSpot's default (ten times the invocation, loop and compile thresholds): a
# driver of the lab's analysis lives seconds, and C2 compiling the many warm methods of Spark's planning and code
# generation costs more CPU than their faster code gives back; the parse's and shuffle's truly hot loops still reach
# C2. Measured in docs/analysis.md, "What the job costs".
LATE_C2 = ("-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 -XX:Tier4CompileThreshold=60000 "
           "-XX:Tier4BackEdgeThreshold=400000")


def driver_address() -> str:
    """The address the driver binds and advertises: `SPARK_LOCAL_IP` when exported, else 127.0.0.1."""
    return os.environ.get("SPARK_LOCAL_IP") or LOOPBACK


def configure_driver(builder: SparkSession.Builder) -> SparkSession.Builder:
    """`builder` with the driver bound to and advertised as `driver_address()`; sets SPARK_LOCAL_IP for a JVM not
    yet started (PySpark launches it from this process's environment), and PYSPARK_PYTHON to this interpreter
    (the one with the project and its dependencies) unless the caller named the executors' Python."""
    address = driver_address()
    os.environ["SPARK_LOCAL_IP"] = address
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return builder.config("spark.driver.host", address).config("spark.driver.bindAddress", address)



def driver_java_options(extra: str | None = None) -> str:
    """The options of a driver JVM this process starts: the collector and the JIT's, then `extra`, or when None the
    class-data archive's (class_archive.py: mapped when `make jvm` built it, else nothing)."""
    if extra is None:
        from zkconsumer.lab.analysis import class_archive

        extra = class_archive.java_options()
    return f"{COLLECTOR} {LATE_C2} {extra}".strip()
