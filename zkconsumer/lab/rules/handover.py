"""What a window of changes cost the members' partitions, from the members' own ownership records, alike on every
design:

- moved: partitions whose owner at the window's end is not their owner at its start (a partition without an owner
  at either end counts when the other end has one). The fewest a change can move is what balance requires: a join
  into N members owning P partitions moves about P/(N+1) of them.
- revoked and kept: partitions a member gave up and then got back in its next assignment. Nothing moved for
  them, but the member stopped consuming them for the rebalance: the stop-the-world an eager protocol imposes on
  every incumbent (the ZooKeeper design releases every owner node; the classic eager protocol revokes everything
  before JoinGroup), and what cooperative rebalancing (KIP-429) and the consumer protocol (KIP-848) exist to avoid.

The records (docs/traces.md): broker-side designs' `generation` records (`assigned` with the whole assignment in
`partitions`, `revoked`/`lost` with what was taken and, for the incremental protocols, `remaining`); the ZooKeeper
design's `member_event`s `fetchers_stopped` (its `partitions`) and `fetchers_started` (the keys of its `offsets`);
the original 0.8.2.2 consumer reports neither, so for it the driver's `owners` snapshots stand in for `moved` and
`revoked_kept` is unknown (None).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


def _names(value: Any) -> set[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return set()
    if isinstance(value, dict):
        return set(value)
    return {str(p) for p in value} if isinstance(value, list) else set()


@dataclass
class Handover:
    """Folds one run's records in time order; `start()` and `end()` mark the window."""

    owned: dict[str, set[str]] = field(default_factory=dict)  # member -> partitions it owns now
    snapshot: dict[str, str] | None = None  # the latest `owners` record: partition -> owner
    revoked_kept: int = 0
    saw_member_records: bool = False
    _given_up: dict[str, set[str]] = field(default_factory=dict)  # member -> revoked since its last assignment
    _at_start: dict[str, str | None] | None = None
    _at_end: dict[str, str | None] | None = None
    _counting: bool = False
    _await_snapshot: bool = False

    def fold(self, record: dict[str, Any]) -> None:
        kind, member = record.get("kind"), record.get("member")
        match record.get("type"):
            case "generation" if kind == "assigned" and member:
                self._gain(member, _names(record.get("partitions")), whole=True)
            case "generation" if kind in ("revoked", "lost") and member:
                remaining = record.get("remaining")
                self._give_up(member, _names(record.get("partitions")),
                              None if remaining is None else _names(remaining))
            case "member_event" if kind == "fetchers_started" and member:
                self._gain(member, _names(record.get("offsets")), whole=False)
            case "member_event" if kind == "fetchers_stopped" and member:
                self._give_up(member, _names(record.get("partitions")), None, partial=True)
            case "membership" if record.get("action") == "kill":
                # a killed process says nothing: what it owned is nobody's until the group reassigns it
                for name in record.get("members") or ():
                    self.owned.pop(name, None)
                    self._given_up.pop(name, None)
            case "owners":
                self.snapshot = {tp: str(owner) for tp, owner in (record.get("owners") or {}).items()}
                if self._await_snapshot:
                    self._at_start, self._await_snapshot = dict(self.snapshot), False

    def start(self) -> None:
        self._counting = True
        if self.saw_member_records:
            self._at_start = self._owners()
        else:
            # Snapshots are taken every half second and the last one may predate the group settling: the first
            # one after the window opens (before any change: a scenario's first change is seconds later) is the
            # settled group's.
            self._await_snapshot = True

    def end(self) -> None:
        self._at_end = self._owners()
        self._counting = False

    @property
    def started(self) -> bool:
        return self._counting or self._at_start is not None

    @property
    def ended(self) -> bool:
        return self._at_end is not None

    @property
    def moved(self) -> int | None:
        if self._at_start is None:
            return None
        after = self._at_end if self._at_end is not None else self._owners()
        return sum(1 for tp in set(self._at_start) | set(after) if self._at_start.get(tp) != after.get(tp))

    @property
    def revoked_kept_or_none(self) -> int | None:
        """None where the members report no ownership of their own (the original consumer)."""
        return self.revoked_kept if self.saw_member_records else None

    def _owners(self) -> dict[str, str | None]:
        if self.saw_member_records:
            return {tp: member for member, tps in sorted(self.owned.items()) for tp in tps}
        return dict(self.snapshot or {})

    def _gain(self, member: str, partitions: set[str], whole: bool) -> None:
        self.saw_member_records = True
        if self._counting:
            self.revoked_kept += len(self._given_up.get(member, set()) & partitions)
        self._given_up.pop(member, None)
        self.owned[member] = set(partitions) if whole else self.owned.get(member, set()) | partitions

    def _give_up(self, member: str, partitions: set[str], remaining: set[str] | None,
                 partial: bool = False) -> None:
        self.saw_member_records = True
        self._given_up.setdefault(member, set()).update(partitions)
        held = self.owned.get(member, set())
        # eager revokes everything (no `remaining`); a fetcher stop or an incremental revoke keeps the rest
        self.owned[member] = remaining if remaining is not None else (held - partitions if partial else set())
