"""Explicit Spark schemas of what the job reads (trace lines, manifests) and of the nested JSON it re-parses.

Nothing is inferred: a trace line is parsed with `TRACE_SCHEMA`, so a line whose declared fields have the wrong
type is caught (the parser's corrupt-record column), not silently widened. Only the fields the job uses are
declared (readers ignore the others, docs/traces.md), plus every field `RECORD_TYPES` requires, so the required
check sees them.

Fields whose JSON type differs between record kinds are declared as strings: Spark keeps the raw JSON text of any
value for a string field, and the job re-parses it per kind with the sub-schemas below. `partitions` is a list of
"topic/partition" in `fetchers_stopped`, `generation` and `assignment` records but a count in `state` events;
`offsets`, `owners` and `sample` are objects.
"""

from __future__ import annotations

from pyspark.sql import types as T

from zkconsumer.lab.trace import RECORD_TYPES

CORRUPT = "_corrupt"  # the parser's corrupt-record column: the raw line when it did not fit TRACE_SCHEMA
BASE_FIELDS = ("v", "type", "ts", "design")

_STRING = T.StringType()
_FIELDS: dict[str, T.DataType] = {
    "v": T.IntegerType(),
    "type": _STRING,
    "ts": T.DoubleType(),
    "design": _STRING,
    # phase, membership, stable
    "phase": _STRING,
    "action": _STRING,
    "members": T.ArrayType(_STRING),
    "step": T.IntegerType(),
    "generation_or_rebalance": T.LongType(),
    "duration_s": T.DoubleType(),
    # member_event, generation, assignment
    "member": _STRING,
    "kind": _STRING,
    "seq": T.LongType(),
    "result": _STRING,
    "error": _STRING,  # raw: null, a message, or anything a future writer puts there
    "partitions": _STRING,  # raw JSON: see the module docstring
    # generation records of the incremental protocols (cooperative, consumer): what one callback added, and what a
    # partial revoke left the member (raw JSON lists, like `partitions`); `round` numbers a member's assignments
    "added": _STRING,
    "remaining": _STRING,
    "round": T.LongType(),
    "offsets": _STRING,  # raw JSON object {"t/p": offset}
    "generation": T.LongType(),
    "pid": T.LongType(),
    "incarnation": T.LongType(),
    # consume, produce, commit
    "topic": _STRING,
    "partition": T.IntegerType(),
    "offset": T.LongType(),
    "first_offset": T.LongType(),
    "last_offset": T.LongType(),
    "count": T.LongType(),
    # wire
    "proto": _STRING,
    "link": _STRING,
    "client_id": _STRING,
    "op": _STRING,
    "opcode": T.IntegerType(),
    "api_name": _STRING,
    "api_key": T.IntegerType(),
    "error_name": _STRING,
    "path": _STRING,  # ZooKeeper: owner-node creates and deletes are the original design's claims and releases
    "err": T.IntegerType(),
    "dropped": T.BooleanType(),  # a frame that met a blackhole (zkconsumer/lab/gaps.py)
    # connection losses (zkconsumer/lab/reconnects.py): a ZooKeeper connection and the session its ConnectRequest
    # named (raw text: a 64-bit id), the timeout its reply gave (0: expired), whether a read sets a watch, and a
    # member's connection state
    "conn": T.LongType(),
    "watch": T.BooleanType(),
    "session_id": _STRING,
    "timeout_ms": T.LongType(),
    "state": _STRING,
    # ConsumerGroupHeartbeat (KIP-848, docs/wire.md): the epoch a member sent and what it said it owns (null:
    # unchanged); the coordinator's answer: its epoch, the partitions of a new assignment (null: none), the interval
    "member_epoch": T.IntegerType(),
    "owned": T.IntegerType(),
    "epoch_after": T.IntegerType(),
    "assigned": T.IntegerType(),
    "heartbeat_interval_ms": T.IntegerType(),
    # owners, mntr
    "owners": _STRING,
    "sample": _STRING,
    # the fault campaign (docs/analysis.md, "The fault campaign"): fault windows and group_view snapshots
    "fault_id": T.LongType(),
    "target": _STRING,
    "params": _STRING,  # raw JSON object: hold_s and the fault's own settings
    "ids": _STRING,  # group_view: raw JSON object {consumer_id: registration}
    "settings": _STRING,
    "threads": T.LongType(),
    "code": T.IntegerType(),
    "signal": T.IntegerType(),
    "expected": T.BooleanType(),
}

_missing = {f for fields in RECORD_TYPES.values() for f in fields} - set(_FIELDS)
if _missing:  # a new required field in trace.py must be declared here, or the required check cannot see it
    raise RuntimeError(f"analysis schema lacks required trace fields: {sorted(_missing)}")

TRACE_FIELDS: tuple[str, ...] = tuple(_FIELDS)
# What the metrics read; the others are parsed only for the required-field check. The job keeps these columns of
# every good line in memory, so the list is kept short.
RECORD_FIELDS: tuple[str, ...] = tuple(f for f in _FIELDS if f not in (
    "v", "seq", "error", "pid", "incarnation", "offset", "count", "owners", "sample", "ids", "settings", "threads",
    "code", "signal", "expected", "remaining", "round", "heartbeat_interval_ms"))
# What only the fault campaign's tables read (chaos_tables.py): left out of what each run's analysis is sent, since
# every column of every record costs in the grouped map (its shuffle and its Arrow batches).
CAMPAIGN_FIELDS = ("fault_id", "target", "params")
RUN_FIELDS: tuple[str, ...] = tuple(f for f in RECORD_FIELDS if f not in CAMPAIGN_FIELDS)
TRACE_SCHEMA = T.StructType([T.StructField(name, dtype) for name, dtype in _FIELDS.items()]
                            + [T.StructField(CORRUPT, _STRING)])

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
