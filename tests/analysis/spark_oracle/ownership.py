"""Ownership built in Spark over every run: the oracle of per_run/ownership.py (events, intervals, overlaps,
per-change coverage, stop-the-world pauses, partitions moved, partitions revoked for nothing, contention events).
What an ownership event and an interval are: zkconsumer/lab/analysis/ownership.py, which keeps the constants read
here (START, END, GIVE_UP, STALE_GENERATION).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

import spark_oracle.owner_nodes as wire
from spark_oracle.windows import attach_change
from zkconsumer.lab.analysis.ownership import END, GIVE_UP, STALE_GENERATION, START
from zkconsumer.lab.analysis.schemas import OFFSET_MAP, PARTITION_LIST
from zkconsumer.lab.designs import BROKER_SIDE_DESIGNS
from zkconsumer.lab.rules.protocol import backs_off_column


def ownership_events(records: DataFrame) -> DataFrame:
    """run_id, design, member, tp ("topic/partition"), ts, ev (START | END), reason."""
    me, gen, kind = F.col("type") == "member_event", F.col("type") == "generation", F.col("kind")

    def events(condition: Column, partitions: Column, ev: int, reason: Column) -> DataFrame:
        return (records.filter(condition)
                .select("run_id", "design", "member", "ts", F.explode(partitions).alias("tp"),
                        F.lit(ev).alias("ev"), reason.alias("reason")))

    started = events(me & (kind == "fetchers_started"), F.map_keys(F.from_json("offsets", OFFSET_MAP)), START,
                     F.lit("fetchers_started"))
    stopped = events(me & (kind == "fetchers_stopped"), F.from_json("partitions", PARTITION_LIST), END,
                     F.lit("fetchers_stopped"))
    gained = F.coalesce(F.from_json("added", PARTITION_LIST), F.from_json("partitions", PARTITION_LIST))
    assigned = events(gen & (kind == "assigned"), gained, START, F.lit("assigned"))
    revoked = events(gen & kind.isin("revoked", "lost"), F.from_json("partitions", PARTITION_LIST), END, kind)
    nodes = (records.filter(wire.from_wire() & (wire.claimed() | wire.deleted()))
             .select("run_id", "design", F.col("link").alias("member"), "ts", wire.owner_tp().alias("tp"),
                     F.when(wire.claimed(), START).otherwise(END).alias("ev"),
                     F.when(wire.claimed(), "owner created").otherwise("owner deleted").alias("reason")))
    owned = started.unionByName(stopped).unionByName(assigned).unionByName(revoked).unionByName(nodes)
    membership = F.col("type") == "membership"
    # what ends everything a member had: a kill on every design; for owner nodes, also the session's end
    ends = (records.filter(membership & (F.col("action") == "kill"))
            .select("run_id", F.explode("members").alias("member"), "ts", F.lit("killed").alias("reason"),
                    F.lit(None).cast("string").alias("only"))
            .unionByName(records.filter(membership & (F.col("action") == "expire"))
                         .select("run_id", F.explode("members").alias("member"), "ts",
                                 F.lit("session expired").alias("reason"), F.lit("wire").alias("only")))
            .unionByName(records.filter(wire.from_wire() & wire.session_closed())
                         .select("run_id", F.col("link").alias("member"), "ts", F.lit("session closed").alias("reason"),
                                 F.lit("wire").alias("only"))))
    ended = (owned.select("run_id", "design", "member", "tp").distinct().join(F.broadcast(ends), ["run_id", "member"])
             .filter(F.col("only").isNull() | wire.from_wire())
             .select("run_id", "design", "member", "ts", "tp", F.lit(END).alias("ev"), "reason"))
    return owned.unionByName(ended)


def intervals(events: DataFrame, bounds: DataFrame, records: DataFrame) -> DataFrame:
    """run_id, design, member, tp, topic, partition, start, end, length_s, end_reason, open_at_end, stale_since,
    basis (what an interval is: "fetching", "generation" or "owner node", owner_nodes.py)."""
    order = Window.partitionBy("run_id", "member", "tp").orderBy("ts", "ev")
    paired = (events.withColumn("next_ts", F.lead("ts").over(order))
              .withColumn("next_reason", F.lead("reason").over(order))
              .filter(F.col("ev") == START)
              .join(F.broadcast(bounds.select("run_id", "run_end")), "run_id")
              .select("run_id", "design", "member", "tp",
                      F.regexp_extract("tp", r"^(.*)/(\d+)$", 1).alias("topic"),
                      F.regexp_extract("tp", r"^(.*)/(\d+)$", 2).cast("int").alias("partition"),
                      F.col("ts").alias("start"),
                      F.coalesce("next_ts", F.greatest("run_end", "ts")).alias("end"),
                      F.coalesce("next_reason", F.lit("trace end")).alias("end_reason"),
                      F.col("next_ts").isNull().alias("open_at_end")))
    expiries = (records.filter((F.col("type") == "member_event") & (F.col("kind") == "session_expired"))
                .select(F.col("run_id").alias("x_run"), F.col("member").alias("x_member"), F.col("ts").alias("x_ts")))
    key = ["run_id", "member", "tp", "start"]
    stale = (paired.select(*key, "end").join(
        F.broadcast(expiries), (F.col("run_id") == F.col("x_run")) & (F.col("member") == F.col("x_member"))
        & (F.col("x_ts") >= F.col("start")) & (F.col("x_ts") < F.col("end")))
        .groupBy(*key).agg(F.min("x_ts").alias("stale_since")))
    basis = (F.when(wire.from_wire(), F.lit("owner node"))
             .when(F.col("design").isin(*BROKER_SIDE_DESIGNS), F.lit("generation"))
             .otherwise(F.lit("fetching")))
    return (paired.join(F.broadcast(stale), key, "left")
            .withColumn("length_s", F.col("end") - F.col("start"))
            .select("run_id", "design", "member", "tp", "topic", "partition", "start", "end", "length_s",
                    "end_reason", "open_at_end", "stale_since", basis.alias("basis")))


def overlaps(iv: DataFrame, windows: DataFrame) -> DataFrame:
    """Two different members fetching one partition at once: run_id, design, tp, member_a, member_b, start, end,
    overlap_s, after_expiry (one of them had lost its ZooKeeper session by then), change_index."""
    a = iv.select(*[F.col(c).alias(f"a_{c}") for c in ("run_id", "design", "member", "tp", "start", "end",
                                                          "stale_since")])
    b = iv.select(*[F.col(c).alias(f"b_{c}") for c in ("run_id", "member", "tp", "start", "end", "stale_since")])
    joined = a.join(b, (F.col("a_run_id") == F.col("b_run_id")) & (F.col("a_tp") == F.col("b_tp"))
                    & (F.col("a_member") < F.col("b_member")) & (F.col("a_start") < F.col("b_end"))
                    & (F.col("b_start") < F.col("a_end")))
    start = F.greatest("a_start", "b_start")

    def stale(side: str) -> Column:
        return F.coalesce(F.col(f"{side}_stale_since") <= start, F.lit(False))

    # the original reports no session expiry of its own: whether one side had lost its session is unknown there
    after_expiry = F.when(~F.col("a_design").isin(*wire.OWNERS_FROM_WIRE), stale("a") | stale("b"))
    found = joined.select(F.col("a_run_id").alias("run_id"), F.col("a_design").alias("design"),
                          F.col("a_tp").alias("tp"), F.col("a_member").alias("member_a"),
                          F.col("b_member").alias("member_b"), start.alias("start"),
                          F.least("a_end", "b_end").alias("end"), after_expiry.alias("after_expiry"))
    return attach_change(found.withColumn("overlap_s", F.col("end") - F.col("start")), windows, ts="start")


def coverage(iv: DataFrame) -> DataFrame:
    """The union of every member's intervals per partition: run_id, tp, start, end (disjoint islands)."""
    order = Window.partitionBy("run_id", "tp").orderBy("start", "end")
    return (iv.withColumn("reach", F.max("end").over(order.rowsBetween(Window.unboundedPreceding, -1)))
            .withColumn("new", F.when(F.col("reach").isNull() | (F.col("start") > F.col("reach")), 1).otherwise(0))
            .withColumn("island", F.sum("new").over(order.rowsBetween(Window.unboundedPreceding, 0)))
            .groupBy("run_id", "tp", "island").agg(F.min("start").alias("start"), F.max("end").alias("end"))
            .drop("island"))


def ownership_per_change(iv: DataFrame, events: DataFrame, windows: DataFrame, runs: DataFrame) -> DataFrame:
    """Per change window: unowned_partition_s and convergence_s.

    unowned_partition_s: window length x partitions, less the time each partition was fetched by someone.
    convergence_s: from the window's start to its last ownership event, if every partition is fetched after it
    (null when the window ends with some partition unowned). The partition count is the scenario's, or the
    number seen fetched when that is larger (partitions added during the run)."""
    changes = windows.filter(F.col("change_index") > 0)
    last = (attach_change(events.select("run_id", "ts"), changes).filter(F.col("change_index").isNotNull())
            .groupBy("run_id", "change_index").agg(F.max("ts").alias("last_event")))
    at = (changes.join(last, ["run_id", "change_index"], "left")
          .select("run_id", "change_index", "win_start", "win_end",
                  F.coalesce("last_event", "win_start").alias("at")))
    islands = coverage(iv)
    # Every island against every window of its run (few of each): the time it covers in the window, whether it
    # covers the window's last event, and (over the whole run) how many partitions were ever fetched.
    overlap = F.least("end", "win_end") - F.greatest("start", "win_start")
    per_window = (islands.join(F.broadcast(at), "run_id")
                  .groupBy("run_id", "change_index", "win_start", "win_end", "at")
                  .agg(F.sum(F.when(overlap > 0, overlap).otherwise(0.0)).alias("covered_s"),
                       F.sum(F.when((F.col("start") <= F.col("at")) & (F.col("end") > F.col("at")), 1).otherwise(0))
                       .alias("owned_at_end"),
                       F.countDistinct("tp").alias("seen")))
    n = F.greatest(F.coalesce("partitions", F.lit(0)), F.coalesce("seen", F.lit(0)))
    return (at.join(F.broadcast(runs.select("run_id", "partitions")), "run_id", "left")
            .join(per_window, ["run_id", "change_index", "win_start", "win_end", "at"], "left")
            .select("run_id", "change_index",
                    ((F.col("win_end") - F.col("win_start")) * n - F.coalesce("covered_s", F.lit(0.0)))
                    .alias("unowned_partition_s"),
                    F.when(F.coalesce("owned_at_end", F.lit(0)) >= n, F.col("at") - F.col("win_start"))
                    .alias("convergence_s"),
                    n.alias("n_partitions")))


def stop_the_world(events: DataFrame, windows: DataFrame) -> DataFrame:
    """Per member: from giving its partitions up (fetchers stopped; revoked or lost) to getting some back (fetchers
    restarted; assigned). A repeated stop before the restart (a retried attempt) belongs to the first one.

    run_id, design, member, stopped_ts, restarted_ts, pause_s (null: never restarted, e.g. it left),
    partitions_before, partitions_after, change_index (of the stop)."""
    per_event = (events.filter(F.col("reason") != "killed")
                 .groupBy("run_id", "design", "member", "ts", "ev").agg(F.count(F.lit(1)).alias("partitions")))
    order = Window.partitionBy("run_id", "member").orderBy("ts", "ev")
    after = order.rowsBetween(1, Window.unboundedFollowing)
    stops = (per_event
             .withColumn("prev_ev", F.lag("ev").over(order))
             .withColumn("restarted_ts", F.first(F.when(F.col("ev") == START, F.col("ts")), ignorenulls=True)
                         .over(after))
             .withColumn("partitions_after", F.first(F.when(F.col("ev") == START, F.col("partitions")),
                                                     ignorenulls=True).over(after))
             .filter((F.col("ev") == END) & (F.col("prev_ev").isNull() | (F.col("prev_ev") == START)))
             .select("run_id", "design", "member", F.col("ts").alias("stopped_ts"), "restarted_ts",
                     (F.col("restarted_ts") - F.col("ts")).alias("pause_s"),
                     F.col("partitions").alias("partitions_before"), "partitions_after"))
    return attach_change(stops, windows, ts="stopped_ts")


def contention_events(records: DataFrame) -> DataFrame:
    """What the split-brain section shows when it happened: run_id, design, member, ts, what, tp.

    what: "owner NodeExists" (a ZooKeeper design's owner-node create refused: someone still owns `tp`; from the
    wire, so both ZooKeeper designs alike), "owner create" (any owner-node create: two members claiming one
    partition in rebalance attempts that overlap in time computed different assignments, split_brain.py),
    "attempt begin" and "attempt end" (a rebalance attempt's bounds), "backoff after <result>" (an attempt that
    failed and sleeps rebalance.backoff.ms; it ends the attempt too), "rebalance failed", "session expired",
    "lost" (a coordinator member's assignment lost) and "<api> <error>" (a coordinator member answered
    STALE_GENERATION: its generation is not the coordinator's)."""
    me, kind = F.col("type") == "member_event", F.col("kind")
    create = (F.col("type") == "wire") & (F.col("proto") == "zk") & (kind == "reply") & (F.col("op") == "create")
    owner_create = create & F.col("path").rlike(wire.OWNER_PATH)
    stale = ((F.col("type") == "wire") & (F.col("proto") == "kafka") & (kind == "response")
             & F.col("error_name").isin(*STALE_GENERATION))
    what = (F.when(owner_create & (F.col("err") == wire.NODE_EXISTS), F.lit("owner NodeExists"))
            .when(owner_create, F.lit("owner create"))
            .when(me & (kind == "attempt_end") & backs_off_column("result"),
                  F.concat(F.lit("backoff after "), F.col("result")))
            .when(me & (kind == "attempt_end"), F.lit("attempt end"))
            .when(me & (kind == "attempt_begin"), F.lit("attempt begin"))
            .when(me & (kind == "rebalance_failed"), F.lit("rebalance failed"))
            .when(me & (kind == "session_expired"), F.lit("session expired"))
            .when((F.col("type") == "generation") & (kind == "lost"), F.lit("lost"))
            .when(stale, F.concat_ws(" ", "api_name", "error_name")))
    return (records.select("run_id", "design", F.coalesce("member", "link").alias("member"), "ts", what.alias("what"),
                           F.when(owner_create, wire.owner_tp()).alias("tp"))
            .filter(F.col("what").isNotNull()))


def _owners_at(iv: DataFrame, spans: DataFrame, keys: tuple[str, ...], at: str, after_events_at: bool) -> DataFrame:
    """run_id, *keys, tp, owner: who owned each partition at each span's `at`, after every ownership event before
    it (and, with `after_events_at`, at it), as handover.Handover folds them; of two members at once, the greater
    name (Handover keeps the last of its members in sorted order)."""
    t = F.col(at)
    holds = (((F.col("start") <= t) & ((F.col("end") > t) | F.col("open_at_end"))) if after_events_at
             else ((F.col("start") < t) & (F.col("end") >= t)))
    return (iv.select("run_id", "member", "tp", "start", "end", "open_at_end")
            .join(F.broadcast(spans), "run_id").filter(holds)
            .groupBy("run_id", *keys, "tp").agg(F.max("member").alias("owner")))


def moved(iv: DataFrame, spans: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """Per span (run_id, *keys, s_start, s_end): `partitions_moved`, the partitions whose owner at the span's end
    differs from the owner at its start (nobody counts as an owner: a partition left unowned moved too).

    The start is the state the events before it left, the end the state after the events at it, as
    zkconsumer/lab/rules/handover.py takes them (its window opens before the record at `settled` and closes after the
    one at `done`)."""
    before = _owners_at(iv, spans, keys, "s_start", False).withColumnRenamed("owner", "before")
    after = _owners_at(iv, spans, keys, "s_end", True).withColumnRenamed("owner", "after")
    changed = (before.join(after, ["run_id", *keys, "tp"], "full")
               .filter(~F.col("before").eqNullSafe(F.col("after")))
               .groupBy("run_id", *keys).agg(F.count(F.lit(1)).alias("partitions_moved")))
    return (spans.select("run_id", *keys).join(changed, ["run_id", *keys], "left")
            .fillna(0, subset=["partitions_moved"]))


def revoked_kept(iv: DataFrame, bounds: DataFrame) -> DataFrame:
    """One row per partition revoked for nothing: a member's interval on it that the member gave up (GIVE_UP)
    inside the churn window, and the same member's next interval on it starting inside the window too. It is the
    stop-the-world of an eager protocol, which revokes everything and gives most of it back; an incremental one
    revokes only what moves.

    run_id, design, member, tp, revoked_ts, regained_ts."""
    order = Window.partitionBy("run_id", "member", "tp").orderBy("start")
    churn = bounds.select("run_id", "churn_start", "churn_end")

    def inside(t: Column) -> Column:
        return (t >= F.col("churn_start")) & (t <= F.col("churn_end"))

    return (iv.withColumn("regained_ts", F.lead("start").over(order))
            .join(F.broadcast(churn), "run_id")
            .filter(F.col("end_reason").isin(*GIVE_UP) & inside(F.col("end")) & inside(F.col("regained_ts")))
            .select("run_id", "design", "member", "tp", F.col("end").alias("revoked_ts"), "regained_ts"))

