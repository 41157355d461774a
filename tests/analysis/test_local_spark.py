"""Spark listens on the loopback interface only (zkconsumer/lab/analysis/local_spark.py)."""

from __future__ import annotations

import os
import sys

import pytest
from listening import listening_addresses, listening_of
from pyspark.sql import SparkSession

from zkconsumer.lab.analysis.job import session

pytestmark = pytest.mark.slow


def test_the_driver_binds_to_loopback(spark: SparkSession) -> None:
    assert spark.conf.get("spark.driver.host") == "127.0.0.1"
    assert spark.conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert listening_addresses(int(spark.conf.get("spark.driver.port"))) == {"127.0.0.1"}
    # every port of the JVM, the block manager's and whatever else Spark opened, not only the RPC port asked about
    jvm = spark.sparkContext._gateway.proc.pid
    ports = listening_of([jvm])
    assert int(spark.conf.get("spark.driver.port")) in {port for _, port in ports}
    assert {address for address, _ in ports} == {"127.0.0.1"}, ports
    assert spark.sparkContext.pythonExec == sys.executable  # the executors' Python workers: this interpreter
    assert session() is spark  # the job reuses the active session, which was built the same way
