"""What one simulated ZooKeeper-design change is: the settled group, the change, the latencies and capacity.

A leaf of the simulation (zk_sim.py runs it, zk_members.py builds each member's consumer config from it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zkconsumer.lab.members.naming import name_width
from zkconsumer.lab.sim.capacity import Capacity
from zkconsumer.lab.sim.latency import LatencyModel
from zkconsumer.modes import mode_properties

CHURN_KINDS = ("join", "leave", "crash")


@dataclass(frozen=True)
class ZkSimConfig:
    """One simulated change. Defaults are the lab's herd scenario (72 partitions, 500 ms backoff, 20 retries)."""

    members: int = 8  # N: the settled group before the change
    partitions: int = 72
    churn: str = "join"
    seed: int = 101
    latency: LatencyModel = field(default_factory=LatencyModel)
    shortcut: bool = True  # the identical-view shortcut (views.py); False executes every registration read
    group: str = "sim"
    topic: str = "herd"
    streams: int = 1
    brokers: int = 1
    session_timeout_ms: int = 6000
    backoff_ms: int = 500
    max_retries: int = 20
    strategy: str = "range"
    # An opt-in mode of zkconsumer/modes.py (or a '+' combination, e.g. "incremental+sticky") every member runs;
    # "sticky" sets the strategy (`assignment_strategy`). The default is 0.8.2 byte for byte.
    mode: str = "faithful"
    # A new member's two chroot checks at connect. The lab's members connect to the broker's ZooKeeper root
    # (a real broker registers there), so they send none.
    chroot: bool = False
    joiners: int = 1  # join: how many new members, `join_gap_ms` apart (overlapping changes: stale views)
    join_gap_ms: int = 0
    settle_gap_ms: int = 1000
    horizon_s: float = 24 * 3600.0  # give up (settled=False) if events remain this long after the change
    # Queues at the servers, the lab's proxy and the members' hosts (capacity.py); None: a request costs its
    # round trip however many are in flight. With one, pass its `wire()` as `latency` (the tables' spread at an
    # unloaded network's level), or the loaded tables count the load twice.
    capacity: Capacity | None = None

    @property
    def properties(self) -> dict[str, str]:
        """The consumer properties of `mode`."""
        return mode_properties(self.mode)

    @property
    def assignment_strategy(self) -> str:
        """The strategy every member runs: the mode's, else `strategy`."""
        return self.properties.get("partition.assignment.strategy", self.strategy)

    @property
    def name_width(self) -> int:
        """Member names padded as the lab pads them (members/naming.py), so both assign in the same order."""
        return name_width(self.members + self.joiners - 1)

    def __post_init__(self) -> None:
        mode_properties(self.mode)  # a ValueError naming the modes there are
        if self.churn not in CHURN_KINDS:
            raise ValueError(f"churn must be one of {CHURN_KINDS}, got {self.churn!r}")
        if self.joiners < 1 or self.join_gap_ms < 0:
            raise ValueError("joiners must be >= 1 and join_gap_ms >= 0")
        if self.members < (0 if self.churn == "join" else 1):
            raise ValueError(f"a {self.churn} needs a settled group with members, got {self.members}")


__all__ = ["CHURN_KINDS", "ZkSimConfig"]
