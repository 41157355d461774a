"""The sweep: one Spark task per parameter combination, one row of predictions for both designs."""

from __future__ import annotations

import pytest

from zkconsumer.lab.join_cost import join_requests
from zkconsumer.lab.sim import ROW_FIELDS, SweepPoint, grid, predict, sweep
from zkconsumer.lab.sim.sweep import TASK_MEASURES


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
