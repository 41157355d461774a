"""The trace contract: every record a run's JSON-lines traces hold, its fields and their JSON types, in one table.

Product and lab share it: the member events (`rebalance/events.py`) are written into traces by the lab's member
processes, and the lab's readers, the Spark job's schema among them, are generated from this table
(`zkconsumer/lab/analysis/schemas.py`). It imports nothing from the lab; the lab imports it.

A record (schema version `SCHEMA_VERSION`) is one flat JSON object: the **envelope** (`v`, `type`, `ts`,
`design`, and `pid`/`incarnation` from writers that restart) and the **payload** of its type. Types with kinds
(`member_event` by `kind`, `wire` by `proto`) add the payload of the kind. Every field may be null unless it is
required; an absent field and a null one are the same to a reader.

Rules (docs/traces.md, "The contract"):

* A writer emits only fields declared here, with their types: `problems()` says what a record breaks, the lab's
  writer checks every record it writes with it (`zkconsumer/lab/trace.py`), and a test checks every record of the
  recorded runs (tests/unit/test_trace_contract.py).
* A field name means one thing, but its JSON type may differ between record types or kinds (`partitions`: a list in
  most, a count in `state` events). Readers with one column per name (Spark) then keep the field's raw JSON text
  and read it per kind (`column_types()` says which names those are); nobody renames a product's field to suit a
  reader.
* A new field does not change `SCHEMA_VERSION`; a changed meaning or type of an existing one does, and so would a
  change of the record's shape. A reader meeting another version says so instead of parsing it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rebalance.events import EventKind

SCHEMA_VERSION = 1


class FieldType(enum.StrEnum):
    """The JSON type of a field's value (null aside)."""

    INT = "int"  # an integer that fits 32 bits (counts, codes, partition numbers)
    LONG = "long"  # an integer (offsets, ids, generations)
    FLOAT = "float"  # a number: an integer is one too (seconds, milliseconds)
    STR = "str"
    BOOL = "bool"
    STR_LIST = "list[str]"  # e.g. "topic/partition" names, member names
    LIST = "list"  # a list of anything (kept as JSON text by column readers)
    OBJECT = "object"  # a JSON object, a map with string keys (kept as JSON text by column readers)
    ID = "id"  # an integer identifier of 64 bits that is never computed with (a ZooKeeper session): kept as text


F = FieldType
Fields = Mapping[str, FieldType]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ok(ftype: FieldType, value: Any) -> bool:
    match ftype:
        case F.INT:
            return _is_int(value) and -(1 << 31) <= value < (1 << 31)
        case F.LONG | F.ID:
            return _is_int(value)
        case F.FLOAT:
            return _is_int(value) or isinstance(value, float)
        case F.STR:
            return isinstance(value, str)
        case F.BOOL:
            return isinstance(value, bool)
        case F.STR_LIST:  # a tuple too: a writer's value before it is JSON
            return isinstance(value, list | tuple) and all(isinstance(x, str) for x in value)
        case F.LIST:
            return isinstance(value, list | tuple)
        case F.OBJECT:
            return isinstance(value, dict)
    raise AssertionError(ftype)


@dataclass(frozen=True)
class RecordType:
    """One record type: its required fields (never null), the optional ones, and, for a type with kinds, the field
    that names the kind and each kind's payload (a kind not listed is not a record of the contract)."""

    name: str
    required: Fields
    optional: Fields = field(default_factory=dict)
    kind_field: str | None = None
    kinds: Mapping[str, Fields] = field(default_factory=dict)
    written_by: str = ""

    def fields(self, kind: str | None = None) -> dict[str, FieldType]:
        """Every field a record of this type (and kind) may hold, the envelope's included."""
        return {**ENVELOPE, **self.required, **self.optional, **(self.kinds.get(kind, {}) if kind else {})}


# Every record: the schema version, the type, wall-clock seconds (time.time(), comparable across the run's processes
# on one host) and the design; coordinator-design members add their process id and incarnation to every line, so
# that the lines of a killed member are never taken for its restarted successor's.
ENVELOPE: Fields = {"v": F.INT, "type": F.STR, "ts": F.FLOAT, "design": F.STR}
WRITER: Fields = {"pid": F.LONG, "incarnation": F.LONG}
REQUIRED_ENVELOPE = tuple(ENVELOPE)

_PARTITION: Fields = {"topic": F.STR, "partition": F.INT}

# The payload of each member event kind: the product's (EventKind, rebalance/events.py, named as the product names
# them), then the lab's own kinds, then the broker-side members' (docs/traces.md).
MEMBER_EVENTS: dict[str, Fields] = {
    EventKind.STATE: {"state": F.STR, "previous": F.STR, "attempt": F.INT, "reason": F.STR,
                      "partitions": F.INT},  # a count here: how many partitions the member owns now
    EventKind.TRIGGER: {"reason": F.STR},
    EventKind.REBALANCE_BEGIN: {"rebalance": F.INT},
    EventKind.REBALANCE_END: {"rebalance": F.INT, "result": F.STR, "attempts": F.INT, "duration_ms": F.FLOAT,
                              "error": F.STR},
    EventKind.ATTEMPT_BEGIN: {"rebalance": F.INT, "attempt": F.INT},
    EventKind.ATTEMPT_END: {"rebalance": F.INT, "attempt": F.INT, "result": F.STR, "duration_ms": F.FLOAT,
                            "error": F.STR},
    EventKind.RELEASE: _PARTITION,
    EventKind.CLAIM: {**_PARTITION, "thread": F.STR, "ok": F.BOOL, "owner": F.STR},
    EventKind.ROLLBACK: _PARTITION,
    EventKind.FETCHERS_STOPPED: {"partitions": F.STR_LIST},
    EventKind.FETCHERS_STARTED: {"offsets": F.OBJECT},  # {"t/p": start offset}
    EventKind.COMMIT: {**_PARTITION, "offset": F.LONG, "sent": F.FLOAT},
    EventKind.SESSION_EXPIRED: {},
    EventKind.SESSION_RENEWED: {"session": F.ID},
    EventKind.REGISTERED: {"session": F.ID},  # the original design's members name the session
    EventKind.REGISTRATION_FAILED: {"error": F.STR, "retry_in_s": F.FLOAT},
    EventKind.CONNECTION: {"state": F.STR, "error": F.STR},  # error: the original design's stream errors
    EventKind.REBALANCE_FAILED: {"error": F.STR},
    EventKind.OWNER_GONE: _PARTITION,
    EventKind.BARRIER: {"view": F.STR, "view_members": F.INT, "acked": F.INT},
    EventKind.BARRIER_SKIPPED: {"members": F.STR_LIST},
    EventKind.STICKY: {"view": F.STR, "created": F.BOOL, "moved": F.INT},
    EventKind.STICKY_SKIPPED: {"members": F.STR_LIST},
    # the lab's ZooKeeper-design members
    "resent": {"op": F.STR, "path": F.STR, "after": F.STR},
    "session": {"session": F.ID, "password": F.STR},
    "op_counts": {"counts": F.OBJECT},
    "consume_window": {"messages": F.LONG, "total_s": F.FLOAT, "max_s": F.FLOAT, "elapsed_s": F.FLOAT,
                       "streams": F.INT},
    # broker-side members (kafka-python)
    "failed": {"stage": F.STR, "error": F.STR},
    "closed": {"member_id": F.STR, "group_state": F.STR, "generation": F.LONG, "duration_s": F.FLOAT},
}

_ZK_WIRE: Fields = {
    "session_id": F.ID, "xid": F.LONG, "opcode": F.INT, "op": F.STR, "path": F.STR, "watch": F.BOOL,
    "zxid": F.LONG, "err": F.INT, "err_name": F.STR, "event_type": F.STR, "event_state": F.STR,
    "sub_ops": F.LIST, "timeout_ms": F.LONG,
}
_KAFKA_WIRE: Fields = {
    "client_id": F.STR, "api_key": F.INT, "api_name": F.STR, "api_version": F.INT, "correlation_id": F.LONG,
    "error_code": F.INT, "error_name": F.STR, "partition_errors": F.OBJECT, "body_decoded": F.BOOL,
    "member_epoch": F.INT, "owned": F.INT, "epoch_after": F.INT, "assigned": F.INT, "heartbeat_interval_ms": F.INT,
}

_TYPES = (
    RecordType("phase", {"phase": F.STR}, written_by="orchestrator"),
    RecordType("membership", {"action": F.STR, "members": F.STR_LIST, "step": F.INT},
               {"restart": F.BOOL, "topic": F.STR, "total": F.INT, "target": F.STR, "delay_ms": F.INT,
                "server": F.INT, "offset_s": F.FLOAT}, written_by="orchestrator"),
    RecordType("member_event", {"member": F.STR, "kind": F.STR}, {"seq": F.LONG, **WRITER},
               kind_field="kind", kinds=MEMBER_EVENTS, written_by="members"),
    RecordType("generation", {"member": F.STR, "kind": F.STR},
               {"partitions": F.STR_LIST, "generation": F.LONG, "member_id": F.STR, "added": F.STR_LIST,
                "remaining": F.STR_LIST, "round": F.LONG, "member_epoch": F.INT, **WRITER},
               kind_field="kind", kinds={"assigned": {}, "revoked": {}, "lost": {}},
               written_by="broker-side members"),
    RecordType("assignment", {"member": F.STR, "partitions": F.STR_LIST},
               {"generation": F.LONG, "round": F.LONG, "member_epoch": F.INT, **WRITER}, written_by="members"),
    RecordType("consume", {"member": F.STR, "topic": F.STR, "partition": F.INT, "first_offset": F.LONG,
                           "last_offset": F.LONG, "count": F.LONG}, {"generation": F.LONG, **WRITER},
               written_by="members with fetchers"),
    RecordType("produce", {"topic": F.STR, "partition": F.INT, "first_offset": F.LONG, "last_offset": F.LONG,
                           "count": F.LONG}, written_by="the load producer"),
    RecordType("commit", {"member": F.STR, "topic": F.STR, "partition": F.INT, "offset": F.LONG}, dict(WRITER),
               written_by="no writer today (the ZooKeeper design's commits are member_event kind commit)"),
    RecordType("wire", {"proto": F.STR, "kind": F.STR},
               {"link": F.STR, "conn": F.LONG, "size": F.LONG, "latency_ms": F.FLOAT, "dropped": F.BOOL,
                "detail": F.STR},
               kind_field="proto", kinds={"zk": _ZK_WIRE, "kafka": _KAFKA_WIRE}, written_by="the proxies"),
    RecordType("owners", {"owners": F.OBJECT}, written_by="orchestrator"),  # {"t/p": owner thread id}
    RecordType("mntr", {"sample": F.OBJECT}, {"server": F.INT}, written_by="orchestrator"),
    RecordType("stable", {"generation_or_rebalance": F.LONG, "duration_s": F.FLOAT},
               {"polled_s": F.FLOAT, "basis": F.STR}, written_by="orchestrator"),
    RecordType("health", {"member": F.STR, "threads": F.LONG, "pid": F.LONG}, {"thread_names": F.STR_LIST},
               written_by="ZooKeeper-design member processes"),
    RecordType("campaign", {"phase": F.STR, "settings": F.OBJECT}, {"status": F.STR, "faults_applied": F.INT},
               written_by="the fault campaign"),
    RecordType("fault", {"fault_id": F.LONG, "kind": F.STR, "phase": F.STR, "target": F.STR},
               {"params": F.OBJECT}, written_by="the campaign's nemesis"),
    RecordType("member_exit", {"member": F.STR, "pid": F.LONG, "code": F.INT, "signal": F.INT, "expected": F.BOOL},
               {"graceful": F.BOOL}, written_by="the campaign"),
    RecordType("live", {"members": F.STR_LIST}, written_by="the campaign"),
    RecordType("group_view", {"ids": F.OBJECT, "owners": F.OBJECT, "offsets": F.OBJECT, "partitions": F.OBJECT},
               written_by="the campaign's observer"),
)
RECORDS: dict[str, RecordType] = {t.name: t for t in _TYPES}


def problems(record: Mapping[str, Any], records: Mapping[str, RecordType] = RECORDS) -> list[str]:
    """What a record breaks of the contract (empty: nothing): a missing or null required field, an unknown type or
    kind, a field the contract does not declare, a value of another JSON type. The version is the reader's to
    check: it reads its own only, and says what it skipped (`version_note`)."""
    found = [f"no {name!r}" for name in REQUIRED_ENVELOPE if record.get(name) is None]
    if found:
        return found
    rtype = records.get(record["type"])
    if rtype is None:
        return [f"unknown type {record['type']!r}"]
    found = [f"{rtype.name} record without {name}" for name in rtype.required if record.get(name) is None]
    kind = record.get(rtype.kind_field) if rtype.kind_field else None
    if rtype.kind_field and kind not in rtype.kinds:
        found.append(f"{rtype.name} record of unknown {rtype.kind_field} {kind!r}")
        return found
    declared = rtype.fields(kind)
    label = f"{rtype.name} {kind}" if kind else rtype.name
    for name, value in record.items():
        ftype = declared.get(name)
        if ftype is None:
            found.append(f"{label} record with undeclared field {name!r}")
        elif value is not None and not _ok(ftype, value):
            found.append(f"{label} record's {name!r} is not {ftype}: {value!r:.80}")
    return found


def version_note(file: str, version: object, lines: int) -> str:
    """The one line a reader says of the lines of a trace file written in a schema version it does not read, which
    it skips instead of parsing them as if they were of its own: how many, where, which version, what to do."""
    newer = isinstance(version, int) and version > SCHEMA_VERSION
    todo = (f"read them with a zkconsumer that knows version {version}" if newer else
            "read them with the zkconsumer that wrote them (the run's manifest.json names it in `versions`)")
    return (f"{file}: {lines} trace line{'s' if lines != 1 else ''} of schema version {version} not read (this "
            f"reader reads version {SCHEMA_VERSION}): {todo}")


def column_types(records: Mapping[str, RecordType] = RECORDS) -> dict[str, FieldType | None]:
    """Each field name of the contract and its one type across every record type and kind, or None where the types
    differ (a reader with one column per name keeps such a field's JSON text and reads it per kind); in the order
    of first declaration, the envelope first."""
    types: dict[str, set[FieldType]] = {name: {ftype} for name, ftype in ENVELOPE.items()}
    for rtype in records.values():
        for kind in (None, *rtype.kinds):
            for name, ftype in rtype.fields(kind).items():
                types.setdefault(name, set()).add(ftype)
    return {name: next(iter(found)) if len(found) == 1 else None for name, found in types.items()}
