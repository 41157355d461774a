"""The herd's counts built in Spark over every run: the oracle of per_run/counts.py (wire counts, the members'
rebalance events, the identities' requests, the answered epochs and their rounds) and of per_run/tables.py's
totals (wire totals, rebalance totals, rounds). What is counted, and why: zkconsumer/lab/analysis/herd.py, which
keeps REBALANCE_TOTALS and the herd's fit.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

import spark_oracle.owner_nodes as wire
from spark_oracle.windows import attach_change
from zkconsumer.lab.analysis.closed_forms import API_COLUMNS
from zkconsumer.lab.analysis.herd import REBALANCE_TOTALS
from zkconsumer.lab.analysis.schemas import PARTITION_LIST
from zkconsumer.lab.designs import BROKER_SIDE_DESIGNS, ZOOKEEPER_DESIGNS
from zkconsumer.lab.rules.noticing import REBALANCE_NOTICE, TARGET_API
from zkconsumer.lab.rules.protocol import (
    GROUP_HEARTBEAT_API,
    HEARTBEAT_APIS,
    conflict_column,
    coordination_request_column,
    failed_attempt_column,
)


def wire_counts(records: DataFrame, windows: DataFrame) -> DataFrame:
    """run_id, design, change_index, member, proto, category (request | notification), op, code, count."""
    zk, kafka, kind = F.col("proto") == "zk", F.col("proto") == "kafka", F.col("kind")
    category = (F.when(zk & (kind == "request"), F.lit("request"))
                .when(zk & (kind == "event"), F.lit("notification"))
                .when(kafka & (kind == "request"), F.lit("request"))
                .when(kafka & (kind == "response") & (F.col("error_name") == REBALANCE_NOTICE), F.lit("notification"))
                # the consumer protocol tells a member of a new target in a heartbeat's answer (rules/noticing.py)
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
    generations for the broker-side designs (one generation is one group rebalance, however many members took
    part), where `rounds_column` replaces it with the wire's epochs when the members report none
    (`generations_seen`: the distinct generations the members reported)."""
    inside = counts.filter(F.col("change_index").isNotNull())
    generations = F.size(F.array_distinct(F.flatten(F.collect_list("generations"))))
    return (inside.groupBy(*keys).agg(
        F.when(F.first("design").isin(*BROKER_SIDE_DESIGNS), generations)
        .otherwise(F.sum("rebalances")).alias("rebalances"),
        generations.alias("generations_seen"),
        *[F.sum(c).alias(c) for c in REBALANCE_TOTALS],
        # a ZooKeeper-protocol count: it does not apply to the coordinator design (null there, not 0)
        F.when(F.first("design").isin(*ZOOKEEPER_DESIGNS), F.sum("owner_conflicts")).alias("owner_conflicts")))


def identity_counts(records: DataFrame, windows: DataFrame) -> DataFrame:
    """Per run, over the churn window: the requests of each API the identities count (`API_COLUMNS`), the
    consumer protocol's joins (`epoch_zero_heartbeats`: ConsumerGroupHeartbeats sent with member epoch 0) and the
    partitions members revoked (`revoked_partitions`), which is what identities.broker_side_join is evaluated on."""
    kafka_request = (F.col("type") == "wire") & (F.col("proto") == "kafka") & (F.col("kind") == "request")
    revoked = (F.col("type") == "generation") & (F.col("kind") == "revoked")
    rows = (records.filter(kafka_request | revoked)
            .select("run_id", "ts", "api_name", "member_epoch", kafka_request.alias("request"),
                    F.when(revoked, F.size(F.coalesce(F.from_json("partitions", PARTITION_LIST),
                                                      F.array().cast("array<string>")))).alias("revoked")))
    inside = attach_change(rows, windows).filter(F.col("change_index").isNotNull())

    def n(condition: Column) -> Column:
        return F.sum(F.when(condition, 1).otherwise(0))

    return inside.groupBy("run_id").agg(
        *[n(F.col("request") & (F.col("api_name") == api)).alias(column) for api, column in API_COLUMNS.items()],
        n(F.col("request") & (F.col("api_name") == GROUP_HEARTBEAT_API) & (F.col("member_epoch") == 0))
        .alias("epoch_zero_heartbeats"),
        F.coalesce(F.sum("revoked"), F.lit(0)).alias("revoked_partitions"))


def answered_epochs(records: DataFrame) -> DataFrame:
    """run_id, ts, epoch: every generation (JoinGroup) or group epoch (ConsumerGroupHeartbeat) a coordinator's answer
    carries (`epoch_after`; 0 and below are no epoch)."""
    return (records.filter((F.col("type") == "wire") & (F.col("proto") == "kafka") & (F.col("kind") == "response")
                           & (F.col("epoch_after") > 0))
            .select("run_id", "ts", F.col("epoch_after").alias("epoch")))


def epoch_rounds(epochs: DataFrame, spans: DataFrame, keys: tuple[str, ...], closed: Column) -> DataFrame:
    """Per span (run_id, *keys, s_start, s_end): `wire_rounds`, the distinct epochs answered inside it above the
    newest answered before it. `closed`: whether a span includes its end (the churn does; a change window only
    when it is the churn's last)."""
    joined = epochs.join(F.broadcast(spans.withColumn("_closed", closed)), "run_id")
    t = F.col("ts")
    inside = (t >= F.col("s_start")) & ((t < F.col("s_end")) | (F.col("_closed") & (t == F.col("s_end"))))
    per = joined.groupBy("run_id", *keys).agg(
        F.max(F.when(t < F.col("s_start"), F.col("epoch"))).alias("before"),
        F.collect_set(F.when(inside, F.col("epoch"))).alias("inside"))
    rounds = F.size(F.filter("inside", lambda e: e > F.coalesce(F.col("before"), F.lit(-1))))
    return (spans.select("run_id", *keys).join(per, ["run_id", *keys], "left")
            .select("run_id", *keys, F.coalesce(rounds, F.lit(0)).alias("wire_rounds")))


def rounds_column(design: Column | str = "design") -> tuple[Column, Column]:
    """(rounds, rebalances) from `generations_seen` (the members' own generations) and `wire_rounds`: a
    broker-side design's rounds are its members' generations where they report them, else the wire's; a
    ZooKeeper design has no rounds (null) and keeps its members' syncedRebalance runs as `rebalances`."""
    d = F.col(design) if isinstance(design, str) else design
    broker = d.isin(*BROKER_SIDE_DESIGNS)
    rounds = F.when(broker, F.when(F.col("generations_seen") > 0, F.col("generations_seen"))
                    .otherwise(F.coalesce("wire_rounds", F.lit(0))))
    return rounds, F.when(broker, rounds).otherwise(F.col("rebalances"))

