"""Spark on this machine binds to the loopback interface only.

Left alone, Spark's driver picks the machine's first non-loopback address for its RPC and block-manager ports
(here 192.0.2.2, reachable from the network), although every executor of `local[n]` is in the same JVM. Every
place the project builds a SparkSession goes through `bind_loopback` so nothing listens beyond 127.0.0.1.

`SPARK_LOCAL_IP` is read by the launcher scripts when the JVM starts (spark-class, and Spark's own
`Utils.findLocalInetAddress`); the two settings cover a JVM that was already started (spark-submit, where the
caller must also export `SPARK_LOCAL_IP`: docs/analysis.md).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOOPBACK = "127.0.0.1"


def bind_loopback(builder: SparkSession.Builder) -> SparkSession.Builder:
    """`builder` with the driver bound to and advertised as 127.0.0.1; sets SPARK_LOCAL_IP for a JVM not yet
    started (PySpark launches it from this process's environment)."""
    os.environ["SPARK_LOCAL_IP"] = LOOPBACK
    return builder.config("spark.driver.host", LOOPBACK).config("spark.driver.bindAddress", LOOPBACK)
