"""The scale simulation's predictions next to the real runs they model (docs/simulation.md, docs/analysis.md).

A real run is *comparable* when it completed with no counting gap (zkconsumer/lab/rules/gaps.py) and each of its counted
membership changes is one member joining a settled group (the herd scenario's shape, which is what
`zkconsumer.lab.sim` simulates). Its rows are of two kinds:

* **identities** (`kind="identity"`): what the protocol fixes whatever the seed or the latencies (closed_forms.py):
  watch notifications per join = N, a conflict-free rebalance-only join's ZooKeeper requests = M² + 7·M + 3·P + 3
  (the original's M² + 11·M + 3·P + 2), the coordinator's JoinGroup + SyncGroup + LeaveGroup = 2·N + 3 (the
  cooperative design's 4·N + 5), and per broker-side run each identity of identities.broker_side_join: the eager
  JoinGroup = N + 2, SyncGroup = N + 1, one generation; the cooperative's 2·N + 3 and 2·N + 2 over two generations;
  the consumer protocol's one epoch-0 heartbeat, one group epoch and no classic request. They are checks of the
  lab's counting and of docs/join-cost.md, one per run, reported as
  "k of k identities hold": the simulation cannot get them wrong, so they are no evidence for it;
* **predictions** (`kind="prediction"`), one per (design, members as, N), which can come out otherwise:
  the rate of joins that raced (an owner conflict), the ZooKeeper requests per join averaged over the seeds
  *including* the conflicts the simulation produces, and the time to stable; for each broker-side design the
  simulation models (eager, cooperative, the consumer protocol: `BROKER_COUNTS`) also its coordination requests
  per join, rounds, partitions moved and partitions revoked and given back. Every prediction is made with the
  run's own `[coordinator]` session and heartbeat (its manifest's, `coordinator_settings`). The simulation runs
  every seed of `SEEDS`, a set fixed before any run it is compared with and never chosen by outcome. A count or a
  time holds when its relative error is within `TOLERANCE` (an observed 0 only at exactly 0); a race rate when its
  Wilson 95% interval over the seeds overlaps the one over the real runs. Times to stable are predicted out of
  sample (calibration.py). The consumer protocol is compared on time to stable, not on noticing: the model counts
  an incumbent's new-epoch answer as noticing even when nothing of its own changed, the lab only an answer that
  carries an assignment (docs/simulation.md).

The predictions also run past the largest real N (powers of two up to `predict_to`, the first seed only), which the
report draws on the herd curve as the scale the lab cannot reach on one machine.
"""

from __future__ import annotations

import functools
import html
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any

from zkconsumer.lab.analysis.closed_forms import API_COLUMNS, closed_form, protocol_identities, single_joins
from zkconsumer.lab.designs import BROKER_SIDE_DESIGNS, ZOOKEEPER_DESIGNS
from zkconsumer.lab.rules.gaps import countable
from zkconsumer.lab.sim.sweep import NEWER_MODELS

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from pyspark.sql import DataFrame, SparkSession

PREDICT_TO = 1024  # the herd curve's predicted tail ends here by default: about 2 s of simulation per design
# Fixed when this rule was written, before the runs it is compared with: every prediction is the simulation over
# these seeds, whatever the real runs did. The tail above the largest real N runs SEEDS[0] only (a drawing).
SEEDS: tuple[int, ...] = tuple(range(12))
TOLERANCE = 0.25  # a predicted count or time holds within ±25% of the observed mean (stated before any run)
# The simulation's model of the lab's machine: queues at the server, the proxy and the members' hosts with service
# times measured by a benchmark alone, never fitted to herd runs (zkconsumer.lab.sim.capacity.LAB).
CAPACITY = "lab"
SWEEP_TASKS_PER_CORE = 2  # the predictions' sweep tasks (sweep.share): enough that one large group does not wait
Z95 = 1.959964  # the standard normal's 97.5% quantile: two-sided 95% intervals

IDENTITY, PREDICTION = "identity", "prediction"
# The broker-side designs the simulation models, each with its sweep columns' prefix (sweep.py: the eager model's
# columns are coord_*, the newer ones' are named after the design).
SIM_PREFIX = {"coordinator": "coord", **{design: design for design in NEWER_MODELS}}
# the simulation executes this project's connector and models the broker
PREDICTED_DESIGNS = ("zk", *SIM_PREFIX)
STABLE = {"zk": "zk_time_to_stable_s",
          **{design: f"{prefix}_time_to_stable_s" for design, prefix in SIM_PREFIX.items()}}
# Per broker-side join: (the runs table's column, the sweep column's measure after the prefix, the label's key).
BROKER_COUNTS = (("kafka_coordination_per_change", "coordination", "kafka_coordination_per_change"),
                 ("rounds", "rounds", "rounds"),
                 ("partitions_moved_per_change", "partitions_moved", "partitions_moved"),
                 ("revoked_kept_per_change", "revoked_kept", "revoked_kept"))
# A run's settings and the sweep rows made with them: (N, partitions, heartbeat ms, session ms); None where a run
# records no `[coordinator]` (the model's defaults, the herd scenario's, are used for it and for its prediction).
Key = tuple[int, int, int | None, int | None]
IDENTITY_METRICS = {
    "zk": ("zk_notifications_per_change", "zk_requests_per_change"),
    "original": ("zk_notifications_per_change", "zk_requests_per_change"),
    # every broker-side run: its coordination requests where the protocol fixes them, then broker_side_join's
    # identities (`_protocol_rows`)
    **{design: ("kafka_coordination_per_change",) for design in BROKER_SIDE_DESIGNS},
}
LABELS = {"zk_notifications_per_change": "watch notifications per join",
          "zk_requests_per_change": "ZooKeeper requests per join",
          "kafka_coordination_per_change": "coordination requests per join",
          "generations_per_change": "generations per join",
          "rounds": "rounds per join",
          "partitions_moved": "partitions moved per join",
          "revoked_kept": "partitions revoked and given back per join",
          "race": "joins that raced (an owner conflict)",
          "stable": "time to stable (s)"}


@dataclass(frozen=True)
class Comparison:
    """An identity (one run) or a prediction (every comparable run of one design, members-as mode and N)."""

    kind: str  # IDENTITY or PREDICTION
    case: str  # the run's case, or "N = 4 (3 runs)"
    design: str
    process_mode: str
    members: int
    partitions: int
    metric: str
    observed: float | None
    predicted: float | None  # the closed form (identities), the mean or rate over SEEDS (predictions)
    holds: bool | None  # identity equal / within TOLERANCE / intervals overlap; None: nothing to judge
    relative_error: float | None = None  # (predicted - observed) / observed
    observed_low: float | None = None  # Wilson 95% intervals of a rate
    observed_high: float | None = None
    predicted_low: float | None = None
    predicted_high: float | None = None
    samples: str = ""  # "3 runs; 12 seeds"
    why: str = ""


def wilson(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (Wilson 1927): unlike p ± z·sqrt(p(1-p)/n) it stays inside [0, 1]
    and is not empty at 0 of n or n of n, which are exactly the rates the join race produces."""
    if trials <= 0:
        raise ValueError("a rate needs at least one trial")
    if not 0 <= successes <= trials:
        raise ValueError(f"{successes} successes of {trials} trials")
    p, z2 = successes / trials, z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z / (1 + z2 / trials) * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials))
    return max(0.0, centre - half), min(1.0, centre + half)


def comparable_runs(runs: list[dict[str, Any]], changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Countable runs (completed, no counting gap) whose every counted change is a single member joining, of a
    design the rows cover."""
    return [r for r in single_joins(runs, changes) if countable(r) and r["design"] in IDENTITY_METRICS]


def coordinator_settings(run: dict[str, Any]) -> tuple[int | None, int | None]:
    """(heartbeat interval, session timeout) in ms of the run's `[coordinator]`, as its manifest records the
    scenario it ran (`lab run --settings shipped` rewrites them per design, rules/shipped.py); every broker-side design
    of a run, the consumer protocol's KRaft broker included (servers.kraft_settings), runs with these. The runs
    table keeps the ZooKeeper session for the ZooKeeper designs, so the manifest is read; (None, None) without one."""
    path = run.get("path")
    return _manifest_settings(str(path)) if path else (None, None)


@functools.cache
def _manifest_settings(run_dir: str) -> tuple[int | None, int | None]:
    try:
        manifest = json.loads((Path(run_dir) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None
    section = (manifest.get("scenario_definition") or {}).get("coordinator") or {}
    heartbeat, session = section.get("heartbeat_interval_ms"), section.get("session_timeout_ms")
    return (None if heartbeat is None else int(heartbeat)), (None if session is None else int(session))


def run_key(run: dict[str, Any]) -> Key:
    return (run["members"], run["partitions"], *coordinator_settings(run))


def sweep_key(row: dict[str, Any]) -> Key:
    """A sweep row's run key: the settings it was simulated with."""
    return (row["members"], row["partitions"], row.get("heartbeat_interval_ms"), row.get("session_timeout_ms"))


def predict_frame(spark: SparkSession, runs: list[dict[str, Any]], predict_to: int = PREDICT_TO) -> DataFrame | None:
    """Every seed of SEEDS per (N, partitions, heartbeat, session) of the comparable runs, plus SEEDS[0] at the
    powers of two above the largest real N up to `predict_to`, at the most common partition count and settings."""
    from zkconsumer.lab.sim.sweep import sweep

    keys = [run_key(r) for r in runs if r["design"] in PREDICTED_DESIGNS]
    if not keys:
        return None
    points = [_point(key, s) for key in sorted(set(keys), key=repr) for s in SEEDS]
    _, partitions, heartbeat, session = max(set(keys), key=lambda k: (sum(1 for q in keys if q[1:] == k[1:]), repr(k)))
    n = max(k[0] for k in keys)
    while n * 2 <= predict_to:
        n *= 2
        points.append(_point((n, partitions, heartbeat, session), SEEDS[0]))
    # a few tasks per core, not one per point: most points are small groups, cheaper to simulate than to schedule
    return sweep(points, spark, tasks=SWEEP_TASKS_PER_CORE * spark.sparkContext.defaultParallelism)


def _point(key: Key, seed: int) -> Any:
    from zkconsumer.lab.sim.sweep import SweepPoint

    members, partitions, heartbeat, session = key
    return SweepPoint(members=members, partitions=partitions, seed=seed, capacity=CAPACITY,
                      heartbeat_interval_ms=heartbeat, session_timeout_ms=session)


def mean_by_size(predictions: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per N (the most common partition count first met): each numeric column's mean over the seeds of SEEDS
    (the tail's single seed where that is all there is)."""
    by_n: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for p in predictions:
        if p.get("seed") in SEEDS:
            by_n[p["members"]].append(p)
    means = {}
    for n, rows in by_n.items():
        means[n] = {k: fmean(r[k] for r in rows) if isinstance(rows[0][k], (int, float))
                    and not isinstance(rows[0][k], bool) and all(r[k] is not None for r in rows) else rows[0][k]
                    for k in rows[0]}
    return means


def identities(runs: list[dict[str, Any]]) -> list[Comparison]:
    """One row per run and protocol identity (closed_forms.py). A ZooKeeper join's request count is fixed only
    without an owner conflict (each costs a failed attempt and a retry) and without fetchers (whose members also
    commit what they consumed), so such runs have no request identity: their cost is a prediction."""
    rows = []
    for run in sorted(runs, key=lambda r: (r["design"], r.get("process_mode") or "", r["members"], r["run_id"])):
        mode = run.get("process_mode") or "?"
        checks: list[tuple[str, float | None, float, str]] = []  # (metric label, observed, expected, formula)
        for metric in IDENTITY_METRICS.get(run["design"], ()):
            if metric == "zk_requests_per_change" and (mode != "threads" or _raced(run)):
                continue
            form = closed_form(run["design"], mode, metric, run["members"], run["partitions"])
            if form is not None and metric == "zk_requests_per_change":
                checks.append(_requests_check(run, form.value, form.formula))
            elif form is not None:
                checks.append((LABELS[metric], _observed(run, metric), float(form.value), form.formula))
        if run["design"] in BROKER_SIDE_DESIGNS:
            checks += _protocol_rows(run)
        rows += [Comparison(IDENTITY, run.get("case") or run["run_id"], run["design"], mode, run["members"],
                            run["partitions"], label, observed, expected,
                            None if observed is None else observed == expected and _attributed(run, label),
                            samples="1 run", why=_why(formula))
                 for label, observed, expected, formula in checks]
    return rows


def _why(formula: str) -> str:
    """"= M² + 7·M + 3·P + 3 (M = N + 1)"; an attributed request count keeps its own words after the formula."""
    form, _, after = formula.partition(" + re-sent ")
    return f"= {form}" + (" (M = N + 1)" if "M" in form else "") + (f" + re-sent {after}" if after else "")


def _requests_check(run: dict[str, Any], value: float, formula: str) -> tuple[str, float | None, float, str]:
    """A ZooKeeper join's requests against its closed form, with the requests its connection losses re-sent
    (rules/reconnects.py): "formula + re-sent R after N connection losses", expected F + R per change; plain without a
    loss. Rows without the loss columns (older tables) are the plain formula."""
    label = LABELS["zk_requests_per_change"]
    losses, reconnections = run.get("connection_losses") or 0, run.get("zk_reconnections") or 0
    resent = run.get("resent_requests_per_change") or 0.0
    if not (losses or reconnections or resent):
        return label, _observed(run, "zk_requests_per_change"), float(value), formula
    attributed = (f" + re-sent {resent:g} after {losses} connection loss{'es' if losses != 1 else ''}"
                  + ("" if losses == reconnections else f" (the wire saw {reconnections} reconnections: "
                                                        "not attributed)"))
    return label, _observed(run, "zk_requests_per_change"), float(value) + resent, formula + attributed


def _attributed(run: dict[str, Any], label: str) -> bool:
    """False where the request identity's losses are not the wire's reconnections (the identity cannot hold)."""
    if label != LABELS["zk_requests_per_change"]:
        return True
    return (run.get("connection_losses") or 0) == (run.get("zk_reconnections") or 0)


def _protocol_rows(run: dict[str, Any]) -> list[tuple[str, float | None, float, str]]:
    """identities.broker_side_join on a single-join run's counts (the runs table's per-API requests, epoch-0
    heartbeats, revoked partitions and rounds). Rows without per-API counts (the lab summary's, which has the
    coordination total only) check the one generation a join forms."""
    if any(run.get(column) is None for column in API_COLUMNS.values()) or run.get("epoch_zero_heartbeats") is None:
        if run["design"] != "coordinator":
            return []
        return [(LABELS["generations_per_change"], _observed(run, "generations_per_change"), 1.0, "1")]
    if run.get("changes") != 1 or run.get("rounds") is None:
        return []
    found = protocol_identities(run["design"], run["members"], {api: run[c] for api, c in API_COLUMNS.items()},
                                run["rounds"], bool(run.get("revoked_partitions")), run["epoch_zero_heartbeats"])
    return [(f"{identity.name} per join", float(identity.observed), float(identity.expected), formula)
            for identity, formula in found]


def _observed(run: dict[str, Any], metric: str) -> float | None:
    if metric == "generations_per_change":
        return run["rebalances"] / run["changes"] if run.get("changes") and run.get("rebalances") is not None else None
    value = run.get(metric)
    return None if value is None else float(value)


def _raced(run: dict[str, Any]) -> bool:
    """A join raced when a member's attempt ended in an owner conflict (ours reports it; the original's shows as
    owner-node creates ZooKeeper refused, owner_nodes.py). A re-sent create refused because the member's first send
    had made the node is no race (rules/reconnects.py): its checks are among the re-sent requests."""
    raced = (run.get("owner_conflicts") or 0) - (run.get("resent_refused_owners") or 0)
    return bool(run.get("conflicts")) or raced > 0


def compare(runs: list[dict[str, Any]], predictions: list[dict[str, Any]],
            calibrated: dict[Key, dict[str, float | None]] | None = None,
            held_out: set[str] | None = None, calibration_note: str = "") -> list[Comparison]:
    """Identities, then one prediction row per (design, members as, N, metric), each run compared only with the
    sweep rows simulated at its own N, partitions, heartbeat and session (`run_key`). `calibrated` holds the time
    to stable predicted with latency tables fitted from other runs (calibration.py), to be compared with the
    `held_out` runs only; without it, the packaged tables' prediction is compared with every run."""
    seeds: dict[Key, list[dict[str, Any]]] = defaultdict(list)
    for p in predictions:
        if p.get("seed") in SEEDS:
            seeds[sweep_key(p)].append(p)
    groups: dict[tuple[str, str, Key], list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        if run["design"] in PREDICTED_DESIGNS and len(seeds.get(run_key(run), ())) == len(SEEDS):
            groups[(run["design"], run.get("process_mode") or "?", run_key(run))].append(run)
    rows = identities(runs)
    for (design, mode, key), mine in sorted(groups.items(), key=repr):
        sims, (n, p, heartbeat, session) = seeds[key], key
        settings = "" if heartbeat is None else f"; heartbeat {heartbeat} ms, session {session} ms (the run's)"
        base = dict(kind=PREDICTION, case=f"N = {n} ({len(mine)} run{'s' if len(mine) > 1 else ''})",
                    design=design, process_mode=mode, members=n, partitions=p)
        sampled = f"{len(mine)} run(s); seeds {SEEDS[0]}..{SEEDS[-1]}"
        if design in ZOOKEEPER_DESIGNS:
            rows.append(_race_row(base, mine, sims, sampled))
            rows.append(_ratio_row(base, "zk_requests_per_change", [r.get("zk_requests_per_change") for r in mine],
                                   [s["zk_requests"] for s in sims], sampled, _requests_why(mode, mine)))
        else:
            rows += _broker_count_rows(base, design, mine, sims, sampled)
        if calibrated is not None and held_out is not None:
            tested = [r for r in mine if r["run_id"] in held_out]
            predicted = (calibrated.get(key) or {}).get(STABLE[design])
            if tested and predicted is not None:
                rows.append(_ratio_row(base, "stable", [r.get("time_to_stable_s") for r in tested], [predicted],
                                       f"{len(tested)} held-out run(s); seeds {SEEDS[0]}..{SEEDS[-1]}",
                                       calibration_note + settings + _latency_note(design)))
                continue
        rows.append(_ratio_row(base, "stable", [r.get("time_to_stable_s") for r in mine],
                               [s[STABLE[design]] for s in sims], sampled,
                               f"capacity model {CAPACITY!r} over the packaged latency tables (fitted from earlier "
                               "runs): no repeat held out to calibrate on" + settings + _latency_note(design)))
    return rows


def sim_column(design: str, measure: str) -> str:
    """The sweep column of a broker-side design's measure (the eager model's rounds are `coord_generations`)."""
    if design == "coordinator" and measure == "rounds":
        return "coord_generations"
    return f"{SIM_PREFIX[design]}_{measure}"


def _broker_count_rows(base: dict[str, Any], design: str, runs: list[dict[str, Any]], sims: list[dict[str, Any]],
                       sampled: str) -> list[Comparison]:
    """The counts per join BROKER_COUNTS names, for the metrics the runs measured (the lab summary's rows have
    the coordination total only)."""
    rows = []
    for observed_column, measure, label in BROKER_COUNTS:
        observed = [r.get(observed_column) for r in runs]
        if all(v is None for v in observed):
            continue
        rows.append(_ratio_row(base, label, observed, [s.get(sim_column(design, measure)) for s in sims], sampled,
                               _count_why(design, measure)))
    return rows


def _count_why(design: str, measure: str) -> str:
    if measure == "coordination":
        if design == "consumer":
            return ("mean over the seeds; a prediction, not an identity: the acknowledging heartbeats depend on how "
                    "the incumbents' releases interleave")
        return "mean over the seeds; the identities fix it when the seeds' joins take the protocol's rounds"
    if measure == "rounds":
        return "mean over the seeds: generations (group epochs for the consumer protocol)"
    if measure == "revoked_kept" and design != "coordinator":
        return "mean over the seeds; an observed 0 holds only at exactly 0 predicted"
    return "mean over the seeds"


def _latency_note(design: str) -> str:
    """The consumer protocol has no latency table of its own yet: say what its heartbeats' latencies are."""
    if design != "consumer":
        return ""
    return ("; no KIP-848 latency table yet: ConsumerGroupHeartbeat latencies are drawn from the classic Heartbeat "
            "table; compared on time to stable, not on noticing (docs/simulation.md)")


def _race_row(base: dict[str, Any], runs: list[dict[str, Any]], sims: list[dict[str, Any]], sampled: str) -> Comparison:
    raced, simulated = sum(1 for r in runs if _raced(r)), sum(1 for s in sims if s.get("zk_conflicts"))
    o_low, o_high = wilson(raced, len(runs))
    p_low, p_high = wilson(simulated, len(sims))
    agree = o_low <= p_high and p_low <= o_high
    why = (f"{raced} of {len(runs)} real, {simulated} of {len(sims)} simulated; Wilson 95% intervals "
           + ("overlap" if agree else f"apart by {max(p_low - o_high, o_low - p_high):.2f}"))
    return Comparison(**base, metric=LABELS["race"], observed=raced / len(runs), predicted=simulated / len(sims),
                      holds=agree, observed_low=o_low, observed_high=o_high, predicted_low=p_low,
                      predicted_high=p_high, samples=sampled, why=why)


def _ratio_row(base: dict[str, Any], metric: str, observed: list[float | None], predicted: list[float | None],
               sampled: str, why: str) -> Comparison:
    seen, sims = [v for v in observed if v is not None], [v for v in predicted if v is not None]
    o = fmean(seen) if seen else None
    p = fmean(sims) if sims and len(sims) == len(predicted) else None
    error = (p - o) / o if o and p is not None else None
    holds = None if error is None else abs(error) <= TOLERANCE
    if o == 0 and p is not None:
        # no relative error of a zero (none revoked and given back): only an exact zero agrees
        holds = p == 0
    return Comparison(**base, metric=LABELS.get(metric, metric), observed=o, predicted=p, holds=holds,
                      relative_error=error, samples=sampled, why=why)


def _requests_why(mode: str, runs: list[dict[str, Any]] = ()) -> str:
    note = "mean over the seeds, with the owner conflicts the simulation produced"
    if mode == "processes":
        note += ("; members with fetchers also send their leader finders' reads and commit consumed offsets, which "
                 "the simulated rebalance-only members do not")
    note += "; the simulation does not model connection losses (docs/simulation.md)"
    losses = sum(r.get("connection_losses") or 0 for r in runs)
    if losses:
        resent = fmean(r.get("resent_requests_per_change") or 0.0 for r in runs)
        note += (f": the real runs lost {losses} connection{'s' if losses != 1 else ''} and re-sent {resent:.0f} "
                 "requests per join after them, in the observed count")
    return note


def headline(comparisons: list[Comparison]) -> str:
    """One line for the terminal and the report: predictions first, identities apart."""
    judged = [c for c in comparisons if c.kind == PREDICTION and c.holds is not None]
    checks = [c for c in comparisons if c.kind == IDENTITY and c.holds is not None]
    return (f"{sum(1 for c in judged if c.holds)} of {len(judged)} predictions hold (counts and times within "
            f"{TOLERANCE:.0%}, race rates within overlapping 95% intervals; seeds {SEEDS[0]}..{SEEDS[-1]} fixed "
            f"in advance); {sum(1 for c in checks if c.holds)} of {len(checks)} protocol identities hold")


def comparison_schema() -> Any:
    from pyspark.sql import types as T

    text, count, real = T.StringType(), T.IntegerType(), T.DoubleType()
    return T.StructType(
        [T.StructField("kind", text, False), T.StructField("case", text), T.StructField("design", text),
         T.StructField("process_mode", text), T.StructField("members", count), T.StructField("partitions", count),
         T.StructField("metric", text), T.StructField("observed", real), T.StructField("predicted", real),
         T.StructField("holds", T.BooleanType())]
        + [T.StructField(c, real) for c in ("relative_error", "observed_low", "observed_high", "predicted_low",
                                            "predicted_high")]
        + [T.StructField("samples", text), T.StructField("why", text)])


def rows_as_dicts(rows: list[Comparison]) -> list[dict[str, Any]]:
    """As rows of `comparison_schema()` (counts as floats: a mean need not be whole)."""
    return [{k: float(v) if isinstance(v, int) and not isinstance(v, bool) and k not in ("members", "partitions")
             else v for k, v in vars(r).items()} for r in rows]


def predictions_table(rows: list[Comparison]) -> str:
    """The HTML of the report's "predicted next to observed" section: the headline, predictions, then checks."""
    if not rows:
        return ("<p>No run of one member joining a settled group (the herd scenario's shape): nothing the "
                "simulation predicts to compare with.</p>")
    parts = [f"<p><b>{html.escape(headline(rows))}</b>.</p>"]
    for kind, title in ((PREDICTION, "Predictions (can come out otherwise)"),
                        (IDENTITY, "Protocol identities (checks of the counting: cannot differ by seed or latency)")):
        body = "".join(_table_row(r) for r in rows if r.kind == kind)
        if body:
            parts.append(f"<h3>{title}</h3><table class=pred><thead><tr><th>case</th><th>design</th>"
                         "<th>members as</th><th>N</th><th>metric</th><th>observed</th><th>predicted</th>"
                         "<th>verdict</th><th>samples</th><th>how</th></tr></thead>"
                         f"<tbody>{body}</tbody></table>")
    parts.append(f"<p class=note>Predictions: zkconsumer.lab.sim over the fixed seeds {SEEDS[0]}..{SEEDS[-1]} (the "
                 "ZooKeeper design executed on a virtual clock, the coordinator as a model of its state machine). "
                 f"A count or time holds within ±{TOLERANCE:.0%} of the observed mean (error = (predicted - "
                 "observed) / observed); a race rate when the Wilson 95% intervals over the real runs and over the "
                 "seeds overlap. Times to stable are predicted with latency tables fitted from other runs "
                 "(docs/analysis.md). The simulation does not model connection losses: the requests a real member "
                 "sent again after its ZooKeeper connection dropped and resumed its session are in the observed "
                 "counts only (the identities name them: \"+ re-sent R after N connection losses\").</p>")
    return "".join(parts)


def _table_row(r: Comparison) -> str:
    if r.holds is None:
        verdict, css = "-", ""
    elif r.kind == IDENTITY:
        verdict, css = ("holds", " class=ok") if r.holds else ("differs", " class=bad")
    elif r.relative_error is not None:
        verdict, css = f"{r.relative_error:+.0%}", " class=ok" if r.holds else " class=bad"
    else:
        verdict, css = ("agree", " class=ok") if r.holds else ("differ", " class=bad")
    observed, predicted = _num(r.observed), _num(r.predicted)
    if r.observed_low is not None:
        observed += f" [{r.observed_low:.2f}, {r.observed_high:.2f}]"
        predicted += f" [{r.predicted_low:.2f}, {r.predicted_high:.2f}]"
    return (f"<tr><td>{html.escape(r.case)}</td><td>{html.escape(r.design)}</td><td>{html.escape(r.process_mode)}"
            f"</td><td>{r.members}</td><td>{html.escape(r.metric)}</td><td>{observed}</td><td>{predicted}</td>"
            f"<td{css}>{verdict}</td><td>{html.escape(r.samples)}</td><td>{html.escape(r.why)}</td></tr>")


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"


def curve_figure(runs: list[dict[str, Any]], predictions: list[dict[str, Any]]) -> go.Figure | None:
    """Requests per join against N on log-log axes: the real runs as markers, the predictions (mean over the
    seeds) as lines that go on past the largest real N."""
    import plotly.graph_objects as go

    from zkconsumer.lab.analysis.herd_view import COLORS, DESIGN_NAMES

    if not predictions:
        return None
    means = mean_by_size(predictions)
    fig = go.Figure()
    for design, observed_col, predicted_col, label in (
            ("zk", "zk_requests_per_change", "zk_requests", "ZooKeeper requests"),
            ("coordinator", "kafka_coordination_per_change", "coord_coordination", "JoinGroup+SyncGroup+LeaveGroup")):
        pts = sorted((n, p[predicted_col]) for n, p in means.items() if p.get(predicted_col))
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
