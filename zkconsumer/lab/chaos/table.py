"""The campaign's closing table: per fault kind, how often it was injected, how fast the group re-converged, what
it cost (duplicates, overlap windows) and what it broke (violations per invariant), from the checkers' results.
An invariant whose checker failed reads "unknown" in every row (checkers.check_all)."""

from __future__ import annotations

import statistics
from typing import Any

from zkconsumer.lab.chaos.checkers import CheckResult
from zkconsumer.lab.chaos.history import History

COLUMNS = ("kind", "count", "reconv_median_s", "reconv_max_s", "duplicates", "overlaps", "overlap_max_s",
           "violations")
UNKNOWN = "unknown"  # an invariant's count in a row when its checker failed


def campaign_table(history: History, results: list[CheckResult]) -> list[dict[str, Any]]:
    by_invariant = {r.invariant: r for r in results}
    rows: dict[str, dict[str, Any]] = {}
    times: dict[str, list[float]] = {}
    for window in history.faults:
        row = rows.setdefault(window.kind, {"kind": window.kind, "count": 0, "duplicates": 0, "overlaps": 0,
                                            "overlap_max_s": 0.0, "violations": {}})
        row["count"] += 1
        for result in results:
            measured = result.per_fault.get(window.fault_id, {})
            if "reconvergence_s" in measured:
                times.setdefault(window.kind, []).append(measured["reconvergence_s"])
            row["duplicates"] += measured.get("duplicates", 0)
            row["overlaps"] += measured.get("overlaps", 0)
            row["overlap_max_s"] = max(row["overlap_max_s"], measured.get("overlap_max_s", 0.0))
            if result.counts_as_violation and result.violations.get(window.fault_id):
                row["violations"][str(result.invariant)] = result.violations[window.fault_id]
    unknown = [str(r.invariant) for r in results if r.verdict == "unknown"]
    for kind, row in rows.items():
        row["violations"].update(dict.fromkeys(unknown, UNKNOWN))
        seconds = times.get(kind, [])
        row["reconv_median_s"] = round(statistics.median(seconds), 2) if seconds else None
        row["reconv_max_s"] = round(max(seconds), 2) if seconds else None
    before = {str(r.invariant): r.violations[None] for r in by_invariant.values()
              if r.counts_as_violation and r.violations.get(None)}
    ordered = [rows[k] for k in sorted(rows)]
    if before:
        ordered.insert(0, {"kind": "(before any fault)", "count": 0, "reconv_median_s": None, "reconv_max_s": None,
                           "duplicates": 0, "overlaps": 0, "overlap_max_s": 0.0, "violations": before})
    return ordered


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"inv{k}: {v}" for k, v in sorted(value.items())) or "0"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def format_table(rows: list[dict[str, Any]]) -> str:
    cells = [list(COLUMNS)] + [[_cell(row.get(c)) for c in COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(text.ljust(w) if i == 0 else text.rjust(w) for i, (text, w) in
                               enumerate(zip(line, widths, strict=True))).rstrip() for line in cells)
