"""Every metric family as a DataFrame: the per-family modules' tables, plus the two that join them, per change
(`changes`) and per run (`runs`)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from zkconsumer.lab import gaps
from zkconsumer.lab.analysis.closed_forms import API_COLUMNS
from zkconsumer.lab.analysis.delivery import DELIVERY_SCHEMA, GAPS_SCHEMA, audit_frame, split_rows
from zkconsumer.lab.analysis.held import Held, hold
from zkconsumer.lab.analysis.herd import (
    answered_epochs,
    epoch_rounds,
    herd_fit,
    identity_counts,
    rebalance_counts,
    rebalance_totals,
    rounds_column,
    wire_counts,
    wire_per_change,
    wire_per_run,
)
from zkconsumer.lab.analysis.migrate_tables import MIGRATE_TABLES, migrate_runs, migrate_tables
from zkconsumer.lab.analysis.notice_split import split_per_change, split_per_run
from zkconsumer.lab.analysis.owner_nodes import OWNER_PATH, blank_unreported, zookeeper_design
from zkconsumer.lab.analysis.ownership import (
    contention_events,
    intervals,
    moved,
    overlaps,
    ownership_events,
    ownership_per_change,
    revoked_kept,
    stop_the_world,
)
from zkconsumer.lab.analysis.windows import attach_change, build

PER_CHANGE = ("zk_requests", "zk_notifications", "kafka_requests", "kafka_coordination", "kafka_heartbeats",
              "rebalance_notices")
# What a change cost the partitions (zkconsumer/lab/handover.py): owners changed, and partitions revoked from a
# member that got them back; normalised per change like the wire counts
HANDOVER = ("partitions_moved", "revoked_kept")


def combine(keys: list[str], base: DataFrame, *parts: DataFrame) -> DataFrame:
    """`base` left-joined with every part on `keys`, in one shuffle: the union of all rows, grouped by the keys,
    keeping each column's non-null value. Parts have one row per key and columns of their own (all small)."""
    columns = list(dict.fromkeys(c for df in (base, *parts) for c in df.columns if c not in keys))
    rows = base.withColumn("_base", F.lit(1))
    for part in parts:
        rows = rows.unionByName(part, allowMissingColumns=True)
    return (rows.groupBy(*keys).agg(*[F.first(c, ignorenulls=True).alias(c) for c in columns],
                                    F.max("_base").alias("_base"))
            .filter(F.col("_base") == 1).drop("_base"))


def compute(spark: SparkSession, records: DataFrame, runs: DataFrame, trace_errors: DataFrame) -> dict[str, Held]:
    """name -> table, every one held by the driver (held.py). docs/analysis.md lists every table's columns.

    Three queries, one per step, each computing all the frames of its step together:
    1. the time frame (windows.py): each run's bounds, changes and change windows, and which runs migrate;
    2. everything read from the trace records, given the windows: wire counts, the members' rebalance events,
       ownership events and intervals, the delivery audit, the noticing split, answered epochs, the identities'
       request counts, the counting gaps, contention events, and the migrate tables when a run migrates;
    3. everything derived from those alone (small, local frames): overlaps, stop-the-world pauses, the per-change
       and per-run tables."""
    # The records the time frame, ownership, rebalance and contention steps read: a small part of the lines
    # (most are wire, produce and consume records), cached apart so those steps do not scan the rest.
    control = records.filter(control_records()).cache()
    frame = build(control)
    step1 = hold(spark, {"changes": frame.changes, "bounds": frame.bounds, "windows": frame.windows,
                         "migrate_runs": migrate_runs(control)})
    changes, bounds, windows = (step1[n].frame(spark) for n in ("changes", "bounds", "windows"))
    migrate = len(step1["migrate_runs"]) > 0

    events = ownership_events(control)
    step2 = hold(spark, {
        "wire_counts": wire_counts(records, windows),
        "rebalances": rebalance_counts(control, windows),
        "events": events,
        "ownership_intervals": intervals(events, bounds, control),
        "delivery_audit": audit_frame(records),
        "noticed": split_per_change(records, changes),  # time to stable = noticing_s + rebalancing_s
        "epochs": answered_epochs(records),
        "identity": identity_counts(records, windows),
        "wire_gaps": wire_gap_counts(records),
        "contention": contention_events(control),  # the split-brain section's events (split_brain.py)
        **(migrate_tables(records) if migrate else {}),
    })
    control.unpersist()  # every later step reads held frames
    delivery, gaps_found = split_rows(step2.pop("delivery_audit").arrow)
    step2["delivery"] = Held("delivery", DELIVERY_SCHEMA, delivery)
    step2["delivery_gaps"] = Held("delivery_gaps", GAPS_SCHEMA, gaps_found)

    def local(name: str) -> DataFrame:
        return step2[name].frame(spark)

    counts, rebalances, iv, events = (local(n) for n in ("wire_counts", "rebalances", "ownership_intervals",
                                                         "events"))
    ov = overlaps(iv, windows)
    own = ownership_per_change(iv, events, windows, runs)
    stw = stop_the_world(events, windows)
    noticed, epochs = local("noticed"), local("epochs")
    # the spans the handover and the wire's rounds are counted over: each change window, and the whole churn
    change_spans = windows.filter(F.col("change_index") > 0).select(
        "run_id", "change_index", F.col("win_start").alias("s_start"), F.col("win_end").alias("s_end"), "last")
    churn_spans = bounds.filter(F.col("churn_start").isNotNull()).select(
        "run_id", F.col("churn_start").alias("s_start"), F.col("churn_end").alias("s_end"))
    kept = revoked_kept(iv, bounds)
    per_change_handover = combine(
        ["run_id", "change_index"], moved(iv, change_spans.drop("last"), ("change_index",)),
        attach_change(kept.withColumnRenamed("revoked_ts", "ts"), windows).groupBy("run_id", "change_index")
        .agg(F.count(F.lit(1)).alias("revoked_kept")),
        epoch_rounds(epochs, change_spans, ("change_index",), F.col("last")))
    per_run_handover = combine(
        ["run_id"], moved(iv, churn_spans, ()), kept.groupBy("run_id").agg(F.count(F.lit(1)).alias("revoked_kept")),
        epoch_rounds(epochs, churn_spans, (), F.lit(True)), local("identity"))

    by_change = ["run_id", "change_index"]
    ov_change = ov.filter(F.col("change_index").isNotNull()).groupBy(*by_change).agg(
        F.count(F.lit(1)).alias("overlaps"), F.sum("overlap_s").alias("overlap_s"))
    in_churn = stw.filter(F.col("change_index").isNotNull() & (F.col("partitions_before") > 0))
    stw_change = in_churn.groupBy(*by_change).agg(
        F.count("pause_s").alias("pauses"), F.max("pause_s").alias("max_pause_s"),
        F.median("pause_s").alias("median_pause_s"))
    info = runs.select("run_id", "scenario", "case", "process_mode", "members")
    per_change = _unreported(_with_rounds(combine(
        by_change, changes.join(F.broadcast(info), "run_id", "left"), wire_per_change(counts),
        rebalance_totals(rebalances, ("run_id", "change_index")), own, ov_change, stw_change, noticed,
        per_change_handover)
        .fillna(0, subset=[*PER_CHANGE, *HANDOVER, "overlaps", "overlap_s", "pauses"])))
    per_run = combine(["run_id"],
                      _runs(runs, bounds, counts, rebalances, ov, in_churn, own, local("delivery"), trace_errors,
                            per_run_handover),
                      split_per_run(noticed, changes, bounds))
    step3 = hold(spark, {
        "runs": with_counting_gaps(per_run, local("wire_gaps")),
        "changes": per_change,
        "rebalances": blank_unreported(rebalances.withColumn("generations", F.array_sort("generations")),
                                       rebalances.columns),
        "overlaps": ov,
        "stop_the_world": stw,
        "trace_errors": trace_errors,
    })
    step3["herd_fit"] = herd_fit(spark, step3["runs"].frame(spark))
    tables = {name: step2[name] for name in ("wire_counts", "ownership_intervals", "delivery", "delivery_gaps",
                                             "contention", *(MIGRATE_TABLES if migrate else ()))}
    return {**tables, **step3}


def control_records() -> Column:
    """Every record the time frame (windows.py), ownership, rebalance counts and contention events read (a
    superset: each applies its own filter): every record but the wire, produce and consume ones, and of the wire
    the owner-node creates and deletes, session closes (owner_nodes.py) and the coordinator's error answers."""
    type_, proto, kind = F.col("type"), F.col("proto"), F.col("kind")
    zk_owner_node = ((proto == "zk") & (kind == "reply") & F.col("op").isin("create", "delete")
                     & F.col("path").rlike(OWNER_PATH))
    zk_close = (proto == "zk") & (kind == "request") & (F.col("op") == "closeSession")
    kafka_error = (proto == "kafka") & (kind == "response") & F.col("error_name").isNotNull()
    wire = (type_ == "wire") & (zk_owner_node | zk_close | kafka_error)
    return F.coalesce(~type_.isin("wire", "produce", "consume") | wire, F.lit(False))


def wire_gap_counts(records: DataFrame) -> DataFrame:
    """run_id, undecodable_streams and blackholed_requests over the whole run: what `with_counting_gaps` reports."""
    wire = records.filter(F.col("type") == "wire")
    return wire.groupBy("run_id").agg(
        F.sum(F.when(F.col("kind") == "undecodable", 1).otherwise(0)).alias("undecodable_streams"),
        F.sum(F.when(F.coalesce(F.col("dropped"), F.lit(False)) & F.col("kind").isin(*gaps.CLIENT_KINDS), 1)
              .otherwise(0)).alias("blackholed_requests"))


def with_counting_gaps(per_run: DataFrame, found: DataFrame) -> DataFrame:
    """`undecodable_streams` and `blackholed_requests` (`wire_gap_counts`), and `counting_gaps`, the reason its
    counts are incomplete (with `bad_lines`: zkconsumer/lab/gaps.py, the same phrase as the lab summary), or null."""
    joined = per_run.join(found, "run_id", "left").fillna(0, subset=["undecodable_streams", "blackholed_requests"])
    counts = {"undecodable": F.col("undecodable_streams"), "blackholed": F.col("blackholed_requests"),
              "bad_lines": F.coalesce(F.col("bad_lines"), F.lit(0))}
    # gaps.describe's phrase, in the words gaps.WORDS gives it
    parts = F.array_compact(F.array(*[
        F.when(counts[key] == 1, F.lit(f"1 {one}")).when(counts[key] > 1, F.concat(counts[key].cast("string"),
                                                                                  F.lit(f" {many}")))
        for key, one, many in gaps.WORDS]))
    return joined.withColumn("counting_gaps", F.when(F.size(parts) > 0, F.array_join(parts, ", ")))


def _with_rounds(df: DataFrame) -> DataFrame:
    """`rounds` and the summary's `rebalances` (herd.rounds_column), without the two counts they come from."""
    rounds, rebalances = rounds_column()
    return df.withColumn("rounds", rounds).withColumn("rebalances", rebalances).drop("generations_seen",
                                                                                     "wire_rounds")


def _unreported(df: DataFrame) -> DataFrame:
    """Null where a count does not apply or the design's members do not report it: `owner_conflicts` outside
    the ZooKeeper designs, and owner_nodes.NOT_REPORTED (the original's members write fewer events)."""
    df = df.withColumn("owner_conflicts", F.when(zookeeper_design(), F.coalesce("owner_conflicts", F.lit(0))))
    return blank_unreported(df, df.columns)


def _runs(runs: DataFrame, bounds: DataFrame, counts: DataFrame, rebalances: DataFrame, ov: DataFrame,
          stw: DataFrame, own: DataFrame, delivery: DataFrame, trace_errors: DataFrame,
          handover: DataFrame) -> DataFrame:
    """One row per run: the summary's counts over the churn window and every family's totals."""
    ov_run = ov.filter(F.col("change_index").isNotNull()).groupBy("run_id").agg(
        F.count(F.lit(1)).alias("overlaps"), F.sum("overlap_s").alias("overlap_s"),
        F.max("overlap_s").alias("max_overlap_s"))
    stw_run = stw.groupBy("run_id").agg(F.median("pause_s").alias("median_pause_s"),
                                        F.max("pause_s").alias("max_pause_s"))
    own_run = own.groupBy("run_id").agg(F.sum("unowned_partition_s").alias("unowned_partition_s"),
                                        F.max("convergence_s").alias("max_convergence_s"),
                                        F.sum(F.when(F.col("convergence_s").isNull(), 1).otherwise(0))
                                        .alias("unconverged_changes"))
    delivery_run = delivery.groupBy("run_id").agg(
        F.first("expected_basis").alias("expected_basis"), F.sum("consumed_offsets").alias("consumed_offsets"),
        F.sum("duplicates").alias("duplicates"), F.sum("missing").alias("missing"))
    errors_run = trace_errors.groupBy("run_id").agg(F.sum("lines").alias("trace_lines"),
                                                    F.sum("bad_lines").alias("bad_lines"))
    joined = combine(["run_id"], runs, bounds, wire_per_run(counts), rebalance_totals(rebalances, ("run_id",)),
                     ov_run, stw_run, own_run, delivery_run, errors_run, handover).fillna(
        0, subset=["changes", "membership_records", *PER_CHANGE, "overlaps", "overlap_s", "trace_lines", "bad_lines",
                   "rebalances", "attempts", "failed_attempts", "conflicts", "rebalance_failures",
                   "session_expiries", "revocations", "losses", "stable_records", "owner_conflicts", "revoked_kept",
                   "epoch_zero_heartbeats", "revoked_partitions", *API_COLUMNS.values()])
    joined = _unreported(_with_rounds(joined))
    per_change = [F.when(F.col("changes") > 0, F.col(c) / F.col("changes")).alias(f"{c}_per_change")
                  for c in (*PER_CHANGE, *HANDOVER)]
    return joined.select("*", *per_change)
