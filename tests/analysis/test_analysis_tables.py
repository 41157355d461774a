"""The job's tables against hand-built runs whose answers are known (tests/analysis/analysis_builders.py)."""

from __future__ import annotations

import pytest
from analysis_builders import BAD_LINES, SWEEP, T0, TORN
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from zkconsumer.lab.analysis.job import AnalysisResult
from zkconsumer.lab.runs.summary import summarize

pytestmark = pytest.mark.slow


def table(result: AnalysisResult, spark: SparkSession, name: str) -> DataFrame:
    return result.read(spark, name)


def test_every_table_is_written(analysed: AnalysisResult) -> None:
    assert set(analysed.tables) == {"runs", "changes", "wire_counts", "rebalances", "herd_fit", "ownership_intervals",
                                    "overlaps", "stop_the_world", "delivery", "delivery_gaps", "trace_errors",
                                    "contention", "predictions", "prediction_comparison"}
    assert analysed.runs == 2 + 2 * len(SWEEP)
    assert analysed.report.is_file()


def test_two_members_owning_one_partition_for_1_5_s(analysed, spark, hand_runs) -> None:
    overlaps = table(analysed, spark, "overlaps").select(
        "run_id", "tp", "member_a", "member_b", (F.col("start") - T0).alias("start"), (F.col("end") - T0).alias("end"),
        "overlap_s", "after_expiry", "change_index")
    expected = spark.createDataFrame(
        [(hand_runs.zk.run_id, "t/0", "m0", "m2", 12.5, 14.0, 1.5, True, 1)],
        "run_id string, tp string, member_a string, member_b string, start double, end double, overlap_s double, "
        "after_expiry boolean, change_index int")
    assertDataFrameEqual(overlaps, expected, rtol=1e-6)


def test_ownership_intervals_end_at_stops_revocations_and_kills(analysed, spark, hand_runs) -> None:
    iv = table(analysed, spark, "ownership_intervals").filter(F.col("run_id") == hand_runs.coordinator.run_id)
    got = iv.select("member", "tp", (F.col("start") - T0).alias("start"), (F.col("end") - T0).alias("end"),
                    "end_reason")
    expected = spark.createDataFrame([
        ("m0", "t/0", 5.0, 13.0, "revoked"), ("m1", "t/1", 5.0, 13.1, "revoked"),
        ("m0", "t/0", 15.0, 22.0, "revoked"), ("m2", "t/1", 15.1, 20.0, "killed"),
        ("m0", "t/0", 23.0, 25.5, "revoked"), ("m1", "t/1", 23.0, 25.5, "revoked")],
        "member string, tp string, start double, end double, end_reason string")
    assertDataFrameEqual(got, expected, rtol=1e-6)


def test_change_windows_latency_and_unowned_time(analysed, spark, hand_runs) -> None:
    changes = table(analysed, spark, "changes").select(
        "run_id", "change_index", "action", (F.col("window_start") - T0).alias("window_start"),
        (F.col("window_end") - T0).alias("window_end"), "stable_s", "convergence_s", "unowned_partition_s")
    zk, co = hand_runs.zk.run_id, hand_runs.coordinator.run_id
    expected = spark.createDataFrame([
        # the leave's window starts at the leaver's stop (19.8), before the orchestrator's record (20.0)
        (zk, 1, "join", 12.0, 19.8, 1.0, 2.0, 0.4),
        (zk, 2, "leave", 19.8, 25.0, 0.5, 0.5, 0.6),
        (co, 1, "join", 12.0, 20.0, 4.0, 3.1, 4.0),
        (co, 2, "kill", 20.0, 25.0, 3.5, 3.0, 4.0)],
        "run_id string, change_index int, action string, window_start double, window_end double, stable_s double, "
        "convergence_s double, unowned_partition_s double")
    assertDataFrameEqual(changes.filter(F.col("run_id").isin(zk, co)), expected, rtol=1e-6, atol=1e-6)


def test_stop_the_world_per_member(analysed, spark, hand_runs) -> None:
    stw = table(analysed, spark, "stop_the_world").filter(F.col("run_id").isin(hand_runs.zk.run_id,
                                                                                hand_runs.coordinator.run_id))
    got = stw.select("design", "member", (F.col("stopped_ts") - T0).alias("stopped"), "pause_s", "partitions_before",
                     "change_index")
    expected = spark.createDataFrame([
        ("zk", "m1", 12.2, 0.4, 1, 1), ("zk", "m0", 14.0, 6.3, 1, 1),  # m0 restarted with nothing until 20.3
        ("zk", "m2", 19.8, None, 1, 2), ("zk", "m1", 20.1, 0.1, 1, 2),  # m2 left: never restarted
        ("zk", "m0", 25.5, None, 1, None), ("zk", "m1", 25.5, None, 1, None),  # shutdown, after done
        ("coordinator", "m0", 13.0, 2.0, 1, 1), ("coordinator", "m1", 13.1, 9.9, 1, 1),
        ("coordinator", "m0", 22.0, 1.0, 1, 2),
        ("coordinator", "m0", 25.5, None, 1, None), ("coordinator", "m1", 25.5, None, 1, None)],
        "design string, member string, stopped double, pause_s double, partitions_before long, change_index int")
    assertDataFrameEqual(got, expected, rtol=1e-6, atol=1e-6)


def test_duplicates_and_gaps_by_offset_audit(analysed, spark, hand_runs) -> None:
    delivery = table(analysed, spark, "delivery").select(
        "run_id", "topic", "partition", "expected_basis", "expected_offsets", "consumed_offsets", "distinct_offsets",
        "duplicates", "missing", "gap_ranges")
    zk, co = hand_runs.zk.run_id, hand_runs.coordinator.run_id
    expected = spark.createDataFrame([
        (zk, "t", 0, "produce", 100, 105, 95, 10, 5, 1),  # 30..39 twice; 80..84 never
        (zk, "t", 1, "produce", 50, 50, 50, 0, 0, 0),
        (co, "t", 0, "max_consumed", 15, 20, 15, 5, 0, 0),
        (co, "t", 1, "max_consumed", 10, 7, 7, 0, 3, 1)],  # 0..2 never consumed
        "run_id string, topic string, partition int, expected_basis string, expected_offsets long, "
        "consumed_offsets long, distinct_offsets long, duplicates long, missing long, gap_ranges long")
    assertDataFrameEqual(delivery, expected)
    gaps = table(analysed, spark, "delivery_gaps").select("run_id", "partition", "gap_first", "gap_last", "gap_size")
    assertDataFrameEqual(gaps, spark.createDataFrame([(zk, 0, 80, 84, 5), (co, 1, 0, 2, 3)],
                                                     "run_id string, partition int, gap_first long, gap_last long, "
                                                     "gap_size long"))


def test_bad_and_torn_lines_are_counted_not_dropped(analysed, spark, hand_runs) -> None:
    errors = table(analysed, spark, "trace_errors")
    m1 = errors.filter((F.col("run_id") == hand_runs.zk.run_id) & (F.col("file") == "m1.jsonl")).collect()
    assert len(m1) == 1
    row = m1[0]
    assert row["bad_lines"] == len(BAD_LINES) + 1  # and the torn last line
    assert row["lines"] == len(hand_runs.zk.lines["m1"]) + 1
    assert row["first_bad_line"] == hand_runs.first_bad_line
    assert row["first_bad_text"] == "{not json at all"
    assert row["first_bad_reason"] == BAD_LINES["{not json at all"]
    assert errors.filter(F.col("run_id") != hand_runs.zk.run_id).agg(F.sum("bad_lines")).first()[0] == 0
    assert analysed.bad_lines == len(BAD_LINES) + 1
    # every line of every file is accounted for
    written = sum(len(b.lines[f]) + (f in b.torn) for b in (hand_runs.zk, hand_runs.coordinator, *hand_runs.sweep)
                  for f in b.lines)
    assert analysed.trace_lines == written
    assert TORN not in BAD_LINES


def test_each_kind_of_bad_line_gets_its_reason(spark) -> None:
    from zkconsumer.lab.analysis.readers import line_reasons

    good = '{"v":1,"design":"zk","type":"phase","ts":1700000000.0,"phase":"setup","extra":{"ignored":true}}'
    lines = [*BAD_LINES, TORN, "", good]
    assert line_reasons(spark, lines) == [*BAD_LINES.values(), "not JSON (torn or garbled line)", "empty line", None]


def test_per_change_counts(analysed, spark, hand_runs) -> None:
    changes = table(analysed, spark, "changes").select(
        "run_id", "change_index", "zk_requests", "zk_notifications", "kafka_coordination", "kafka_heartbeats",
        "rebalance_notices", "kafka_requests", "rebalances", "attempts", "failed_attempts", "conflicts",
        "rebalance_failures", "session_expiries")
    zk, co = hand_runs.zk.run_id, hand_runs.coordinator.run_id
    expected = spark.createDataFrame([
        (zk, 1, 8, 2, 0, 0, 0, 0, 4, 5, 2, 1, 1, 1),
        (zk, 2, 2, 0, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0),
        (co, 1, 0, 0, 6, 2, 2, 13, 1, 0, 0, 0, 0, 0),
        (co, 2, 0, 0, 3, 0, 0, 3, 1, 0, 0, 0, 0, 0)],
        "run_id string, change_index int, zk_requests long, zk_notifications long, kafka_coordination long, "
        "kafka_heartbeats long, rebalance_notices long, kafka_requests long, rebalances long, attempts long, "
        "failed_attempts long, conflicts long, rebalance_failures long, session_expiries long")
    assertDataFrameEqual(changes.filter(F.col("run_id").isin(zk, co)), expected)


def test_wire_counts_by_member_and_operation(analysed, spark, hand_runs) -> None:
    counts = (table(analysed, spark, "wire_counts")
              .filter((F.col("run_id") == hand_runs.zk.run_id) & (F.col("change_index") == 1))
              .select("member", "category", "op", "code", "count"))
    expected = spark.createDataFrame([
        ("m0", "request", "getData", 4, 3), ("m0", "request", "getChildren", 8, 2), ("m2", "request", "create", 1, 3),
        ("m0", "notification", "watch event", None, 1), ("m1", "notification", "watch event", None, 1)],
        "member string, category string, op string, code int, count long")
    assertDataFrameEqual(counts, expected)


def test_per_run_counts_are_the_lab_summary(analysed, spark, hand_runs) -> None:
    runs = {r["run_id"]: r for r in table(analysed, spark, "runs").collect()}
    for b in (hand_runs.zk, hand_runs.coordinator, *hand_runs.sweep):
        s, r = summarize(b.path), runs[b.run_id]
        assert (r["changes"], r["rebalances"], r["attempts"], r["conflicts"], r["failed_attempts"],
                r["rebalance_failures"], r["zk_requests"], r["zk_notifications"], r["kafka_coordination"],
                r["kafka_heartbeats"], r["time_to_stable_s"]) == (
            s.changes, s.rebalances, s.attempts, s.conflicts, s.failed_attempts, s.failures, s.zk_requests,
            s.zk_notifications, s.kafka_coordination, s.kafka_heartbeats, s.time_to_stable), b.run_id
    zk = runs[hand_runs.zk.run_id]
    assert zk["servers"] == "ZooKeeper 3.9.5, Apache Kafka 3.9.2"  # from the manifest, for the report's note
    assert zk["zk_requests"] == 11 and zk["zk_requests_per_change"] == pytest.approx(5.5)
    assert zk["overlaps"] == 1 and zk["overlap_s"] == pytest.approx(1.5)
    assert zk["duplicates"] == 10 and zk["missing"] == 5 and zk["expected_basis"] == "produce"
    assert zk["bad_lines"] == len(BAD_LINES) + 1


def test_polynomial_fits_of_a_quadratic_and_a_linear_sweep(analysed, spark) -> None:
    """3·N² ZooKeeper requests, 5·N coordination requests, N notifications (analysis_builders.sweep): the fits give
    those coefficients back with no residual."""
    fits = {(r["design"], r["metric"]): r for r in table(analysed, spark, "herd_fit").collect()}
    assert set(fits) == {("zk", "zk_requests_per_change"), ("zk", "zk_notifications_per_change"),
                         ("coordinator", "kafka_coordination_per_change"),
                         ("coordinator", "rebalance_notices_per_change")}
    quadratic = fits["zk", "zk_requests_per_change"]
    assert quadratic["degree"] == 2 and quadratic["runs"] == len(SWEEP) and quadratic["sizes"] == len(SWEEP)
    assert (quadratic["a2"], quadratic["a1"], quadratic["a0"]) == (
        pytest.approx(3.0), pytest.approx(0.0, abs=1e-6), pytest.approx(0.0, abs=1e-6))
    assert quadratic["rms_residual"] == pytest.approx(0.0, abs=1e-6)
    assert quadratic["max_abs_residual"] == pytest.approx(0.0, abs=1e-6)
    linear = fits["coordinator", "kafka_coordination_per_change"]
    assert linear["degree"] == 1 and linear["a2"] is None
    assert linear["a1"] == pytest.approx(5.0) and linear["a0"] == pytest.approx(0.0, abs=1e-6)
    assert fits["zk", "zk_notifications_per_change"]["a1"] == pytest.approx(1.0)
    assert all(r["scenario"] == "herd-hand" for r in fits.values())  # one N only: the split runs have no fit
