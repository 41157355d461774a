"""The herd section of the report: cost per membership change against N, and the fit table.

One module so the herd's chart and table change together, apart from the rest of the report.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from typing import Any

import plotly.graph_objects as go

from zkconsumer.lab.designs import LABELS, ZOOKEEPER_DESIGNS

DESIGN_NAMES = LABELS
NONE = "-"
COLORS = {"zk": "#1f77b4", "original": "#2ca02c", "coordinator": "#d62728"}
# (column in runs, label) per design: what plays "requests per change" and "notifications per change"; the
# ZooKeeper designs are one protocol, so they are counted alike (designs.py)
HERD_METRICS = {
    "requests": {**{d: ("zk_requests_per_change", "ZooKeeper requests") for d in ZOOKEEPER_DESIGNS},
                 "coordinator": ("kafka_coordination_per_change", "JoinGroup+SyncGroup+LeaveGroup")},
    "notifications": {**{d: ("zk_notifications_per_change", "watch notifications") for d in ZOOKEEPER_DESIGNS},
                      "coordinator": ("rebalance_notices_per_change", "REBALANCE_IN_PROGRESS responses")},
}


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NONE
    if isinstance(value, float):
        return f"{value:.{digits}f}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def _series_key(run: dict[str, Any]) -> tuple[str, str, str]:
    return run["scenario"] or "?", run["process_mode"] or "?", run["design"] or "?"


def herd_figure(runs: list[dict[str, Any]], fits: list[dict[str, Any]], kind: str) -> go.Figure | None:
    """Per-change cost against N on log-log axes, one series per (scenario, process mode, design), with the
    fitted power law and its exponent. Only scenarios whose runs span at least two group sizes."""
    spans: dict[str, set[int]] = defaultdict(set)
    for run in runs:
        if run["members"]:
            spans[run["scenario"]].add(run["members"])
    series: dict[tuple[str, str, str], list[tuple[float, float]]] = defaultdict(list)
    for run in runs:
        metric = HERD_METRICS[kind].get(run["design"])
        if metric is None or len(spans.get(run["scenario"], ())) < 2:
            continue
        value = run.get(metric[0])
        if value and run["members"]:
            series[_series_key(run)].append((run["members"], value))
    if not series:
        return None
    fig = go.Figure()
    fit_of = {(f["scenario"], f["process_mode"], f["design"], f["metric"]): f for f in fits}
    for (scenario, mode, design), points in sorted(series.items()):
        column, label = HERD_METRICS[kind][design]
        points.sort()
        name = f"{scenario} · {DESIGN_NAMES.get(design, design)} ({mode}): {label}"
        fit = fit_of.get((scenario, mode, design, column))
        if fit is not None:
            ci = (f" [{fit['ci95_low']:.2f}, {fit['ci95_high']:.2f}]" if fit["ci95_low"] is not None else "")
            name += f", k = {fit['exponent']:.2f}{ci}"
        dash = "dot" if mode == "threads" else "solid"
        fig.add_trace(go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="markers+lines",
                                 name=name, line={"color": COLORS.get(design), "dash": dash}, opacity=0.85))
        if fit is not None:
            xs = [fit["n_min"] * (fit["n_max"] / fit["n_min"]) ** (i / 20) for i in range(21)]
            fig.add_trace(go.Scatter(x=xs, y=[fit["coefficient"] * x ** fit["exponent"] for x in xs], mode="lines",
                                     line={"color": COLORS.get(design), "width": 1, "dash": "dash"},
                                     name=f"fit {fit['coefficient']:.2g}·N^{fit['exponent']:.2f}", showlegend=True))
    title = ("requests per membership change vs N" if kind == "requests"
             else "notifications per membership change vs N")
    fig.update_layout(title=title, xaxis={"type": "log", "title": "N (initial group size)"},
                      yaxis={"type": "log", "title": f"{kind} per change"}, height=520,
                      legend={"font": {"size": 10}})
    return fig


def fit_table(fits: list[dict[str, Any]]) -> str:
    if not fits:
        return "<p>No sweep over N with at least two group sizes: no growth exponent.</p>"
    rows = "".join(
        f"<tr><td>{html.escape(str(f['scenario']))}</td><td>{html.escape(str(f['design']))}</td>"
        f"<td>{html.escape(str(f['process_mode']))}</td><td>{html.escape(f['metric'])}</td><td>{f['runs']}</td>"
        f"<td>{_fmt(f['n_min'], 0)} to {_fmt(f['n_max'], 0)}</td><td><b>{f['exponent']:.2f}</b></td>"
        f"<td>{_fmt(f['ci95_low'], 2)} … {_fmt(f['ci95_high'], 2)}</td><td>{_fmt(f['r2'], 3)}</td>"
        f"<td>{_fmt(f['tail_exponent'], 2)}</td></tr>"
        for f in fits)
    return ("<table><thead><tr><th>scenario</th><th>design</th><th>members as</th><th>metric</th><th>runs</th>"
            "<th>N</th><th>exponent k</th><th>95% CI</th><th>r²</th><th>k between the two largest N</th></tr>"
            f"</thead><tbody>{rows}</tbody></table><p class=note>k: least squares of log(per-change cost) on log N "
            "over the whole sweep, with a Student-t 95% interval. A cost such as N² + 7N + 3P (docs/join-cost.md) "
            "has a local slope that rises towards 2 only where N² outgrows the constant, so the whole-sweep k is "
            "lower than the last column.</p>")
