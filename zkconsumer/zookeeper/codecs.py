"""Bytes <-> records for every znode the consumer reads or writes, byte-compatible with Kafka 0.8.2.

Decoders raise `ZnodeDataError` naming the path and the content, so that a bad node written by another
client fails one rebalance attempt with a clear log line instead of killing a thread.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from fetcher_manager.broker import Broker
from rebalance.assignment import ConsumerThreadId, TopicPartition
from rebalance.subscription import STATIC, Registration
from zkconsumer.errors import UserError


class ZnodeDataError(UserError, ValueError):
    """A znode holds data we cannot use; the message names the path, the content and what was expected."""

    def __init__(self, path: str, content: bytes | str | None, reason: str) -> None:
        shown = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
        if shown is not None and len(shown) > 200:
            shown = shown[:200] + "..."
        super().__init__(f"bad data in {path}: {reason}; content={shown!r}")
        self.path = path
        self.content = content
        self.reason = reason


def json_escape(text: str) -> str:
    """Kafka's `Utils.JSONEscapeString`: also escapes '/' and U+007F-009F, unlike json.dumps."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in '"\\/':
            out.append("\\" + ch)
        elif ch in "\b\f\n\r\t":
            out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif code <= 0x1F or 0x7F <= code <= 0x9F:
            out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    return "".join(out)


def _parse_json_object(path: str, raw: bytes | None) -> dict[str, Any]:
    if raw is None:
        raise ZnodeDataError(path, raw, "the node has no data")
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZnodeDataError(path, raw, f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ZnodeDataError(path, raw, "expected a JSON object")
    return value


# --- consumer registration --------------------------------------------------------------------------

def encode_registration(registration: Registration, timestamp_ms: int | None = None) -> bytes:
    """Compact JSON with keys in Scala's order: version, subscription, pattern, timestamp (a string).

    Scala's hand-rolled `Json.encode` does not escape strings; topic names cannot need it and the wildcard
    regex is escaped beforehand with `json_escape`, exactly as `TopicCount` does.
    """
    timestamp = registration.timestamp or str(timestamp_ms if timestamp_ms is not None else int(time.time() * 1000))
    if registration.pattern == STATIC:
        entries = ",".join(f'"{topic}":{n}' for topic, n in registration.subscription.items())
    else:
        entries = ",".join(f'"{json_escape(regex)}":{n}' for regex, n in registration.subscription.items())
    # The opt-in modes that need every member say so after the keys 0.8.2 reads; TopicCount ignores other keys.
    names = ",".join(json.dumps(m) for m in registration.modes)
    modes = f',"zkconsumer.modes":[{names}]' if registration.modes else ""
    return (
        f'{{"version":{registration.version},"subscription":{{{entries}}},'
        f'"pattern":"{registration.pattern}","timestamp":"{timestamp}"{modes}}}'
    ).encode()


def decode_registration(path: str, raw: bytes | None) -> Registration:
    data = _parse_json_object(path, raw)
    for key in ("pattern", "subscription"):
        if key not in data:
            raise ZnodeDataError(path, raw, f"missing key {key!r} (a Kafka consumer registration needs it)")
    pattern, subscription = data["pattern"], data["subscription"]
    if not isinstance(pattern, str) or not isinstance(subscription, dict):
        raise ZnodeDataError(path, raw, "'pattern' must be a string and 'subscription' an object")
    counts: dict[str, int] = {}
    for topic, streams in subscription.items():
        if isinstance(streams, bool) or not isinstance(streams, int) or streams < 0:
            raise ZnodeDataError(path, raw, f"stream count for {topic!r} must be a non-negative integer")
        counts[topic] = streams
    timestamp = data.get("timestamp")
    version = data.get("version", 1)
    modes = data.get("zkconsumer.modes", [])
    if not isinstance(modes, list) or not all(isinstance(m, str) for m in modes):
        raise ZnodeDataError(path, raw, "'zkconsumer.modes' must be a list of mode names")
    return Registration(pattern, counts, None if timestamp is None else str(timestamp),
                        version if isinstance(version, int) else 1, tuple(modes))


# --- brokers -----------------------------------------------------------------------------------------

def encode_broker(broker: Broker, timestamp_ms: int | None = None) -> bytes:
    """Registration as a Kafka 3.x broker in ZooKeeper mode writes it (version 5)."""
    endpoint = f"PLAINTEXT://{broker.host}:{broker.port}"
    data = {
        "features": {}, "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}, "endpoints": [endpoint],
        "jmx_port": -1, "port": broker.port, "host": broker.host, "version": 5,
        "timestamp": str(timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)),
    }
    return json.dumps(data, separators=(",", ":")).encode()


def decode_broker(path: str, broker_id: int, raw: bytes | None) -> Broker:
    """Versions 1-5: prefer the endpoint whose security protocol is PLAINTEXT, as the old consumer does."""
    data = _parse_json_object(path, raw)
    protocol_map = data.get("listener_security_protocol_map") or {}
    for endpoint in data.get("endpoints") or []:
        if not isinstance(endpoint, str) or "://" not in endpoint:
            continue
        listener, address = endpoint.split("://", 1)
        if protocol_map.get(listener, listener) != "PLAINTEXT":
            continue
        host, _, port = address.rpartition(":")
        if host and port.isdigit():
            return Broker(broker_id, host.strip("[]"), int(port))
    plain_host, plain_port = data.get("host"), data.get("port")
    if isinstance(plain_host, str) and plain_host and isinstance(plain_port, int) and plain_port > 0:
        return Broker(broker_id, plain_host, plain_port)
    raise ZnodeDataError(path, raw, "no PLAINTEXT endpoint and no host/port")


# --- topics ------------------------------------------------------------------------------------------

def new_topic_id() -> str:
    """Kafka's topic id form: a random UUID in unpadded URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def encode_topic(replicas: Mapping[int, list[int]], topic_id: str | None = None) -> bytes:
    """`/brokers/topics/<t>` as a Kafka 3.x controller writes it (version 3; readers only need `partitions`)."""
    data = {
        "partitions": {str(p): list(r) for p, r in sorted(replicas.items())},
        "topic_id": topic_id or new_topic_id(), "adding_replicas": {}, "removing_replicas": {}, "version": 3,
    }
    return json.dumps(data, separators=(",", ":")).encode()


def decode_topic_partitions(path: str, raw: bytes | None) -> list[int]:
    """Partition ids are the keys of `partitions`, as integers, ascending."""
    data = _parse_json_object(path, raw)
    partitions = data.get("partitions")
    if not isinstance(partitions, dict):
        raise ZnodeDataError(path, raw, "missing object 'partitions'")
    try:
        ids = sorted(int(key) for key in partitions)
    except ValueError:
        raise ZnodeDataError(path, raw, "partition keys must be integers") from None
    if any(p < 0 for p in ids):
        raise ZnodeDataError(path, raw, "partition ids must not be negative")
    return ids


def encode_partition_state(leader: int, isr: list[int], leader_epoch: int = 0, controller_epoch: int = 1) -> bytes:
    data = {"controller_epoch": controller_epoch, "leader": leader, "version": 1,
            "leader_epoch": leader_epoch, "isr": list(isr)}
    return json.dumps(data, separators=(",", ":")).encode()


# --- offsets -----------------------------------------------------------------------------------------

def encode_offset(offset: int) -> bytes:
    return str(offset).encode()


def decode_offset(path: str, raw: bytes | None) -> int:
    text = (raw or b"").decode("utf-8", "replace").strip()
    try:
        return int(text)
    except ValueError:
        raise ZnodeDataError(path, raw, "an offset must be a decimal integer") from None


# --- the sticky assignor's record of a view (an opt-in mode, docs/modes.md; 0.8.2 never reads it) ---------------

def encode_assignment_record(view: str | None, owners: Mapping[TopicPartition, ConsumerThreadId]) -> bytes:
    """`{"version":1,"view":...,"assignment":{topic:{partition: thread id}}}`, topics and partitions sorted, thread
    ids as owner nodes hold them: the same assignment always gives the same bytes."""
    by_topic: dict[str, dict[str, str]] = {}
    for tp in sorted(owners):
        by_topic.setdefault(tp.topic, {})[str(tp.partition)] = str(owners[tp])
    return json.dumps({"version": 1, "view": view, "assignment": by_topic}, separators=(",", ":")).encode()


def decode_assignment_record(path: str, raw: bytes | None) -> tuple[str | None, dict[TopicPartition, ConsumerThreadId]]:
    """(view, partition -> owning thread) of a record written by `encode_assignment_record`."""
    data = _parse_json_object(path, raw)
    view, assignment = data.get("view"), data.get("assignment")
    if not (view is None or isinstance(view, str)) or not isinstance(assignment, dict):
        raise ZnodeDataError(path, raw, "expected 'view' (a string) and 'assignment' (an object of topics)")
    owners: dict[TopicPartition, ConsumerThreadId] = {}
    for topic, partitions in assignment.items():
        if not isinstance(partitions, dict):
            raise ZnodeDataError(path, raw, f"topic {topic!r} must map partitions to thread ids")
        for partition, thread in partitions.items():
            consumer, _, index = thread.rpartition("-") if isinstance(thread, str) else ("", "", "")
            if not (partition.isdigit() and consumer and index.isdigit()):
                raise ZnodeDataError(path, raw, f"{topic}/{partition} -> {thread!r} is not partition -> thread id")
            owners[TopicPartition(topic, int(partition))] = ConsumerThreadId(consumer, int(index))
    return view, owners
