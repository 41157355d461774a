"""The newer protocols' models (cooperative.py: KIP-429 on the classic protocol; consumer_protocol.py: KIP-848)
beside the eager one: the protocol identities on the simulated counts, the sticky designs' minimal moves, the
stop-the-world only eager has, the consumer protocol's time bounded by heartbeats whatever N, cooperative's two
generations. Seeds are fixed here, before any run."""

from __future__ import annotations

import pytest

from zkconsumer.lab.rules.identities import broker_side_join
from zkconsumer.lab.sim.consumer_protocol import CONSUMER, simulate_consumer_protocol
from zkconsumer.lab.sim.cooperative import COOPERATIVE, simulate_cooperative
from zkconsumer.lab.sim.coordinator import EAGER, CoordinatorSimConfig, simulate_coordinator
from zkconsumer.lab.sim.sticky import minimum_moves, sticky_assignment

SEEDS = (0, 1, 2)
MODELS = {EAGER: simulate_coordinator, COOPERATIVE: simulate_cooperative, CONSUMER: simulate_consumer_protocol}


def _identities(design, n, p):
    return broker_side_join(design, n, p.requests_by_api, p.generations, p.revoked, p.epoch_zero)


@pytest.mark.parametrize("n", [1, 2, 4, 16, 100])
@pytest.mark.parametrize("design", [EAGER, CONSUMER])
def test_a_join_meets_the_protocol_identities(design, n):
    for seed in SEEDS:
        p = MODELS[design](CoordinatorSimConfig(members=n, seed=seed))
        assert p.settled and p.design == design
        assert all(i.holds for i in _identities(design, n, p)), [str(i) for i in _identities(design, n, p)]


@pytest.mark.parametrize("n", [1, 2, 4, 16, 100])
def test_cooperative_meets_its_identities_unless_a_syncgroup_met_the_next_generation(n):
    """2N + 3 JoinGroup and 2N + 2 SyncGroup over two generations, or the eager counts over one when nothing had to
    move; a SyncGroup that reaches the coordinator after a revoking member rejoined is answered
    REBALANCE_IN_PROGRESS, and its sender, if it missed a smaller assignment, costs one generation more."""
    held = 0
    for seed in SEEDS:
        p = simulate_cooperative(CoordinatorSimConfig(members=n, seed=seed))
        assert p.settled
        holds = all(i.holds for i in _identities(COOPERATIVE, n, p))
        assert holds or p.late_syncs > 0, (seed, [str(i) for i in _identities(COOPERATIVE, n, p)])
        held += holds
    assert held >= 2


def test_cooperative_needs_two_generations_and_one_when_nothing_moves():
    p = simulate_cooperative(CoordinatorSimConfig(members=10, seed=5))
    assert p.revoked and p.generations == 2 and p.late_syncs == 0
    assert p.requests_by_api["JoinGroup"] == 2 * 10 + 3 and p.requests_by_api["SyncGroup"] == 2 * 10 + 2
    crowded = simulate_cooperative(CoordinatorSimConfig(members=72, seed=5))  # 73 members, 72 partitions
    assert not crowded.revoked and crowded.generations == 1 and crowded.partitions_moved == 0


@pytest.mark.parametrize(("n", "churn"), [(1, "join"), (4, "join"), (16, "join"), (100, "join"), (8, "leave"),
                                          (8, "crash")])
@pytest.mark.parametrize("design", [COOPERATIVE, CONSUMER])
def test_the_sticky_designs_move_the_minimum_and_revoke_nothing_they_keep(design, n, churn):
    config = CoordinatorSimConfig(members=n, churn=churn, seed=3)
    p = MODELS[design](config)
    names = [f"m{i}" for i in range(n)]
    before = sticky_assignment(config.partitions, names, {})
    after = [*names, "joiner"] if churn == "join" else names[:-1]
    assert p.partitions_moved == minimum_moves(config.partitions, after, before)
    if churn == "join":
        assert p.partitions_moved == config.partitions // (n + 1)
    assert p.revoked_kept == 0


@pytest.mark.parametrize("n", [1, 4, 16])
def test_eager_revokes_everything_and_gets_back_all_but_what_moved(n):
    p = simulate_coordinator(CoordinatorSimConfig(members=n, seed=3))
    assert p.revoked_kept == p.partitions - p.partitions_moved
    sticky = simulate_cooperative(CoordinatorSimConfig(members=n, seed=3))
    # Range moves the minimum only into a group of one (36 of 72 either way).
    assert sticky.partitions_moved < p.partitions_moved if n > 1 else sticky.partitions_moved == p.partitions_moved


@pytest.mark.parametrize("n", [10, 10_000])
def test_the_consumer_protocols_time_to_stable_is_heartbeats_whatever_n(n):
    """Each incumbent learns its target at its next heartbeat, the joiner gets what was freed at its next one: two
    intervals at most, plus round trips (the commit before a revoke is the slowest, 160 ms at most)."""
    config = CoordinatorSimConfig(members=n, seed=7)
    p = simulate_consumer_protocol(config)
    assert p.settled and p.generations == 1
    assert p.time_to_stable_s <= 2 * config.heartbeat_interval_ms / 1000 + 0.5
    assert p.noticing_s + p.rebalancing_s == pytest.approx(p.time_to_stable_s)
    # No JoinGroup or SyncGroup: the join, each acknowledgement of a revoke or an assignment step.
    assert set(p.requests_by_api) <= {"FindCoordinator", "ConsumerGroupHeartbeat", "OffsetCommit"}
    assert p.heartbeats >= n  # every incumbent's next heartbeat falls inside the change
    if n >= config.partitions:
        assert p.coordination == 1 and p.partitions_moved == 0


def test_a_consumer_protocol_join_acknowledges_each_revoke_and_each_step():
    """1 join + one acknowledgement per incumbent that gave a partition up + one per step of the joiner's
    assignment, each step at one of its heartbeats."""
    p = simulate_consumer_protocol(CoordinatorSimConfig(members=4, seed=11, commit_on_revoke=False))
    losers = 4  # 72 over 5: each incumbent of 18 keeps 14 or 15
    assert losers + 2 <= p.coordination <= 1 + 2 * losers
    assert p.requests_by_api["ConsumerGroupHeartbeat"] == p.coordination + p.heartbeats


@pytest.mark.parametrize("design", [COOPERATIVE, CONSUMER])
def test_the_newer_models_are_deterministic(design):
    a = MODELS[design](CoordinatorSimConfig(members=300, seed=9)).to_dict()
    b = MODELS[design](CoordinatorSimConfig(members=300, seed=9)).to_dict()
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b


def test_cooperative_never_has_a_partition_owned_by_two_members(monkeypatch):
    """What makes cooperative-sticky incremental: a partition moves only once its owner revoked it (the leader
    leaves it out of the first generation). The consumer protocol's equivalent (the broker hands a partition out
    only once released) is not checked this way: its joiner's next heartbeat comes an interval after its join, by
    which time every incumbent has heard and released, so a join cannot show it."""
    design = COOPERATIVE
    from zkconsumer.lab.sim.holdings import Holdings

    take = Holdings.take
    doubles = []

    def checked(self, name, partitions, now):
        partitions = list(partitions)
        owners = self.owners()
        doubles.extend(p for p in partitions if owners.get(p, name) != name)
        take(self, name, partitions, now)

    monkeypatch.setattr(Holdings, "take", checked)
    p = MODELS[design](CoordinatorSimConfig(members=8, seed=13))
    assert p.partitions_moved > 0 and doubles == []
