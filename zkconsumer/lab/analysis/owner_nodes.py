"""Owner nodes read off the ZooKeeper wire: ownership of the designs whose members do not report their claims.

Kafka 0.8.2.2's ZookeeperConsumerConnector has no rebalance listener, so the "original" design's members write
no `claim`, `release`, `rollback` or `fetchers_*` events (docs/traces.md). What each one owns is still on the
wire: it creates `/consumers/<group>/owners/<topic>/<partition>` as an ephemeral node to claim a partition
(`ZKRebalancerListener.reflectPartitionOwnershipDecision`, via `ZkUtils.createEphemeralPathExpectConflict`) and
deletes it to give it up (`releasePartitionOwnership`, `deletePartitionOwnershipFromZK`), each through its own
proxy link. A `create` answered NodeExists (-110) is a conflict: another member still owns the partition.

Both ZooKeeper designs send these requests, so the wire's conflicts (`owner_conflicts`) are counted for both
alike; only the designs in `OWNERS_FROM_WIRE` take their ownership intervals from the wire.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from zkconsumer.lab.designs import ZOOKEEPER_DESIGNS

# Designs whose members report no per-partition events: their owners come from the wire (docs/analysis.md).
OWNERS_FROM_WIRE: tuple[str, ...] = ("original",)
# Per design, the run and change columns its members do not report: null ("not reported"), never 0.
NOT_REPORTED: dict[str, tuple[str, ...]] = {
    # no rebalance_failed or session_expired events; and no revocations of its own, so nothing tells a partition
    # it gave up for nothing (zkconsumer/lab/handover.py leaves that out for it too)
    "original": ("rebalance_failures", "session_expiries", "revoked_kept", "revoked_kept_per_change"),
}
# An owner node; the wire's path carries the client's chroot in front, hence no anchor at the start.
OWNER_PATH = r"/consumers/[^/]+/owners/([^/]+)/(\d+)$"
OK, NODE_EXISTS = 0, -110


def owner_tp() -> Column:
    """"topic/partition" of a wire record's owner-node path, or null."""
    path = F.coalesce(F.col("path"), F.lit(""))
    return F.when(path.rlike(OWNER_PATH), F.concat_ws("/", F.regexp_extract(path, OWNER_PATH, 1),
                                                      F.regexp_extract(path, OWNER_PATH, 2)))


def _zk_reply(op: str) -> Column:
    return ((F.col("type") == "wire") & (F.col("proto") == "zk") & (F.col("kind") == "reply")
            & (F.col("op") == op) & F.col("path").rlike(OWNER_PATH))


def claimed() -> Column:
    """An owner node created: the member (the record's `link`) owns the partition from the reply on."""
    return _zk_reply("create") & (F.col("err") == OK)


def conflicted() -> Column:
    """A claim refused: the node is someone else's (NodeExists)."""
    return _zk_reply("create") & (F.col("err") == NODE_EXISTS)


def deleted() -> Column:
    """An owner node deleted (released, or rolled back after a conflict): gone once the server answers."""
    return _zk_reply("delete")


def session_closed() -> Column:
    """A member closing its session: ZooKeeper deletes its ephemeral owner nodes with it."""
    return ((F.col("type") == "wire") & (F.col("proto") == "zk") & (F.col("kind") == "request")
            & (F.col("op") == "closeSession"))


def from_wire() -> Column:
    return F.col("design").isin(*OWNERS_FROM_WIRE)


def zookeeper_design() -> Column:
    return F.col("design").isin(*ZOOKEEPER_DESIGNS)


def blank_unreported(df: DataFrame, columns: list[str]) -> DataFrame:
    """`df` with each column a design does not report set to null for that design's rows."""
    out = df
    for design, names in NOT_REPORTED.items():
        for name in names:
            if name in columns and name in df.columns:
                out = out.withColumn(name, F.when(F.col("design") == design, F.lit(None)).otherwise(F.col(name)))
    return out
