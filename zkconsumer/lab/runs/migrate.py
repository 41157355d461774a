"""The `migrate` churn action: one run in which a ZooKeeper-design group is rolled, member by member, to the
coordinator design under the same group id, the way operators left the 0.8 consumer (docs/migrate.md).

`MigratingDriver` wraps the run's ZooKeeper-design driver (it starts the initial group and every joiner) and a
`CoordinatorDriver` of its own. `migrate(name)` stops the ZooKeeper member cleanly (its connector commits on
shutdown, Kafka 0.8.2's `ZookeeperConsumerConnector.shutdown`) and then starts a coordinator member in its place.

The two halves never see each other: the ZooKeeper members balance among the registrations under
/consumers/<group>/ids, the coordinator members among the broker's `GroupCoordinator` members. Each half
therefore assigns every partition to its own members, and while both are live a partition is consumed twice.
The offset audit counts those duplicates; nothing here hides them. The group is stable when each half with a
live member is stable on its own.

A migrated member takes the name `<name>-c`: its own trace file and log (the ZooKeeper member's file is never
appended to by another design) and its own client id at the Kafka proxy. A later action on the scenario's index
(a leave, a kill) acts on whichever half runs it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from zkconsumer.lab.drivers.coordinator import CoordinatorDriver
from zkconsumer.lab.drivers.interface import DesignDriver, LabEnvironment

log = logging.getLogger(__name__)
SUFFIX = "-c"  # a migrated member's name: the scenario's member name plus this


def coordinator_name(name: str) -> str:
    return f"{name}{SUFFIX}"


class MigratingDriver:
    """`DesignDriver` of a run with `migrate` steps: the ZooKeeper-design driver plus the coordinator members
    that replace its members one by one (see the module docstring)."""

    def __init__(self, zk: DesignDriver, process_mode: str = "processes") -> None:
        self.zk = zk
        self.design = zk.design  # the run's design: the group starts on it (the manifest and every record say so)
        self.coordinator = CoordinatorDriver(process_mode)
        self._migrated: dict[str, str] = {}  # scenario member name -> its coordinator member's name
        self._lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------------------

    def start(self, env: LabEnvironment) -> None:
        self.zk.start(env)
        self.coordinator.start(env)

    def migrate(self, name: str) -> str:
        """Stop ZooKeeper member `name` cleanly (it commits), then start its coordinator replacement; returns the
        replacement's name. The stop returns once the member's process has exited, so its last commit is written
        before the replacement fetches its first offsets."""
        with self._lock:
            if name in self._migrated:
                raise ValueError(f"member {name} was migrated already (it runs as {self._migrated[name]})")
        if name not in self.zk.live_members():
            raise ValueError(f"member {name} is not a live ZooKeeper-design member: only a running one migrates")
        self.zk.leave(name)
        replacement = coordinator_name(name)
        with self._lock:
            self._migrated[name] = replacement
        self.coordinator.join(replacement)
        log.info("lab member %s migrated: now %s in the coordinator design", name, replacement)
        return replacement

    def join(self, name: str) -> None:
        """A new member starts in the ZooKeeper design; a restart of a migrated one restarts its replacement."""
        half, member = self._half(name)
        half.join(member)

    def leave(self, name: str) -> None:
        half, member = self._half(name)
        half.leave(member)

    def kill(self, name: str) -> None:
        half, member = self._half(name)
        half.kill(member)

    def pause(self, name: str) -> None:
        half, member = self._half(name)
        half.pause(member)

    def resume(self, name: str) -> None:
        half, member = self._half(name)
        half.resume(member)

    def expire(self, name: str) -> None:
        half, member = self._half(name)
        half.expire(member)

    def stop(self) -> None:
        # Both halves, whatever the other did: nothing the run started may outlive it.
        try:
            self.coordinator.stop()
        finally:
            self.zk.stop()

    # --- observation ---------------------------------------------------------------------------------

    def failed(self) -> dict[str, str]:
        # The coordinator driver reports no start-up failures of its own (run_stability asks with hasattr).
        halves = (self.zk, self.coordinator)
        return {name: why for half in halves if hasattr(half, "failed") for name, why in half.failed().items()}

    def live_members(self) -> list[str]:
        """The members' own names (a migrated one as `<name>-c`): what the proxies know them by."""
        return sorted(self.zk.live_members() + self.coordinator.live_members())

    def stable(self) -> bool:
        """Each half with a live member is stable on its own (they cannot agree with each other: module
        docstring); a run with no live member at all is not stable."""
        halves = self._live_halves()
        return bool(halves) and all(half.stable() for half in halves)

    def stable_since(self) -> float | None:
        times = [half.stable_since() for half in self._live_halves()]
        return max(times) if times and None not in times else None  # type: ignore[type-var]

    def owners(self) -> dict[str, str]:
        """The ZooKeeper half's owner znodes (the run's owner snapshots); the coordinator half has none."""
        return self.zk.owners()  # type: ignore[attr-defined]

    def stats(self) -> dict[str, Any]:
        stats = dict(self.zk.stats())
        stats["coordinator_half"] = self.coordinator.stats()
        with self._lock:
            stats["migrated"] = dict(self._migrated)
        stats["bad_trace_lines"] = (stats.get("bad_trace_lines", 0)
                                    + stats["coordinator_half"].get("bad_trace_lines", 0))
        return stats

    # --- helpers ---------------------------------------------------------------------------------------

    def _half(self, name: str) -> tuple[Any, str]:
        with self._lock:
            replacement = self._migrated.get(name)
        return (self.coordinator, replacement) if replacement is not None else (self.zk, name)

    def _live_halves(self) -> list[Any]:
        return [half for half in (self.zk, self.coordinator) if half.live_members()]


def has_migrate(steps: list[Any]) -> bool:
    """Whether a case's resolved steps migrate a member: only such a run gets a `MigratingDriver`."""
    return any(step.kind == "migrate" for step in steps)
