"""The herd section of the report: cost per membership change against N, observed next to each design's closed
form (closed_forms.py, docs/join-cost.md), and the table of polynomial fits with their residuals.

The closed forms are drawn only for sweeps whose every change is one member joining (the herd's shape), where
M = N + 1; a ZooKeeper join with an owner conflict costs more than its closed form by its retry, and members with
fetchers add their commits, so a point off its line is shown off it, never adjusted.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from zkconsumer.lab.analysis.closed_forms import closed_form, single_joins
from zkconsumer.lab.designs import BROKER_SIDE_DESIGNS, DESIGNS, LABELS, ZOOKEEPER_DESIGNS

DESIGN_NAMES = LABELS
NONE = "-"  # an empty cell of the report's tables
COLORS = {"zk": "#1f77b4", "original": "#2ca02c", "coordinator": "#d62728", "cooperative": "#ff7f0e",
          "consumer": "#9467bd", "consumer-java": "#8c564b"}
# What a broker-side design's requests and notifications are (rules/protocol.py, herd.py): the classic protocol's
# JoinGroup, SyncGroup and LeaveGroup, and the consumer protocol's heartbeats that join, leave or acknowledge; the
# answers that tell a member to rebalance
COORDINATION_LABEL = "JoinGroup+SyncGroup+LeaveGroup+group-changing ConsumerGroupHeartbeats"
NOTICES_LABEL = "REBALANCE_IN_PROGRESS responses and heartbeat answers with a new assignment"
# (column in runs, label) per design: what plays "requests per change" and "notifications per change"; the
# ZooKeeper designs are one protocol, so they are counted alike (designs.py), and so are the broker-side ones
# (herd.FIT_METRICS fits the same columns)
HERD_METRICS = {
    "requests": {**{d: ("zk_requests_per_change", "ZooKeeper requests") for d in ZOOKEEPER_DESIGNS},
                 **{d: ("kafka_coordination_per_change", COORDINATION_LABEL) for d in BROKER_SIDE_DESIGNS}},
    "notifications": {**{d: ("zk_notifications_per_change", "watch notifications") for d in ZOOKEEPER_DESIGNS},
                      **{d: ("rebalance_notices_per_change", NOTICES_LABEL) for d in BROKER_SIDE_DESIGNS}},
}


def fmt_cell(value: Any, digits: int = 1) -> str:
    """A table cell of the report: NONE for a missing or NaN value, large numbers without decimals."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NONE
    if isinstance(value, float):
        return f"{value:.{digits}f}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def _series_key(run: dict[str, Any]) -> tuple[str, str, str]:
    return run["scenario"] or "?", run["process_mode"] or "?", run["design"] or "?"


def _series(runs: list[dict[str, Any]], kind: str) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    """Runs per (scenario, process mode, design) with a value of the kind's metric, for scenarios whose runs span
    at least two group sizes."""
    spans: dict[str, set[int]] = defaultdict(set)
    for run in runs:
        if run["members"]:
            spans[run["scenario"]].add(run["members"])
    series: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        metric = HERD_METRICS[kind].get(run["design"])
        if metric is None or len(spans.get(run["scenario"], ())) < 2 or not run["members"]:
            continue
        if run.get(metric[0]) is not None:
            series[_series_key(run)].append(run)
    return series


def _closed_line(key: tuple[str, str, str], runs: list[dict[str, Any]], column: str,
                 joins: set[str]) -> tuple[list[int], list[float], str] | None:
    """The design's closed form at the series' N, when every run of the series is a single join at one P."""
    _, mode, design = key
    partitions = {r["partitions"] for r in runs}
    if len(partitions) != 1 or not all(r["run_id"] in joins for r in runs):
        return None
    ns = sorted({r["members"] for r in runs})
    forms = [form for n in ns if (form := closed_form(design, mode, column, n, runs[0]["partitions"])) is not None]
    if len(forms) != len(ns):
        return None
    return ns, [float(f.value) for f in forms], forms[0].formula


def herd_figure(runs: list[dict[str, Any]], fits: list[dict[str, Any]], kind: str,
                changes: list[dict[str, Any]] | None = None) -> go.Figure | None:
    """Per-change cost against N on log-log axes, one series per (scenario, process mode, design): the observed
    runs as markers, each design's closed form as a line (single-join sweeps), the fitted polynomial as a thin
    dashed line. Notifications get one panel per design: both are N per join by the protocol, and on one pair of
    axes one series would hide the other."""
    series = _series(runs, kind)
    if not series:
        return None
    joins = {r["run_id"] for r in single_joins(runs, changes or [])}
    fit_of = {(f["scenario"], f["process_mode"], f["design"], f["metric"]): f for f in fits}
    panels = [d for d in DESIGNS if any(design == d for _, _, design in series)]
    if kind == "notifications" and len(panels) > 1:
        fig = make_subplots(rows=1, cols=len(panels), shared_yaxes=True,
                            subplot_titles=[DESIGN_NAMES.get(d, d) for d in panels])
    else:
        fig, panels = go.Figure(), []
    for key, mine in sorted(series.items(), key=lambda kv: (kv[0][0], kv[0][1], DESIGNS.index(kv[0][2])
                                                            if kv[0][2] in DESIGNS else len(DESIGNS))):
        scenario, mode, design = key
        column, label = HERD_METRICS[kind][design]
        where = {"row": 1, "col": panels.index(design) + 1} if panels else {}
        points = sorted((r["members"], r[column]) for r in mine)
        name = f"{scenario} · {DESIGN_NAMES.get(design, design)} ({mode}): {label}"
        fig.add_trace(go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="markers", name=name,
                                 marker={"color": COLORS.get(design), "size": 9,
                                         "symbol": "circle-open" if mode == "threads" else "diamond-open"}),
                      **where)
        closed = _closed_line(key, mine, column, joins)
        if closed is not None:
            ns, values, formula = closed
            fig.add_trace(go.Scatter(x=ns, y=values, mode="lines", name=f"closed form {formula} ({mode})",
                                     line={"color": COLORS.get(design), "width": 1.5,
                                           "dash": "solid" if mode == "threads" else "dot"}), **where)
        fit = fit_of.get((scenario, mode, design, column))
        if fit is not None:
            xs = [fit["n_min"] * (fit["n_max"] / fit["n_min"]) ** (i / 20) for i in range(21)]
            fig.add_trace(go.Scatter(x=xs, y=[_fitted(fit, x) for x in xs], mode="lines", name=f"fit {_formula(fit)}",
                                     line={"color": COLORS.get(design), "width": 1, "dash": "dash"}), **where)
    if kind == "requests":
        title = "requests per membership change vs N: observed (markers), closed form (line), fit (dashed)"
    else:
        title = ("notifications per membership change vs N: watch events (ZooKeeper designs), rebalance notices "
                 "(broker-side designs; the eager coordinator notifies each incumbent once per join, N)")
    fig.update_layout(title={"text": title, "font": {"size": 14}}, height=520, legend={"font": {"size": 10}})
    fig.update_xaxes(type="log", title="N (initial group size)")
    fig.update_yaxes(type="log", title=f"{kind} per change")
    return fig


def _fitted(fit: dict[str, Any], x: float) -> float:
    return (fit["a2"] or 0.0) * x * x + fit["a1"] * x + fit["a0"]


def _formula(fit: dict[str, Any]) -> str:
    terms = ([f"{fit['a2']:.2f}·N²"] if fit.get("a2") is not None else []) + [f"{fit['a1']:.2f}·N", f"{fit['a0']:.1f}"]
    return " + ".join(terms).replace("+ -", "- ")


def _closed_residuals(fit: dict[str, Any], runs: list[dict[str, Any]], joins: set[str]) -> tuple[str, str]:
    """(the closed form, the largest |observed - closed form| over the sweep's runs) or dashes."""
    key = (fit["scenario"], fit["process_mode"], fit["design"])
    mine = [r for r in runs if _series_key(r) == key and r.get(fit["metric"]) is not None and r["members"]]
    closed = _closed_line(key, mine, fit["metric"], joins) if mine else None
    if closed is None:
        return NONE, NONE
    by_n = dict(zip(closed[0], closed[1], strict=True))
    worst = max(mine, key=lambda r: abs(r[fit["metric"]] - by_n[r["members"]]))
    residual = worst[fit["metric"]] - by_n[worst["members"]]
    raced = sum(1 for r in mine if r.get("conflicts") or r.get("owner_conflicts"))
    note = f" (N = {worst['members']})" if residual else ""
    return (html.escape(closed[2]), f"{residual:+.1f}{note}" + (f"; {raced} run(s) raced" if raced else ""))


def fit_table(fits: list[dict[str, Any]], runs: list[dict[str, Any]] | None = None,
              changes: list[dict[str, Any]] | None = None) -> str:
    if not fits:
        return "<p>No sweep over enough group sizes for a fit (a·N + b needs two, a·N² + b·N + c three).</p>"
    joins = {r["run_id"] for r in single_joins(runs or [], changes or [])}
    rows = []
    for f in fits:
        formula, residual = _closed_residuals(f, runs or [], joins)
        rows.append(
            f"<tr><td>{html.escape(str(f['scenario']))}</td><td>{html.escape(str(f['design']))}</td>"
            f"<td>{html.escape(str(f['process_mode']))}</td><td>{html.escape(f['metric'])}</td><td>{f['runs']}</td>"
            f"<td>{fmt_cell(f['n_min'], 0)} to {fmt_cell(f['n_max'], 0)}</td><td><b>{html.escape(_formula(f))}</b></td>"
            f"<td>{fmt_cell(f['rms_residual'], 2)}</td><td>{fmt_cell(f['max_abs_residual'], 2)}</td>"
            f"<td>{formula}</td><td>{residual}</td></tr>")
    return ("<table><thead><tr><th>scenario</th><th>design</th><th>members as</th><th>metric</th><th>runs</th>"
            "<th>N</th><th>least-squares fit</th><th>rms residual</th><th>max |mean - fit|</th>"
            "<th>closed form (M = N + 1)</th><th>largest observed - closed form</th></tr>"
            f"</thead><tbody>{''.join(rows)}</tbody></table><p class=note>The costs are polynomials by the protocol "
            "(docs/join-cost.md), so they are fitted as such: a·N² + b·N + c for ZooKeeper requests, a·N + b for "
            "the rest, by least squares over every run of the sweep. Ours costs M² + 7·M + 3·P + 3 requests per "
            "join rebalance-only (M² + 9·M + 3·P + 3 with fetchers), the original M² + 11·M + 3·P + 2 (M² + 13·M + "
            "3·P + 2), with one broker; the eager coordinator 2·N + 3 JoinGroup + SyncGroup + LeaveGroup, the "
            "cooperative design 4·N + 5 (a second generation after its revoke); the consumer protocol's "
            "acknowledging heartbeats have no closed form (zkconsumer/lab/rules/identities.py). At small N the "
            "3·P term dominates a ZooKeeper join; the N² term overtakes it from N ≈ sqrt(3·P). A join that raced "
            "(an owner conflict) costs a retry more than its closed form.</p>")
