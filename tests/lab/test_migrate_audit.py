"""The migrate audit (zkconsumer/lab/analysis/migrate_tables.py, docs/migrate.md "The audit") in its Spark form
(tests/analysis/spark_oracle/migrate_tables.py, which per_run/migrate.py is held equal to) on a hand-built two-step
run whose answers are worked out by hand: duplicates before and inside each step's window, a gap, a stretch without
consumption that began before each step, and a partition stall that spans the step boundary.

The real run of tests/lab/test_migrate.py can only be checked for consistency; here every number is known. The run
is written as the lab writes it (RunBuilder, tests/analysis/analysis_builders.py) with a second run that has no
migrate step, which the audit must leave out. It uses the test run's one SparkSession (tests/conftest.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from zkconsumer.lab.analysis.readers import load_runs, read_traces

sys.path.append(str(Path(__file__).resolve().parents[1] / "analysis"))  # tests/ has no packages: builders, oracle
from analysis_builders import T0, RunBuilder
from spark_oracle.migrate_tables import migrate_tables

pytestmark = pytest.mark.slow


def build_migrate(root: Path) -> RunBuilder:
    """ZooKeeper members m0 and m1 on topic t (partitions 0 and 1), replaced by m0-c at 5 s (step 0) and m1-c at
    12 s (step 1); the run's last record is at 20 s. Windows: step 0 [5, 12), step 1 [12, 20] (the last window
    holds its end). Times are seconds from T0; every consume record's time is listed so that the stretches
    between them (the group's dead time) can be read off: 2, 2.5, 3 | 6, 6.5, 7, 9.5, 11 | 14.2, 15.5, 17, 18, 20."""
    b = RunBuilder(root, "migrate", "zk", scenario="migrate")
    b.phase(0, "churn")
    # before the first step: t/0 0..9 read twice in part (8, 9): 2 duplicates before the first step
    b.produce(1.0, "t", 0, 0, 9)
    b.produce(1.0, "t", 1, 0, 9)
    b.consume(2.0, "m0", "t", 0, 0, 9)
    b.consume(2.5, "m1", "t", 1, 0, 9)
    b.consume(3.0, "m0", "t", 0, 8, 9)
    # step 0: m0 -> m0-c. Both halves read t/0: m0-c from 5 (5..9 again), the ZooKeeper half's m1 from 12
    b.membership(5.0, "migrate", ["m0"], 0)
    b.produce(5.5, "t", 0, 10, 19)
    b.produce(5.5, "t", 1, 10, 19)
    b.consume(6.0, "m1", "t", 1, 10, 19)
    b.consume(6.5, "m0-c", "t", 0, 5, 19)  # 5..9 read before: 5 duplicates
    b.consume(7.0, "m1", "t", 0, 12, 19)  # 12..19 read at 6.5: 8 duplicates
    b.produce(8.0, "t", 1, 20, 29)
    b.consume(9.5, "m1", "t", 1, 20, 24)  # 25..29 left waiting: t/1 stalls from 9.5 to its next consume at 15.5
    b.produce(10.0, "t", 0, 20, 24)
    b.consume(11.0, "m0-c", "t", 0, 20, 24)
    # step 1: m1 -> m1-c, which re-reads t/0 from 18
    b.membership(12.0, "migrate", ["m1"], 1)
    b.produce(13.0, "t", 0, 25, 29)
    b.produce(13.0, "t", 1, 30, 34)
    b.consume(14.2, "m1-c", "t", 0, 18, 29)  # 18..24 read before: 7 duplicates
    b.consume(15.5, "m0-c", "t", 1, 28, 34)  # 25..27 are never consumed: the gap
    b.produce(16.0, "t", 0, 30, 39)
    b.consume(17.0, "m0-c", "t", 0, 30, 39)
    b.consume(18.0, "m1-c", "t", 1, 30, 31)  # 2 duplicates
    b.consume(20.0, "m1-c", "t", 1, 32, 32)  # 1 duplicate, at the window's (and the run's) end
    b.write()
    return b


def build_plain(root: Path) -> RunBuilder:
    """A run without a migrate step (a join), with a duplicate and a gap of its own: no row of the audit's."""
    b = RunBuilder(root, "plain", "zk")
    b.produce(1.0, "t", 0, 0, 9)
    b.membership(2.0, "join", ["m2"], 0)
    b.consume(3.0, "m0", "t", 0, 0, 4)
    b.consume(4.0, "m2", "t", 0, 4, 7)
    b.write()
    return b


@pytest.fixture(scope="module")
def audited(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    root = tmp_path_factory.mktemp("migrate-audit")
    build_migrate(root)
    build_plain(root)
    traces = read_traces(spark, load_runs([root]))
    assert traces.bad_lines == 0
    tables = migrate_tables(traces.records)
    order = {"migrate_steps": ["run_id", "step"], "migrate_totals": ["run_id"],
             "migrate_partitions": ["run_id", "topic", "partition"]}
    return {name: [r.asDict() for r in tables[name].orderBy(*order[name]).collect()] for name in order}


RUN = "migrate-zk-hand"


def test_each_step_window_counts_what_was_planted(audited: dict[str, list[dict]]) -> None:
    first, second = audited["migrate_steps"]  # exactly two rows: the plain run has none
    assert (first["run_id"], first["step"], first["member"]) == (RUN, 0, "m0")
    assert first["start_ts"] == pytest.approx(T0 + 5) and first["window_end"] == pytest.approx(T0 + 12)
    # [5, 12): produced t/0 10..19, t/1 10..19, t/1 20..29, t/0 20..24 = 10 + 10 + 10 + 5;
    # consumed 10 (6.0) + 15 (6.5) + 8 (7.0) + 5 (9.5) + 5 (11.0); duplicates 5 (6.5) + 8 (7.0)
    assert (first["produced"], first["consumed"], first["duplicates"]) == (35, 43, 13)
    assert (second["run_id"], second["step"], second["member"]) == (RUN, 1, "m1")
    assert second["start_ts"] == pytest.approx(T0 + 12) and second["window_end"] == pytest.approx(T0 + 20)
    # [12, 20]: produced t/0 25..29, t/1 30..34, t/0 30..39 = 5 + 5 + 10; consumed 12 (14.2) + 7 (15.5) + 10 (17.0)
    # + 2 (18.0) + 1 (20.0, the run's last record: the last window holds its end); duplicates 7 + 2 + 1
    assert (second["produced"], second["consumed"], second["duplicates"]) == (20, 32, 10)


def test_dead_time_is_the_longest_stretch_ending_in_the_window_counted_whole(audited: dict[str, list[dict]]) -> None:
    first, second = audited["migrate_steps"]
    # step 0: the stretch 3 -> 6 began before the step and counts whole (3.0 s); cut at the step it would be 1.0 and
    # the window's longest would be 7 -> 9.5 (2.5 s)
    assert first["dead_time_s"] == pytest.approx(3.0)
    assert (first["dead_from"], first["dead_to"]) == (pytest.approx(T0 + 3), pytest.approx(T0 + 6))
    # step 1: 11 -> 14.2 (3.2 s) began in step 0's window but ends in step 1's; cut at the step it would be 2.2 and
    # the window's longest would be 18 -> 20 (2.0 s)
    assert second["dead_time_s"] == pytest.approx(3.2)
    assert (second["dead_from"], second["dead_to"]) == (pytest.approx(T0 + 11), pytest.approx(T0 + 14.2))


def test_partition_stall_is_clipped_to_the_window(audited: dict[str, list[dict]]) -> None:
    first, second = audited["migrate_steps"]
    # t/1 waits from 9.5 (25..29 left) to 15.5 (its next consume): 12 - 9.5 = 2.5 s in step 0's window (longer
    # than t/0's 5.5 -> 6.5 and 10 -> 11, and t/1's 5.5 -> 6 and 8 -> 9.5) and 15.5 - 12 = 3.5 s in step 1's
    # (longer than t/0's 13 -> 14.2 and 16 -> 17); the whole stall is 6.0 s
    assert first["partition_stall_s"] == pytest.approx(2.5)
    assert second["partition_stall_s"] == pytest.approx(3.5)


def test_totals_and_partitions_are_the_whole_runs_audit(audited: dict[str, list[dict]]) -> None:
    [total] = audited["migrate_totals"]
    assert total["run_id"] == RUN
    # produced: t/0 0..39 (40) + t/1 0..34 (35); duplicates 2 before + 13 + 10; missing t/1 25..27
    assert (total["produced"], total["duplicates"], total["missing"], total["partitions"]) == (75, 25, 3, 2)
    assert (total["duplicates_before"], total["steps"]) == (2, 2)
    assert total["dead_time_s"] == pytest.approx(3.0 + 3.2) and total["max_dead_time_s"] == pytest.approx(3.2)
    assert total["partition_stall_s"] == pytest.approx(3.5)
    p0, p1 = audited["migrate_partitions"]  # the plain run's t/0 is not among them
    # t/0: read 10 + 2 + 15 + 8 + 5 + 12 + 10 = 62 offsets, 40 distinct, by m0, m0-c, m1 and m1-c
    assert (p0["run_id"], p0["partition"], p0["expected_offsets"], p0["consumed_offsets"], p0["duplicates"],
            p0["missing"], p0["gap_ranges"], p0["members"]) == (RUN, 0, 40, 62, 22, 0, 0, 4)
    # t/1: read 10 + 10 + 5 + 7 + 2 + 1 = 35 offsets, 32 distinct (25..27 never), by m1, m0-c and m1-c
    assert (p1["run_id"], p1["partition"], p1["expected_offsets"], p1["consumed_offsets"], p1["duplicates"],
            p1["missing"], p1["gap_ranges"], p1["members"]) == (RUN, 1, 35, 35, 3, 3, 1, 3)
