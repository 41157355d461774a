"""The lab's counting rules (zkconsumer/lab/rules/protocol.py) answer the same in Python (summary, ZooKeeper driver,
simulation) and as Spark columns (the herd tables), on every value the traces carry, a missing one included."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pyspark.sql import Column, SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from rebalance.listener_types import AttemptResult
from zkconsumer.lab.lesson.coord_steps import GROUP_APIS
from zkconsumer.lab.rules.protocol import (
    backs_off,
    backs_off_column,
    conflict_column,
    coordination_api_column,
    coordination_request_column,
    failed_attempt_column,
    is_conflict,
    is_coordination_api,
    is_coordination_request,
    is_failed_attempt,
    is_heartbeat,
)

pytestmark = pytest.mark.slow

RESULTS = [str(r) for r in AttemptResult] + [None]  # None: an attempt_end record without a result
APIS = [*GROUP_APIS, "Metadata", "Fetch", "ListOffsets", "Produce", None]


def _spark_answers(spark: SparkSession, values: list[str | None],
                   build: Callable[[str], Column]) -> dict[str | None, bool]:
    df = spark.createDataFrame([(v,) for v in values], StructType([StructField("v", StringType())]))
    return {row["v"]: row["answer"] for row in df.select("v", build("v").alias("answer")).collect()}


def test_failed_attempt_and_conflict_agree_in_python_and_spark(spark: SparkSession) -> None:
    failed = _spark_answers(spark, RESULTS, failed_attempt_column)
    conflict = _spark_answers(spark, RESULTS, conflict_column)
    assert failed == {r: is_failed_attempt(r) for r in RESULTS}
    assert conflict == {r: is_conflict(r) for r in RESULTS}
    # What the rule says, so agreement on a wrong rule cannot pass: the listener stops retrying on ok and
    # no_brokers; everything else, a member stopping mid-rebalance included, is a failed attempt.
    assert [r for r in RESULTS if not failed[r]] == ["ok", "no_brokers"]
    assert [r for r in RESULTS if conflict[r]] == ["conflict"]


def test_backoff_agrees_in_python_and_spark(spark: SparkSession) -> None:
    answers = _spark_answers(spark, RESULTS, backs_off_column)
    assert answers == {r: backs_off(r) for r in RESULTS}
    # The listener sleeps after a conflict or an error; a closing member (stopped) gives up without sleeping.
    assert [r for r in RESULTS if answers[r]] == ["conflict", "error"]


def test_coordination_apis_agree_in_python_and_spark(spark: SparkSession) -> None:
    answers = _spark_answers(spark, APIS, coordination_api_column)
    assert answers == {api: is_coordination_api(api) for api in APIS}
    assert sorted(api for api in APIS if answers[api]) == ["JoinGroup", "LeaveGroup", "SyncGroup"]


def test_consumer_protocol_coordination_requests_agree_in_python_and_spark(spark: SparkSession) -> None:
    # (api, member epoch, owned): a join (epoch 0), leaves (-1, -2 static), an acknowledgement (owned sent), a
    # plain heartbeat (nothing changed), and the classic APIs, which carry neither field
    cases = [("ConsumerGroupHeartbeat", 0, 0), ("ConsumerGroupHeartbeat", -1, None),
             ("ConsumerGroupHeartbeat", -2, None), ("ConsumerGroupHeartbeat", 7, 3),
             ("ConsumerGroupHeartbeat", 7, None), ("ConsumerGroupHeartbeat", None, None),
             ("JoinGroup", None, None), ("Heartbeat", None, None), ("Fetch", None, None)]
    schema = "api string, epoch int, owned int"
    df = spark.createDataFrame(cases, schema)
    rows = df.select("api", "epoch", "owned",
                     coordination_request_column("api", "epoch", "owned").alias("answer")).collect()
    spark_answers = [r["answer"] for r in rows]
    python_answers = [is_coordination_request(*case) for case in cases]
    assert spark_answers == python_answers == [True, True, True, True, False, False, True, False, False]
    assert [is_heartbeat(*case) for case in cases] == [False, False, False, False, True, True, False, True, False]
