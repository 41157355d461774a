"""Messages as the application sees them, and the decoding of fetched record sets into them.

This is the consumer's hot path. Magic-2 batches (the only format Kafka has written since 0.11) are parsed by
aiokafka's record batch class, compiled with Cython in its wheels: per record it does in C what a hand-written
Python parser spent ~2/3 of the consuming thread on (varints, bounds, slicing), which left this module only the
building of 0.8's ``MessageAndMetadata``. Only the batch class is used, not aiokafka's (asyncio) consumer. Each
batch's CRC-32C is checked here before it is decoded. Compressed batches are inflated and old (magic 0/1) message
sets are parsed through ``kafka_wire``, the one module that touches kafka-python internals.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# aiokafka.record.default_records picks the compiled class and falls back to aiokafka's own pure-Python one where
# no wheel with the extension exists, so this project keeps no decoder of its own for that case.
from aiokafka.errors import CorruptRecordException
from aiokafka.record.default_records import DefaultRecordBatch
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

    A type checker cannot follow that assignment: the two places that make one (``make_message``, ``_messages``)
    carry two ignore comments each, on the assignment and where the object is then used as a MessageAndMetadata.
    """

    __slots__ = MessageAndMetadata.__slots__
    # The slots' types, for the type checker: annotations only, which create no class attributes beside the slots.
    topic: str
    partition: int
    offset: int
    key: Any
    value: Any


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
_ATTRIBUTES_LOW = 22  # the low byte of the int16 attributes, which holds the compression bits
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
    (base, _, _, _, crc, attributes, _, _, _, _, _, _, _) = _BATCH_HEADER.unpack_from(buf, start)
    view = memoryview(buf)
    # Checked here, before decoding, with the ICRAR C CRC-32C: aiokafka's batch class does not check it while
    # iterating, and the guarantee is 0.8.2's (every message handed out has passed its checksum).
    if crc32c(view[start + _CRC_FROM:end]) != crc:
        raise InvalidMessageError(f"{topic}-{partition}: record batch at offset {base} failed its CRC check")
    if attributes & _CONTROL_FLAG:
        return []  # transaction markers are not messages
    codec = attributes & _COMPRESSION_MASK
    if codec:
        # Inflated by kafka_wire (kafka-python's codecs, as for every other format), then decoded as the same batch
        # uncompressed: its header with the compression bits cleared, followed by the inflated records.
        body = kafka_wire.decompress(codec, buf[start + _HEADER_SIZE:end])
        header = bytearray(buf[start:start + _HEADER_SIZE])
        header[_ATTRIBUTES_LOW] &= ~_COMPRESSION_MASK & 0xFF
        return _messages(DefaultRecordBatch(bytes(header) + body), base, topic, partition)
    return _messages(DefaultRecordBatch(view[start:end]), base, topic, partition)


def _messages(batch: Any, base: int, topic: str, partition: int) -> list[MessageAndMetadata]:
    """The batch's records as messages. aiokafka parses each record in C (lengths, bounds, the bytes left over at
    the end of the batch); the Python work left per record is reading its three fields and building the message
    (see _Unfrozen). Reading them as attributes costs ~10% fewer instructions than an attrgetter's tuple."""
    out: list[_Unfrozen] = []
    append = out.append
    new, unfrozen, frozen = _new, _Unfrozen, MessageAndMetadata
    try:
        for record in batch:
            message = new(unfrozen)
            message.topic = topic
            message.partition = partition
            message.offset = record.offset
            message.key = record.key
            message.value = record.value
            message.__class__ = frozen  # type: ignore[assignment]
            append(message)
    except CorruptRecordException as exc:
        raise InvalidMessageError(f"{topic}-{partition}: malformed record in batch at offset {base}: {exc}") from None
    return out  # type: ignore[return-value]  # every element has MessageAndMetadata's class by now
