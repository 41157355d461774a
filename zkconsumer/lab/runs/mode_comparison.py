"""The opt-in modes compared (`zkconsumer lab modes`, docs/modes.md): each (scenario, sweep value, design and mode)'s
runs as one row, the mean over its repeats, with the zk design's ZooKeeper requests and time to stable as ratios
against the faithful mode's runs of the same scenario and sweep value. The terminal shows the rows
(`terminal.modes_table`); the Spark report's "Opt-in modes" section has the same rows with the metrics only the
traces' full analysis gives (analysis/modes_tables.py)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from zkconsumer.lab.designs import MODE_DESIGN, is_zookeeper_design
from zkconsumer.lab.runs.summary import RunSummary


@dataclass
class ModeRow:
    """The mean of one (scenario, sweep value, design label)'s repeats, as the summary table counts them."""

    scenario: str
    sweep: str
    label: str
    design: str
    runs: int
    completed: int
    zk_requests: float | None
    zk_notifications: float | None
    conflicts: float
    failed_attempts: float
    time_to_stable: float | None
    requests_ratio: float | None = None  # against the faithful zk runs of the same scenario and sweep value
    stable_ratio: float | None = None


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def mode_rows(summaries: list[tuple[str, RunSummary]]) -> list[ModeRow]:
    """(scenario name, summary) pairs in, one row per scenario, sweep value and label out, in the order met."""
    groups: dict[tuple[str, str, str], list[RunSummary]] = defaultdict(list)
    for scenario, s in summaries:
        sweep = ",".join(f"{k}={v}" for k, v in s.sweep.items())
        groups[(scenario, sweep, s.label)].append(s)
    rows = []
    for (scenario, sweep, label), runs in groups.items():
        zk = is_zookeeper_design(runs[0].design)
        rows.append(ModeRow(
            scenario, sweep, label, runs[0].design, len(runs), sum(s.completed for s in runs),
            _mean([s.per_change(s.zk_requests) for s in runs]) if zk else None,
            _mean([s.per_change(s.zk_notifications) for s in runs]) if zk else None,
            statistics.fmean(s.conflicts for s in runs), statistics.fmean(s.failed_attempts for s in runs),
            _mean([s.time_to_stable for s in runs])))
    faithful = {(r.scenario, r.sweep): r for r in rows if r.label == MODE_DESIGN}
    for r in rows:
        base = faithful.get((r.scenario, r.sweep))
        if base is not None and r.design == MODE_DESIGN:
            r.requests_ratio = _ratio(r.zk_requests, base.zk_requests)
            r.stable_ratio = _ratio(r.time_to_stable, base.time_to_stable)
    return rows


def _ratio(value: float | None, base: float | None) -> float | None:
    return value / base if value is not None and base else None
