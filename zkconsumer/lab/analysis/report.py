"""The HTML report: one self-contained file (plotly.js inline, no network) built from collected rows.

It takes plain Python rows (`ReportData`), not DataFrames, so it renders the same from a job or a test.
"""

from __future__ import annotations

import html
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from zkconsumer.lab.analysis.chaos_report import ChaosSection, kinds_table, section_intro
from zkconsumer.lab.analysis.chaos_report import timeline_figure as chaos_timeline
from zkconsumer.lab.analysis.herd_view import (
    COLORS,
    COORDINATION_LABEL,
    HERD_METRICS,
    NONE,
    NOTICES_LABEL,
    fit_table,
    fmt_cell,
    herd_figure,
)
from zkconsumer.lab.analysis.migrate_report import MigrateSection, migrate_section
from zkconsumer.lab.analysis.modes_report import modes_section
from zkconsumer.lab.analysis.owner_nodes import NOT_REPORTED, OWNERS_FROM_WIRE
from zkconsumer.lab.analysis.split_brain import section as split_brain_section
from zkconsumer.lab.analysis.verdict import verdict
from zkconsumer.lab.designs import DESIGNS, LABELS

NOT_REPORTED_CELL = "n/r"  # a count the design's members do not report (owner_nodes.NOT_REPORTED): never 0
DESIGN_NAMES = LABELS
SHORT = {"zk": "zk", "original": "orig", "coordinator": "eager", "cooperative": "coop",
         "consumer": "kip848", "consumer-java": "kip848j"}  # table sub-headings


@dataclass
class Timeline:
    """One rebalance of one run: every ownership interval near one change, times relative to the change."""

    design: str
    run_id: str
    case: str
    action: str
    members: str
    stable_s: float | None
    window_s: float  # the chart ends here: after the change's step recovered (windows.recovery_span)
    intervals: list[tuple[str, str, float, float]]  # member, partition, start, end (seconds from the change)


@dataclass
class ReportData:
    runs: list[dict[str, Any]] = field(default_factory=list)
    changes: list[dict[str, Any]] = field(default_factory=list)
    fits: list[dict[str, Any]] = field(default_factory=list)
    pauses: list[dict[str, Any]] = field(default_factory=list)  # design, pause_s (inside the churn)
    timelines: list[Timeline] = field(default_factory=list)
    trace_errors: list[dict[str, Any]] = field(default_factory=list)  # files with bad lines
    overlaps: list[dict[str, Any]] = field(default_factory=list)  # the longest ones
    title: str = "zkconsumer lab analysis"
    notes: list[str] = field(default_factory=list)
    predictions: list[dict[str, Any]] = field(default_factory=list)  # sweep rows (zkconsumer.lab.sim.sweep)
    comparisons: list[Any] = field(default_factory=list)  # predictions.Comparison: observed next to predicted
    contention: list[dict[str, Any]] = field(default_factory=list)  # per_run.ownership.contention_events rows
    overlaps_after_expiry: dict[str, int] = field(default_factory=dict)  # run_id -> overlaps after an expiry
    chaos: ChaosSection | None = None  # fault campaigns given to the job (chaos_tables.py)
    migrate: MigrateSection | None = None  # runs with migrate steps (migrate_tables.py)
    modes: list[dict[str, Any]] = field(default_factory=list)  # the modes table's rows (modes_tables.py)


def latency_figure(changes: list[dict[str, Any]], pauses: list[dict[str, Any]]) -> go.Figure | None:
    panels = [("time to stable (s)*", [(c["design"], c.get("stable_s")) for c in changes]),
              ("convergence (s)", [(c["design"], c.get("convergence_s")) for c in changes]),
              ("stop-the-world (s)", [(p["design"], p.get("pause_s")) for p in pauses]),
              ("unowned partition·s", [(c["design"], c.get("unowned_partition_s")) for c in changes])]
    if not any(v is not None for _, values in panels for _, v in values):
        return None
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[p[0] for p in panels])
    for col, (_, values) in enumerate(panels, start=1):
        for design in DESIGNS:
            ys = [v for d, v in values if d == design and v is not None]
            if ys:
                fig.add_trace(go.Box(y=ys, name=DESIGN_NAMES[design], marker_color=COLORS[design],
                                     boxpoints="all", jitter=0.4, pointpos=0, showlegend=col == 1,
                                     legendgroup=design), row=1, col=col)
    fig.update_layout(title="latency distributions (every change of every run)", height=500,
                      margin={"b": 110})
    fig.add_annotation(text="convergence: from the change to the moment every partition is fetched again; "
                       "stop-the-world: one member's partitions given up to new ones fetched; unowned partition·s: "
                       "partitions nobody fetched, times seconds, per change window.",
                       xref="paper", yref="paper", x=0, y=-0.2, showarrow=False, font={"size": 10}, align="left")
    return fig


def timeline_figure(tl: Timeline) -> go.Figure:
    """Gantt-like: per member, how many partitions it fetched over time around one change."""
    bars: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    per_member: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for member, _tp, start, end in tl.intervals:
        per_member[member] += [(start, 1), (end, -1)]
    for member, points in per_member.items():
        points.sort(key=lambda p: (p[0], p[1]))  # ends first at one instant: a hand-over, no spike
        count, since = 0, None
        for t, delta in points:
            if count > 0 and since is not None and t > since:
                bars[member].append((since, t, count))
            count += delta
            since = t
    members = sorted(bars, key=lambda m: (len(m), m))
    # a design that reports no fetchers: what it held is its owner nodes, read off the wire
    held = "owner nodes held" if tl.design in OWNERS_FROM_WIRE else "partitions fetched"
    fig = go.Figure()
    for member in members:
        segs = bars[member]
        fig.add_trace(go.Bar(y=[member] * len(segs), x=[e - s for s, e, _ in segs], base=[s for s, _, _ in segs],
                             orientation="h", marker={"color": COLORS.get(tl.design), "opacity": 0.8},
                             text=[str(n) for _, _, n in segs], textposition="inside", showlegend=False,
                             hovertemplate=f"{member}: %{{text}} {held} from %{{base:.3f}} s<extra></extra>"))
    fig.add_vline(x=0, line={"color": "black"}, annotation_text=f"{tl.action} {tl.members}")
    title = f"{DESIGN_NAMES.get(tl.design, tl.design)}: ownership around one change ({tl.case})"
    if tl.design in OWNERS_FROM_WIRE:
        title += ", owner nodes from the wire"
    if tl.stable_s is not None:
        fig.add_vline(x=tl.stable_s, line={"color": "green", "dash": "dash"}, annotation_text="stable",
                      annotation_position="bottom right")
    fig.update_layout(title=title, barmode="overlay", height=140 + 28 * max(1, len(members)),
                      xaxis={"title": "seconds from the membership change", "range": [
                          min((s for segs in bars.values() for s, _, _ in segs), default=-1.0), tl.window_s]},
                      yaxis={"title": f"member (bar text: {held})", "categoryorder": "array",
                             "categoryarray": members[::-1]})
    return fig


COMPARISON = [  # (label, runs column, digits)
    ("requests/chg", None, 1),  # the design's own: ZooKeeper requests or coordination requests (HERD_METRICS)
    # a ZooKeeper connection that dropped and resumed its session, and what it sent again (per_run/losses.py)
    ("connection losses", "connection_losses", 0),
    ("re-sent/chg", "resent_requests_per_change", 1),
    ("notifications/chg", None, 1),
    ("rounds", "rounds", 0),  # broker-side: the group's generations or epochs; none on the ZooKeeper designs
    ("moved/chg", "partitions_moved_per_change", 1),
    ("revoked & given back/chg", "revoked_kept_per_change", 1),
    ("attempts", "attempts", 0),
    ("conflicts", "conflicts", 0),
    ("owner NodeExists", "owner_conflicts", 0),  # from the wire: ZooKeeper designs only
    ("rebalance failures", "rebalance_failures", 0),
    ("session expiries", "session_expiries", 0),
    ("stable s*", "time_to_stable_s", 2),
    ("converged s", "max_convergence_s", 2),
    ("stop-the-world s (max)", "max_pause_s", 2),
    ("unowned p·s", "unowned_partition_s", 1),
    ("overlaps", "overlaps", 0),
    ("duplicates", "duplicates", 0),
    ("missing", "missing", 0),
]


def _cell(run: dict[str, Any] | None, label: str, column: str | None, digits: int) -> str:
    if run is None:
        return NONE
    if column is None:
        kind = "requests" if label.startswith("requests") else "notifications"
        column = HERD_METRICS[kind].get(run["design"], (None,))[0]
    value = run.get(column) if column else None
    if value is None and column in NOT_REPORTED.get(run["design"], ()):
        return f"<span title='not reported by this design&#39;s members'>{NOT_REPORTED_CELL}</span>"
    return fmt_cell(float(value) if isinstance(value, int | float) and digits else value, digits)


def comparison_table(runs: list[dict[str, Any]]) -> str:
    """Per scenario, one row per case (the same case on every design), each metric with one column per design
    that ran (designs.py order: ours, the original, the coordinator)."""
    by_case: dict[tuple[str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for run in runs:
        by_case[(run["scenario"] or "?", run["case"] or run["run_id"])][run["design"]] = run
    shown = [d for d in DESIGNS if any(r["design"] == d for r in runs)] or ["zk", "coordinator"]
    head = "".join(f"<th colspan={len(shown)}>{html.escape(label)}</th>" for label, _, _ in COMPARISON)
    sub = "".join(f"<th title='{html.escape(LABELS[d])}'>{SHORT[d]}</th>" for d in shown) * len(COMPARISON)
    rows = []
    for (scenario, case), designs in sorted(by_case.items(), key=lambda kv: (kv[0][0], _n(kv[1]), kv[0][1])):
        cells = "".join(f"<td class='{SHORT[d]}'>{_cell(designs.get(d), *m)}</td>" for m in COMPARISON for d in shown)
        n = _n(designs)
        rows.append(f"<tr><td>{html.escape(scenario)}</td><td>{html.escape(case)}</td><td>{n or NONE}</td>{cells}</tr>")
    legend = "; ".join(f"{SHORT[d]}: {html.escape(LABELS[d])}" for d in shown)
    original = ("original" in shown and f" {NOT_REPORTED_CELL}: not reported by the original (Kafka 0.8.2.2's "
                "connector has no rebalance listener; its claims, conflicts and ownership are read off the wire).")
    return (f"<table class=cmp><thead><tr><th rowspan=2>scenario</th><th rowspan=2>case</th><th rowspan=2>N</th>"
            f"{head}</tr><tr>{sub}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"<p class=note>{legend}. requests/chg: ZooKeeper requests (ZooKeeper designs) or "
            f"{html.escape(COORDINATION_LABEL)} (broker-side designs); notifications/chg: watch notifications or "
            f"{html.escape(NOTICES_LABEL)}; rounds: the group's rebalances on a broker-side design (generations, "
            f"or the consumer protocol's group epochs, as the coordinator answered them); moved/chg: partitions "
            f"whose owner differs between the churn's start and end; revoked &amp; given back/chg: partitions a "
            f"member gave up in the churn and got back in it (the eager protocols' stop-the-world); "
            f"connection losses: members' ZooKeeper connections that dropped and resumed their session in the churn "
            f"(the members' events; the wire's reconnections must agree), re-sent/chg: the requests sent again after "
            f"them (beside the requests, and in them: the protocol identities below name them); "
            f"conflicts: attempts that ended in an owner conflict, as the members "
            f"report them; owner NodeExists: owner-node creates ZooKeeper refused, counted on the wire.{original or ''}"
            f"</p>")


def _n(designs: dict[str, dict[str, Any]]) -> int:
    return next((r["members"] for r in designs.values() if r.get("members")), 0)


def verdict_html(runs: list[dict[str, Any]]) -> str:
    """The report's opening: the verdict's sentences (verdict.py), each computed from the runs."""
    findings = verdict(runs)
    if not findings:
        return ("<section id=verdict><h2>Verdict</h2><p>No scenario ran two designs to completion: nothing to "
                "compare.</p></section>")
    items = "".join(f"<li data-metric='{html.escape(f.metric)}'>{html.escape(f.text)}</li>" for f in findings)
    return ("<section id=verdict><h2>Verdict</h2><ul>" + items + "</ul><p class=note>Computed from the runs below "
            "(the median of each design at each N; lower is better for every metric). Requests and notifications "
            "are each design's own: ZooKeeper requests and watch events against "
            f"{html.escape(COORDINATION_LABEL)} and {html.escape(NOTICES_LABEL)}.</p></section>")


def _rows_table(rows: list[dict[str, Any]], columns: list[str], empty: str) -> str:
    if not rows:
        return f"<p>{html.escape(empty)}</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt_cell(r.get(c), 3))}</td>" for c in columns) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:right}th{background:#f4f4f4}
td:first-child,td:nth-child(2){text-align:left}
table.cmp td.eager{background:#fff5f5}table.cmp td.orig{background:#f3faf3}
table.cmp td.coop{background:#fff8ee}table.cmp td.kip848{background:#f7f3fb}
td.ok{background:#e8f6e8}td.bad{background:#fde8e8}
table.pred td:nth-child(9){text-align:left;max-width:40em}.note{font-size:12px;color:#555;max-width:70em}
"""


def counting_gaps_flag(runs: list[dict[str, Any]]) -> str:
    """A visible flag over the report when some runs' counts are incomplete (zkconsumer/lab/rules/gaps.py), naming each
    run and why; nothing when every run was counted in full."""
    short = [r for r in runs if r.get("counting_gaps")]
    if not short:
        return ""
    rows = "".join(f"<tr><td>{html.escape(str(r.get('run_id')))}</td><td>{html.escape(str(r.get('design')))}</td>"
                   f"<td>{html.escape(r['counting_gaps'])}</td></tr>" for r in short)
    return (f"<div class=gaps style='border:2px solid #c00;padding:4px 8px;margin:8px 0'><p><b>Counting gaps: "
            f"{len(short)} of {len(runs)} runs were not counted in full</b> (their counts are short by what the "
            "proxies could not decode, requests sent into a blackhole, whose replies never came, and trace lines "
            "that could not be read; docs/traces.md).</p><table><tr><th>run_id</th><th>design</th>"
            f"<th>counting gaps</th></tr>{rows}</table></div>")


def render(data: ReportData, path: Path) -> Path:
    """Write the report to `path` and return it."""
    parts: list[str] = []
    figures = 0

    def figure(fig: go.Figure | None, missing: str) -> None:
        nonlocal figures
        if fig is None:
            parts.append(f"<p>{html.escape(missing)}</p>")
            return
        figures += 1
        parts.append(fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False}))

    if data.chaos is not None and not data.runs:  # only campaigns were given: their section alone
        parts.append(f"<h1>{html.escape(data.title)}</h1>")
        _chaos_section(data.chaos, parts, figure)
        return _write(parts, figures, data.title, path)
    completed = sum(1 for r in data.runs if r.get("completed"))
    parts.append(f"<h1>{html.escape(data.title)}</h1><p>{len(data.runs)} runs ({completed} completed), "
                 f"{sum(1 for c in data.changes if c.get('counted'))} membership changes.</p>")
    parts.append(verdict_html(data.runs))
    parts += [f"<p class=note>{html.escape(n)}</p>" for n in data.notes]
    parts.append(counting_gaps_flag(data.runs))
    parts.append("<h2>The herd: cost per membership change against N</h2>")
    figure(herd_figure(data.runs, data.fits, "requests", data.changes), "No sweep over N in these runs.")
    figure(herd_figure(data.runs, data.fits, "notifications", data.changes), "No notifications to plot.")
    parts.append(fit_table(data.fits, data.runs, data.changes))
    parts.append("<h2>Latency</h2>")
    figure(latency_figure(data.changes, data.pauses), "No membership change with a measured latency.")
    parts.append("<h2>Ownership timeline of one rebalance per design</h2>")
    for tl in data.timelines:
        figure(timeline_figure(tl), "")
    if not data.timelines:
        parts.append("<p>No run with ownership records.</p>")
    if data.predictions or data.comparisons:
        from zkconsumer.lab.analysis.predictions import curve_figure, predictions_table

        parts.append("<h2>Predicted next to observed: the scale simulation</h2>")
        figure(curve_figure(data.runs, data.predictions), "")
        parts.append(predictions_table(data.comparisons))
    parts.append("<h2>The designs side by side</h2>")
    parts.append(comparison_table(data.runs))
    if data.modes:
        parts += modes_section(data.modes)
    parts.append("<h2 id=split-brain>Split brain: members that disagree about the group</h2>")
    parts.append(split_brain_section(data.runs, data.changes, data.contention, data.overlaps,
                                     data.overlaps_after_expiry))
    if any(r["design"] in OWNERS_FROM_WIRE for r in data.runs):
        parts.append("<p class=note>The original's ownership is its owner nodes (created to deleted, on the wire), "
                     "not its fetchers, which it does not report: two of its members can only overlap through a "
                     "dead session's node, and a fetcher still running after its session expired (0.8.2.2 keeps it "
                     "until the next rebalance) does not show. after_expiry is not reported by the original.</p>")
    if data.chaos is not None:
        _chaos_section(data.chaos, parts, figure)
    if data.migrate is not None:
        parts += migrate_section(data.migrate)
    parts.append("<h2>Trace lines that could not be used</h2>")
    parts.append(_rows_table(data.trace_errors, ["run_id", "file", "lines", "bad_lines", "first_bad_line",
                                                 "first_bad_reason", "first_bad_text"],
                             "Every trace line parsed and had its required fields."))
    return _write(parts, figures, data.title, path)


def _chaos_section(chaos: ChaosSection, parts: list[str], figure: Any) -> None:
    parts.append("<h2 id=fault-campaign>Fault campaign</h2>")
    parts.append(section_intro(chaos))
    parts.append(kinds_table(chaos.kinds))
    figure(chaos_timeline(chaos.faults), "No fault was injected in these campaigns.")


def _write(parts: list[str], figures: int, title: str, path: Path) -> Path:
    body = "\n".join(parts)
    text = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style><script type='text/javascript'>{get_plotlyjs()}</script></head>"
            f"<body data-figures='{figures}'>{body}</body></html>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
