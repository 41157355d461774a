"""The Spark schema of trace lines is generated from the trace contract (zkconsumer/trace_contract.py), not written
by hand: equal, field by field, to the schema that was hand-written until the contract existed, and a field added
to the contract is a column of it, typed, or text where record kinds disagree on its type. No JVM: schemas only.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import types as T

from rebalance.events import EventKind
from zkconsumer import trace_contract as contract
from zkconsumer.lab.analysis import schemas
from zkconsumer.trace_contract import RECORDS, FieldType

# analysis/schemas.py's `_FIELDS` as written by hand at b52a94d, the last commit before the contract.
HAND_WRITTEN = {
    "v": "int", "type": "string", "ts": "double", "design": "string", "phase": "string", "action": "string",
    "members": "array<string>", "step": "int", "generation_or_rebalance": "bigint", "duration_s": "double",
    "member": "string", "kind": "string", "seq": "bigint", "result": "string", "error": "string",
    "partitions": "string", "added": "string", "remaining": "string", "round": "bigint", "offsets": "string",
    "generation": "bigint", "pid": "bigint", "incarnation": "bigint", "topic": "string", "partition": "int",
    "offset": "bigint", "first_offset": "bigint", "last_offset": "bigint", "count": "bigint", "proto": "string",
    "link": "string", "client_id": "string", "op": "string", "opcode": "int", "api_name": "string", "api_key": "int",
    "error_name": "string", "path": "string", "err": "int", "dropped": "boolean", "conn": "bigint",
    "watch": "boolean", "session_id": "string", "timeout_ms": "bigint", "state": "string", "member_epoch": "int",
    "owned": "int", "epoch_after": "int", "assigned": "int", "heartbeat_interval_ms": "int", "owners": "string",
    "sample": "string", "fault_id": "bigint", "target": "string", "params": "string", "ids": "string",
    "settings": "string", "threads": "bigint", "code": "int", "signal": "int", "expected": "boolean",
}


def _types(schema: T.StructType) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in schema.fields}


def test_the_generated_schema_equals_the_hand_written_one_field_by_field() -> None:
    generated = _types(schemas.TRACE_SCHEMA)
    assert {name: generated.get(name) for name in HAND_WRITTEN} == HAND_WRITTEN
    assert list(generated)[-1] == schemas.CORRUPT and generated[schemas.CORRUPT] == "string"


def test_the_schema_has_a_column_for_every_field_of_the_contract() -> None:
    names = {name for rtype in RECORDS.values() for kind in (None, *rtype.kinds) for name in rtype.fields(kind)}
    assert names == set(schemas.TRACE_FIELDS)
    # and what the metrics read is in it, typed as the contract says
    assert set(schemas.RECORD_FIELDS) <= set(schemas.TRACE_FIELDS)


def test_a_field_added_to_the_contract_becomes_a_column_and_is_parsed() -> None:
    wire = RECORDS["wire"]
    zk = {**wire.kinds["zk"], "reconnect_ms": FieldType.FLOAT, "reconnect_note": FieldType.STR}
    records = {**RECORDS, "wire": replace(wire, kinds={**wire.kinds, "zk": zk})}
    assert "reconnect_ms" not in schemas.TRACE_FIELDS
    schema = schemas.trace_schema(records)
    assert _types(schema)["reconnect_ms"] == "double" and _types(schema)["reconnect_note"] == "string"
    # parsed, so a value of another type is a bad line; a text column nobody reads would check nothing: not parsed
    assert _types(schemas.parse_schema(schema, records))["reconnect_ms"] == "double"
    assert "reconnect_note" not in _types(schemas.parse_schema(schema, records))


def test_the_parse_has_every_typed_column_and_every_column_read_or_required() -> None:
    parsed = _types(schemas.PARSE_SCHEMA)
    generated = _types(schemas.TRACE_SCHEMA)
    assert {name: generated[name] for name in parsed} == parsed
    required = {name for t in RECORDS.values() for name in t.required}
    assert {*schemas.RECORD_FIELDS, *required, schemas.CORRUPT} <= set(parsed)
    assert {name for name, dtype in generated.items() if dtype != "string"} <= set(parsed)
    # what the hand-written schema parsed and this does not: text its reader did not read (checks nothing)
    assert {name for name in HAND_WRITTEN if name not in parsed} == {"error", "remaining"}


def test_a_name_whose_type_differs_by_kind_is_read_as_text() -> None:
    """What bent the product's names (b33d215): the barrier event's view hash was called `generation`, a string,
    where the job's one `generation` column was a number, and the barrier lines did not parse. Generated, the
    column becomes the raw JSON text of either, and no line is lost; the job then reads it per kind."""
    events = {**contract.MEMBER_EVENTS, EventKind.BARRIER: {"generation": FieldType.STR, "members": FieldType.INT}}
    records = {**RECORDS, "member_event": replace(RECORDS["member_event"], kinds=events)}
    types = _types(schemas.trace_schema(records))
    assert types["generation"] == "string" and types["members"] == "string"
    assert _types(schemas.TRACE_SCHEMA)["generation"] == "bigint"


def test_every_contract_type_has_a_spark_type() -> None:
    assert set(schemas.SPARK_TYPES) == set(FieldType)
