"""The ZooKeeper design on a virtual clock: the real connector, listener and assignor, counted against the
closed form of docs/join-cost.md, the members' own accounting, and the wire counts of real lab runs."""

from __future__ import annotations

import dataclasses

import pytest
from lab_fixture import lab_runs

from zkconsumer.lab.rules.join_cost import join_notifications, join_requests
from zkconsumer.lab.sim import LatencyModel, ZkSimConfig, simulate_zk

# A seed whose join into N = 1 has no owner conflict: without queues (capacity=None) 9 of seeds 0-19 race the
# incumbent's releases at N = 1 (the lab's joins into one do every time: tests/sim/test_capacity.py models why).
CALM = 0
# What changes between two runs of the same configuration: the wall clock and how much the shortcut saved.
MEASURED = {"wall_s", "batches", "counted_reads", "executed_reads", "events"}


def predictions(**kwargs: object) -> dict:
    return {k: v for k, v in simulate_zk(ZkSimConfig(**kwargs)).to_dict().items() if k not in MEASURED}


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_one_join_executed_read_by_read_costs_exactly_the_formula(n):
    p = simulate_zk(ZkSimConfig(members=n, partitions=72, seed=CALM, shortcut=False, chroot=False))
    assert p.settled and p.conflicts == 0 and p.attempts == n + 1
    assert p.requests == join_requests(n + 1, 72) == p.accounted_requests
    assert p.notifications == join_notifications(n + 1)
    assert p.counted_reads == 0 and p.executed_reads == (n + 1) * (n + 2)  # everyone's and its own, per attempt


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_one_join_equals_the_real_lab_wire_counts(n):
    """The lab's members connect to ZooKeeper's root (where the broker registers): no chroot checks, the closed
    form itself. (The lab's join into N = 1 raced the incumbent's releases, as 4 of 5 did: see the next test.)"""
    real = lab_runs("zk")[n]
    p = simulate_zk(ZkSimConfig(members=n, partitions=real["partitions"], seed=CALM, shortcut=n > 8))
    assert p.conflicts == 0 == real["conflicts"]
    assert p.requests == real["zk_requests"] == join_requests(n + 1, real["partitions"])
    assert p.requests_by_op == real["zk_by_op"]
    assert p.notifications == real["zk_notifications"] == n


def test_a_join_into_one_that_races_the_incumbent_costs_what_the_lab_measured():
    """Into a group of one, the joiner often claims a partition the incumbent has not released yet (every such join
    measured here; without queues 9 of the first 20 seeds): one conflict, a rollback, a backoff and a
    second attempt. Whichever partitions collided, that costs the same number of requests in both."""
    real = lab_runs("zk")[1]
    assert real["conflicts"] == 1
    raced = [p for seed in range(20) if (p := simulate_zk(ZkSimConfig(members=1, partitions=real["partitions"],
                                                                       seed=seed))).conflicts == 1]
    assert raced, "no seed of 20 raced the incumbent"
    assert {p.requests for p in raced} == {real["zk_requests"]} and real["zk_requests"] > join_requests(2, 72)
    # Which partitions collided decides how the rollback splits between deletes and reads, nothing else.
    def shape(by_op: dict) -> tuple:
        return by_op["create"], by_op["getChildren"], by_op["delete"] + by_op["getData"]

    assert {shape(p.requests_by_op) for p in raced} == {shape(real["zk_by_op"])}


def test_a_slow_incumbent_makes_the_joiner_conflict_and_every_request_is_accounted():
    """The incumbent's range shrinks when m2 joins; 100 ms away it still owns those partitions when the near
    joiner claims them: conflict, rollback, backoff (500 ms, virtual), and a later attempt that succeeds."""
    latency = LatencyModel(extra_ms={"m0": 100.0, "m1": 100.0})
    p = simulate_zk(ZkSimConfig(members=2, seed=7, latency=latency))
    assert p.settled
    assert p.conflicts >= 1 and p.failed_attempts == p.conflicts and p.failures == 0
    assert p.attempts == 3 + p.failed_attempts
    assert p.requests == p.accounted_requests > join_requests(3, 72)
    assert p.time_to_stable_s > 0.5 * p.conflicts  # each failed attempt waited out the backoff
    again = simulate_zk(ZkSimConfig(members=2, seed=7, latency=latency))
    assert (again.conflicts, again.requests, again.time_to_stable_s) == (p.conflicts, p.requests, p.time_to_stable_s)


def test_the_same_seed_gives_the_same_prediction_and_another_seed_another_timing():
    first = predictions(members=6, seed=3)
    assert predictions(members=6, seed=3) == first
    other = predictions(members=6, seed=4)
    assert other["requests"] == first["requests"]  # no conflicts either way: the count is the formula's
    assert other["time_to_stable_s"] != first["time_to_stable_s"]


@pytest.mark.parametrize("churn", ["join", "leave", "crash"])
def test_the_identical_view_shortcut_predicts_what_full_execution_does(churn):
    """Same draws, same nanoseconds: the shortcut only stops executing what it can prove identical."""
    full = simulate_zk(ZkSimConfig(members=16, churn=churn, shortcut=False))
    short = simulate_zk(ZkSimConfig(members=16, churn=churn, shortcut=True))
    assert {k: v for k, v in full.to_dict().items() if k not in MEASURED} == {
        k: v for k, v in short.to_dict().items() if k not in MEASURED}
    assert full.executed_reads == short.executed_reads + short.counted_reads  # each read executed or counted
    assert full.counted_reads == 0 and short.executed_reads == short.attempts == short.batches  # own reads only


def test_a_view_change_during_a_batch_falls_back_to_reading_one_by_one():
    """A second member joins while the group re-reads the first one's arrival: batches in flight are cut at the
    change and the rest is read for real, and the prediction still equals full execution."""
    kwargs = {"members": 16, "joiners": 2, "join_gap_ms": 100}
    short = simulate_zk(ZkSimConfig(shortcut=True, **kwargs))
    assert short.executed_reads > short.attempts and short.settled
    assert predictions(shortcut=True, **kwargs) == predictions(shortcut=False, **kwargs)


def test_a_leave_costs_a_session_close_and_one_rebalance_of_each_remaining_member():
    n = 4
    p = simulate_zk(ZkSimConfig(members=n, churn="leave"))
    assert p.settled and p.conflicts == 0
    assert p.requests_by_op["closeSession"] == 1 and "exists" not in p.requests_by_op
    assert p.notifications == n - 1 and p.rebalances == n - 1
    assert p.requests == p.accounted_requests
    assert p.requests_by_op["create"] == 72  # every partition claimed again by the three that stay


def test_a_crash_is_noticed_only_when_the_session_expires():
    config = ZkSimConfig(members=4, churn="crash")
    p = simulate_zk(config)
    assert p.settled and "closeSession" not in p.requests_by_op
    assert p.notifications == 3 and p.requests == p.accounted_requests
    assert p.time_to_stable_s > config.session_timeout_ms / 1000
    leave = simulate_zk(dataclasses.replace(config, churn="leave"))
    assert leave.time_to_stable_s < p.time_to_stable_s - config.session_timeout_ms / 1000 + 1


def test_latency_scale_stretches_time_not_counts():
    slow = simulate_zk(ZkSimConfig(members=4, seed=CALM, latency=LatencyModel(scale=4.0)))
    fast = simulate_zk(ZkSimConfig(members=4, seed=CALM))
    assert slow.requests == fast.requests and slow.conflicts == fast.conflicts == 0
    assert slow.time_to_stable_s > 3 * fast.time_to_stable_s


def test_invalid_configurations_are_refused():
    with pytest.raises(ValueError, match="churn"):
        ZkSimConfig(churn="restart")
    with pytest.raises(ValueError, match="needs a settled group"):
        ZkSimConfig(members=0, churn="leave")
