"""The consuming thread's work alone: decode + ConsumerIterator + the bench's per-message loop, no broker, no network.

bench_fetch.py measures the whole consumer on a real broker; this isolates what the profile says is the bottleneck,
the thread that iterates a KafkaStream. The record sets are built here as bench_fetch's producer builds them
(kafka-python's DefaultRecordBatchBuilder: magic 2, uncompressed, keys b"0".., 100-byte values, 550 records a
batch), which are the bytes a broker stores and returns for them (it rewrites only the base offset and the partition
leader epoch, outside the CRC). Chunks of 27 batches (~1 MiB, fetch.message.max.bytes) are queued, then one
KafkaStream is drained the way fetch_child.py drains one.

With --before REV the same measurement also runs on fetcher_manager/ as of that git revision (in a process of its
own, with PYTHONPATH pointing at an exported copy), alternated with the current tree, round after round.

    .venv/bin/python benchmarks/bench_decode.py --before f362671
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VALUE = (b"0123456789abcdef" * 7)[:100]


def chunks(count: int, batches: int = 27, records: int = 550) -> list[tuple[bytes, int]]:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    out, offset = [], 0
    for _ in range(count):
        start, parts = offset, []
        for _ in range(batches):
            builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                                producer_epoch=-1, base_sequence=-1, batch_size=1 << 24)
            for delta in range(records):
                builder.append(delta, timestamp=1_700_000_000_000, key=b"%d" % (offset + delta), value=VALUE,
                               headers=[])
            batch = bytearray(builder.build())
            batch[0:8] = offset.to_bytes(8, "big")  # the base offset, as the broker assigns it (not under the CRC)
            parts.append(bytes(batch))
            offset += records
        out.append((b"".join(parts), start))
    return out


def drain_once(data: list[tuple[bytes, int]]) -> float:
    """CPU nanoseconds per message to drain one stream fed with `data` (the queue is filled before the clock)."""
    from fetcher_manager.chunks import ChunkQueue, FetchedDataChunk
    from fetcher_manager.partition_info import PartitionTopicInfo
    from fetcher_manager.stream import KafkaStream

    queue = ChunkQueue(len(data) + 1)
    info = PartitionTopicInfo("bench-fetch", 0, queue, 0, 0)
    for records, start in data:
        queue.put(FetchedDataChunk(records, len(records), info, start))
    queue.put_shutdown_sentinel()
    keys = values = count = 0
    started = time.process_time()
    for message in iter(KafkaStream(queue, -1)):  # what fetch_child.Tally.drain does per message, less the marks
        keys += len(message.key)
        values += len(message.value)
        count += 1
    elapsed = time.process_time() - started
    if info.consumed_offset != count or values != count * len(VALUE):
        raise SystemExit(f"consumed offset {info.consumed_offset}, {count} messages: the decode is wrong")
    return elapsed / count * 1e9


def child(args: argparse.Namespace) -> None:
    data = chunks(args.chunks)
    drain_once(data[:2])  # imports, first allocations
    gc.collect()
    print(json.dumps([drain_once(data) for _ in range(args.runs)]))


def spawn(args: argparse.Namespace, python_path: Path | None) -> list[float]:
    env = dict(os.environ)
    if python_path is not None:
        env["PYTHONPATH"] = str(python_path)
    done = subprocess.run([sys.executable, __file__, "--child", "--chunks", str(args.chunks), "--runs",
                           str(args.runs)], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=20, help="~1 MiB chunks of 14,850 messages each")
    parser.add_argument("--runs", type=int, default=3, help="drains per process (the best one counts)")
    parser.add_argument("--rounds", type=int, default=3, help="processes per contender, alternated")
    parser.add_argument("--before", metavar="REV", help="also measure fetcher_manager/ as of this git revision")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    with tempfile.TemporaryDirectory(prefix="bench-decode-") as tmp:
        contenders: dict[str, Path | None] = {"now": None}
        if args.before:
            archive = subprocess.run(["git", "archive", args.before, "fetcher_manager"], cwd=ROOT,
                                     capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            contenders[f"before ({args.before})"] = Path(tmp)
        best: dict[str, list[float]] = {name: [] for name in contenders}
        for round_no in range(args.rounds):
            for name, path in contenders.items():
                best[name].append(min(spawn(args, path)))
                print(f"round {round_no + 1}/{args.rounds}  {name:<20} {best[name][-1]:7.0f} ns/message  "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
    for name, values in best.items():
        print(f"{name:<20} median {statistics.median(values):7.0f} ns/message (CPU, consuming thread), "
              f"{1e9 / statistics.median(values):,.0f} msg/s of one core")


if __name__ == "__main__":
    main()
