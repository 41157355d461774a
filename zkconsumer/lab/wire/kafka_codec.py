"""Kafka protocol decoding of single frame payloads, without sockets.

Request headers are decoded by hand (Kafka request header v1/v2: api_key int16, api_version int16,
correlation_id int32, client_id as an int16-length nullable string; v2 only appends tagged fields, which we
do not need). Response bodies are decoded with kafka-python's own message classes to find error codes: the
response header is v1 (correlation_id + tagged fields) for flexible API versions and v0 otherwise, except
ApiVersions responses, which always use header v0.

kafka-python has no message classes for the APIs of Kafka's consumer group protocol (KIP-848), so those are
decoded here by hand from Kafka's own schemas: ConsumerGroupHeartbeat (api key 68) and ConsumerGroupDescribe (69)
requests and responses (`clients/src/main/resources/common/message/ConsumerGroupHeartbeatRequest.json`,
`ConsumerGroupHeartbeatResponse.json`, `ConsumerGroupDescribeRequest.json`, `ConsumerGroupDescribeResponse.json`),
plus the two client-telemetry responses (KIP-714, `GetTelemetrySubscriptionsResponse.json`,
`PushTelemetryResponse.json`) whose error codes would otherwise go unseen. All of them are flexible in every
version: compact strings and arrays (unsigned-varint length + 1, 0 = null), tagged fields after every struct,
request header v2 and response header v1. docs/wire.md lists what the lab reads from them.
"""

from __future__ import annotations

import base64
import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

API_VERSIONS_KEY = 18
JOIN_GROUP_KEY = 11
CONSUMER_GROUP_HEARTBEAT_KEY = 68
CONSUMER_GROUP_DESCRIBE_KEY = 69
GET_TELEMETRY_SUBSCRIPTIONS_KEY = 71
PUSH_TELEMETRY_KEY = 72

# API keys of Apache Kafka 4.4 that kafka-python 3.0.12's ApiKey lacks, with Kafka's names for them
# (clients/src/main/java/org/apache/kafka/common/protocol/ApiKeys.java). kafka-python's own names win where it has
# one, so this table only ever fills gaps.
KAFKA_API_NAMES: dict[int, str] = {
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
    70: "ControllerRegistration",
    71: "GetTelemetrySubscriptions",
    72: "PushTelemetry",
    73: "AssignReplicasToDirs",
    74: "ListConfigResources",
    75: "DescribeTopicPartitions",
    76: "ShareGroupHeartbeat",
    77: "ShareGroupDescribe",
    78: "ShareFetch",
    79: "ShareAcknowledge",
    80: "AddRaftVoter",
    81: "RemoveRaftVoter",
    82: "UpdateRaftVoter",
    83: "InitializeShareGroupState",
    84: "ReadShareGroupState",
    85: "WriteShareGroupState",
    86: "DeleteShareGroupState",
    87: "ReadShareGroupStateSummary",
    88: "StreamsGroupHeartbeat",
    89: "StreamsGroupDescribe",
    90: "DescribeShareGroupOffsets",
    91: "AlterShareGroupOffsets",
    92: "DeleteShareGroupOffsets",
    93: "StreamsGroupTopologyDescriptionUpdate",
    94: "UnregisterController",
}

# Error codes of Apache Kafka 4.4 that kafka-python 3.0.12 does not know, with Kafka's names for them
# (clients/src/main/java/org/apache/kafka/common/protocol/Errors.java); 128 answers a ConsumerGroupHeartbeat v1
# whose SubscribedTopicRegex does not compile.
KAFKA_ERROR_NAMES: dict[int, str] = {
    128: "INVALID_REGULAR_EXPRESSION",
    129: "REBOOTSTRAP_REQUIRED",
    130: "STREAMS_INVALID_TOPOLOGY",
    131: "STREAMS_INVALID_TOPOLOGY_EPOCH",
    132: "STREAMS_TOPOLOGY_FENCED",
    133: "SHARE_SESSION_LIMIT_REACHED",
    134: "GROUP_DELETION_FAILED",
    135: "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED",
    136: "CONTROLLER_ID_NOT_REGISTERED",
}


class KafkaDecodeError(ValueError):
    """A payload that does not parse as the Kafka structure expected."""


@cache
def _api_names() -> dict[int, str]:
    from kafka.protocol.api_key import ApiKey

    return {**KAFKA_API_NAMES, **{int(key): key.name for key in ApiKey}}


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
    for code, name in KAFKA_ERROR_NAMES.items():
        names.setdefault(code, name)
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
    end: int = 10  # offset just past client_id: where header v1 ends and header v2's tagged fields begin


def parse_request_header(payload: bytes) -> RequestHeader:
    if len(payload) < 10:
        raise KafkaDecodeError(f"request of {len(payload)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, id_len = struct.unpack_from(">hhih", payload, 0)
    if api_key < 0 or api_version < 0:
        raise KafkaDecodeError(f"not a Kafka request header: api_key={api_key} api_version={api_version}")
    client_id = None
    end = 10
    if id_len >= 0:
        if 10 + id_len > len(payload):
            raise KafkaDecodeError(f"client_id of {id_len} bytes overruns the request ({len(payload)} bytes)")
        client_id = payload[10:10 + id_len].decode("utf-8", errors="replace")
        end += id_len
    return RequestHeader(api_key, api_version, correlation_id, client_id, end)


def parse_correlation_id(payload: bytes) -> int:
    if len(payload) < 4:
        raise KafkaDecodeError(f"response of {len(payload)} bytes has no correlation id")
    return struct.unpack_from(">i", payload, 0)[0]


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise KafkaDecodeError(f"truncated unsigned varint at byte {pos} of {len(data)}")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 35:
            raise KafkaDecodeError(f"unsigned varint longer than 5 bytes at byte {pos}")


def skip_tagged_fields(data: bytes, pos: int) -> int:
    count, pos = _read_uvarint(data, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(data, pos)
        size, pos = _read_uvarint(data, pos)
        pos += size
    if pos > len(data):
        raise KafkaDecodeError("tagged fields overrun the frame")
    return pos


# ---- KIP-848 and KIP-714 messages, decoded by hand -------------------------------------------------------------

_T = TypeVar("_T")


class _Reader:
    """Reads one flexible-version message body; every overrun raises KafkaDecodeError naming the field."""

    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes, pos: int, what: str) -> None:
        self.data, self.pos, self.what = data, pos, what

    def _take(self, size: int, field: str) -> int:
        start = self.pos
        if size < 0 or start + size > len(self.data):
            raise KafkaDecodeError(f"{self.what}: {field} needs {size} bytes at byte {start}, the frame has "
                                   f"{len(self.data) - start} left")
        self.pos = start + size
        return start

    def int8(self, field: str) -> int:
        return struct.unpack_from(">b", self.data, self._take(1, field))[0]

    def int16(self, field: str) -> int:
        return struct.unpack_from(">h", self.data, self._take(2, field))[0]

    def int32(self, field: str) -> int:
        return struct.unpack_from(">i", self.data, self._take(4, field))[0]

    def boolean(self, field: str) -> bool:
        return self.int8(field) != 0

    def uuid(self, field: str) -> str:
        """Kafka's text form of a Uuid (Uuid.toString: URL-safe base64, no padding), as its tools print topic ids."""
        start = self._take(16, field)
        return base64.urlsafe_b64encode(self.data[start:start + 16]).rstrip(b"=").decode("ascii")

    def _length(self, field: str) -> int:
        """A compact length: the unsigned varint holds length + 1, and 0 means null (returned as -1)."""
        try:
            raw, self.pos = _read_uvarint(self.data, self.pos)
        except KafkaDecodeError as exc:
            raise KafkaDecodeError(f"{self.what}: length of {field}: {exc}") from None
        return raw - 1

    def nullable_string(self, field: str) -> str | None:
        size = self._length(field)
        if size < 0:
            return None
        start = self._take(size, field)
        return self.data[start:start + size].decode("utf-8", errors="replace")

    def string(self, field: str) -> str:
        value = self.nullable_string(field)
        if value is None:
            raise KafkaDecodeError(f"{self.what}: {field} is null, which its schema does not allow")
        return value

    def nullable_array(self, field: str, item: Callable[[_Reader], _T]) -> tuple[_T, ...] | None:
        count = self._length(field)
        if count < 0:
            return None
        if count > len(self.data) - self.pos:  # every element takes at least one byte
            raise KafkaDecodeError(f"{self.what}: {field} claims {count} elements, the frame has "
                                   f"{len(self.data) - self.pos} bytes left")
        return tuple(item(self) for _ in range(count))

    def array(self, field: str, item: Callable[[_Reader], _T]) -> tuple[_T, ...]:
        value = self.nullable_array(field, item)
        if value is None:
            raise KafkaDecodeError(f"{self.what}: {field} is null, which its schema does not allow")
        return value

    def tagged_fields(self) -> None:
        try:
            self.pos = skip_tagged_fields(self.data, self.pos)
        except KafkaDecodeError as exc:
            raise KafkaDecodeError(f"{self.what}: {exc}") from None

    def end(self) -> None:
        if self.pos != len(self.data):
            raise KafkaDecodeError(f"{self.what}: {len(self.data) - self.pos} bytes left over after the body")


def _known_version(what: str, version: int, newest: int) -> None:
    if not 0 <= version <= newest:
        raise KafkaDecodeError(f"{what} v{version} is not a version this decoder knows (0-{newest}, Apache Kafka 4.4)")


@dataclass(frozen=True)
class TopicPartitions:
    """A topic id with partitions: heartbeat assignments and owned sets; describe's also carry the topic name."""

    topic_id: str  # Kafka's text form of the Uuid
    partitions: tuple[int, ...]
    topic_name: str | None = None  # ConsumerGroupDescribe only


def _int32_item(r: _Reader) -> int:
    return r.int32("partition")


def _topic_partitions(r: _Reader) -> TopicPartitions:
    topic_id = r.uuid("TopicId")
    partitions = r.array("Partitions", _int32_item)
    r.tagged_fields()
    return TopicPartitions(topic_id, partitions)


def _named_topic_partitions(r: _Reader) -> TopicPartitions:
    topic_id = r.uuid("TopicId")
    name = r.string("TopicName")
    partitions = r.array("Partitions", _int32_item)
    r.tagged_fields()
    return TopicPartitions(topic_id, partitions, name)


def _string_item(r: _Reader) -> str:
    return r.string("element")


def partition_count(topics: tuple[TopicPartitions, ...] | None) -> int | None:
    """How many partitions a (nullable) list of topic partitions names; None stays None (= unchanged)."""
    return None if topics is None else sum(len(t.partitions) for t in topics)


@dataclass(frozen=True)
class ConsumerGroupHeartbeatRequest:
    """ConsumerGroupHeartbeatRequest.json, versions 0-1. The nullable fields are null when unchanged since the
    member's previous heartbeat; MemberEpoch is 0 to join, -1 to leave, -2 for a static member leaving to rejoin."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int  # -1: unchanged
    subscribed_topic_names: tuple[str, ...] | None
    subscribed_topic_regex: str | None  # version 1+
    server_assignor: str | None
    topic_partitions: tuple[TopicPartitions, ...] | None  # the partitions the member owns; None: unchanged

    @property
    def owned(self) -> int | None:
        return partition_count(self.topic_partitions)


def decode_consumer_group_heartbeat_request(payload: bytes) -> ConsumerGroupHeartbeatRequest:
    """One ConsumerGroupHeartbeat request frame payload (header v2 first). Raises KafkaDecodeError."""
    header = parse_request_header(payload)
    if header.api_key != CONSUMER_GROUP_HEARTBEAT_KEY:
        raise KafkaDecodeError(f"not a ConsumerGroupHeartbeat request: api key {header.api_key}")
    what = f"ConsumerGroupHeartbeat v{header.api_version} request"
    _known_version(what, header.api_version, 1)
    r = _Reader(payload, header.end, what)
    r.tagged_fields()  # the rest of request header v2
    group_id = r.string("GroupId")
    member_id = r.string("MemberId")
    member_epoch = r.int32("MemberEpoch")
    instance_id = r.nullable_string("InstanceId")
    rack_id = r.nullable_string("RackId")
    rebalance_timeout_ms = r.int32("RebalanceTimeoutMs")
    topic_names = r.nullable_array("SubscribedTopicNames", _string_item)
    regex = r.nullable_string("SubscribedTopicRegex") if header.api_version >= 1 else None
    server_assignor = r.nullable_string("ServerAssignor")
    owned = r.nullable_array("TopicPartitions", _topic_partitions)
    r.tagged_fields()
    r.end()
    return ConsumerGroupHeartbeatRequest(group_id, member_id, member_epoch, instance_id, rack_id,
                                         rebalance_timeout_ms, topic_names, regex, server_assignor, owned)


@dataclass(frozen=True)
class ConsumerGroupHeartbeatResponse:
    """ConsumerGroupHeartbeatResponse.json, versions 0-1 (the same layout; v1 adds an error code)."""

    throttle_time_ms: int
    error_code: int
    error_message: str | None
    member_id: str | None  # given when the member joined with epoch 0
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: tuple[TopicPartitions, ...] | None  # None: no new assignment (the member keeps what it has)

    @property
    def assigned(self) -> int | None:
        return partition_count(self.assignment)


def _response_reader(payload: bytes, what: str) -> _Reader:
    if len(payload) < 4:
        raise KafkaDecodeError(f"{what}: {len(payload)} bytes hold no correlation id")
    r = _Reader(payload, 4, what)
    r.tagged_fields()  # the rest of response header v1
    return r


def decode_consumer_group_heartbeat_response(payload: bytes, version: int) -> ConsumerGroupHeartbeatResponse:
    """One ConsumerGroupHeartbeat response frame payload (header v1: correlation id, tagged fields)."""
    what = f"ConsumerGroupHeartbeat v{version} response"
    _known_version(what, version, 1)
    r = _response_reader(payload, what)
    throttle = r.int32("ThrottleTimeMs")
    error_code = r.int16("ErrorCode")
    error_message = r.nullable_string("ErrorMessage")
    member_id = r.nullable_string("MemberId")
    member_epoch = r.int32("MemberEpoch")
    interval = r.int32("HeartbeatIntervalMs")
    assignment = None
    # A nullable struct is one int8 marker: -1 null, 1 present.
    marker = r.int8("Assignment")
    if marker == 1:
        assignment = r.array("Assignment.TopicPartitions", _topic_partitions)
        r.tagged_fields()
    elif marker != -1:
        raise KafkaDecodeError(f"{what}: Assignment marker {marker} is neither -1 (null) nor 1")
    r.tagged_fields()
    r.end()
    return ConsumerGroupHeartbeatResponse(throttle, error_code, error_message, member_id, member_epoch, interval,
                                          assignment)


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[TopicPartitions, ...]  # what the member owns now
    target_assignment: tuple[TopicPartitions, ...]  # what the coordinator is moving it to
    member_type: int | None  # version 1+: -1 unknown, 0 classic, 1 consumer (KIP-1099)


@dataclass(frozen=True)
class DescribedGroup:
    error_code: int
    error_message: str | None
    group_id: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[DescribedMember, ...]
    authorized_operations: int


@dataclass(frozen=True)
class ConsumerGroupDescribeRequest:
    group_ids: tuple[str, ...]
    include_authorized_operations: bool


@dataclass(frozen=True)
class ConsumerGroupDescribeResponse:
    """ConsumerGroupDescribeResponse.json, versions 0-1 (v1 adds each member's MemberType)."""

    throttle_time_ms: int
    groups: tuple[DescribedGroup, ...]


def decode_consumer_group_describe_request(payload: bytes) -> ConsumerGroupDescribeRequest:
    header = parse_request_header(payload)
    if header.api_key != CONSUMER_GROUP_DESCRIBE_KEY:
        raise KafkaDecodeError(f"not a ConsumerGroupDescribe request: api key {header.api_key}")
    what = f"ConsumerGroupDescribe v{header.api_version} request"
    _known_version(what, header.api_version, 1)
    r = _Reader(payload, header.end, what)
    r.tagged_fields()
    group_ids = r.array("GroupIds", _string_item)
    include = r.boolean("IncludeAuthorizedOperations")
    r.tagged_fields()
    r.end()
    return ConsumerGroupDescribeRequest(group_ids, include)


def _assignment_struct(r: _Reader) -> tuple[TopicPartitions, ...]:
    topics = r.array("TopicPartitions", _named_topic_partitions)
    r.tagged_fields()
    return topics


def decode_consumer_group_describe_response(payload: bytes, version: int) -> ConsumerGroupDescribeResponse:
    what = f"ConsumerGroupDescribe v{version} response"
    _known_version(what, version, 1)

    def member(r: _Reader) -> DescribedMember:
        member_id = r.string("MemberId")
        instance_id = r.nullable_string("InstanceId")
        rack_id = r.nullable_string("RackId")
        epoch = r.int32("MemberEpoch")
        client_id = r.string("ClientId")
        client_host = r.string("ClientHost")
        topics = r.array("SubscribedTopicNames", _string_item)
        regex = r.nullable_string("SubscribedTopicRegex")
        assignment = _assignment_struct(r)
        target = _assignment_struct(r)
        member_type = r.int8("MemberType") if version >= 1 else None
        r.tagged_fields()
        return DescribedMember(member_id, instance_id, rack_id, epoch, client_id, client_host, topics, regex,
                               assignment, target, member_type)

    def group(r: _Reader) -> DescribedGroup:
        error_code = r.int16("ErrorCode")
        error_message = r.nullable_string("ErrorMessage")
        group_id = r.string("GroupId")
        state = r.string("GroupState")
        group_epoch = r.int32("GroupEpoch")
        assignment_epoch = r.int32("AssignmentEpoch")
        assignor = r.string("AssignorName")
        members = r.array("Members", member)
        operations = r.int32("AuthorizedOperations")
        r.tagged_fields()
        return DescribedGroup(error_code, error_message, group_id, state, group_epoch, assignment_epoch, assignor,
                              members, operations)

    r = _response_reader(payload, what)
    throttle = r.int32("ThrottleTimeMs")
    groups = r.array("Groups", group)
    r.tagged_fields()
    r.end()
    return ConsumerGroupDescribeResponse(throttle, groups)


def _telemetry_error_code(payload: bytes, api_key: int, version: int) -> int:
    """The error code of GetTelemetrySubscriptions / PushTelemetry v0 (KIP-714): both responses begin
    ThrottleTimeMs, ErrorCode (GetTelemetrySubscriptionsResponse.json, PushTelemetryResponse.json); the rest of
    GetTelemetrySubscriptions (the metrics a broker's plugin asks for) means nothing to the lab."""
    what = f"{api_name(api_key)} v{version} response"
    _known_version(what, version, 0)
    r = _response_reader(payload, what)
    r.int32("ThrottleTimeMs")
    return r.int16("ErrorCode")


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
    # JoinGroup: the generation_id it answers, the classic protocol's group epoch (-1 with an error)
    generation: int | None = None


@dataclass(frozen=True)
class DecodedResponse:
    errors: ResponseErrors
    # The hand-decoded body of the APIs kafka-python has no classes for (KIP-848's); None for the others.
    body: ConsumerGroupHeartbeatResponse | ConsumerGroupDescribeResponse | None = None


def decode_response(api_key: int, api_version: int, payload: bytes) -> DecodedResponse:
    """Errors of one response frame payload, and its body where this module decodes it by hand."""
    if api_key == CONSUMER_GROUP_HEARTBEAT_KEY:
        heartbeat = decode_consumer_group_heartbeat_response(payload, api_version)
        return DecodedResponse(ResponseErrors(heartbeat.error_code, {}), heartbeat)
    if api_key == CONSUMER_GROUP_DESCRIBE_KEY:
        # Like DescribeGroups: no top-level code, one per described group (counted as nested).
        describe = decode_consumer_group_describe_response(payload, api_version)
        nested = Counter(g.error_code for g in describe.groups if g.error_code)
        return DecodedResponse(ResponseErrors(None, dict(nested)), describe)
    if api_key in (GET_TELEMETRY_SUBSCRIPTIONS_KEY, PUSH_TELEMETRY_KEY):
        return DecodedResponse(ResponseErrors(_telemetry_error_code(payload, api_key, api_version), {}))
    return DecodedResponse(response_errors(api_key, api_version, payload))


def response_errors(api_key: int, api_version: int, payload: bytes) -> ResponseErrors:
    """Error codes of one response frame payload (correlation id first). Raises KafkaDecodeError."""
    if api_key in (CONSUMER_GROUP_HEARTBEAT_KEY, CONSUMER_GROUP_DESCRIBE_KEY, GET_TELEMETRY_SUBSCRIPTIONS_KEY,
                   PUSH_TELEMETRY_KEY):
        return decode_response(api_key, api_version, payload).errors
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
    generation = tree.get("generation_id") if api_key == JOIN_GROUP_KEY else None
    return ResponseErrors(top if isinstance(top, int) else None, dict(nested),
                          generation if isinstance(generation, int) else None)


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
