"""Protocol identities of the broker-side designs, checked on every run they apply to (docs/coordinator.md,
docs/join-cost.md).

The classic protocol with an eager assignor (design "coordinator"):

For one member joining a settled group of N kafka-python members on Apache Kafka's GroupCoordinator, the requests
of the change follow from the protocol alone, whatever the timing:

- JoinGroup = N + 2: every incumbent rejoins once; the joiner sends two (the first is answered
  MEMBER_ID_REQUIRED, KIP-394, and carries the id the second one uses);
- SyncGroup = N + 1: one per member of the new generation;
- LeaveGroup = 0, FindCoordinator = 1 (the joiner's; the incumbents know their coordinator);
- generations = 1.

Heartbeats grow with time rather than with the change, OffsetFetch with how many members gain partitions (the
range assignor's shifts), and OffsetCommit with the periodic auto-commits that fall in the window (N when none
does: each incumbent commits before it gives its partitions up), so none of them is an identity. A run whose
counts differ is flagged, not adjusted: a dropped join or a second generation is what these checks exist to show.

The classic protocol with cooperative-sticky (KIP-429, design "cooperative"): the first generation is the eager
one's (N + 2 JoinGroup, N + 1 SyncGroup), but nobody revokes before it; an incumbent that the new assignment takes
partitions from revokes just those afterwards and rejoins at once, which starts a second generation that every
member of the group joins (N + 1 JoinGroup and N + 1 SyncGroup more). So with a revoke: JoinGroup = 2·N + 3,
SyncGroup = 2·N + 2, generations = 2; without one (nothing had to move), the eager counts and 1 generation.

The consumer group protocol (KIP-848, designs "consumer" and "consumer-java": the protocol's, whichever client):
no JoinGroup, SyncGroup or LeaveGroup at all; the joiner sends exactly one ConsumerGroupHeartbeat with member
epoch 0, and the group epoch advances exactly once (the
coordinator computes the new target assignment once; the members then reconcile towards it in later heartbeats,
each answered with that epoch). How many heartbeats a change costs is not an identity: each member sends one per
interval, plus one each time its owned partitions change (the acknowledgement of a revoke or an assignment), and
the joiner's assignment arrives in as many steps as the incumbents take to release what it gets.
"""

from __future__ import annotations

from dataclasses import dataclass

from zkconsumer.lab.designs import is_consumer_protocol


@dataclass(frozen=True)
class Identity:
    name: str
    expected: int
    observed: int

    @property
    def holds(self) -> bool:
        return self.expected == self.observed

    def __str__(self) -> str:
        return f"{self.name} {self.observed}" + ("" if self.holds else f"≠{self.expected}")


def single_join(joins: int, other_changes: int) -> bool:
    """The identities describe a window with exactly one change: one member joining."""
    return joins == 1 and other_changes == 0


def broker_side_join(design: str, incumbents: int, by_api: dict[str, int], rounds: int, revoked: bool,
                     epoch_zero: int) -> list[Identity]:
    """The identities of one join on `design` (see the module docstring); `rounds` are generations (classic) or
    group epochs (consumer protocol) formed in the window, `revoked` whether an incumbent revoked anything,
    `epoch_zero` the ConsumerGroupHeartbeat requests with member epoch 0."""
    if design == "cooperative":
        return cooperative_join(incumbents, by_api, rounds, revoked)
    if is_consumer_protocol(design):
        return consumer_protocol_join(by_api, rounds, epoch_zero)
    return coordinator_join(incumbents, by_api, rounds)


def cooperative_join(incumbents: int, by_api: dict[str, int], generations: int, revoked: bool) -> list[Identity]:
    n, second = incumbents, int(revoked)
    return [
        Identity("JoinGroup", n + 2 + second * (n + 1), by_api.get("JoinGroup", 0)),
        Identity("SyncGroup", n + 1 + second * (n + 1), by_api.get("SyncGroup", 0)),
        Identity("LeaveGroup", 0, by_api.get("LeaveGroup", 0)),
        Identity("generations", 1 + second, generations),
    ]


def consumer_protocol_join(by_api: dict[str, int], epochs: int, epoch_zero: int) -> list[Identity]:
    return [
        Identity("JoinGroup+SyncGroup+LeaveGroup", 0, sum(by_api.get(a, 0) for a in ("JoinGroup", "SyncGroup",
                                                                                    "LeaveGroup"))),
        Identity("epoch-0 heartbeats", 1, epoch_zero),
        Identity("group epochs", 1, epochs),
    ]


def coordinator_join(incumbents: int, by_api: dict[str, int], generations: int) -> list[Identity]:
    """The identities of one join into a settled group of `incumbents`, against the window's counts."""
    n = incumbents
    return [
        Identity("JoinGroup", n + 2, by_api.get("JoinGroup", 0)),
        Identity("SyncGroup", n + 1, by_api.get("SyncGroup", 0)),
        Identity("LeaveGroup", 0, by_api.get("LeaveGroup", 0)),
        Identity("FindCoordinator", 1, by_api.get("FindCoordinator", 0)),
        Identity("generations", 1, generations),
    ]


@dataclass(frozen=True)
class RequestIdentity(Identity):
    """A ZooKeeper design's requests of one join against its closed form (docs/join-cost.md), with what connection
    losses in the window sent again (rules/reconnects.py). Without a loss it is the plain formula; with losses it reads
    "formula F + re-sent R after N connection losses = measured M" and holds iff F + R = M, and only where the
    wire's reconnections equal the members' connection losses (else the extra requests are not attributed)."""

    formula: int = 0
    resent: int = 0
    losses: int = 0
    reconnections: int = 0

    @property
    def attributed(self) -> bool:
        """Whether the check names connection losses (any on the wire or in the events)."""
        return bool(self.losses or self.reconnections or self.resent)

    @property
    def holds(self) -> bool:
        return self.expected == self.observed and self.reconnections == self.losses

    def __str__(self) -> str:
        if not self.attributed:
            return super().__str__()
        sign = "=" if self.expected == self.observed else "≠"
        text = (f"{self.name}: formula {self.formula} + re-sent {self.resent} after {self.losses} connection "
                f"loss{'es' if self.losses != 1 else ''} {sign} measured {self.observed}")
        if self.reconnections != self.losses:
            text += f" (the wire saw {self.reconnections} reconnections: not attributed)"
        return text


def zk_join(formula: int, measured: int, resent: int = 0, losses: int = 0, reconnections: int = 0,
            name: str = "ZooKeeper requests") -> RequestIdentity:
    """The request identity of one join on a ZooKeeper design: `formula` the closed form (rules/join_cost.py),
    `measured`
    the wire's requests of the window, `resent`, `losses` and `reconnections` what reconnects.count found there."""
    return RequestIdentity(name, formula + resent, measured, formula=formula, resent=resent, losses=losses,
                           reconnections=reconnections)
