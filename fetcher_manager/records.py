"""Messages as the application sees them, and the decoding of fetched record sets into them.

This is the consumer's hot path, so magic-2 batches (the only format Kafka has written since 0.11) are
parsed here by hand rather than through kafka-python's record classes: per record we read only what a
0.8 ``MessageAndMetadata`` carries (offset, key, value) and jump over timestamps and headers using the
record's length. Compressed batches are inflated and old (magic 0/1) message sets are parsed through
``kafka_wire``, the one module that touches kafka-python internals.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from crc32c import crc32c  # C implementation (ICRAR crc32c), also what kafka-python uses when present

from fetcher_manager import kafka_wire
from fetcher_manager.errors import InvalidMessageError


@dataclass(frozen=True, slots=True)
class MessageAndMetadata:
    topic: str
    partition: int
    offset: int
    key: Any
    value: Any


class _Unfrozen:
    """MessageAndMetadata's slots (same names, same order) without its frozen ``__setattr__``.

    A record becomes a message once per consumed record, so its construction is on the hot path. The frozen
    dataclass's ``__init__`` costs ~0.9 us (five ``object.__setattr__`` calls) and writing the slots through their
    descriptors about half that; filling an instance of this class with plain attribute stores (which CPython
    specializes for slots) and then giving it MessageAndMetadata's class costs about half again. Assigning
    ``__class__`` is allowed because the two layouts are identical (CPython checks it, and raises if not).
    """

    __slots__ = MessageAndMetadata.__slots__  # type: ignore[misc]


_new = object.__new__


def make_message(topic: str, partition: int, offset: int, key: Any, value: Any) -> MessageAndMetadata:
    message = _new(_Unfrozen)
    message.topic = topic
    message.partition = partition
    message.offset = offset
    message.key = key
    message.value = value
    message.__class__ = MessageAndMetadata  # type: ignore[assignment]
    return message  # type: ignore[return-value]


# BaseOffset, Length | PartitionLeaderEpoch, Magic, CRC, Attributes, LastOffsetDelta, FirstTimestamp,
# MaxTimestamp, ProducerId, ProducerEpoch, BaseSequence, RecordCount
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
_HEADER_SIZE = _BATCH_HEADER.size  # 61
_LOG_OVERHEAD = 12  # offset + length: the part shared by every message format
_PREFIX = struct.Struct(">qi")
_LENGTH = struct.Struct(">i")
_MAGIC_AT = 16
_LAST_DELTA = struct.Struct(">i")
_LAST_DELTA_AT = 23
_CRC_FROM = 21  # the CRC covers attributes .. end of batch
_COMPRESSION_MASK = 0x07
_CONTROL_FLAG = 0x20


@dataclass(frozen=True)
class RecordSetScan:
    valid_bytes: int  # length of the leading complete batches
    next_offset: int  # offset after the last complete batch (meaningless when valid_bytes == 0)


def scan_record_set(buf: bytes, fetch_offset: int) -> RecordSetScan:
    """Find the complete batches at the start of a fetched record set (the broker may cut the last one)."""
    pos, size, next_offset = 0, len(buf), fetch_offset
    while pos + _LOG_OVERHEAD <= size:
        base, length = _PREFIX.unpack_from(buf, pos)
        end = pos + _LOG_OVERHEAD + length
        if end > size or length < 5:
            break
        if buf[pos + _MAGIC_AT] >= 2:
            next_offset = base + _LAST_DELTA.unpack_from(buf, pos + _LAST_DELTA_AT)[0] + 1
        else:
            # magic 0/1: a compressed wrapper carries the offset of its last inner message
            next_offset = base + 1
        pos = end
    return RecordSetScan(pos, next_offset)


def iter_message_batches(buf: bytes, valid_bytes: int, topic: str,
                         partition: int) -> Iterator[list[MessageAndMetadata]]:
    """Yield the messages of each batch in ``buf[:valid_bytes]`` (CRC-checked, control batches dropped)."""
    pos = 0
    while pos < valid_bytes:
        length = _LENGTH.unpack_from(buf, pos + 8)[0]
        end = pos + _LOG_OVERHEAD + length
        if buf[pos + _MAGIC_AT] < 2:
            yield [make_message(topic, partition, offset, key, value)
                   for offset, key, value in kafka_wire.legacy_messages(buf[pos:end])]
        else:
            yield _decode_batch(buf, pos, end, topic, partition)
        pos = end


def _decode_batch(buf: bytes, start: int, end: int, topic: str, partition: int) -> list[MessageAndMetadata]:
    if end - start < _HEADER_SIZE:
        raise InvalidMessageError(f"{topic}-{partition}: {end - start}-byte record batch is shorter than its header")
    (base, _, _, _, crc, attributes, _, _, _, _, _, _, count) = _BATCH_HEADER.unpack_from(buf, start)
    if crc32c(memoryview(buf)[start + _CRC_FROM:end]) != crc:
        raise InvalidMessageError(f"{topic}-{partition}: record batch at offset {base} failed its CRC check")
    if attributes & _CONTROL_FLAG:
        return []  # transaction markers are not messages
    codec = attributes & _COMPRESSION_MASK
    if codec:
        body = kafka_wire.decompress(codec, buf[start + _HEADER_SIZE:end])
        return _decode_records(body, 0, len(body), count, base, topic=topic, partition=partition)
    return _decode_records(buf, start + _HEADER_SIZE, end, count, base, topic=topic, partition=partition)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Zig-zag varint at ``pos`` (any length): (value, next position)."""
    shift = raw = 0
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return _zig_zag(raw), pos
        shift += 7
        if shift > 63:
            raise InvalidMessageError("varint longer than 64 bits")


def _zig_zag(raw: int) -> int:
    return (raw >> 1) ^ -(raw & 1)


# _TWO_BYTE_VARINTS[first][second] is the value of the two-byte varint (first >= 0x80, second < 0x80): two list
# lookups instead of the arithmetic, measured at ~13% fewer instructions per record (Python 3.11, callgrind) for
# records of about 100 bytes, which have three such varints. Indices 0..127 of the outer list are never used.
_TWO_BYTE_VARINTS: list[list[int]] = [[] for _ in range(0x80)] + [
    [_zig_zag((first & 0x7F) | (second << 7)) for second in range(0x80)] for first in range(0x80, 0x100)]


def _decode_records(buf: bytes, pos: int, end: int, count: int, base: int, *, topic: str,
                    partition: int) -> list[MessageAndMetadata]:
    # Record: Length varint | Attributes int8 | TimestampDelta varlong | OffsetDelta varint |
    #         KeyLength varint | Key | ValueLength varint | Value | Headers (skipped via Length).
    # Varints of one and two bytes are decoded inline, longer ones by _read_varint: a function call per field
    # is most of the cost of a record, and two bytes is the common case for a record's length and its value's
    # length (64..8191 bytes) and for the offset delta past a batch's 64th record. One-byte forms are read as
    # the decoder always has (zig-zag: even byte = non-negative value, 0x01 = -1 = null); two-byte ones come
    # from _TWO_BYTE_VARINTS.
    out: list[MessageAndMetadata] = []
    append = out.append
    varint, two = _read_varint, _TWO_BYTE_VARINTS
    new, unfrozen, frozen = _new, _Unfrozen, MessageAndMetadata
    try:
        for _ in range(count):
            byte = buf[pos]
            if byte < 0x80:
                length, pos = byte >> 1, pos + 1
            elif (high := buf[pos + 1]) < 0x80:
                length, pos = two[byte][high], pos + 2
            else:
                length, pos = varint(buf, pos)
            record_end = pos + length
            pos += 1  # attributes: unused
            while buf[pos] >= 0x80:  # timestamp delta: not part of a 0.8 message
                pos += 1
            byte = buf[pos + 1]
            if byte < 0x80:
                delta, pos = byte >> 1, pos + 2
            elif (high := buf[pos + 2]) < 0x80:
                delta, pos = two[byte][high], pos + 3
            else:
                delta, pos = varint(buf, pos + 1)
            byte = buf[pos]
            if byte < 0x80:
                pos += 1
                key = None if byte == 1 else buf[pos:pos + (byte >> 1)]
                pos += byte >> 1
            else:
                if (high := buf[pos + 1]) < 0x80:
                    size, pos = two[byte][high], pos + 2
                else:
                    size, pos = varint(buf, pos)
                key = buf[pos:pos + size]
                pos += size
            byte = buf[pos]
            if byte < 0x80:
                value = None if byte == 1 else buf[pos + 1:pos + 1 + (byte >> 1)]
            else:
                if (high := buf[pos + 1]) < 0x80:
                    size, pos = two[byte][high], pos + 2
                else:
                    size, pos = varint(buf, pos)
                value = buf[pos:pos + size]
            if record_end > end:
                raise InvalidMessageError(f"{topic}-{partition}: record at offset {base + delta} overruns its batch")
            message = new(unfrozen)  # see _Unfrozen
            message.topic = topic
            message.partition = partition
            message.offset = base + delta
            message.key = key
            message.value = value
            message.__class__ = frozen
            append(message)
            pos = record_end
    except IndexError:
        raise InvalidMessageError(f"{topic}-{partition}: truncated record in batch at offset {base}") from None
    if pos != end:
        raise InvalidMessageError(f"{topic}-{partition}: {end - pos} stray bytes after the records of batch {base}")
    return out  # type: ignore[return-value]  # every element has MessageAndMetadata's class by now
