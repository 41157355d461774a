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

from pyspark.sql import Column
from pyspark.sql import functions as F

from zkconsumer.lab.designs import ZOOKEEPER_DESIGNS

# Designs whose members report no per-partition events: their owners come from the wire (docs/analysis.md).
OWNERS_FROM_WIRE: tuple[str, ...] = ("original",)
# Per design, the run and change columns its members do not report: null ("not reported"), never 0.
NOT_REPORTED: dict[str, tuple[str, ...]] = {
    # no rebalance_failed or session_expired events; and no revocations of its own, so nothing tells a partition
    # it gave up for nothing (zkconsumer/lab/rules/handover.py leaves that out for it too)
    "original": ("rebalance_failures", "session_expiries", "revoked_kept", "revoked_kept_per_change"),
}
# An owner node; the wire's path carries the client's chroot in front, hence no anchor at the start.
OWNER_PATH = r"/consumers/[^/]+/owners/([^/]+)/(\d+)$"
OK, NODE_EXISTS = 0, -110


def zookeeper_design() -> Column:
    return F.col("design").isin(*ZOOKEEPER_DESIGNS)


