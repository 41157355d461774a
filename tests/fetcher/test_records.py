"""Decoding fetched record sets: our hand-written magic-2 parser against kafka-python's builders and reader."""

from __future__ import annotations

import os

import pytest
from crc32c import crc32c
from fetch_helpers import record_batch
from kafka.record import MemoryRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from fetcher_manager.errors import InvalidMessageError
from fetcher_manager.records import MessageAndMetadata, iter_message_batches, scan_record_set


def decode(buf: bytes, fetch_offset: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    scan = scan_record_set(buf, fetch_offset)
    return [(m.offset, m.key, m.value) for batch in iter_message_batches(buf, scan.valid_bytes, "t", 3)
            for m in batch]


def reference(buf: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    out, records = [], MemoryRecords(buf)
    while (batch := records.next_batch()) is not None:
        out += [(r.offset, r.key, r.value) for r in batch]
    return out


@pytest.mark.parametrize("compression", [0, 1], ids=["plain", "gzip"])
def test_decodes_like_kafka_python(compression: int) -> None:
    # Sizes chosen to cross every varint fast path: null/empty/1-byte/2-byte/3-byte lengths, headers skipped.
    payloads = [(None, b"v"), (b"", b""), (b"k", None), (b"key" * 30, b"x" * 63), (b"k" * 64, b"y" * 8000),
                (os.urandom(200), os.urandom(20000))]
    buf = (record_batch(100, payloads, compression, headers=[("h", b"1"), ("h2", None)])
           + record_batch(106, [(b"a", b"b")] * 300, compression))
    ours = decode(buf, 100)
    assert ours == reference(buf)
    assert [offset for offset, _, _ in ours] == list(range(100, 406))


def test_message_and_metadata_reads_like_the_interface() -> None:
    buf = record_batch(7, [(b"k", b"v")])
    [[message]] = list(iter_message_batches(buf, len(buf), "topic-a", 2))
    assert message == MessageAndMetadata("topic-a", 2, 7, b"k", b"v")
    fields = (message.topic, message.partition, message.offset, message.key, message.value)
    assert fields == ("topic-a", 2, 7, b"k", b"v")
    with pytest.raises(AttributeError):
        message.offset = 8  # type: ignore[misc]  # frozen


def test_scan_stops_at_a_truncated_batch() -> None:
    first, second = record_batch(0, [(b"k", b"v")] * 3), record_batch(3, [(b"k", b"v")] * 3)
    scan = scan_record_set(first + second[:-5], 0)
    assert (scan.valid_bytes, scan.next_offset) == (len(first), 3)
    assert scan_record_set(second[:30], 3).valid_bytes == 0  # bytes but no complete batch: "too large"
    assert scan_record_set(b"", 42).next_offset == 42


def test_crc_mismatch_is_reported() -> None:
    buf = bytearray(record_batch(0, [(b"k", b"value")]))
    buf[-2] ^= 0xFF
    with pytest.raises(InvalidMessageError, match="CRC"):
        decode(bytes(buf))


def test_legacy_message_sets_decode_through_kafka_python() -> None:
    for magic in (0, 1):
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
        for offset in range(3):
            builder.append(offset, timestamp=None if magic == 0 else 1, key=b"k%d" % offset, value=b"v")
        buf = bytes(builder.build())
        assert decode(buf) == [(0, b"k0", b"v"), (1, b"k1", b"v"), (2, b"k2", b"v")]
        assert scan_record_set(buf, 0).next_offset == 3


@pytest.mark.parametrize("size", [0, 1, 3, 4, 15, 16, 17, 511, 512, 600, 8191, 8192, 9000, 70001])
def test_crc32c_matches_kafka_python(size: int) -> None:
    from kafka.record.util import calc_crc32c

    data = os.urandom(size)
    assert calc_crc32c(data) == crc32c(data)
    assert crc32c(memoryview(b"-" + data)[1:]) == calc_crc32c(data)
