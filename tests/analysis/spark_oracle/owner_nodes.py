"""The owner-node reading of the ZooKeeper wire as Spark Columns: the oracle of per_run/core.py's `claimed`,
`conflicted`, `deleted`, `session_closed`, `from_wire` and `owner_tp`, and of per_run/run.py's blanking of the
columns a design does not report. What an owner node tells, and which designs take their owners from the wire:
zkconsumer/lab/analysis/owner_nodes.py.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from zkconsumer.lab.analysis.owner_nodes import NODE_EXISTS, NOT_REPORTED, OK, OWNER_PATH, OWNERS_FROM_WIRE


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


def blank_unreported(df: DataFrame, columns: list[str]) -> DataFrame:
    """`df` with each column a design does not report set to null for that design's rows."""
    out = df
    for design, names in NOT_REPORTED.items():
        for name in names:
            if name in columns and name in df.columns:
                out = out.withColumn(name, F.when(F.col("design") == design, F.lit(None)).otherwise(F.col(name)))
    return out

