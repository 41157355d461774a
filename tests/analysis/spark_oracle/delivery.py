"""The offset audit of every run as a Spark grouped map over the product's per-run sweep
(delivery._audit_records): what the audit counts, and how: zkconsumer/lab/analysis/delivery.py. The Spark
migrate tables (migrate_tables.py here) take their partitions from `audit`.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from zkconsumer.lab.analysis.delivery import (
    DELIVERY_SCHEMA,
    GAP_ROW,
    GAPS_SCHEMA,
    PARTITION_ROW,
    _audit_records,
)

# both tables' rows in one frame: `row` says which; each table's columns are the others' nulls
AUDIT_SCHEMA = T.StructType([T.StructField("row", T.StringType()),
                             *DELIVERY_SCHEMA.fields,
                             *[f for f in GAPS_SCHEMA.fields if f.name not in DELIVERY_SCHEMA.fieldNames()]])


def audit_frame(records: DataFrame) -> DataFrame:
    """AUDIT_SCHEMA rows of every run with produce or consume records: one `partition` row per partition
    (DELIVERY_SCHEMA) and one `gap` row per missing range (GAPS_SCHEMA)."""
    rows = (records.filter(F.col("type").isin("consume", "produce"))
            .select("run_id", "design", "type", "member", "topic", "partition",
                    F.col("first_offset").alias("first"), F.col("last_offset").alias("last")))
    arrow = to_arrow_schema(AUDIT_SCHEMA)

    # made here, not at module level: the executors' Python cannot import this test package, and a nested
    # function is sent by value
    def audit_run(table: pa.Table) -> pa.Table:
        return pa.Table.from_pylist(_audit_records(table.to_pylist()), schema=arrow)

    return rows.groupBy("run_id").applyInArrow(audit_run, AUDIT_SCHEMA)


def audit(records: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(delivery, delivery_gaps) as frames (DELIVERY_SCHEMA, GAPS_SCHEMA)."""
    both = audit_frame(records)
    return (both.filter(F.col("row") == PARTITION_ROW).select(*DELIVERY_SCHEMA.fieldNames()),
            both.filter(F.col("row") == GAP_ROW).select(*GAPS_SCHEMA.fieldNames()))

