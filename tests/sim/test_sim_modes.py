"""The opt-in modes in the simulation (`ZkSimConfig(mode=...)`, docs/simulation.md "Opt-in modes"): members run a
mode of zkconsumer/modes.py through the consumer properties the lab gives them, and the identical-view shortcut
stays exact with them. The sticky assignor with incremental ownership: one join into 16 (72 partitions) moves the
minimum and costs what the lab and the in-memory benchmark measured."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from zkconsumer.lab.rules.join_cost import original_join_requests
from zkconsumer.lab.sim import ZkSimConfig, simulate_zk

MEASURED = {"wall_s", "batches", "counted_reads", "executed_reads", "events"}
STICKY = "incremental+sticky"
# The lab's join into 16 with incremental+sticky members, each of 3 repeats beside the original (docs/modes.md,
# "The sticky assignor at N = 16"): no owner conflict in any.
LAB_STICKY_JOIN_16 = 202


def predictions(**kwargs: object) -> dict:
    return {k: v for k, v in simulate_zk(ZkSimConfig(**kwargs)).to_dict().items() if k not in MEASURED}


def test_a_mode_that_is_not_one_is_refused():
    with pytest.raises(ValueError, match="unknown mode 'stiky'"):
        ZkSimConfig(mode="incremental+stiky")
    assert ZkSimConfig().properties == {} and ZkSimConfig(mode="sticky").assignment_strategy == "sticky"


@pytest.mark.parametrize("seed", range(8))
def test_one_sticky_join_into_16_moves_the_minimum_and_costs_what_the_lab_measured(seed):
    p = simulate_zk(ZkSimConfig(members=16, partitions=72, churn="join", seed=seed, mode=STICKY))
    assert p.settled and p.failures == 0
    assert p.partitions_moved == 72 // 17 == 4  # the joiner's share, one from each of four 5-partition members
    if p.conflicts == 0:
        assert p.requests == LAB_STICKY_JOIN_16 and p.requests_by_op["create"] == 17 + 4 + 2
        assert p.requests / original_join_requests(17, 72) <= 0.3
    else:  # the joiner claimed before an incumbent released (no claim on deletion): a rollback and a retry
        assert p.conflicts == 1 and p.requests == 221


def test_the_in_memory_benchmark_costs_what_the_simulation_predicts():
    """benchmarks/bench_sticky_join.py (real threads, the in-memory ZooKeeper, no virtual time) measures one of
    the simulation's outcomes: its joiner loses the owner-node race to an incumbent's release (221 requests) or not
    (202, the lab's)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from bench_sticky_join import INCREMENTAL, one_join
    from bench_sticky_join import STICKY as STICKY_PROPERTIES

    spent, moved = one_join(16, 72, {**STICKY_PROPERTIES, **INCREMENTAL})
    simulated = {simulate_zk(ZkSimConfig(members=16, churn="join", seed=s, mode=STICKY)).requests for s in range(8)}
    assert simulated == {LAB_STICKY_JOIN_16, 221}
    assert moved == 4 and spent in simulated


@pytest.mark.parametrize("churn", ["join", "leave", "crash"])
@pytest.mark.parametrize("mode", [STICKY, "incremental", "sticky"])
def test_the_shortcut_gives_what_full_execution_gives_with_a_mode(mode, churn):
    """Incremental members read only the registrations of members they have not seen, sticky members create and
    read their view's record: the shortcut counts and times exactly what executing every read does."""
    shortcut = predictions(members=16, churn=churn, seed=101, mode=mode)
    assert shortcut == predictions(members=16, churn=churn, seed=101, mode=mode, shortcut=False)
    assert shortcut["settled"]


def test_a_sticky_leave_and_crash_move_only_the_partitions_of_the_member_that_went():
    for churn in ("leave", "crash"):
        p = simulate_zk(ZkSimConfig(members=16, churn=churn, seed=101, mode=STICKY))
        assert p.settled and p.partitions_moved == 4  # the newest member's 4 of 72 (⌊72/16⌋ = 4, 8 members hold 5)
