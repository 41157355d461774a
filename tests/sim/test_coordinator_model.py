"""The coordinator model: Kafka's GroupCoordinator state machine, counted per membership change and checked
against the real lab's coordinator runs (herd scenario: one member joins a settled group of N)."""

from __future__ import annotations

import pytest
from lab_fixture import lab_runs

from zkconsumer.lab.sim import CoordinatorSimConfig, simulate_coordinator
from zkconsumer.lab.sim.coordinator import kafka_latency

MODELLED_APIS = ("FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit")


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32])
def test_a_join_into_n_costs_2n_plus_3_coordination_requests_as_in_the_lab(n):
    """JoinGroup + SyncGroup per incumbent; the joiner's MEMBER_ID_REQUIRED round trip, its JoinGroup with the id
    and its SyncGroup; one heartbeat per incumbent tells it of the rebalance, after which it commits."""
    p = simulate_coordinator(CoordinatorSimConfig(members=n))
    assert p.settled and p.generations == 1
    assert p.coordination == 2 * n + 3 == lab_runs("coordinator")[n]["kafka_coordination"]
    assert p.requests_by_api == {"FindCoordinator": 1, "JoinGroup": n + 2, "SyncGroup": n + 1, "Heartbeat": n,
                                 "OffsetCommit": n}
    real = lab_runs("coordinator")[n]  # the lab's members commit before they rejoin, too
    counted = [api for api in MODELLED_APIS if api != "Heartbeat"]
    assert {api: real["kafka_by_api"].get(api, 0) for api in counted} == {api: p.requests_by_api.get(api, 0)
                                                                          for api in counted}
    # The lab counts every heartbeat of its churn window (they go on after the group settled); the model only
    # those that tell an incumbent of the rebalance, which the wire shows as REBALANCE_IN_PROGRESS answers.
    assert real["kafka_errors"]["Heartbeat/REBALANCE_IN_PROGRESS"] == p.requests_by_api["Heartbeat"] == n
    assert real["kafka_errors"]["JoinGroup/MEMBER_ID_REQUIRED"] == 1


@pytest.mark.parametrize("n", [1, 2, 9])
def test_a_leave_costs_one_leavegroup_and_a_join_and_sync_per_remaining_member(n):
    p = simulate_coordinator(CoordinatorSimConfig(members=n, churn="leave"))
    assert p.settled
    assert p.coordination == 2 * (n - 1) + 1
    assert p.requests_by_api.get("LeaveGroup") == 1
    assert p.requests_by_api.get("JoinGroup", 0) == p.requests_by_api.get("SyncGroup", 0) == n - 1
    assert p.generations == (1 if n > 1 else 0)  # the last member leaving empties the group: no generation


def test_a_crash_costs_no_leavegroup_and_waits_for_the_session_timeout():
    config = CoordinatorSimConfig(members=8, churn="crash")
    p = simulate_coordinator(config)
    assert p.settled and p.coordination == 2 * 7 and "LeaveGroup" not in p.requests_by_api
    # Noticed between session - heartbeat interval and session after the crash, plus a heartbeat to rejoin.
    assert (config.session_timeout_ms - config.heartbeat_interval_ms) / 1000 < p.time_to_stable_s
    assert p.time_to_stable_s < (config.session_timeout_ms + 2 * config.heartbeat_interval_ms) / 1000


def test_a_join_completes_when_every_member_has_rejoined_not_on_a_timer():
    """Kafka's event-driven completion: about one heartbeat interval (the last incumbent to hear of it), not a
    fraction of the session timeout; a longer interval delays it, a longer session timeout does not."""
    base = simulate_coordinator(CoordinatorSimConfig(members=16))
    assert 0.5 < base.time_to_stable_s < 2.5
    slower = simulate_coordinator(CoordinatorSimConfig(members=16, heartbeat_interval_ms=4000))
    assert slower.time_to_stable_s > base.time_to_stable_s
    longer_session = simulate_coordinator(CoordinatorSimConfig(members=16, session_timeout_ms=45000))
    assert longer_session.time_to_stable_s == base.time_to_stable_s


def test_a_join_into_an_empty_group_waits_the_initial_rebalance_delay():
    p = simulate_coordinator(CoordinatorSimConfig(members=0))
    assert p.settled and p.coordination == 3  # MEMBER_ID_REQUIRED, JoinGroup with the id, SyncGroup
    assert p.time_to_stable_s >= 3.0


def test_the_model_is_deterministic_and_scales():
    a = simulate_coordinator(CoordinatorSimConfig(members=2000, seed=5)).to_dict()
    b = simulate_coordinator(CoordinatorSimConfig(members=2000, seed=5)).to_dict()
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b and a["coordination"] == 4003


def test_latency_scale_stretches_the_round_trips():
    fast = simulate_coordinator(CoordinatorSimConfig(members=8, heartbeat_interval_ms=100))
    slow = simulate_coordinator(CoordinatorSimConfig(members=8, heartbeat_interval_ms=100,
                                                     latency=kafka_latency(scale=20.0)))
    assert slow.coordination == fast.coordination
    assert slow.time_to_stable_s > fast.time_to_stable_s
