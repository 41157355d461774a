"""The fetcher manager's only module that uses kafka-python internals: request/response classes, codecs, legacy
message sets (docs/DESIGN.md, "Imports", names the others: kafka_offsets.py and the lab's wire decoding).

kafka-python 3.0 has no public per-broker blocking connection (its ``kafka.net`` layer is an event loop
driven by the client), and the 0.8 fetcher design is one blocking thread per broker. So each ``KafkaWire``
keeps plain blocking sockets, one per broker, and borrows only kafka-python's protocol classes to encode
requests and decode responses. Versions are negotiated per connection with ApiVersions v0 and clamped to
the ranges below, whose request shapes this module fills in. ``tests/fetcher/test_kafka_wire_contract.py``
fails, naming the attribute, if kafka-python moves any of this.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self

import kafka.codec as _codec
import kafka.errors as _errors
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.record.legacy_records import LegacyRecordBatch

from fetcher_manager.broker import Broker
from fetcher_manager.errors import InvalidMessageError
from fetcher_manager.settings import FetchSettings
from fetcher_manager.topic_partition import TopicPartition

log = logging.getLogger(__name__)

NO_ERROR = 0
OFFSET_OUT_OF_RANGE = 1
_EARLIEST, _LATEST = -2, -1
_INT32_MAX = 2**31 - 1
# (min, max) versions we can build. Fetch stops at 12 (13+ names topics by id); Metadata starts at 4 for
# allow_auto_topic_creation=False (a consumer must not create topics by asking about them).
_SUPPORTED = {"fetch": (FetchRequest, 4, 12), "metadata": (MetadataRequest, 4, 12),
              "list_offsets": (ListOffsetsRequest, 1, 7)}
_RESPONSES = {request.API_KEY: response for request, response in (
    (ApiVersionsRequest, ApiVersionsResponse), (MetadataRequest, MetadataResponse),
    (FetchRequest, FetchResponse), (ListOffsetsRequest, ListOffsetsResponse))}
_SIZE = struct.Struct(">i")


class WireError(Exception):
    """A request could not be completed (connect, I/O, timeout, framing): the connection is dropped."""


class BrokerError(Exception):
    """The broker answered with an error code."""

    def __init__(self, code: int, what: str) -> None:
        super().__init__(f"{what}: {error_name(code)} ({code})")
        self.code = code


@dataclass(frozen=True)
class FetchedPartition:
    error_code: int
    high_watermark: int
    records: bytes  # the raw record set (decoded lazily by records.py on the consuming thread)


@dataclass(frozen=True)
class FetchResult:
    """One Fetch response: each partition's part, and the response's size as it came off the socket."""

    partitions: dict[TopicPartition, FetchedPartition]
    # The frame after its 4-byte length prefix, i.e. what Kafka 0.8.2's FetchResponse.sizeInBytes counts
    # (FetchResponse.scala) and SimpleConsumer.fetch feeds to the FetchResponseSize histogram.
    size_bytes: int


@dataclass(frozen=True)
class ClusterMetadata:
    brokers: dict[int, Broker]
    leaders: dict[TopicPartition, int | None]  # every partition the broker reported; None = no leader now


class _Request(Protocol):
    """What this module uses of a kafka-python request (``kafka.protocol.api_message.ApiMessage``, which ships no
    type information)."""

    API_KEY: int
    API_VERSION: int

    def with_header(self, correlation_id: int = 0, client_id: str = "kafka-python") -> None: ...

    def encode(self, version: int | None = None, header: bool = False, framed: bool = False) -> bytes: ...


def error_name(code: int) -> str:
    name: str = _errors.for_code(code).__name__
    return name


class _Connection:
    """One blocking socket to one broker, with the API versions it negotiated."""

    def __init__(self, broker: Broker, client_id: str, timeout_s: float, receive_buffer_bytes: int) -> None:
        self.broker = broker
        self._client_id = client_id
        self._correlation_id = 0
        self._timeout_s = timeout_s
        try:
            self.sock = socket.create_connection((broker.host, broker.port), timeout=timeout_s)
        except OSError as exc:
            raise WireError(f"cannot connect to broker {broker}: {exc}") from exc
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if receive_buffer_bytes > 0:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
        self.versions: dict[str, int] = {}
        try:
            answer, _ = self.call(ApiVersionsRequest(), 0)
            if answer.error_code:
                raise BrokerError(answer.error_code, f"ApiVersions from broker {broker}")
            offered = {entry.api_key: (entry.min_version, entry.max_version) for entry in answer.api_keys}
            for name, (request_class, low, high) in _SUPPORTED.items():
                broker_low, broker_high = offered.get(request_class.API_KEY, (0, -1))
                chosen = min(high, broker_high)
                if chosen >= max(low, broker_low):
                    self.versions[name] = chosen
        except BaseException:
            self.sock.close()
            raise

    def version(self, name: str) -> int:
        try:
            return self.versions[name]
        except KeyError:
            low, high = _SUPPORTED[name][1:]
            raise WireError(f"broker {self.broker} supports no {name} version in {low}..{high}") from None

    def call(self, request: _Request, version: int, extra_timeout_s: float = 0.0) -> tuple[Any, int]:
        """Send one request and read its answer: (decoded response, frame size in bytes)."""
        self._correlation_id = (self._correlation_id + 1) % _INT32_MAX
        request.API_VERSION = version
        request.with_header(correlation_id=self._correlation_id, client_id=self._client_id)
        response_class = _RESPONSES[request.API_KEY]
        try:
            # a Fetch may legitimately sit at the broker for max_wait_ms before the first byte comes back
            self.sock.settimeout(self._timeout_s + extra_timeout_s)
            self.sock.sendall(request.encode(framed=True, header=True))
            size = _SIZE.unpack(self._read(4))[0]
            if size < 4:
                raise WireError(f"broker {self.broker} sent a {size}-byte frame")
            body = self._read(size)
        except OSError as exc:
            raise WireError(f"{type(request).__name__} to broker {self.broker} failed: {exc!r}") from exc
        try:
            response = response_class.decode(body, version=version, header=True)
        except Exception as exc:
            raise WireError(f"undecodable {response_class.__name__} v{version} from {self.broker}: {exc}") from exc
        if response.header.correlation_id != self._correlation_id:
            raise WireError(f"correlation id {response.header.correlation_id} != {self._correlation_id}")
        return response, size

    def _read(self, size: int) -> bytearray:
        buf = bytearray(size)
        view = memoryview(buf)
        got = 0
        while got < size:
            n = self.sock.recv_into(view[got:])
            if not n:
                raise WireError(f"broker {self.broker} closed the connection")
            got += n
        return buf


WireFactory = Callable[[FetchSettings], "KafkaWire"]  # how the manager and its fetchers get their wires


class KafkaWire:
    """Blocking Metadata / Fetch / ListOffsets calls, one lazily opened socket per broker.

    Used by one thread at a time; ``abort()`` may be called from any thread to unblock that thread
    (it shuts the sockets down, so the pending call fails with ``WireError``).
    """

    def __init__(self, client_id: str, socket_timeout_ms: int = 30000, receive_buffer_bytes: int = 65536) -> None:
        self._client_id = client_id
        self._timeout_s = socket_timeout_ms / 1000.0
        self._receive_buffer_bytes = receive_buffer_bytes
        self._lock = threading.Lock()  # guards _connections against abort()/close() from other threads
        self._connections: dict[Broker, _Connection] = {}
        self._aborted = False

    @classmethod
    def from_settings(cls, settings: FetchSettings) -> Self:
        """The wire a consumer's leader finder and fetcher threads use (``socket.timeout.ms``,
        ``socket.receive.buffer.bytes``, ``client.id``); a subclass gets an instance of itself."""
        return cls(settings.client_id, settings.socket_timeout_ms, settings.socket_receive_buffer_bytes)

    def metadata(self, brokers: Sequence[Broker], topics: Collection[str]) -> ClusterMetadata:
        """Ask the brokers in the given order until one answers; WireError if none does."""
        failures = []
        for broker in brokers:
            try:
                return self._metadata_from(broker, sorted(set(topics)))
            except (WireError, BrokerError) as exc:
                failures.append(str(exc))
        raise WireError(f"no broker answered the metadata request: {failures or 'no live brokers'}")

    def _metadata_from(self, broker: Broker, topics: list[str]) -> ClusterMetadata:
        topic_type = MetadataRequest.MetadataRequestTopic
        request = MetadataRequest(topics=[topic_type(name=name) for name in topics], allow_auto_topic_creation=False)
        response, _ = self._call(broker, "metadata", request)
        brokers = {entry.node_id: Broker(entry.node_id, entry.host, entry.port) for entry in response.brokers}
        leaders: dict[TopicPartition, int | None] = {}
        for topic in response.topics:
            for part in topic.partitions:
                ok = part.error_code in (NO_ERROR, _errors.ReplicaNotAvailableError.errno) and part.leader_id >= 0
                leaders[TopicPartition(topic.name, part.partition_index)] = part.leader_id if ok else None
        return ClusterMetadata(brokers, leaders)

    def fetch(self, broker: Broker, offsets: Mapping[TopicPartition, int], max_wait_ms: int, min_bytes: int,
              partition_max_bytes: int, *, max_bytes: int | None = None) -> FetchResult:
        """One Fetch for ``offsets`` (in their order); a response-level error is reported on every partition."""
        topic_type = FetchRequest.FetchTopic
        partition_type = topic_type.FetchPartition
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(
                partition_type(partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes))
        if max_bytes is None:
            max_bytes = partition_max_bytes * max(1, len(offsets))
        request = FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                               max_bytes=min(max_bytes, _INT32_MAX), isolation_level=0,
                               topics=[topic_type(topic=t, partitions=parts) for t, parts in by_topic.items()])
        response, size = self._call(broker, "fetch", request, extra_timeout_s=max_wait_ms / 1000.0)
        top_error = getattr(response, "error_code", NO_ERROR) or NO_ERROR
        result: dict[TopicPartition, FetchedPartition] = {}
        for topic in response.responses:
            for part in topic.partitions:
                result[TopicPartition(topic.topic, part.partition_index)] = FetchedPartition(
                    top_error or part.error_code, part.high_watermark, part.records or b"")
        if top_error:
            for tp in offsets:
                result.setdefault(TopicPartition(*tp), FetchedPartition(top_error, -1, b""))
        return FetchResult(result, size)

    def offset_for(self, broker: Broker, tp: tuple[str, int], earliest: bool) -> int:
        """The log start (``earliest``) or log end offset of a partition on its leader: ListOffsets with the
        timestamps -2 and -1, as 0.8's ``SimpleConsumer.earliestOrLatestOffset`` asks."""
        # callers outside fetcher_manager may still pass a plain (topic, partition)
        return self._list_offset(broker, TopicPartition(*tp), _EARLIEST if earliest else _LATEST)

    def _list_offset(self, broker: Broker, tp: TopicPartition, timestamp: int) -> int:
        topic_type = ListOffsetsRequest.ListOffsetsTopic
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[topic_type(
            name=tp.topic, partitions=[topic_type.ListOffsetsPartition(partition_index=tp.partition,
                                                                       timestamp=timestamp)])])
        response, _ = self._call(broker, "list_offsets", request)
        for topic in response.topics:
            for part in topic.partitions:
                if topic.name == tp.topic and part.partition_index == tp.partition:
                    if part.error_code:
                        raise BrokerError(part.error_code,
                                          f"ListOffsets {tp.topic}-{tp.partition} on broker {broker.id}")
                    offset: int = part.offset
                    return offset
        raise WireError(f"ListOffsets response from broker {broker.id} lacks {tp.topic}-{tp.partition}")

    def _call(self, broker: Broker, name: str, request: _Request, extra_timeout_s: float = 0.0) -> tuple[Any, int]:
        conn = self._connection(broker)
        try:
            return conn.call(request, conn.version(name), extra_timeout_s)
        except WireError:
            self._drop(broker, conn)
            raise

    def _connection(self, broker: Broker) -> _Connection:
        with self._lock:
            if self._aborted:
                raise WireError("aborted")
            conn = self._connections.get(broker)
        if conn is not None:
            return conn
        conn = _Connection(broker, self._client_id, self._timeout_s, self._receive_buffer_bytes)
        with self._lock:
            if self._aborted:
                conn.sock.close()
                raise WireError("aborted")
            self._connections[broker] = conn
        return conn

    def _drop(self, broker: Broker, conn: _Connection) -> None:
        with self._lock:
            if self._connections.get(broker) is conn:
                del self._connections[broker]
        conn.sock.close()

    def disconnect(self, broker: Broker) -> None:
        """Close the connection to one broker (the next call reconnects)."""
        with self._lock:
            conn = self._connections.pop(broker, None)
        if conn is not None:
            conn.sock.close()

    def abort(self) -> None:
        """Make the current and every later call fail at once; safe from any thread. Sockets stay open
        (but shut down) until ``close()``, so a blocked recv on them never sees a reused descriptor."""
        with self._lock:
            self._aborted = True
            conns = list(self._connections.values())
        for conn in conns:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        with self._lock:
            conns = list(self._connections.values())
            self._connections.clear()
        for conn in conns:
            conn.sock.close()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._connections)


def decompress(codec: int, data: bytes) -> bytes:
    """Inflate the records of a compressed magic-2 batch (1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
    decoders = {1: ("gzip_decode", _codec.has_gzip), 2: ("snappy_decode", _codec.has_snappy),
                4: ("zstd_decode", _codec.has_zstd), 3: ("lz4_decode", _codec.has_lz4)}
    if codec not in decoders:
        raise InvalidMessageError(f"unknown compression codec {codec}")
    name, available = decoders[codec]
    if not available():
        raise InvalidMessageError(f"compression codec {codec} needs a library kafka-python could not import")
    return bytes(getattr(_codec, name)(bytes(data)))


def legacy_messages(entry: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of one magic 0/1 message-set entry (expanding a compressed wrapper), CRC-checked."""
    magic = entry[16]
    batch = LegacyRecordBatch(memoryview(entry)[: len(entry)], magic)
    if not batch.validate_crc():
        raise InvalidMessageError(f"message at offset {batch.base_offset} failed its CRC check")
    out = []
    for record in batch:
        if not record.validate_crc():
            raise InvalidMessageError(f"message at offset {record.offset} failed its CRC check")
        out.append((record.offset, _as_bytes(record.key), _as_bytes(record.value)))
    return out


def _as_bytes(data: bytes | memoryview | None) -> bytes | None:
    return None if data is None else bytes(data)
