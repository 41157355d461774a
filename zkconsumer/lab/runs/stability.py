"""When a lab run's group is stable again: each membership change is recorded (a `membership` trace record) and
the time the group then takes to be stable again (a `stable` record), measured alike on every design.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

from zkconsumer.lab.drivers.interface import DesignDriver
from zkconsumer.lab.rules.noticing import CHANGE_ACTIONS
from zkconsumer.lab.runs.state import LabRunError
from zkconsumer.lab.trace import TraceWriter

POLL_S = 0.05


class ChangeTracker:
    """The run's membership changes and the one still waiting for the group to be stable again."""

    def __init__(self, trace: TraceWriter, offsets: dict[int, float], design: str, logs: Path,
                 stop: threading.Event) -> None:
        self.trace = trace
        self.design = design
        self._offsets = offsets  # step index -> the drawn part of its time (its spread)
        self._logs = logs
        self._stop = stop
        self._changes = 0
        # (membership change number, when by the monotonic clock, when by the wall clock members stamp records with)
        self._pending: tuple[int, float, float] | None = None

    @property
    def pending(self) -> bool:
        """A change was made and the group has not been seen stable since."""
        return self._pending is not None

    def membership(self, action: str, members: list[str], step: int, **extra: Any) -> None:
        offset = self._offsets.get(step)
        if offset:  # the drawn part of the step's time (its spread): the phase it ran at, for the analysis
            extra.setdefault("offset_s", offset)
        self.trace.write("membership", action=action, members=members, step=step, **extra)
        if action in CHANGE_ACTIONS:
            self._changes += max(1, len(members))
            self._pending = (self._changes, time.monotonic(), time.time())

    def track(self, driver: DesignDriver) -> None:
        """Time to stable, measured alike on every design: the check (`driver.stable()`) says the group is stable;
        the moment it became so is when the last member reached the state the check accepted, as that member
        wrote it (`driver.stable_since()`). Polling time is kept beside it (`polled_s`): it adds the poll interval
        and the check's own reads, which differ between designs (the ZooKeeper check reads every registration and
        owner node, the coordinator's reads nothing), so it is not what is compared. If no member changed state
        after the change (nothing needed to move), the poll time is all there is (`basis` "poll")."""
        if self._pending is None or not driver.stable():
            return
        change, since, wall = self._pending
        polled = time.monotonic() - since
        reached = driver.stable_since()
        if reached is not None and reached >= wall:
            duration, basis = reached - wall, "events"
        else:
            duration, basis = polled, "poll"
        self.trace.write("stable", generation_or_rebalance=change, duration_s=duration, polled_s=polled,
                         basis=basis)
        self._pending = None

    def await_stable(self, driver: DesignDriver, timeout: float, what: str, fail: bool = True) -> bool:
        """Wait until the group is stable (and time the pending change); on timeout raise ``LabRunError`` naming
        the member logs, or with ``fail=False`` return False. A member the driver reports failed raises at once."""
        began = time.monotonic()
        deadline = began + timeout
        while not self._stop.is_set():
            self.raise_if_failed(driver)
            if driver.stable():
                if self._pending is not None:
                    self.track(driver)
                return True
            if time.monotonic() > deadline:
                if fail:
                    raise LabRunError(f"{what} did not become stable within {timeout:.0f} s on the {self.design} "
                                      f"design: see the member logs in {self._logs}")
                return False
            time.sleep(POLL_S)
        return False

    def raise_if_failed(self, driver: DesignDriver) -> None:
        """``LabRunError`` naming the members that ended on their own, if any: a group that is stable only because
        its failed members are no longer live is not a run that completed."""
        failed = driver.failed() if hasattr(driver, "failed") else {}
        if failed:
            raise LabRunError(f"{self.design} design: {describe_failures(failed)}")


def describe_failures(failed: dict[str, str]) -> str:
    """`member m1 <why>` for one; members that failed alike named together first, e.g. `members failed to bootstrap:
    m1, m2 (member m1 failed to bootstrap (...); ...)`. Alike: the same words before the first ` (`, `: ` or `; ` of
    their why."""
    if len(failed) == 1:
        [(name, why)] = failed.items()
        return f"member {name} {why}"
    groups: dict[str, list[str]] = {}
    for name in sorted(failed):
        groups.setdefault(re.split(r" \(|: |; ", failed[name], maxsplit=1)[0], []).append(name)
    parts = []
    for what, names in groups.items():
        details = "; ".join(f"member {name} {failed[name]}" for name in names)
        parts.append(f"members {what}: {', '.join(names)} ({details})" if len(names) > 1
                     else f"member {names[0]} {failed[names[0]]}")
    return "; ".join(parts)
