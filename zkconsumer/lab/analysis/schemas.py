"""Explicit Spark schemas of what the job reads (trace lines, manifests) and of the nested JSON it re-parses.

Nothing is inferred. `TRACE_SCHEMA` is generated from the trace contract (`zkconsumer/trace_contract.py`): one
column per field name the contract declares, so a field added there is a column here. A trace line is parsed with
it (`PARSE_SCHEMA`: less the text columns nobody reads, which check nothing), so a line whose fields have the wrong
type is caught (the parser's corrupt-record column), not silently widened.

A field whose JSON type differs between record types or kinds (the contract's `column_types()` gives it no one
type) is a string column: Spark keeps the raw JSON text of any value for a string field, and the job re-parses it
per kind with the sub-schemas below. So a kind that gives a known name another type (a list here, a count there)
never makes the lines of either unreadable. Today: `partitions` is a list of "topic/partition" in
`fetchers_stopped`, `generation` and `assignment` records, a count in `state` events and an object in
`group_view`; objects (`offsets`, `owners`, `sample`, ...), lists of anything and 64-bit ids (`session_id`) are kept
as text too, and `added`/`remaining` (`RAW_TEXT`) because the job reads them as it reads `partitions`.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import types as T

from zkconsumer.trace_contract import RECORDS, FieldType, RecordType, column_types

CORRUPT = "_corrupt"  # the parser's corrupt-record column: the raw line when it did not fit TRACE_SCHEMA
BASE_FIELDS = ("v", "type", "ts", "design")

_STRING = T.StringType()
# The Spark type of each contract type; None: the raw JSON text, re-parsed by whoever reads it.
SPARK_TYPES: dict[FieldType, T.DataType | None] = {
    FieldType.INT: T.IntegerType(),
    FieldType.LONG: T.LongType(),
    FieldType.FLOAT: T.DoubleType(),
    FieldType.STR: _STRING,
    FieldType.BOOL: T.BooleanType(),
    FieldType.STR_LIST: T.ArrayType(_STRING),
    FieldType.LIST: None,
    FieldType.OBJECT: None,
    FieldType.ID: None,  # a 64-bit id: its text, never a number the job computes with
}
# Lists of "topic/partition" the job re-parses with PARTITION_LIST from their text, as it does `partitions`.
RAW_TEXT = ("added", "remaining")


def trace_fields(records: Mapping[str, RecordType] = RECORDS) -> dict[str, T.DataType]:
    """The Spark type of every field name of the contract: its one type's, or text where types differ."""
    return {name: (None if ftype is None or name in RAW_TEXT else SPARK_TYPES[ftype]) or _STRING
            for name, ftype in column_types(records).items()}


def trace_schema(records: Mapping[str, RecordType] = RECORDS) -> T.StructType:
    return T.StructType([T.StructField(name, dtype) for name, dtype in trace_fields(records).items()]
                        + [T.StructField(CORRUPT, _STRING)])


TRACE_SCHEMA = trace_schema()
TRACE_FIELDS: tuple[str, ...] = tuple(f.name for f in TRACE_SCHEMA.fields if f.name != CORRUPT)
# What the metrics read; the others are parsed for the checks only (required fields, types). The job keeps these
# columns of every good line in memory, so the list is kept short.
RECORD_FIELDS: tuple[str, ...] = (
    "type", "ts", "design", "phase", "action", "members", "step", "generation_or_rebalance", "duration_s", "member",
    "kind", "result", "partitions", "added", "offsets", "generation", "topic", "partition", "first_offset",
    "last_offset", "proto", "link", "client_id", "op", "opcode", "api_name", "api_key", "error_name", "path", "err",
    "dropped", "conn", "watch", "session_id", "timeout_ms", "state", "member_epoch", "owned", "epoch_after",
    "assigned", "fault_id", "target", "params")
# What the reader parses a line with: TRACE_SCHEMA but the text columns it neither reads nor requires. A text column
# takes any JSON value, so parsing it checks nothing, and copying out the text of every such value (the Kafka wire
# records' partition_errors, the ZooKeeper ones' sub_ops, ...) cost the parse of a whole herd run (888k lines) a
# quarter more CPU; every typed column is parsed, so a value of another type is a bad line whatever its field.
def parse_schema(schema: T.StructType, records: Mapping[str, RecordType] = RECORDS) -> T.StructType:
    required = {name for t in records.values() for name in t.required}
    return T.StructType([f for f in schema.fields if f.dataType != _STRING or f.name in required
                         or f.name in (*RECORD_FIELDS, *BASE_FIELDS, CORRUPT)])


PARSE_SCHEMA = parse_schema(TRACE_SCHEMA)
# What only the fault campaign's tables read (chaos_tables.py): left out of what each run's analysis is sent, since
# every column of every record costs in the grouped map (its shuffle and its Arrow batches).
CAMPAIGN_FIELDS = ("fault_id", "target", "params")
RUN_FIELDS: tuple[str, ...] = tuple(f for f in RECORD_FIELDS if f not in CAMPAIGN_FIELDS)

PARTITION_LIST = T.ArrayType(_STRING)
OFFSET_MAP = T.MapType(_STRING, T.LongType())

MANIFEST_SCHEMA = T.StructType([
    T.StructField("run_id", _STRING, False),
    T.StructField("path", _STRING, False),
    T.StructField("scenario", _STRING),
    T.StructField("case", _STRING),
    T.StructField("design", _STRING),
    T.StructField("process_mode", _STRING),
    T.StructField("repeat", T.IntegerType()),
    T.StructField("sweep_axis", _STRING),
    T.StructField("sweep_value", T.DoubleType()),
    T.StructField("members", T.IntegerType()),  # N: the initial group size
    T.StructField("partitions", T.IntegerType()),  # every partition of the scenario's topics
    T.StructField("session_timeout_ms", T.IntegerType()),  # the design's session timeout
    T.StructField("servers", _STRING),  # "ZooKeeper 3.9.5, Apache Kafka 3.9.2": what the run ran against
    T.StructField("completed", T.BooleanType()),
    T.StructField("status", _STRING),
    T.StructField("started", T.DoubleType()),
    T.StructField("ended", T.DoubleType()),
])

TRACE_ERROR_SCHEMA = T.StructType([
    T.StructField("run_id", _STRING),
    T.StructField("file", _STRING),
    T.StructField("lines", T.LongType()),
    T.StructField("bad_lines", T.LongType()),
    T.StructField("first_bad_line", T.LongType()),
    T.StructField("first_bad_reason", _STRING),
    T.StructField("first_bad_text", _STRING),
])

FIT_SCHEMA = T.StructType([  # herd.herd_fit: a least-squares polynomial in N per sweep and metric
    T.StructField("scenario", _STRING),
    T.StructField("design", _STRING),
    T.StructField("process_mode", _STRING),
    T.StructField("metric", _STRING),
    T.StructField("runs", T.IntegerType()),
    T.StructField("sizes", T.IntegerType()),  # distinct N
    T.StructField("n_min", T.DoubleType()),
    T.StructField("n_max", T.DoubleType()),
    T.StructField("degree", T.IntegerType()),
    T.StructField("a2", T.DoubleType()),  # the N² coefficient (null for a linear fit)
    T.StructField("a1", T.DoubleType()),  # the N coefficient
    T.StructField("a0", T.DoubleType()),  # the constant
    T.StructField("rms_residual", T.DoubleType()),  # sqrt(RSS / (runs - coefficients)); null without a residual df
    T.StructField("max_abs_residual", T.DoubleType()),  # largest |mean per N - fit(N)|
])
