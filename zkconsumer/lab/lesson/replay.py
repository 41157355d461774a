"""What both designs' replays share: the window of one change, pending steps applied in time order, counters.

A builder turns trace records into *pending* steps: a `Step` (what to show) and a function that changes the
design's state. Some records only change state (a member's `state` event, an owner snapshot) and make no
step of their own. `Replay.finish()` applies them in time order, snapshotting the state after each step, so a
step's state and counters are those of the moment it completed, as the trace says.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zkconsumer.event_log import LineErrors
from zkconsumer.lab.lesson.model import LessonError, Step
from zkconsumer.lab.trace import read_traces

Mutation = Callable[[dict[str, Any]], None]


def load_records(run_dir: Path, errors: LineErrors | None = None) -> list[dict[str, Any]]:
    """Every record of a run, by time; one member's events keep their own order (`seq`) on equal times. Lines that
    are not records (a torn last line, a garbled one) are skipped and counted in `errors`."""
    records = list(read_traces(run_dir, errors))
    return sorted(records, key=lambda r: (r.get("ts") or 0.0, r.get("seq", 0)))


# Records that end a member's part in a rebalance: the replay runs until the last of them.
SETTLING = {("member_event", "rebalance_end"), ("member_event", "registered"), ("member_event", "rebalance_failed"),
            ("generation", "assigned"), ("generation", "lost")}


@dataclass(frozen=True)
class Window:
    """The change replayed: from its first membership record to the first `stable` record after its last one
    (the orchestrator's check, docs/lab.md), or to the end of the run if it never settled; and on, if members
    were still rebalancing then, to the last rebalance end or assignment before the next churn step. The
    orchestrator's check can pass early: after a restart with the same consumer.id the old session's
    registration and owner nodes still look like a settled group (the restart trap, docs/exercises.md)."""

    start: float
    end: float
    changes: list[dict[str, Any]]
    stable_s: float | None


def change_window(records: list[dict[str, Any]], step: int | None) -> Window:
    memberships = [r for r in records if r["type"] == "membership"]
    if not memberships:
        raise LessonError("the run has no membership change to replay (a scenario without churn?)")
    steps = sorted({r["step"] for r in memberships if r["step"] >= 0})
    wanted = steps[0] if step is None and steps else step
    changes = [r for r in memberships if r["step"] == wanted]
    if not changes:
        raise LessonError(f"no membership change of churn step {wanted}; the run has steps {steps}")
    start, last = changes[0]["ts"], changes[-1]["ts"]
    done = next((r["ts"] for r in records if r["type"] == "phase" and r["phase"] == "done" and r["ts"] >= last), None)
    later = [r["ts"] for r in memberships if r["step"] >= 0 and r["step"] != wanted and r["ts"] > last]
    boundary = min([*later, *([done] if done is not None else [])], default=records[-1]["ts"])
    # a `stable` after the next change is that change's: this one did not settle before it
    stable = next((r for r in records if r["type"] == "stable" and last <= r["ts"] < boundary), None)
    settling = [r["ts"] for r in records if last < r["ts"] < boundary and (r["type"], r.get("kind")) in SETTLING]
    end = max([stable["ts"] if stable else boundary - 1e-6, *settling])
    return Window(start, end, changes, stable["duration_s"] if stable else None)


@dataclass
class RunningCount:
    """A running count of records: how many of `times` are at or before a step's time."""

    label: str
    times: list[float] = field(default_factory=list)

    def at(self, t: float) -> int:
        return bisect.bisect_right(self.times, t)


class Replay:
    def __init__(self, design: str, window: Window, initial: dict[str, Any]) -> None:
        self.design = design
        self.window = window
        self.state = initial
        self.pending: list[tuple[float, int, Step | None, Mutation | None]] = []
        self.counters: dict[str, RunningCount] = {}
        self._order = 0

    def counter(self, key: str, label: str) -> RunningCount:
        return self.counters.setdefault(key, RunningCount(label))

    def count(self, key: str, ts: float) -> None:
        if self.window.start <= ts <= self.window.end:
            self.counters[key].times.append(ts)

    def add(self, ts: float, step: Step | None, mutation: Mutation | None = None) -> None:
        """A step at `ts` (None: a state change only). Steps outside the window only build the initial state."""
        self._order += 1
        if step is not None:
            step.t = ts - self.window.start
        self.pending.append((ts, self._order, step, mutation))

    def finish(self, derive: Callable[[dict[str, Any]], dict[str, Any]]) -> tuple[dict[str, Any], list[Step]]:
        """Apply everything in time order; `derive(state)` adds computed fields (unowned partitions) to a
        snapshot. Returns the state at the change and the window's steps, each with its state after it."""
        self.pending.sort(key=lambda p: (p[0], p[1]))
        initial: dict[str, Any] | None = None
        steps: list[Step] = []
        for ts, _order, step, mutation in self.pending:
            if ts > self.window.end:
                break
            if ts >= self.window.start and initial is None:
                initial = self.snapshot(self.window.start, derive)
            if mutation is not None:
                mutation(self.state)
            if step is not None and ts >= self.window.start:
                step.state = self.snapshot(ts, derive)
                steps.append(step)
        if initial is None:
            initial = self.snapshot(self.window.start, derive)
        return initial, steps

    def snapshot(self, ts: float, derive: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
        state = copy.deepcopy(self.state)
        state["counters"] = {c.label: c.at(ts) for c in self.counters.values()}
        state.update(derive(state))
        return state


def members_in(records: Iterable[dict[str, Any]]) -> list[str]:
    """Member names in start order (m0, m1, ...; docs/scenarios.md numbers them so)."""
    names = {r["member"] for r in records if isinstance(r.get("member"), str)}
    names |= {m for r in records if r["type"] == "membership" for m in r["members"]}
    return sorted(names, key=lambda n: (len(n), n))
