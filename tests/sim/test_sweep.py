"""The sweep: one Spark task per parameter combination, one row of predictions for both designs."""

from __future__ import annotations

import pytest

from zkconsumer.lab.rules.join_cost import join_requests
from zkconsumer.lab.sim import ROW_FIELDS, SweepPoint, grid, predict, sweep
from zkconsumer.lab.sim.sweep import TASK_MEASURES, share


def test_grid_is_the_cartesian_product_of_a_dict_or_the_given_points():
    points = grid({"members": [2, 4], "churn": ["join", "crash"]})
    assert len(points) == 4 and SweepPoint(members=4, churn="crash") in points
    assert grid([{"members": 3}, SweepPoint(members=3), {"members": 5, "latency_scale": 2.0}]) == [
        SweepPoint(members=3), SweepPoint(members=5, latency_scale=2.0)]
    with pytest.raises(ValueError, match="unknown sweep parameter"):
        grid({"members": [1], "group_size": [2]})


def test_a_row_holds_both_designs_predictions():
    row = predict(SweepPoint(members=2, seed=0))
    assert list(row) == [name for name, _ in ROW_FIELDS]
    assert row["zk_requests"] == join_requests(3, 72) == row["zk_accounted_requests"]
    assert row["zk_get_data"] + row["zk_get_children"] + row["zk_create"] + row["zk_delete"] + row["zk_exists"] == (
        row["zk_requests"])
    assert row["coord_coordination"] == 2 * 2 + 3 and row["coord_join_group"] == 4
    assert row["zk_settled"] and row["coord_settled"]


@pytest.mark.parametrize(("n", "churn"), [(4, "join"), (16, "join"), (8, "leave"), (1, "crash")])
def test_both_designs_move_the_same_partitions(n, churn):
    """Both run the range assignor over the same members in the same order (ZooKeeper: by thread id, the
    coordinator's leader: by member id), so one change moves the same partitions; the herd is in the requests."""
    row = predict(SweepPoint(members=n, churn=churn, seed=0))
    assert row["zk_partitions_moved"] == row["coord_partitions_moved"] > 0


@pytest.mark.slow
def test_a_tiny_spark_sweep_returns_one_row_per_combination(spark):
    params = {"members": [1, 3], "churn": ["join", "leave"], "latency_scale": [1.0, 2.0]}
    rows = sweep(params, spark).collect()
    assert len(rows) == 8
    assert {(r.members, r.churn, r.latency_scale) for r in rows} == {
        (n, c, s) for n in (1, 3) for c in ("join", "leave") for s in (1.0, 2.0)}
    for row in rows:
        assert row.zk_settled and row.coord_settled
        assert row.zk_requests == row.zk_accounted_requests
        if row.churn == "join":
            assert row.coord_coordination == 2 * row.members + 3
            assert row.zk_notifications == row.members
        else:
            assert row.coord_leave_group == 1 and row.zk_close_session == 1
    one = predict(SweepPoint(members=3, churn="leave", latency_scale=2.0))
    spark_row = next(r for r in rows if (r.members, r.churn, r.latency_scale) == (3, "leave", 2.0)).asDict()
    measured = set(TASK_MEASURES)  # the task's own wall time and memory, not the simulated group's
    assert {k: v for k, v in spark_row.items() if k not in measured} == {
        k: v for k, v in one.items() if k not in measured}


def test_shared_tasks_deal_every_point_once_and_balance_by_group_size():
    points = grid({"members": [1024, 512, 256, 64, 64, 16, 4, 1], "seed": [0]}) + grid(
        {"members": [64, 16, 4, 1], "seed": list(range(1, 12))})
    points.sort(key=lambda p: -p.members)  # as sweep() orders them
    shares = share(points, 4)
    assert sorted((p.members, p.seed) for s in shares for p in s) == sorted((p.members, p.seed) for p in points)
    costs = [sum(p.members + 1 for p in s) for s in shares]
    assert costs == sorted(costs, reverse=True)  # the dearest task first
    # the largest point is a task on its own; the rest are within one point of each other (LPT's bound)
    assert [p.members for p in shares[0]] == [1024]
    assert max(costs[1:]) - min(costs[1:]) <= 513
    for s in shares:
        assert [p.members for p in s] == sorted((p.members for p in s), reverse=True)
    assert share(points[:2], 4) == [[points[0]], [points[1]]]  # fewer points than tasks: no empty task
    with pytest.raises(ValueError, match="at least one task"):
        sweep([SweepPoint(members=1)], None, tasks=0)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_sweep_in_shared_tasks_gives_the_rows_of_a_task_per_point(spark):
    params = {"members": [1, 2, 3], "seed": [0, 1]}
    measured = set(TASK_MEASURES)

    context, tracker = spark.sparkContext, spark.sparkContext.statusTracker()

    def rows(tasks):
        context.setJobGroup(f"sweep-{tasks}", "a sweep", interruptOnCancel=False)
        try:
            found = [{k: v for k, v in r.asDict().items() if k not in measured}
                     for r in sweep(params, spark, tasks=tasks).collect()]
        finally:
            context.setLocalProperty("spark.jobGroup.id", None)
        stages = [stage for job in tracker.getJobIdsForGroup(f"sweep-{tasks}")
                  for stage in tracker.getJobInfo(job).stageIds]
        return sorted(found, key=lambda r: (r["members"], r["seed"])), sum(
            tracker.getStageInfo(stage).numTasks for stage in stages)

    (shared, shared_tasks), (alone, alone_tasks) = rows(2), rows(None)
    assert len(shared) == 6 and shared == alone
    assert (shared_tasks, alone_tasks) == (2, 6)
