"""What the members of a broker-side model hold, and what one change did to it: partitions moved, revoked and given
back, and the time partitions had no owner. Shared by every broker-side model (coordinator.py, cooperative.py,
consumer_protocol.py) so the three count these alike (docs/simulation.md, "What a change costs the members").

A partition is owned from the moment its member takes it (a SyncGroup answer, a ConsumerGroupHeartbeat answer)
until that member revokes it (before a rejoin, a LeaveGroup, or in answer to a smaller assignment) or dies.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from zkconsumer.lab.sim.scheduler import S


@dataclass(frozen=True)
class Outcome:
    """One change, from the members' ownership."""

    partitions_moved: int  # owner at the change differs from the owner once stable (None counts as an owner)
    revoked_kept: int  # revoked during the change by a member that owned them again once stable
    unowned_partition_s: float  # seconds without an owner, summed over the partitions, up to the end
    revoked_members: frozenset[str]  # members that revoked anything during the change


@dataclass(frozen=True)
class TimeSplit:
    """Time to stable split as the lab splits it (zkconsumer/lab/rules/noticing.py)."""

    noticing_s: float | None  # change -> the last incumbent hearing of it (0 when none had to)
    rebalancing_s: float | None  # the rest


def split(change_at: int, finished: int | None, noticed: Iterable[int]) -> TimeSplit:
    """`finished` None: the change did not settle, nothing to split. A notice after `finished` cannot be."""
    if finished is None:
        return TimeSplit(None, None)
    last = max((t for t in noticed if t <= finished), default=change_at)
    return TimeSplit((last - change_at) / S, (finished - last) / S)


class Holdings:
    def __init__(self) -> None:
        self.owned: dict[str, set[int]] = defaultdict(set)
        self.counting = False
        self._initial: dict[int, str] = {}
        self._unowned_since: dict[int, int] = {}
        self._unowned_ns = 0
        self._revoked: dict[str, set[int]] = defaultdict(set)

    def settle(self, assignment: Mapping[str, Iterable[int]]) -> None:
        """The settled group before the change: member name -> partitions."""
        for name, partitions in assignment.items():
            self.owned[name] = set(partitions)

    def start(self) -> None:
        """The change: from now on revokes, takes and unowned time count."""
        self.counting = True
        self._initial = self.owners()

    def owners(self) -> dict[int, str]:
        return {p: name for name, partitions in self.owned.items() for p in partitions}

    def revoke(self, name: str, partitions: Iterable[int], now: int, *, lost: bool = False) -> None:
        """`name` stops consuming `partitions`; nobody owns them until a member takes them. A dead member's are
        `lost`: unowned as well, but not revoked (it cannot get them back)."""
        mine = self.owned[name]
        for p in list(partitions):
            mine.discard(p)
            if self.counting:
                self._unowned_since.setdefault(p, now)
                if not lost:
                    self._revoked[name].add(p)

    def take(self, name: str, partitions: Iterable[int], now: int) -> None:
        mine = self.owned[name]
        for p in partitions:
            since = self._unowned_since.pop(p, None)
            if since is not None:
                self._unowned_ns += now - since
            mine.add(p)

    def outcome(self, live: Iterable[str], end: int) -> Outcome:
        """Once the change is over (`end`): `live` are the members of the group then; what the others still hold
        is nobody's."""
        alive = set(live)
        final = {p: name for name, partitions in self.owned.items() if name in alive for p in partitions}
        moved = sum(final.get(p) != owner for p, owner in self._initial.items())
        moved += sum(p not in self._initial for p in final)
        kept = sum(len(partitions & self.owned[name]) for name, partitions in self._revoked.items() if name in alive)
        unowned = self._unowned_ns + sum(max(0, end - since) for since in self._unowned_since.values())
        return Outcome(moved, kept, unowned / S, frozenset(n for n, ps in self._revoked.items() if ps))
