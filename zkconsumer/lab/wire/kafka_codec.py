"""Kafka protocol decoding of single frame payloads, without sockets.

Request headers are decoded by hand (Kafka request header v1/v2: api_key int16, api_version int16,
correlation_id int32, client_id as an int16-length nullable string; v2 only appends tagged fields, which we
do not need). Response bodies are decoded with kafka-python's own message classes to find error codes: the
response header is v1 (correlation_id + tagged fields) for flexible API versions and v0 otherwise, except
ApiVersions responses, which always use header v0.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import Any

API_VERSIONS_KEY = 18


class KafkaDecodeError(ValueError):
    """A payload that does not parse as the Kafka structure expected."""


@cache
def _api_names() -> dict[int, str]:
    from kafka.protocol.api_key import ApiKey

    return {int(key): key.name for key in ApiKey}


def api_name(api_key: int | None) -> str | None:
    if api_key is None:
        return None
    return _api_names().get(api_key, f"api{api_key}")


@cache
def _error_names() -> dict[int, str]:
    from kafka import errors

    names: dict[int, str] = {}
    for value in vars(errors).values():
        if isinstance(value, type) and issubclass(value, errors.BrokerResponseError) and value.errno is not None:
            names.setdefault(value.errno, value.message)
    return names


def error_name(code: int | None) -> str | None:
    if code is None:
        return None
    return _error_names().get(code, f"error{code}")


@dataclass(frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def parse_request_header(payload: bytes) -> RequestHeader:
    if len(payload) < 10:
        raise KafkaDecodeError(f"request of {len(payload)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, id_len = struct.unpack_from(">hhih", payload, 0)
    if api_key < 0 or api_version < 0:
        raise KafkaDecodeError(f"not a Kafka request header: api_key={api_key} api_version={api_version}")
    client_id = None
    if id_len >= 0:
        if 10 + id_len > len(payload):
            raise KafkaDecodeError(f"client_id of {id_len} bytes overruns the request ({len(payload)} bytes)")
        client_id = payload[10:10 + id_len].decode("utf-8", errors="replace")
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def parse_correlation_id(payload: bytes) -> int:
    if len(payload) < 4:
        raise KafkaDecodeError(f"response of {len(payload)} bytes has no correlation id")
    return struct.unpack_from(">i", payload, 0)[0]


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise KafkaDecodeError("truncated varint in tagged fields")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise KafkaDecodeError("varint too long in tagged fields")


def skip_tagged_fields(data: bytes, pos: int) -> int:
    count, pos = _read_uvarint(data, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(data, pos)
        size, pos = _read_uvarint(data, pos)
        pos += size
    if pos > len(data):
        raise KafkaDecodeError("tagged fields overrun the frame")
    return pos


@cache
def _load_protocol_classes() -> None:
    # Importing these modules registers every response class kafka-python knows with its header registry.
    import kafka.protocol.admin
    import kafka.protocol.consumer
    import kafka.protocol.metadata
    import kafka.protocol.producer  # noqa: F401


def response_class(api_key: int, api_version: int) -> Any | None:
    """kafka-python's response class for this API at this version, or None if it has none."""
    _load_protocol_classes()
    from kafka.protocol.api_header import RequestHeader as KpRequestHeader

    header = KpRequestHeader(request_api_key=api_key, request_api_version=api_version, correlation_id=0,
                             client_id="")
    try:
        return header.get_response_class()
    except (ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class ResponseErrors:
    error_code: int | None  # the body's top-level error code, None when this response has none
    nested: dict[int, int]  # nonzero error codes found deeper (per topic / partition / member) -> count


def response_errors(api_key: int, api_version: int, payload: bytes) -> ResponseErrors:
    """Error codes of one response frame payload (correlation id first). Raises KafkaDecodeError."""
    if api_key == API_VERSIONS_KEY:
        # Header v0 always, and error_code leads the body in every version; a broker refusing our version
        # answers in v0 layout, which a decode at the requested version would misread.
        if len(payload) < 6:
            raise KafkaDecodeError("ApiVersions response without an error code")
        return ResponseErrors(struct.unpack_from(">h", payload, 4)[0], {})
    cls = response_class(api_key, api_version)
    if cls is None:
        raise KafkaDecodeError(f"kafka-python has no response class for {api_name(api_key)} v{api_version}")
    pos = 4
    if cls.flexible_version_q(api_version):
        pos = skip_tagged_fields(payload, pos)
    try:
        message = cls.decode(payload[pos:], version=api_version)
        tree = message.to_dict(json=False)
    except Exception as exc:
        raise KafkaDecodeError(f"{api_name(api_key)} v{api_version} body: {type(exc).__name__}: {exc}") from exc
    top = tree.get("error_code")
    skip = {"error_code"}
    if top is None and tree.get("coordinators"):
        # FindCoordinator v4+ batches keys and moved the error into each coordinator; clients ask for one key.
        codes = [c.get("error_code") or 0 for c in tree["coordinators"]]
        top = next((code for code in codes if code), 0)
        skip.add("coordinators")
    nested: Counter[int] = Counter()
    for key, value in tree.items():
        if key not in skip:
            _collect_errors(value, nested)
    return ResponseErrors(top if isinstance(top, int) else None, dict(nested))


def _collect_errors(value: Any, into: Counter[int]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "error_code" and isinstance(item, int):
                if item:
                    into[item] += 1
            else:
                _collect_errors(item, into)
    elif isinstance(value, list):
        for item in value:
            _collect_errors(item, into)
