"""The migrate tables of one run in Python (zkconsumer/lab/analysis/per_run/migrate.py) against the Spark oracle's
migrate_tables (spark_oracle/migrate_tables.py) on the same records: the fixed set's real migrate run and the hand-built
two-step run of tests/lab/test_migrate_audit.py (whose answers are known), table by table, and a hand-built run of the
rules' edge cases (`build_edges`); every other run gives no tables.

The fixed set is the session's (`fixed_ref`, tests/analysis/conftest.py); the runs built here are read into a
reference of their own, joined to it (per_run_reference.joined), and Spark's tables are made in one query, once for
the module.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from analysis_builders import RunBuilder
from per_run_reference import FixedReference, joined, runs_reference, same
from pyspark.sql import SparkSession
from spark_oracle import migrate_tables as spark_migrate

from zkconsumer.lab.analysis.held import hold
from zkconsumer.lab.analysis.per_run import migrate

sys.path.append(str(Path(__file__).resolve().parents[1] / "lab"))  # tests/ has no packages: the hand-built run
from test_migrate_audit import RUN as HAND_RUN
from test_migrate_audit import build_migrate, build_plain

EDGES_RUN = "edges-zk-hand"


def build_edges(root: Path) -> RunBuilder:
    """Where the rules' edges are, each checked against Spark: two steps at one instant (step 0's window is
    empty, [3, 3)), a duplicate at the first step's very instant (not before it), stretches of equal length (the
    earliest wins), two windows of one step number (Spark joins them by step: both rows get step 2's totals) and
    a stall that only the run's end closes. Times in seconds from T0, as the others."""
    b = RunBuilder(root, "edges", "zk", scenario="migrate", partitions=3)
    b.produce(1.0, "t", 0, 0, 4)
    b.consume(1.0, "m0", "t", 0, 0, 4)  # a produce and its consume at one instant
    b.produce(1.5, "t", 1, 0, 2)
    b.consume(1.5, "m1", "t", 1, 0, 2)
    b.membership(3.0, "migrate", ["m0"], 0)
    b.membership(3.0, "migrate", ["m1"], 1)
    b.consume(3.0, "m1", "t", 1, 0, 2)  # 3 duplicates at the first step's instant: in step 1's window
    b.produce(4.0, "t", 0, 5, 9)  # t/0 waits from 4 to 6: a stall of 2 s in step 1's window
    b.consume(4.5, "m1", "t", 1, 1, 2)  # the stretches 1.5 -> 3, 3 -> 4.5, 4.5 -> 6 are all 1.5 s
    b.consume(6.0, "m0-c", "t", 0, 5, 9)
    b.membership(8.0, "migrate", ["m1"], 2)
    b.consume(8.0, "m0-c", "t", 0, 8, 9)  # 6 -> 8: the longest stretch, in step 2's first window
    b.produce(9.0, "t", 2, 0, 1)  # never consumed: t/2 waits until the run's end at 10
    b.consume(9.0, "m0-c", "t", 0, 0, 0)
    b.membership(9.5, "migrate", ["m1-c"], 2)  # step 2 again
    b.consume(9.5, "m0-c", "t", 0, 9, 9)
    b.consume(10.0, "m0-c", "t", 0, 5, 5)  # the run's last record
    b.write()
    return b


@dataclass
class Reference:
    ref: FixedReference
    spark_rows: dict[str, list[dict]]  # Spark's migrate_tables of every run, by table
    fixed_run: str  # the fixed set's migrate run

    def spark_of(self, table: str, run_id: str) -> list[dict]:
        return [r for r in self.spark_rows[table] if r["run_id"] == run_id]


@pytest.fixture(scope="module")
def reference(spark: SparkSession, fixed_ref: FixedReference, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    hand = tmp_path_factory.mktemp("per-run-migrate") / "hand"
    build_migrate(hand)
    build_plain(hand)  # a run with a membership change that is not a migrate step
    build_edges(hand)
    # the migrate tables need the records only, not the oracle's time frame of the runs built here
    ref = joined(fixed_ref, runs_reference(spark, [hand], time_frame=False))
    held = hold(spark, spark_migrate.migrate_tables(ref.records))
    [fixed_run] = [r for r in ref.run_tables if r.startswith("migrate-") and r != HAND_RUN]
    return Reference(ref, {name: held[name].rows() for name in spark_migrate.MIGRATE_TABLES}, fixed_run)


@pytest.mark.slow
@pytest.mark.parametrize("table", spark_migrate.MIGRATE_TABLES)
@pytest.mark.parametrize("which", ["fixed", "hand", "edges"])
def test_a_migrate_runs_tables_equal_sparks(reference: Reference, which: str, table: str) -> None:
    run_id = {"fixed": reference.fixed_run, "hand": HAND_RUN, "edges": EDGES_RUN}[which]
    want = reference.spark_of(table, run_id)
    assert want, f"Spark has no {table} rows of {run_id}: the comparison would prove nothing"
    found = migrate.migrate_tables(reference.ref.run_tables[run_id])[table]
    assert same(found, want, table), (found, want)


@pytest.mark.slow
def test_runs_without_a_migrate_step_give_no_tables(reference: Reference) -> None:
    migrating = {reference.fixed_run, HAND_RUN, EDGES_RUN}
    assert {r["run_id"] for rows in reference.spark_rows.values() for r in rows} == migrating
    others = [run_id for run_id in reference.ref.run_tables if run_id not in migrating]
    assert "plain-zk-hand" in others and len(others) > 1
    for run_id in others:
        assert migrate.migrate_tables(reference.ref.run_tables[run_id]) == {}, run_id


def test_consumed_ranges_count_what_was_seen_before() -> None:
    """_Consumed (the repeats' range set) against a plain set of offsets, on overlapping, touching and nested
    ranges."""
    rng = random.Random(7)
    for _ in range(200):
        consumed, seen = migrate._Consumed(), set()
        for _ in range(rng.randint(1, 12)):
            lo = rng.randint(0, 40)
            hi = lo + rng.randint(0, 8)
            offsets = set(range(lo, hi + 1))
            assert consumed.add(lo, hi) == len(offsets & seen)
            seen |= offsets
        assert sum(h - lo + 1 for lo, h in zip(consumed.los, consumed.his, strict=True)) == len(seen)
        assert all(h + 1 < lo for h, lo in zip(consumed.his, consumed.los[1:], strict=False))
