"""The offset audit of every run as a Spark grouped map: the frame form of the audit whose per-run function,
delivery._audit_run, stays in the product (per_run/migrate.py calls it). What the audit counts, and how:
zkconsumer/lab/analysis/delivery.py. The Spark migrate tables (migrate_tables.py here) take their partitions from
`audit`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from zkconsumer.lab.analysis.delivery import (
    AUDIT_SCHEMA,
    DELIVERY_SCHEMA,
    GAP_ROW,
    GAPS_SCHEMA,
    PARTITION_ROW,
    _audit_run,
)


def audit_frame(records: DataFrame) -> DataFrame:
    """AUDIT_SCHEMA rows of every run with produce or consume records: one `partition` row per partition
    (DELIVERY_SCHEMA) and one `gap` row per missing range (GAPS_SCHEMA)."""
    rows = (records.filter(F.col("type").isin("consume", "produce"))
            .select("run_id", "design", "type", "member", "topic", "partition",
                    F.col("first_offset").alias("first"), F.col("last_offset").alias("last")))
    return rows.groupBy("run_id").applyInArrow(_audit_run, AUDIT_SCHEMA)


def audit(records: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(delivery, delivery_gaps) as frames (DELIVERY_SCHEMA, GAPS_SCHEMA)."""
    both = audit_frame(records)
    return (both.filter(F.col("row") == PARTITION_ROW).select(*DELIVERY_SCHEMA.fieldNames()),
            both.filter(F.col("row") == GAP_ROW).select(*GAPS_SCHEMA.fieldNames()))

