"""The report's "Fault campaign" section: the per-kind table and a per-fault timeline (chaos_tables.py's rows)."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from zkconsumer.lab.analysis.herd_view import fmt_cell


@dataclass
class ChaosSection:
    faults: list[dict[str, Any]]  # chaos_faults rows
    kinds: list[dict[str, Any]]  # chaos_kinds rows
    violations: dict[str, int | None] = field(default_factory=dict)  # run_id -> chaos.json's total (None: no file)
    bad_lines: int = 0
    unknown: dict[str, list[Any]] = field(default_factory=dict)  # run_id -> invariants its checkers could not judge


KIND_COLUMNS = [  # (heading, chaos_kinds column, digits)
    ("faults", "faults", 0), ("re-convergence median s", "reconv_median_s", 2),
    ("re-convergence max s", "reconv_max_s", 2), ("duplicates", "duplicates", 0),
    ("dead time max s", "max_dead_time_s", 2), ("windows without a view", "windows_without_view", 0),
    ("overlap windows", "overlaps", 0), ("longest overlap s", "overlap_max_s", 2), ("violations", "violations", 0),
    ("by invariant", "violations_by_invariant", 0),
]
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#393b79", "#637939"]


def kinds_table(kinds: list[dict[str, Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h, _, _ in KIND_COLUMNS)
    body = "".join(
        f"<tr data-kind='{html.escape(str(k['kind']))}'><td>{html.escape(str(k['run_id']))}</td>"
        f"<td>{html.escape(str(k['kind']))}</td>"
        + "".join(f"<td>{html.escape(fmt_cell(k.get(c), d))}</td>" for _, c, d in KIND_COLUMNS) + "</tr>"
        for k in kinds)
    return (f"<table class=chaos><thead><tr><th>campaign</th><th>fault kind</th>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def timeline_figure(faults: list[dict[str, Any]]) -> go.Figure | None:
    """One mark per fault at its start, coloured by kind: duplicates (top) and dead time (bottom)."""
    if not faults:
        return None
    t0 = min(f["start_ts"] for f in faults)
    kinds = sorted({f["kind"] for f in faults})
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, subplot_titles=["duplicates in the fault's window",
                                                                           "dead time in the window (s)"])
    for i, kind in enumerate(kinds):
        mine = [f for f in faults if f["kind"] == kind]
        xs = [f["start_ts"] - t0 for f in mine]
        text = [f"fault {f['fault_id']} {kind} on {f['target']}" for f in mine]
        colour = PALETTE[i % len(PALETTE)]
        for row, column in ((1, "duplicates"), (2, "dead_time_s")):
            fig.add_trace(go.Scatter(x=xs, y=[f[column] for f in mine], mode="markers", name=kind, text=text,
                                     marker={"color": colour, "size": 9}, legendgroup=kind, showlegend=row == 1,
                                     hovertemplate="%{text}<br>%{y}<extra></extra>"), row=row, col=1)
    fig.update_layout(title="the fault campaign: one mark per fault", height=520)
    fig.update_xaxes(title_text="seconds from the first fault", row=2, col=1)
    return fig


def section_intro(section: ChaosSection) -> str:
    def verdict(run: str, violations: int | None) -> str:
        if violations is None:
            return "no chaos.json"
        unknown = section.unknown.get(run)
        # a checker that failed judged nothing: its invariant is neither held nor broken
        return f"{violations} violations" + (
            f" in the invariants judged, invariant {', '.join(map(str, unknown))} UNKNOWN (its checker failed)"
            if unknown else "")

    verdicts = "; ".join(f"{html.escape(run)}: {html.escape(verdict(run, v))}"
                         for run, v in sorted(section.violations.items()))
    bad = (f" {section.bad_lines} trace lines of the campaigns could not be read and were left out."
           if section.bad_lines else "")
    return ("<p class=note>A fault window runs from a fault's start to the next fault's start. The invariants the "
            "checkers judge over the recorded history: (1) once settled, no owner znode names a member that is not "
            "alive; (2) after every fault the group re-converges to its strategy's assignment within the settle "
            "bound; (3) every produced message is consumed at least once, duplicates only replaying work since the "
            "last commit; (4) committed offsets never move backwards; (5) windows in which two members fetch one "
            "partition are measured, never a violation (the 0.8 design allows them around a session expiry); "
            "(6) no member dies, hangs or leaks threads. Re-convergence, overlap windows and violations come from "
            "the checkers' verdict in each campaign's chaos.json (written by `zkconsumer lab chaos`, again by "
            "`zkconsumer lab chaos-check DIR`); faults, duplicates, dead time (the longest time a partition had "
            f"messages waiting and none consumed) and views are counted here from the history. Verdicts: "
            f"{verdicts}.{bad}</p>")
