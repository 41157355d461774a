"""The virtual clock (baton-passing scheduler, virtual primitives) and the latency model."""

from __future__ import annotations

import pytest

from zkconsumer.lab.sim.calibrate import parked_syncs, quantiles, undelayed
from zkconsumer.lab.sim.latency import WIRE_OP, LatencyModel, default_tables
from zkconsumer.lab.sim.scheduler import MS, Scheduler, SimulationError, VirtualEvent, VirtualLock


def test_processes_interleave_in_virtual_time_one_at_a_time():
    sched = Scheduler()
    log: list[tuple[int, str]] = []
    running: list[str] = []

    def worker(name: str, steps: list[int]) -> None:
        for step in steps:
            running.append(name)
            assert running == [name]  # nobody else runs while we hold the baton
            running.pop()
            sched.sleep(step)
            log.append((sched.now, name))

    sched.spawn("a", lambda: worker("a", [3, 3, 3]))
    sched.spawn("b", lambda: worker("b", [4, 4]))
    sched.run()
    assert log == [(3, "a"), (4, "b"), (6, "a"), (8, "b"), (9, "a")]
    assert sched.idle and not sched.live_processes()
    sched.terminate_all()


def test_virtual_event_wait_times_out_or_is_set_without_wall_clock_time():
    sched = Scheduler()
    event = VirtualEvent(sched)
    seen: list[tuple[str, bool, int]] = []

    def wait(name: str, timeout: float | None) -> None:
        seen.append((name, event.wait(timeout), sched.now))

    sched.spawn("timeout", lambda: wait("timeout", 3600.0))  # an hour, of virtual time
    sched.run()
    sched.spawn("waiter", lambda: wait("waiter", None))
    sched.call_after(5 * MS, event.set)
    sched.run()
    assert seen == [("timeout", False, 3600 * 10**9), ("waiter", True, 3600 * 10**9 + 5 * MS)]
    sched.terminate_all()


def test_virtual_lock_hands_over_in_fifo_order_and_is_reentrant_if_asked():
    sched = Scheduler()
    lock = VirtualLock(sched, reentrant=True)
    order: list[str] = []

    def holder() -> None:
        with lock, lock:  # re-entrant
            sched.sleep(10)
            order.append("holder")

    def waiter(name: str) -> None:
        with lock:
            order.append(name)

    sched.spawn("holder", holder)
    sched.spawn("w1", lambda: waiter("w1"))
    sched.spawn("w2", lambda: waiter("w2"))
    sched.run()
    assert order == ["holder", "w1", "w2"] and not lock.locked()
    sched.terminate_all()


def test_a_failing_process_fails_the_run_and_terminate_all_ends_parked_processes():
    sched = Scheduler()
    sched.spawn("boom", lambda: 1 / 0)
    with pytest.raises(SimulationError, match="ZeroDivisionError"):
        sched.run()
    parked = VirtualEvent(sched)
    cleaned: list[bool] = []

    def forever() -> None:
        try:
            parked.wait()
        finally:
            cleaned.append(True)

    process = sched.spawn("forever", forever)
    sched.run()
    assert process.alive and not cleaned
    sched.terminate_all()
    # its `finally` ran, and its greenlet is over: nothing of the run is left to switch to
    assert cleaned == [True] and not process.alive and process.glet is not None and process.glet.dead
    assert sched.live_processes() == []


def test_a_batch_draws_exactly_what_single_draws_would():
    model = LatencyModel()
    one, many = model.sampler(9, "m1"), model.sampler(9, "m1")
    singles = [one.rtt("getData") for _ in range(1000)]
    assert many.batch("getData", 1000) == singles
    assert many.rtt("getData") == one.rtt("getData")  # the streams stay in step after the batch


def test_latency_model_scale_distance_and_streams():
    base, far = LatencyModel(), LatencyModel(scale=2.0, extra_ms={"m1": 50.0})
    near = base.sampler(1, "m1").rtt("create")
    assert abs(far.sampler(1, "m1").rtt("create") - (2 * near + 100 * MS)) <= 1  # rounding of the scaled table
    assert base.sampler(1, "m1").rtt("create") != base.sampler(1, "m2").rtt("create")
    up, down = LatencyModel.constant(2.0).sampler(0, "x").split("getData")
    assert (up, down) == (MS, MS)


def test_packaged_tables_cover_every_operation_and_are_quantiles():
    zk, kafka = default_tables("zk"), default_tables("kafka")
    assert set(WIRE_OP.values()) <= set(zk)
    assert {"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "FindCoordinator", "OffsetCommit"} <= set(kafka)
    for table in (*zk.values(), *kafka.values()):
        assert len(table) == 101 and list(table) == sorted(table) and table[0] > 0


def test_calibration_helpers():
    assert quantiles([4.0, 1.0, 3.0, 2.0], points=5) == [1.0, 1.75, 2.5, 3.25, 4.0]
    assert undelayed({"scenario_definition": {"network": [{"delay_ms": 0}]}})
    assert not undelayed({"scenario_definition": {"network": [{"delay_ms": 50}]}})


def test_syncgroups_answered_with_the_leaders_were_parked():
    def sync(conn: int, sent: float, answered: float) -> dict:
        return {"type": "wire", "proto": "kafka", "kind": "response", "api_name": "SyncGroup", "conn": conn,
                "correlation_id": 7, "ts": answered, "latency_ms": (answered - sent) * 1000}

    # Two followers wait for the leader (conn 3), whose SyncGroup releases all three within a millisecond; a
    # late follower (conn 4) is answered on its own, at once.
    records = [sync(1, 10.000, 10.050), sync(2, 10.010, 10.0505), sync(3, 10.048, 10.051), sync(4, 10.2, 10.203)]
    assert parked_syncs(records) == {(1, 7), (2, 7)}
