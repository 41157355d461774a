"""Each change's time to stable split into noticing and rebalancing, in Spark, as the lab's summary splits it
(zkconsumer/lab/rules/noticing.py has the definitions: an incumbent's first REBALANCE_IN_PROGRESS response or
JoinGroup request, or its first ZooKeeper watch notification, after the change and no later than it was stable).
The oracle of per_run/counts.py's `split_per_change` and `split_per_run`.

`changes` columns used: run_id, change_index, change_ts (the change's record), change_members, stable_s.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from zkconsumer.lab.rules.noticing import REBALANCE_NOTICE, REJOIN_API, TARGET_API

SPLIT_COLUMNS = ("noticing_s", "rebalancing_s", "noticed_by")


def notice() -> Column:
    """A wire record that shows its member heard of a change (zkconsumer/lab/noticing.notice_member)."""
    kind, proto = F.col("kind"), F.col("proto")
    kafka = (proto == "kafka") & (((kind == "response") & (F.col("error_name") == REBALANCE_NOTICE))
                                  | ((kind == "request") & (F.col("api_name") == REJOIN_API))
                                  | ((kind == "response") & (F.col("api_name") == TARGET_API)
                                     & F.col("assigned").isNotNull()))
    return (F.col("type") == "wire") & (((proto == "zk") & (kind == "event")) | kafka)


def split_per_change(records: DataFrame, changes: DataFrame) -> DataFrame:
    """run_id, change_index, noticing_s, rebalancing_s, noticed_by: one row per change that became stable."""
    notices = (records.filter(notice())
               .select(F.col("run_id").alias("_n_run"), F.col("ts").alias("_n_ts"),
                       F.coalesce("link", "client_id").alias("_n_member")))
    settled = (changes.filter(F.col("stable_s").isNotNull())
               .select("run_id", "change_index", "change_ts", "stable_s",
                       F.split(F.coalesce("change_members", F.lit("")), ",").alias("_changed")))
    inside = ((F.col("run_id") == F.col("_n_run")) & (F.col("_n_ts") >= F.col("change_ts"))
              & (F.col("_n_ts") <= F.col("change_ts") + F.col("stable_s"))
              & ~F.array_contains("_changed", F.col("_n_member")))
    first = (settled.join(notices, inside, "left")
             .groupBy("run_id", "change_index", "change_ts", "stable_s", "_n_member")
             .agg(F.min("_n_ts").alias("_first")))
    per_change = (first.groupBy("run_id", "change_index", "change_ts", "stable_s")
                  .agg(F.max("_first").alias("_last"), F.count("_n_member").alias("noticed_by")))
    noticing = F.coalesce(F.col("_last") - F.col("change_ts"), F.lit(0.0))
    return per_change.select("run_id", "change_index", noticing.alias("noticing_s"),
                             (F.col("stable_s") - noticing).alias("rebalancing_s"), "noticed_by")


def split_per_run(per_change: DataFrame, changes: DataFrame, bounds: DataFrame) -> DataFrame:
    """run_id, noticing_s, rebalancing_s: the split of the change whose time to stable is the run's
    (`time_to_stable_s`, the longest in the churn window)."""
    churn = bounds.select("run_id", "churn_start", "churn_end")
    rows = (changes.select("run_id", "change_index", "change_ts", "stable_s")
            .join(per_change, ["run_id", "change_index"]).join(churn, "run_id")
            .filter((F.col("change_ts") >= F.col("churn_start")) & (F.col("change_ts") <= F.col("churn_end"))))
    # Ties in stable_s go to the earliest change, as the summary's max() over its stable records in order does:
    # max_by alone picks any of the tied rows, and two runs of the job then disagree.
    longest = F.struct(F.col("stable_s"), (-F.col("change_index")).alias("earliest"))
    return rows.groupBy("run_id").agg(F.max_by("noticing_s", longest).alias("noticing_s"),
                                      F.max_by("rebalancing_s", longest).alias("rebalancing_s"))
