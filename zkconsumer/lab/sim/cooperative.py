"""The cooperative design, modelled: the classic protocol with librdkafka's `cooperative-sticky` assignor (KIP-429),
on coordinator.py's model of Kafka's `GroupCoordinator` (the broker is the same: only the clients' steps and the
leader's assignor differ; docs/simulation.md, "The newer protocols").

    prediction = simulate_cooperative(CoordinatorSimConfig(members=16, churn="join", seed=1))

What differs from the eager model, as librdkafka does it (src/rdkafka_cgrp.c) and the lab measured it (librdkafka
2.16 members on Apache Kafka 4.4, docs/coordinator.md):

* an incumbent told REBALANCE_IN_PROGRESS rejoins at once and revokes nothing (no commit, no revoke before the
  JoinGroup: its owned partitions go along in its subscription);
* the leader runs the sticky assignor (sticky.py) over what every member owns, and leaves out of this generation's
  assignment every partition another member still owns (Kafka's `ConsumerCoordinator` and librdkafka alike), so
  the joiner gets nothing yet;
* a member whose assignment shrank revokes just those partitions (committing first when auto-commit is on) and
  rejoins at once: a second generation, whose other members hear of it at their next heartbeat, gives the freed
  partitions to their new owners. Nothing to revoke (a join into a group with more members than partitions, or a
  leave or a crash, whose partitions are nobody's): one generation.

So a join into N costs N + 2 JoinGroup and N + 1 SyncGroup, and as many again but one JoinGroup when an incumbent
revoked (rules/identities.py `cooperative_join`).
"""

from __future__ import annotations

from collections.abc import Callable

from zkconsumer.lab.sim.coordinator import (
    CoordinatorPrediction,
    CoordinatorSimConfig,
    _Member,
    _Model,
    design_name,
    run_classic,
)
from zkconsumer.lab.sim.scheduler import MS
from zkconsumer.lab.sim.sticky import sticky_assignment

COOPERATIVE = design_name("cooperative")
# librdkafka sends a member's JoinGroups at most once a second (the `rkcg_join_intvl` interval of
# src/rdkafka_cgrp.c, fixed, not a setting; a JoinGroup answered with an error, MEMBER_ID_REQUIRED included, backs
# it off by the same second): the ~1 s the lab measured before a joiner's second JoinGroup.
JOIN_INTERVAL_MS = 1000


class _CooperativeModel(_Model):
    design = COOPERATIVE

    def __init__(self, config: CoordinatorSimConfig) -> None:
        super().__init__(config)
        self.last_join: dict[str, int] = {}  # member name -> when its latest JoinGroup left

    def join(self, member: _Member) -> None:
        """A JoinGroup no sooner than JOIN_INTERVAL_MS after the member's previous one."""
        self.notice(member)
        last = self.last_join.get(member.name)
        at = self.sched.now if last is None else max(self.sched.now, last + JOIN_INTERVAL_MS * MS)
        self.last_join[member.name] = at
        self.sched.call_at(at, lambda: super(_CooperativeModel, self).join(member))


    def initial_assignment(self) -> dict[int, str]:
        return _by_partition(sticky_assignment(self.config.partitions, self.names(), {}))

    def names(self) -> list[str]:
        return [m.name for m in self.members.values()]

    def prepare_join(self, member: _Member, then: Callable[[], None]) -> None:
        """A rejoin revokes nothing and commits nothing (KIP-429); a closing member still gives everything up
        (`leave` -> `give_up`), as the eager one does."""
        then()

    def assign(self) -> dict[int, str]:
        """The sticky target over what each member owns, less the partitions still owned by another member: those
        move in the next generation, after their owner revoked them."""
        names = self.names()
        owned = self.holdings.owned
        target = sticky_assignment(self.config.partitions, names, {name: owned.get(name, ()) for name in names})
        owners = self.holdings.owners()
        return {p: name for name, partitions in target.items() for p in partitions if owners.get(p, name) == name}

    def assigned(self, member: _Member) -> None:
        mine = self.by_member.get(member.name, set())
        owned = self.holdings.owned[member.name]
        self.take(member, mine - owned)
        lost = owned - mine
        if not lost:
            return
        # librdkafka revokes what the assignment took away and rejoins at once: the partitions can only move to
        # their new owner in a generation that knows they are free.
        member.stable = False
        self.give_up(member, lost, lambda: self.join(member))


def _by_partition(assignment: dict[str, set[int]]) -> dict[int, str]:
    return {p: name for name, partitions in assignment.items() for p in partitions}


def simulate_cooperative(config: CoordinatorSimConfig) -> CoordinatorPrediction:
    """One change of a group of librdkafka `cooperative-sticky` members on the classic protocol."""
    return run_classic(_CooperativeModel(config))
