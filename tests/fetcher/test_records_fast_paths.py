"""The decoder's fast paths (fetcher_manager/records.py): aiokafka's compiled batch class on every varint width, key
and value size and header layout, messages built through _Unfrozen, malformed records reported as ours, and the plain
consumed_offset attribute the iterator writes per message."""

from __future__ import annotations

import dataclasses
import pickle
import struct

import pytest
from crc32c import crc32c
from fetch_helpers import record_batch
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords

from fetcher_manager.chunks import ChunkQueue
from fetcher_manager.errors import InvalidMessageError
from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.records import MessageAndMetadata, iter_message_batches, make_message


def _decoded(buf: bytes) -> list[MessageAndMetadata]:
    return [m for batch in iter_message_batches(buf, len(buf), "t", 1) for m in batch]


def test_every_varint_width_decodes_like_kafka_python() -> None:
    # 8,300 records: offset deltas take one (0..63), two (64..8191) and three bytes (8192..); keys and values cross
    # the one/two/three-byte length boundaries, and so do the records' own lengths.
    sizes = [0, 1, 63, 64, 65, 8191, 8192, 9000]
    records = [(None if i % 97 == 0 else b"k" * sizes[i % len(sizes)] if i % 13 == 0 else b"%d" % i,
                None if i % 89 == 0 else b"v" * sizes[(i // 7) % len(sizes)] if i % 11 == 0 else b"x" * (i % 120))
               for i in range(8300)]
    buf = record_batch(5000, records)
    ours = [(m.offset, m.key, m.value) for m in _decoded(buf)]
    batch = MemoryRecords(buf).next_batch()
    assert ours == [(r.offset, r.key, r.value) for r in batch]
    assert [offset for offset, _, _ in ours] == list(range(5000, 13300))


# Large payloads are built from two small draws (length, fill byte): drawn byte by byte, ~8 KiB each exhausted
# Hypothesis's entropy budget and failed its data_too_large health check on a slow machine.
_large = st.tuples(st.integers(8185, 8200), st.integers(0, 255)).map(lambda t: bytes([t[1]]) * t[0])
_payload = st.one_of(st.none(), st.binary(max_size=70), _large)


@settings(max_examples=60, deadline=None)
@given(records=st.lists(st.tuples(_payload, _payload), min_size=1, max_size=80), base=st.integers(0, 2**40),
       with_headers=st.booleans())
def test_any_batch_decodes_like_kafka_python(records: list, base: int, with_headers: bool) -> None:
    buf = record_batch(base, records, headers=[("h", b"x" * 70)] if with_headers else None)
    expected = [(r.offset, r.key, r.value) for r in MemoryRecords(buf).next_batch()]
    assert [(m.offset, m.key, m.value) for m in _decoded(buf)] == expected


def test_decoded_messages_are_frozen_message_and_metadata() -> None:
    [message] = _decoded(record_batch(7, [(b"key", b"value")]))
    built = MessageAndMetadata("t", 1, 7, b"key", b"value")
    for candidate in (message, make_message("t", 1, 7, b"key", b"value")):
        assert type(candidate) is MessageAndMetadata
        assert candidate == built and hash(candidate) == hash(built)
        assert repr(candidate) == repr(built)
        assert dataclasses.asdict(candidate) == dataclasses.asdict(built)
        assert pickle.loads(pickle.dumps(candidate)) == built
        with pytest.raises(dataclasses.FrozenInstanceError):
            candidate.value = b"other"  # type: ignore[misc]


def test_a_record_that_overruns_its_batch_is_still_reported() -> None:
    buf = bytearray(record_batch(0, [(b"k", b"v" * 100)]))
    # The record's length (a two-byte varint right after the 61-byte header) now claims 4 more bytes than exist.
    raw = (buf[61] & 0x7F) | (buf[62] << 7)
    raw += 8  # zig-zag: +4
    buf[61], buf[62] = (raw & 0x7F) | 0x80, raw >> 7
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))  # a valid CRC over the bad record
    with pytest.raises(InvalidMessageError, match="malformed record in batch at offset 0"):
        list(iter_message_batches(bytes(buf), len(buf), "t", 1))


def _resealed(buf: bytearray) -> bytes:
    """The batch with its length field and CRC made to fit its (altered) bytes, as a well-behaved broker's would."""
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


@pytest.mark.parametrize("alter", ["stray bytes", "one record more than present", "value past the batch's end"])
def test_malformed_records_under_a_valid_crc_are_reported_not_decoded(alter: str) -> None:
    buf = bytearray(record_batch(3, [(b"k", b"v" * 10)]))
    if alter == "stray bytes":
        buf += b"\x00\x00\x00"
    elif alter == "one record more than present":
        struct.pack_into(">i", buf, 57, 2)  # the record count
    else:
        del buf[-4:]  # the value and the header count: the record's length now runs past the batch
    with pytest.raises(InvalidMessageError, match="malformed record in batch at offset 3"):
        _decoded(_resealed(buf))


def test_consumed_offset_is_a_plain_attribute_kept_in_step_with_its_setter() -> None:
    info = PartitionTopicInfo("t", 0, ChunkQueue(1), 3, 3)
    info.consumed_offset = 9
    assert info.consumed_offset == 9
    info.set_consumed_offset(11)
    assert info.consumed_offset == 11
    assert "consumed offset = 11" in repr(info)
