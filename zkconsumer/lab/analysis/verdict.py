"""The report's opening verdict, computed from the runs: which design costs less on which metric, from which group
size on, and by how much.

Pure Python over the `runs` rows (docs/analysis.md), so the report, the main job's terminal summary and a test
all get the same sentences. Nothing here knows which design ought to win: every sentence is built from the
medians of the runs at each N, and the same code says the opposite when the data does.

Per scenario and metric, the runs are grouped by N (the initial group size) and design. At an N the winner is
the design with the lowest median; it is *clear* when every one of its repeats is below every repeat of the
others (with one repeat per design that is just the lower value), else the designs *overlap* there. "From
N = X on" is the smallest measured N from which the design that wins at the largest N wins at every N.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zkconsumer.lab.analysis.herd_view import COORDINATION_LABEL, HERD_METRICS, NOTICES_LABEL
from zkconsumer.lab.designs import DESIGNS, LABELS
from zkconsumer.lab.rules.gaps import countable

Row = dict[str, Any]
# The split of time to stable (docs/lab.md): until every incumbent heard of the change, and the rest.
NOTICING, REBALANCING = "noticing_s", "rebalancing_s"


def _column(name: str) -> Callable[[Row], float | None]:
    return lambda run: _number(run.get(name))


def _per_change(name: str) -> Callable[[Row], float | None]:
    def value(run: Row) -> float | None:
        total, changes = _number(run.get(name)), _number(run.get("changes"))
        return None if total is None or not changes else total / changes

    return value


def _herd(kind: str) -> Callable[[Row], float | None]:
    def value(run: Row) -> float | None:
        metric = HERD_METRICS[kind].get(run.get("design"))
        return None if metric is None else _number(run.get(metric[0]))

    return value


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    value: Callable[[Row], float | None]  # one run's figure, None when it has none
    unit: str  # after a value: "" for counts, " s", " partition·s"
    digits: int


METRICS: tuple[Metric, ...] = (
    Metric("requests", f"requests per membership change (ZooKeeper requests; {COORDINATION_LABEL})",
           _herd("requests"), "", 0),
    Metric("notifications", f"notifications per membership change (watch events; {NOTICES_LABEL})",
           _herd("notifications"), "", 0),
    Metric("stable", "time to stable", _column("time_to_stable_s"), " s", 2),
    Metric("noticing", "of which noticing (until every incumbent heard of the change)", _column(NOTICING), " s", 2),
    Metric("rebalancing", "of which rebalancing (the rest)", _column(REBALANCING), " s", 2),
    Metric("unowned", "unowned partition-seconds per change", _per_change("unowned_partition_s"), " partition·s", 1),
    Metric("duplicates", "duplicates delivered per change", _per_change("duplicates"), "", 1),
    # what a change cost the partitions (docs/analysis.md): owners changed, the least any assignor can do being a
    # fair share for a joiner; and partitions revoked from a member that got them back, an eager protocol's
    # stop-the-world, which the incremental ones (KIP-429, KIP-848) avoid
    Metric("moved", "partitions moved per change", _column("partitions_moved_per_change"), "", 1),
    Metric("revoked_kept", "partitions revoked and given back per change (stop-the-world)",
           _column("revoked_kept_per_change"), "", 1),
)


@dataclass(frozen=True)
class Finding:
    """One sentence of the verdict, with the facts it was built from (for tests and tables)."""

    scenario: str
    metric: str  # Metric.key, or "" for a sentence about the data itself
    text: str
    winner: str | None = None  # the design lowest at the largest N (None: a tie, or no comparison)
    from_n: int | None = None  # the smallest N from which `winner` is lowest at every measured N
    clear: bool = False  # at the largest N the winner's every repeat is below every other's
    ratio: float | None = None  # at the largest N: the next design's median over the winner's (None if 0)
    # the designs lowest at the largest N: the winner alone, or those that tie there below the rest
    lowest: tuple[str, ...] = ()


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return None if math.isnan(value) else float(value)


def _fmt(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}" if abs(value) < 1000 or digits == 0 else f"{value:,.0f}"


def _label(design: str) -> str:
    return LABELS.get(design, design)


def verdict(runs: list[Row]) -> list[Finding]:
    """The verdict's sentences, scenario by scenario (only those that ran at least two designs to completion),
    from the runs `gaps.countable` accepts: a run with a counting gap has counts short by construction."""
    findings: list[Finding] = []
    # one comparison per scenario and process mode: threads and processes are not measured alike
    by_scenario: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for run in runs:
        by_scenario[(run.get("scenario") or "?", run.get("process_mode") or "")].append(run)
    for (name, mode), rows in sorted(by_scenario.items()):
        scenario = f"{name} (members as {mode})" if mode else name
        used = [r for r in rows if countable(r) and r.get("members")]
        designs = [d for d in DESIGNS if any(r.get("design") == d for r in used)]
        if len(designs) < 2:
            continue
        sizes = sorted({r["members"] for r in used})
        left_out = len(rows) - len(used)
        repeats = max(Counter((r["design"], r["members"]) for r in used).values())
        basis = (f"{scenario}: {len(used)} completed runs of {', '.join(_label(d) for d in designs)} at N = "
                 f"{', '.join(map(str, sizes))}"
                 + (f" ({left_out} not completed or not counted in full, left out)" if left_out else "")
                 + "; per N the median over repeats, lower is better throughout"
                 + ("; one run per design and N, so a small difference may be run-to-run noise." if repeats == 1
                    else "."))
        findings.append(Finding(scenario, "", basis))
        for metric in METRICS:
            finding = _compare(scenario, metric, used)
            if finding is not None:
                findings.append(finding)
        if not any(metric.value(r) is not None for r in used for metric in METRICS if metric.key == "noticing"):
            findings.append(Finding(scenario, "noticing", f"Time to stable cannot be split into noticing and "
                                    f"rebalancing here: the runs have no {NOTICING} / {REBALANCING} figures."))
        if not any(_number(r.get("duplicates")) is not None for r in used):
            findings.append(Finding(scenario, "duplicates", "Duplicates: no delivery audit in these runs (their "
                                    "members consumed nothing), so no design can be said to deliver fewer."))
    return findings


def _compare(scenario: str, metric: Metric, runs: list[Row]) -> Finding | None:
    values: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        value = metric.value(run)
        if value is not None:
            values[run["members"]][run["design"]].append(value)
    compared = sorted(n for n, per in values.items() if len(per) >= 2)
    if not compared:
        return None
    winners = {n: _winner(values[n]) for n in compared}
    top = compared[-1]
    lowest, clear = winners[top]
    medians = {d: statistics.median(v) for d, v in values[top].items()}
    if not lowest:
        shown = ", ".join(f"{_label(d)} {_fmt(m, metric.digits)}{metric.unit}" for d, m in _in_order(medians))
        return Finding(scenario, metric.key, f"{_cap(metric.label)}: no design lower at N = {top} ({shown}).")
    others = sorted((m, d) for d, m in medians.items() if d not in lowest)
    where = f"N = {compared[0]}" if len(compared) == 1 else f"N = {compared[0]} to {top}"
    from_n = top
    for n in reversed(compared):
        if winners[n][0] != lowest:
            break
        from_n = n
    best = medians[lowest[0]]
    ratio = others[0][0] / best if best > 0 else None
    against = ", ".join(f"{_fmt(m, metric.digits)}{metric.unit} ({_label(d)})" for m, d in others)
    how = (f"{ratio:.1f}x lower" if ratio is not None and ratio >= 1.05
           else f"{others[0][0] - best:,.{metric.digits}f}{metric.unit} lower")
    span = (f"at every N measured ({where})" if from_n == compared[0] else f"from N = {from_n} on (of {where})")
    who = (f"{_label(lowest[0])} lower" if len(lowest) == 1
           else f"{_and(lowest)} tie lowest")
    text = f"{_cap(metric.label)}: {who} {span}; at N = {top}: {_fmt(best, metric.digits)}{metric.unit}"
    text += f" against {against}, {how}"
    if not clear:
        text += ", but the repeats overlap there"
    below: dict[tuple[str, ...], list[int]] = defaultdict(list)  # other lowest designs -> the N below from_n
    for n in compared:
        if n < from_n and winners[n][0] not in ((), lowest):
            below[winners[n][0]].append(n)
    for other, sizes in below.items():
        n = sizes[-1]
        at = {d: statistics.median(v) for d, v in values[n].items()}
        verb = "was" if len(other) == 1 else "were"
        theirs = [at[d] for d in lowest if d in at]  # the designs lowest at the top N may not all run at every N
        text += (f". Below that {_and(other)} {verb} lower at N = {', '.join(map(str, sizes))} (at N = {n}: "
                 f"{_fmt(at[other[0]], metric.digits)}{metric.unit}"
                 + (f" against {_fmt(min(theirs), metric.digits)}{metric.unit})" if theirs else ")"))
    winner = lowest[0] if len(lowest) == 1 else None
    return Finding(scenario, metric.key, text + ".", winner, from_n, clear, ratio, lowest)


def _in_order(medians: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(medians.items(), key=lambda kv: (DESIGNS.index(kv[0]) if kv[0] in DESIGNS else len(DESIGNS), kv[0]))


def _and(designs: tuple[str, ...]) -> str:
    names = [_label(d) for d in designs]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _winner(per_design: dict[str, list[float]]) -> tuple[tuple[str, ...], bool]:
    """The designs with the lowest median (several on a tie; none when every design ties) in designs.py order, and
    whether all their repeats are below all the others' repeats."""
    medians = {d: statistics.median(v) for d, v in per_design.items()}
    best = min(medians.values())
    lowest = tuple(d for d, _ in _in_order(medians) if medians[d] == best)
    if len(lowest) == len(medians):
        return (), False
    worst_of_lowest = max(max(per_design[d]) for d in lowest)
    clear = all(worst_of_lowest < min(v) for d, v in per_design.items() if d not in lowest)
    return lowest, clear


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]
