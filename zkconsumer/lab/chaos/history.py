"""A campaign's history, as the checkers read it: every trace record of the run in time order, the campaign's
settings, and its faults as windows.

A record belongs to the window of the fault that started last before it: [start, the next fault's start), the last
one to the end of the history; records before the first fault belong to no fault (`fault_id` None). That is how a
duplicate, a violation or an overlap is charged to a fault (docs/chaos.md).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zkconsumer.event_log import LineErrors
from zkconsumer.lab.trace import read_traces


@dataclass(frozen=True)
class FaultWindow:
    fault_id: int
    kind: str
    target: str
    params: dict[str, Any]
    start_ts: float
    heal_ts: float | None  # None: the fault was never healed (the campaign was interrupted)
    end_ts: float  # the next fault's start, or the end of the history


@dataclass
class History:
    path: Path
    records: list[dict[str, Any]]
    settings: dict[str, Any]
    faults: list[FaultWindow]
    bad_lines: int = 0
    _starts: list[float] = field(default_factory=list, repr=False)

    @classmethod
    def load(cls, run_dir: Path) -> History:
        errors = LineErrors()
        records = sorted(read_traces(run_dir, errors), key=lambda r: r["ts"])
        return cls.of_records(run_dir, records, errors.count)

    @classmethod
    def of_records(cls, path: Path, records: list[dict[str, Any]], bad_lines: int = 0) -> History:
        records = sorted(records, key=lambda r: r["ts"])
        settings = next((r["settings"] for r in records if r["type"] == "campaign" and r["phase"] == "start"), None)
        if settings is None:
            raise ValueError(f"{path}: no `campaign` start record: not a fault campaign's history "
                             "(made by `zkconsumer lab chaos`)")
        end = records[-1]["ts"] if records else 0.0
        starts = [r for r in records if r["type"] == "fault" and r["phase"] == "start"]
        heals = {r["fault_id"]: r["ts"] for r in records if r["type"] == "fault" and r["phase"] == "heal"}
        faults = [FaultWindow(r["fault_id"], r["kind"], r["target"], dict(r.get("params") or {}), r["ts"],
                              heals.get(r["fault_id"]), starts[i + 1]["ts"] if i + 1 < len(starts) else end)
                  for i, r in enumerate(starts)]
        return cls(path, records, settings, faults, bad_lines, [w.start_ts for w in faults])

    @property
    def group(self) -> str:
        return str(self.settings["group"])

    @property
    def strategy(self) -> str:
        return str(self.settings["properties"].get("partition.assignment.strategy", "range"))

    @property
    def settle_bound_s(self) -> float:
        return float(self.settings["settle_bound_s"])

    def of_type(self, *types: str) -> Iterator[dict[str, Any]]:
        return (r for r in self.records if r["type"] in types)

    def window(self, ts: float) -> FaultWindow | None:
        """The fault whose window holds `ts`, or None before the first fault."""
        i = bisect.bisect_right(self._starts, ts) - 1
        return self.faults[i] if i >= 0 else None

    def fault_id(self, ts: float) -> int | None:
        window = self.window(ts)
        return window.fault_id if window is not None else None

    def excerpt(self, ts: float, before_s: float = 2.0, after_s: float = 1.0, limit: int = 10,
                types: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """The records (of `types` only, if given) nearest before `ts` and a few from it on: the first violation's
        context, the violating record itself included."""
        times = [r["ts"] for r in self.records]
        lo, at, hi = (bisect.bisect_left(times, ts - before_s), bisect.bisect_left(times, ts),
                      bisect.bisect_right(times, ts + after_s))
        wanted = [r for r in self.records[lo:hi] if not types or r["type"] in types]
        before = [r for r in wanted if r["ts"] < times[at]] if at < len(times) else wanted
        after = wanted[len(before):]
        keep_after = min(len(after), max(3, limit - len(before)))
        return before[-(limit - keep_after):] + after[:keep_after] if limit > keep_after else after[:limit]
