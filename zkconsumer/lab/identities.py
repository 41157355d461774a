"""Protocol identities of the coordinator design, checked on every run they apply to (docs/coordinator.md).

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
"""

from __future__ import annotations

from dataclasses import dataclass


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
