"""The herd: what each membership change costs on the wire, per member and operation, and how that grows with N.

Counted as the lab's summary counts them (zkconsumer/lab/summary.py): ZooKeeper requests (pings and the connect
handshake are other kinds, so they are left out) and watch notifications (`event` records); Kafka requests by
API, with JoinGroup + SyncGroup + LeaveGroup as the coordination requests and heartbeats apart. The coordinator
design has no watches: what tells its members to rejoin is a response carrying REBALANCE_IN_PROGRESS (to a
Heartbeat, an OffsetCommit, ...), so those responses are its notifications here.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

import zkconsumer.lab.analysis.owner_nodes as wire
from zkconsumer.lab.analysis.fit import fit_from_moments, residual_sum
from zkconsumer.lab.analysis.schemas import FIT_SCHEMA
from zkconsumer.lab.analysis.windows import attach_change
from zkconsumer.lab.designs import BROKER_SIDE_DESIGNS, ZOOKEEPER_DESIGNS
from zkconsumer.lab.noticing import TARGET_API
from zkconsumer.lab.protocol_rules import (
    HEARTBEAT_APIS,
    conflict_column,
    coordination_request_column,
    failed_attempt_column,
)

REBALANCE_NOTICE = "REBALANCE_IN_PROGRESS"
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
MAX_DEGREE = 2


def wire_counts(records: DataFrame, windows: DataFrame) -> DataFrame:
    """run_id, design, change_index, member, proto, category (request | notification), op, code, count."""
    zk, kafka, kind = F.col("proto") == "zk", F.col("proto") == "kafka", F.col("kind")
    category = (F.when(zk & (kind == "request"), F.lit("request"))
                .when(zk & (kind == "event"), F.lit("notification"))
                .when(kafka & (kind == "request"), F.lit("request"))
                .when(kafka & (kind == "response") & (F.col("error_name") == REBALANCE_NOTICE), F.lit("notification"))
                # the consumer protocol tells a member of a new target in a heartbeat's answer (noticing.py)
                .when(kafka & (kind == "response") & (F.col("api_name") == TARGET_API) & F.col("assigned").isNotNull(),
                      F.lit("notification")))
    wire = (records.filter(F.col("type") == "wire")
            .select("run_id", "design", "ts", F.coalesce("link", "client_id").alias("member"), "proto",
                    category.alias("category"),
                    F.when(zk, F.coalesce("op", F.lit("watch event"))).otherwise(F.col("api_name")).alias("op"),
                    F.when(zk, F.col("opcode")).otherwise(F.col("api_key")).alias("code"),
                    (kafka & (kind == "request")
                     & coordination_request_column("api_name", "member_epoch", "owned")).alias("coordination"))
            .filter(F.col("category").isNotNull()))
    return (attach_change(wire, windows)
            .groupBy("run_id", "design", "change_index", "member", "proto", "category", "op", "code", "coordination")
            .agg(F.count(F.lit(1)).alias("count")))


def _wire_totals(counts: DataFrame) -> list[Column]:
    def total(condition: Column) -> Column:
        return F.sum(F.when(condition, F.col("count")).otherwise(0))

    zk, kafka = F.col("proto") == "zk", F.col("proto") == "kafka"
    request, notification = F.col("category") == "request", F.col("category") == "notification"
    return [total(zk & request).alias("zk_requests"), total(zk & notification).alias("zk_notifications"),
            total(kafka & request).alias("kafka_requests"),
            total(kafka & request & F.col("coordination")).alias("kafka_coordination"),
            total(kafka & request & F.col("op").isin(*HEARTBEAT_APIS) & ~F.col("coordination"))
            .alias("kafka_heartbeats"),
            total(kafka & notification).alias("rebalance_notices")]


def wire_per_change(counts: DataFrame) -> DataFrame:
    return (counts.filter(F.col("change_index").isNotNull()).groupBy("run_id", "change_index")
            .agg(*_wire_totals(counts)))


def wire_per_run(counts: DataFrame) -> DataFrame:
    """Totals over the whole churn window (every change window, the quiet one included)."""
    return counts.filter(F.col("change_index").isNotNull()).groupBy("run_id").agg(*_wire_totals(counts))


def rebalance_counts(records: DataFrame, windows: DataFrame) -> DataFrame:
    """Per run, change and member: the split-brain symptoms members report about themselves, and (ZooKeeper
    designs) the owner-node claims ZooKeeper refused, from the wire (`owner_conflicts`, owner_nodes.py)."""
    kind = F.col("kind")
    events = (records.filter(F.col("type").isin("member_event", "generation") | wire.conflicted())
              .select("run_id", "design", "ts", F.coalesce("member", "link").alias("member"), "type", "kind",
                      "result", "generation", wire.conflicted().alias("refused")))
    attempt_end = kind == "attempt_end"

    def n(condition: Column) -> Column:
        return F.sum(F.when(condition, 1).otherwise(0))

    generation = F.col("type") == "generation"
    return (attach_change(events, windows).groupBy("run_id", "design", "change_index", "member")
            .agg(n((F.col("type") == "member_event") & (kind == "rebalance_begin")).alias("rebalances"),
                 n(attempt_end).alias("attempts"),
                 n(attempt_end & failed_attempt_column("result")).alias("failed_attempts"),
                 n(attempt_end & conflict_column("result")).alias("conflicts"),
                 n(F.col("refused")).alias("owner_conflicts"),
                 n(kind == "rebalance_failed").alias("rebalance_failures"),
                 n(kind == "session_expired").alias("session_expiries"),
                 n(generation & (kind == "assigned")).alias("assignments"),
                 n(generation & (kind == "revoked")).alias("revocations"),
                 n(generation & (kind == "lost")).alias("losses"),
                 F.collect_set(F.when(generation & (kind == "assigned"), F.col("generation"))).alias("generations")))


def rebalance_totals(counts: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """Sums over members. `rebalances` is the summary's: syncedRebalance runs for the ZooKeeper design, distinct
    generations for the coordinator (one generation is one group rebalance, however many members took part)."""
    inside = counts.filter(F.col("change_index").isNotNull())
    generations = F.size(F.array_distinct(F.flatten(F.collect_list("generations"))))
    return (inside.groupBy(*keys).agg(
        F.when(F.first("design").isin(*BROKER_SIDE_DESIGNS), generations)
        .otherwise(F.sum("rebalances")).alias("rebalances"),
        *[F.sum(c).alias(c) for c in ("attempts", "failed_attempts", "conflicts", "rebalance_failures",
                                      "session_expiries", "revocations", "losses")],
        # a ZooKeeper-protocol count: it does not apply to the coordinator design (null there, not 0)
        F.when(F.first("design").isin(*ZOOKEEPER_DESIGNS), F.sum("owner_conflicts")).alias("owner_conflicts")))


def herd_fit(spark: SparkSession, runs: DataFrame) -> DataFrame:
    """Per (scenario, design, process mode) sweep and metric: the least-squares polynomial of the per-change cost
    in N (`FIT_DEGREE`: a·N² + b·N + c for ZooKeeper requests, a·N + b otherwise), from every run with N > 0 and at
    least one change, with its residuals: `rms_residual` over the runs, `max_abs_residual` of the mean per N.

    The sums the normal equations need are aggregated per (sweep, N) in Spark; a sweep with fewer distinct N than
    coefficients has no fit (it would pass through any points)."""
    metrics = sorted({m for pair in FIT_METRICS.values() for m in pair})
    points = (runs.filter(F.col("members") > 0)
              .select("scenario", "design", "process_mode", F.col("members").cast("double").alias("n"),
                      F.explode(F.array(*[F.struct(F.lit(m).alias("metric"), F.col(m).alias("y"))
                                          for m in metrics])).alias("p"))
              .select("scenario", "design", "process_mode", "n", "p.metric", "p.y")
              .filter(F.col("y").isNotNull()))
    x, y = F.col("n"), F.col("y")
    powers = [F.sum(x ** k).alias(f"sx{k}") for k in range(2 * MAX_DEGREE + 1)]
    cross = [F.sum(x ** k * y).alias(f"sxy{k}") for k in range(MAX_DEGREE + 1)]
    # one row per sweep, metric and group size: the moments the normal equations need, a few dozen rows
    partials = (points.groupBy("scenario", "design", "process_mode", "metric", "n")
                .agg(*powers, *cross, F.sum(y * y).alias("syy"), F.avg("y").alias("mean"),
                     F.count(y).alias("k"), (F.var_pop(y) * F.count(y)).alias("within"))
                .collect())
    groups: dict[tuple, list] = {}
    for p in partials:
        if p["metric"] in FIT_METRICS.get(p["design"], ()):
            groups.setdefault((p["scenario"], p["design"], p["process_mode"], p["metric"]), []).append(p)
    rows = []
    for key, parts in sorted(groups.items(), key=lambda kv: tuple(str(k) for k in kv[0])):
        degree = FIT_DEGREE.get(key[3], 1)
        fit = fit_from_moments(degree, [sum(p[f"sx{k}"] for p in parts) for k in range(2 * degree + 1)],
                               [sum(p[f"sxy{k}"] for p in parts) for k in range(degree + 1)],
                               sum(p["syy"] for p in parts), len(parts))
        if fit is None:
            continue
        # the residuals from means and spreads per N: yᵀy - βᵀXᵀy would cancel to noise for an exact polynomial
        fit = residual_sum(fit, sum(p["within"] + p["k"] * (p["mean"] - fit(p["n"])) ** 2 for p in parts))
        a = [*fit.coefficients, None, None][:3]
        rows.append((*key, fit.n, len(parts), min(p["n"] for p in parts), max(p["n"] for p in parts), degree,
                     a[2], a[1], a[0], fit.rms_residual, max(abs(p["mean"] - fit(p["n"])) for p in parts)))
    return spark.createDataFrame(rows, FIT_SCHEMA)
