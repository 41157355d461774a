"""The scale simulation's predictions next to the real runs they model (docs/simulation.md, docs/analysis.md).

A real run is *comparable* when each of its counted membership changes is one member joining a settled group
(the herd scenario's shape, which is what `zkconsumer.lab.sim` simulates). For each one the simulation predicts
the same change at the same N and partition count, as Spark tasks (`sweep`), and the comparison says:

* ZooKeeper requests and watch notifications per change are deterministic given the number of owner
  conflicts (each costs a failed attempt and a retry): when the real run raced and the first prediction did not
  (or the other way round), further seeds are tried for one that conflicts as often, and the row says which
  and how many were tried. They must then equal the wire counts exactly, and a row that differs says why
  (members with fetchers also commit the offsets they consumed, which rebalance-only members never have);
* JoinGroup + SyncGroup + LeaveGroup per change (coordinator) likewise;
* time to stable is a latency: the row gives the relative error of the prediction.

The predictions also run past the largest real N (powers of two up to `predict_to`), which the report draws on
the herd curve as the scale the lab cannot reach on one machine.
"""

from __future__ import annotations

import html
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from pyspark.sql import DataFrame, SparkSession

PREDICT_TO = 1024  # the herd curve's predicted tail ends here by default: about 2 s of simulation per design
SEED = 0  # the first seed tried for every prediction
CONDITION_SEEDS = 30  # further seeds tried for a prediction with as many conflicts as the real run (small N only)
CONDITION_UP_TO = 64

# per design: (observed column of the runs table, prediction column of the sweep, label)
COUNTS = {
    "zk": [("zk_requests_per_change", "zk_requests", "ZooKeeper requests"),
           ("zk_notifications_per_change", "zk_notifications", "watch notifications")],
    "coordinator": [("kafka_coordination_per_change", "coord_coordination", "JoinGroup+SyncGroup+LeaveGroup")],
    # The simulation executes this project's connector, not 0.8.2.2's: the original's requests and latencies are
    # its own (its reads, its commits, its backoff), so they are not predicted. What a join costs in watch
    # notifications is the protocol's: ZooKeeper fires each watch once per change, and every incumbent of either
    # ZooKeeper design watches /ids, so that count is checked for the original too.
    "original": [("zk_notifications_per_change", "zk_notifications", "watch notifications")],
}
STABLE = {"zk": "zk_time_to_stable_s", "coordinator": "coord_time_to_stable_s"}
CONFLICTS = {"zk": "zk_conflicts"}


@dataclass(frozen=True)
class Comparison:
    """One real run next to its prediction."""

    run_id: str
    case: str
    design: str
    process_mode: str
    members: int
    partitions: int
    metric: str
    observed: float | None
    predicted: float | None
    exact: bool | None  # None for latencies
    relative_error: float | None  # (predicted - observed) / observed, latencies only
    why: str


def _comparison_schema() -> Any:
    from pyspark.sql import types as T

    text, count, real = T.StringType(), T.IntegerType(), T.DoubleType()
    return T.StructType([
        T.StructField("run_id", text, False), T.StructField("case", text), T.StructField("design", text),
        T.StructField("process_mode", text), T.StructField("members", count), T.StructField("partitions", count),
        T.StructField("metric", text), T.StructField("observed", real), T.StructField("predicted", real),
        T.StructField("exact", T.BooleanType()), T.StructField("relative_error", real), T.StructField("why", text)])


def comparable_runs(runs: list[dict[str, Any]], changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Completed runs whose every counted change is a single member joining."""
    counted: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for change in changes:
        if change.get("counted"):
            counted[change["run_id"]].append(change)
    found = []
    for run in runs:
        mine = counted.get(run["run_id"], [])
        if (run.get("completed") and run.get("members") is not None and run.get("partitions") and mine
                and run["design"] in COUNTS
                and all(c["action"] == "join" and "," not in (c.get("change_members") or "") for c in mine)):
            found.append(run)
    return found


def predict_frame(spark: SparkSession, runs: list[dict[str, Any]], predict_to: int = PREDICT_TO) -> DataFrame | None:
    """One sweep row per (N, partitions) of the comparable runs, plus the powers of two above the largest real N
    up to `predict_to` at the most common partition count."""
    from zkconsumer.lab.sim.sweep import SweepPoint, sweep

    sizes = {(r["members"], r["partitions"]) for r in runs}
    if not sizes:
        return None
    partitions = max({p for _, p in sizes}, key=lambda p: sum(1 for _, q in sizes if q == p))
    n = max(m for m, _ in sizes)
    while n * 2 <= predict_to:
        n *= 2
        sizes.add((n, partitions))
    return sweep([SweepPoint(members=m, partitions=p, seed=SEED) for m, p in sorted(sizes)], spark)


def compare(runs: list[dict[str, Any]], predictions: list[dict[str, Any]]) -> list[Comparison]:
    by_size = {(p["members"], p["partitions"]): p for p in predictions}
    rows: list[Comparison] = []
    for run in sorted(runs, key=lambda r: (r["design"], r.get("process_mode") or "", r["members"], r["run_id"])):
        p = by_size.get((run["members"], run["partitions"]))
        if p is None:
            continue
        base = dict(run_id=run["run_id"], case=run.get("case") or run["run_id"], design=run["design"],
                    process_mode=run.get("process_mode") or "?", members=run["members"], partitions=run["partitions"])
        conditioned, note = _same_conflicts(run, p)
        for observed_col, predicted_col, label in COUNTS[run["design"]]:
            observed, predicted = run.get(observed_col), conditioned[predicted_col]
            exact = observed is not None and observed == predicted
            why = note if exact else "; ".join(filter(None, [note, _why(run, conditioned)]))
            rows.append(Comparison(**base, metric=label, observed=observed, predicted=predicted, exact=exact,
                                   relative_error=None, why=why))
        if run["design"] not in STABLE:  # the original: its latencies are not the simulated connector's
            continue
        observed, predicted = run.get("time_to_stable_s"), conditioned[STABLE[run["design"]]]
        error = (predicted - observed) / observed if observed and predicted is not None else None
        rows.append(Comparison(**base, metric="time to stable (s)", observed=observed, predicted=predicted,
                               exact=None, relative_error=error, why=""))
    return rows


def _same_conflicts(run: dict[str, Any], prediction: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Counts are deterministic *given* the conflicts: when the real run raced (an owner conflict) and the
    prediction did not, or the other way round, predict again with the next seeds until one conflicts as often,
    and say how rare that was in the simulation (a measure of how well its latencies reproduce the race)."""
    column = CONFLICTS.get(run["design"])
    wanted = run.get("conflicts") or 0
    if column is None or (prediction.get(column) or 0) == wanted or run["members"] > CONDITION_UP_TO:
        return prediction, ""
    from zkconsumer.lab.sim.sweep import SweepPoint, predict

    tried = 1
    for seed in range(SEED + 1, SEED + 1 + CONDITION_SEEDS):
        tried += 1
        again = predict(SweepPoint(members=run["members"], partitions=run["partitions"], seed=seed))
        if (again.get(column) or 0) == wanted:
            return again, (f"predicted with seed {seed}, the first of {tried} seeds whose join had {wanted} "
                           f"conflict(s) as the real one did")
    return prediction, f"no seed of {tried} had {wanted} conflict(s) as the real run did"


def _why(run: dict[str, Any], prediction: dict[str, Any]) -> str:
    reasons = []
    column = CONFLICTS.get(run["design"])
    if column and (run.get("conflicts") or 0) != (prediction.get(column) or 0):
        reasons.append(f"conflicts: {run.get('conflicts') or 0} real, {prediction.get(column) or 0} predicted "
                       "(each costs a failed attempt and a retry)")
    if run["design"] == "original":
        reasons.append("the original's own watches: a count that differs here is a protocol difference the "
                       "simulation does not know (docs/analysis.md)")
    if run["design"] == "zk" and run.get("process_mode") == "processes":
        reasons.append("members with fetchers commit consumed offsets on release; rebalance-only members "
                       "(the simulation, --members threads) have none to commit")
    if not run.get("changes") or run["changes"] != 1:
        reasons.append(f"{run.get('changes')} changes averaged")
    return "; ".join(reasons) or "unexplained: see docs/simulation.md"


def rows_as_dicts(rows: list[Comparison]) -> list[dict[str, Any]]:
    """As rows of `comparison_schema()` (counts as floats: a per-change average need not be whole)."""
    return [{**vars(r), "observed": _float(r.observed), "predicted": _float(r.predicted)} for r in rows]


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def comparison_schema() -> Any:
    return _comparison_schema()


def predictions_table(rows: list[Comparison]) -> str:
    """The HTML table of the report's "predicted next to observed" section."""
    if not rows:
        return ("<p>No run of one member joining a settled group (the herd scenario's shape): nothing the "
                "simulation predicts to compare with.</p>")
    exact = [r for r in rows if r.exact is not None]
    matched = sum(1 for r in exact if r.exact)
    body = []
    for r in rows:
        if r.exact is None:
            verdict = "-" if r.relative_error is None else f"{r.relative_error:+.0%}"
            css = ""
        else:
            verdict, css = ("exact", " class=ok") if r.exact else ("differs", " class=bad")
        body.append(f"<tr><td>{html.escape(r.case)}</td><td>{html.escape(r.design)}</td>"
                    f"<td>{html.escape(r.process_mode)}</td><td>{r.members}</td><td>{html.escape(r.metric)}</td>"
                    f"<td>{_num(r.observed)}</td><td>{_num(r.predicted)}</td><td{css}>{verdict}</td>"
                    f"<td>{html.escape(r.why)}</td></tr>")
    return (f"<p><b>{matched} of {len(exact)}</b> deterministic counts predicted exactly.</p>"
            "<table class=pred><thead><tr><th>case</th><th>design</th><th>members as</th><th>N</th><th>metric</th>"
            "<th>observed</th><th>predicted</th><th>match / error</th><th>why</th></tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>"
            "<p class=note>Predictions: zkconsumer.lab.sim (the ZooKeeper design executed on a virtual clock, "
            "the coordinator as a model of its state machine), one Spark task per group size. Counts per "
            "membership change; latency error = (predicted - observed) / observed.</p>")


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"


def curve_figure(runs: list[dict[str, Any]], predictions: list[dict[str, Any]]) -> go.Figure | None:
    """Requests per join against N on log-log axes: the real runs as markers, the predictions as lines that go
    on past the largest real N."""
    import plotly.graph_objects as go

    if not predictions:
        return None
    from zkconsumer.lab.analysis.report import COLORS, DESIGN_NAMES

    fig = go.Figure()
    for design, (observed_col, predicted_col, label) in (("zk", COUNTS["zk"][0]),
                                                          ("coordinator", COUNTS["coordinator"][0])):
        pts = sorted((p["members"], p[predicted_col]) for p in predictions if p[predicted_col])
        fig.add_trace(go.Scatter(x=[x for x, _ in pts], y=[y for _, y in pts], mode="lines",
                                 name=f"{DESIGN_NAMES[design]}: {label}, predicted",
                                 line={"color": COLORS[design], "dash": "dash"}))
        real = sorted((r["members"], r[observed_col]) for r in runs if r["design"] == design and r.get(observed_col))
        modes = sorted({r.get("process_mode") or "?" for r in runs if r["design"] == design})
        fig.add_trace(go.Scatter(x=[x for x, _ in real], y=[y for _, y in real], mode="markers",
                                 name=f"{DESIGN_NAMES[design]}: observed ({', '.join(modes)})",
                                 marker={"color": COLORS[design], "size": 9, "symbol": "circle-open"}))
    fig.update_layout(title="one join: observed and predicted requests per change, N up to "
                            f"{max(p['members'] for p in predictions)}",
                      xaxis={"type": "log", "title": "N (group size before the join)"},
                      yaxis={"type": "log", "title": "requests per change"}, height=480, legend={"font": {"size": 10}})
    return fig
