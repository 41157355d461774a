"""The herd: what each membership change costs on the wire, per member and operation, and how that grows with N.

Counted as the lab's summary counts them (zkconsumer/lab/summary.py): ZooKeeper requests (pings and the connect
handshake are other kinds, so they are left out) and watch notifications (`event` records); Kafka requests by
API, with JoinGroup + SyncGroup + LeaveGroup as the coordination requests and heartbeats apart. The coordinator
design has no watches: what tells its members to rejoin is a response carrying REBALANCE_IN_PROGRESS (to a
Heartbeat, an OffsetCommit, ...), so those responses are its notifications here.
"""

from __future__ import annotations

import math

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from zkconsumer.lab.analysis import owner_nodes as wire
from zkconsumer.lab.analysis.fit import fit_from_sums
from zkconsumer.lab.analysis.schemas import FIT_SCHEMA
from zkconsumer.lab.analysis.windows import attach_change
from zkconsumer.lab.designs import ZOOKEEPER_DESIGNS

COORDINATION_APIS = ("JoinGroup", "SyncGroup", "LeaveGroup")
REBALANCE_NOTICE = "REBALANCE_IN_PROGRESS"
# The growth curves: per design, the metric that plays "requests per change" and "notifications per change".
# Every ZooKeeper design (designs.py) is the same protocol, so the original's curves are ours.
_ZK_FIT = ("zk_requests_per_change", "zk_notifications_per_change")
FIT_METRICS = {
    **{design: _ZK_FIT for design in ZOOKEEPER_DESIGNS},
    "coordinator": ("kafka_coordination_per_change", "rebalance_notices_per_change"),
}


def wire_counts(records: DataFrame, windows: DataFrame) -> DataFrame:
    """run_id, design, change_index, member, proto, category (request | notification), op, code, count."""
    zk, kafka, kind = F.col("proto") == "zk", F.col("proto") == "kafka", F.col("kind")
    category = (F.when(zk & (kind == "request"), F.lit("request"))
                .when(zk & (kind == "event"), F.lit("notification"))
                .when(kafka & (kind == "request"), F.lit("request"))
                .when(kafka & (kind == "response") & (F.col("error_name") == REBALANCE_NOTICE), F.lit("notification")))
    wire = (records.filter(F.col("type") == "wire")
            .select("run_id", "design", "ts", F.coalesce("link", "client_id").alias("member"), "proto",
                    category.alias("category"),
                    F.when(zk, F.coalesce("op", F.lit("watch event"))).otherwise(F.col("api_name")).alias("op"),
                    F.when(zk, F.col("opcode")).otherwise(F.col("api_key")).alias("code"))
            .filter(F.col("category").isNotNull()))
    return (attach_change(wire, windows)
            .groupBy("run_id", "design", "change_index", "member", "proto", "category", "op", "code")
            .agg(F.count(F.lit(1)).alias("count")))


def _wire_totals(counts: DataFrame) -> list[Column]:
    def total(condition: Column) -> Column:
        return F.sum(F.when(condition, F.col("count")).otherwise(0))

    zk, kafka = F.col("proto") == "zk", F.col("proto") == "kafka"
    request, notification = F.col("category") == "request", F.col("category") == "notification"
    return [total(zk & request).alias("zk_requests"), total(zk & notification).alias("zk_notifications"),
            total(kafka & request).alias("kafka_requests"),
            total(kafka & request & F.col("op").isin(*COORDINATION_APIS)).alias("kafka_coordination"),
            total(kafka & request & (F.col("op") == "Heartbeat")).alias("kafka_heartbeats"),
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
                 n(attempt_end & ~F.coalesce(F.col("result"), F.lit("")).isin("ok", "no_brokers"))
                 .alias("failed_attempts"),
                 n(attempt_end & (F.col("result") == "conflict")).alias("conflicts"),
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
        F.when(F.first("design") == "coordinator", generations).otherwise(F.sum("rebalances")).alias("rebalances"),
        *[F.sum(c).alias(c) for c in ("attempts", "failed_attempts", "conflicts", "rebalance_failures",
                                      "session_expiries", "revocations", "losses")],
        # a ZooKeeper-protocol count: it does not apply to the coordinator design (null there, not 0)
        F.when(F.first("design").isin(*ZOOKEEPER_DESIGNS), F.sum("owner_conflicts")).alias("owner_conflicts")))


def herd_fit(spark: SparkSession, runs: DataFrame) -> DataFrame:
    """Growth exponent of each per-change metric against N, per (scenario, design, process mode): one fit per
    sweep, from every run with N > 0, at least one change and a positive value (a log needs one).

    Besides the fit over the whole sweep, `tail_exponent` is the slope between the two largest N (mean per N):
    a cost like N^2 + 7N + 3P looks flatter than N^2 over small N, where the constant dominates."""
    metrics = sorted({m for pair in FIT_METRICS.values() for m in pair})
    points = (runs.filter(F.col("members") > 0)
              .select("scenario", "design", "process_mode", F.col("members").cast("double").alias("n"),
                      F.explode(F.array(*[F.struct(F.lit(m).alias("metric"), F.col(m).alias("y"))
                                          for m in metrics])).alias("p"))
              .select("scenario", "design", "process_mode", "n", "p.metric", "p.y")
              .filter(F.col("y") > 0))
    x, y = F.log("n"), F.log("y")
    # partial sums per (sweep, N): the fit adds them up, the tail exponent uses the means of the last two N
    partials = (points.groupBy("scenario", "design", "process_mode", "metric", "n")
                .agg(F.count(F.lit(1)).alias("k"), F.sum(x).alias("sx"), F.sum(y).alias("sy"),
                     F.sum(x * x).alias("sxx"), F.sum(x * y).alias("sxy"), F.sum(y * y).alias("syy"),
                     F.avg("y").alias("mean"))
                .collect())
    groups: dict[tuple, list] = {}
    for p in partials:
        if p["metric"] in FIT_METRICS.get(p["design"], ()):
            groups.setdefault((p["scenario"], p["design"], p["process_mode"], p["metric"]), []).append(p)
    rows = []
    for key, parts in sorted(groups.items(), key=lambda kv: tuple(str(k) for k in kv[0])):
        total = {c: sum(p[c] for p in parts) for c in ("k", "sx", "sy", "sxx", "sxy", "syy")}
        fit = fit_from_sums(total["k"], total["sx"], total["sy"], total["sxx"], total["sxy"], total["syy"])
        if fit is None or not math.isfinite(fit.exponent):
            continue
        by_n = sorted(parts, key=lambda p: p["n"])
        (n1, y1), (n2, y2) = (by_n[-2]["n"], by_n[-2]["mean"]), (by_n[-1]["n"], by_n[-1]["mean"])
        rows.append((*key, total["k"], by_n[0]["n"], n2, fit.exponent, fit.exponent_se, fit.ci95_low, fit.ci95_high,
                     fit.coefficient, fit.r2, math.log(y2 / y1) / math.log(n2 / n1)))
    return spark.createDataFrame(rows, FIT_SCHEMA)
