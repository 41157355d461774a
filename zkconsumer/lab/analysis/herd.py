"""The herd: what each membership change costs on the wire, per member and operation, and how that grows with N.

Counted as the lab's summary counts them (zkconsumer/lab/runs/summary.py): ZooKeeper requests (pings and the connect
handshake are other kinds, so they are left out) and watch notifications (`event` records); Kafka requests by
API, with the coordination requests of rules/protocol.py (JoinGroup + SyncGroup + LeaveGroup, and the consumer
protocol's ConsumerGroupHeartbeats that join, leave or acknowledge) and heartbeats apart. The broker-side designs
have no watches: what tells a classic-protocol member to rejoin is a response carrying REBALANCE_IN_PROGRESS (to a
Heartbeat, an OffsetCommit, ...), and a consumer-protocol member a heartbeat answer carrying a new assignment, so
those responses are their notifications here.

A broker-side design's *rounds* are the group's rebalances: the generations its eager members report, or, where
the members cannot tell them (librdkafka's, whose `generation` is null), the generations (JoinGroup answers) and
group epochs (ConsumerGroupHeartbeat answers) the coordinator answered in the window above the newest it answered
before the window, as the lab's summary counts them.

per_run/counts.py counts them, and per_run/tables.py totals them, run by run in Python over Arrow; the herd's fit
across runs is here (`herd_fit`). The tests check the counts against a Spark form written apart
(tests/analysis/spark_oracle/herd.py).
"""

from __future__ import annotations

from typing import Any

from zkconsumer.lab.analysis.fit import fit_from_moments, residual_sum
from zkconsumer.lab.analysis.held import Held, held_frame
from zkconsumer.lab.analysis.schemas import FIT_SCHEMA
from zkconsumer.lab.designs import BROKER_SIDE_DESIGNS, ZOOKEEPER_DESIGNS

# The growth curves: per design, the metric that plays "requests per change" and "notifications per change".
# Every ZooKeeper design (designs.py) is the same protocol, so the original's curves are ours.
_ZK_FIT = ("zk_requests_per_change", "zk_notifications_per_change")
FIT_METRICS = {
    **{design: _ZK_FIT for design in ZOOKEEPER_DESIGNS},
    **{design: ("kafka_coordination_per_change", "rebalance_notices_per_change") for design in BROKER_SIDE_DESIGNS},
}
# ZooKeeper requests per join grow as M² (every member re-reads every registration, docs/join-cost.md); every
# other per-change cost the herd fits is linear in N by its protocol.
FIT_DEGREE = {"zk_requests_per_change": 2}
# What per_run/tables.rebalance_totals sums over the members (rebalances and owner_conflicts have rules of their own)
REBALANCE_TOTALS = ("attempts", "failed_attempts", "conflicts", "rebalance_failures", "session_expiries",
                    "revocations", "losses")


def herd_fit(runs: list[dict[str, Any]]) -> Held:
    """Per (scenario, design, process mode) sweep and metric: the least-squares polynomial of the per-change cost
    in N (`FIT_DEGREE`: a·N² + b·N + c for ZooKeeper requests, a·N + b otherwise), from every run with N > 0 and at
    least one change, with its residuals: `rms_residual` over the runs, `max_abs_residual` of the mean per N.

    `runs` are the `runs` table's rows (a row per run, held by the driver). The normal equations are solved from
    the moments per (sweep, N); a sweep with fewer distinct N than coefficients has no fit (it would pass through
    any points)."""
    points: dict[tuple, dict[float, list[float]]] = {}
    for run in runs:
        if not run["members"] or run["members"] <= 0:
            continue
        for metric in FIT_METRICS.get(run["design"], ()):
            if run.get(metric) is not None:
                key = (run["scenario"], run["design"], run["process_mode"], metric)
                points.setdefault(key, {}).setdefault(float(run["members"]), []).append(run[metric])
    rows = []
    for key, per_n in sorted(points.items(), key=lambda kv: tuple(str(k) for k in kv[0])):
        degree = FIT_DEGREE.get(key[3], 1)
        sizes = sorted(per_n)
        pairs = [(n, y) for n in sizes for y in per_n[n]]
        fit = fit_from_moments(degree, [sum(n ** k for n, _ in pairs) for k in range(2 * degree + 1)],
                               [sum(n ** k * y for n, y in pairs) for k in range(degree + 1)],
                               sum(y * y for _, y in pairs), len(sizes))
        if fit is None:
            continue
        means = {n: sum(ys) / len(ys) for n, ys in per_n.items()}
        # the residuals from means and spreads per N: yᵀy - βᵀXᵀy would cancel to noise for an exact polynomial
        fit = residual_sum(fit, sum(sum((y - means[n]) ** 2 for y in ys) + len(ys) * (means[n] - fit(n)) ** 2
                                    for n, ys in per_n.items()))
        a = [*fit.coefficients, None, None][:3]
        rows.append((*key, fit.n, len(sizes), sizes[0], sizes[-1], degree, a[2], a[1], a[0], fit.rms_residual,
                     max(abs(means[n] - fit(n)) for n in sizes)))
    return held_frame("herd_fit", rows, FIT_SCHEMA)
