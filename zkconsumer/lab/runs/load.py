"""The scenario's message load (`[load]`: rate, keys, message size), produced while the churn runs.

The producer talks to the broker's `DIRECT` listener, not through the lab's Kafka proxy: its requests are not a
member's and must not count as the design's cost (Kafka answers Metadata with the listener a client came in on, so
it stays there). Every acknowledged message's offset goes into a `produce` trace record
(one per partition and contiguous range, flushed twice a second), which is what the analysis audits the
members' `consume` records against (duplicates and gaps, docs/analysis.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zkconsumer.lab.drivers.interface import TraceTail
from zkconsumer.lab.trace import TraceWriter

log = logging.getLogger(__name__)

TICK_S = 0.05  # sending in small bursts keeps the rate even without a timer per message
FLUSH_S = 0.5


class OffsetRanges:
    """Acknowledged offsets per partition, written as contiguous ranges (`produce` records)."""

    def __init__(self, trace: TraceWriter) -> None:
        self.trace = trace
        self.lock = threading.Lock()
        self.acked: dict[tuple[str, int], list[int]] = {}
        self.last: dict[tuple[str, int], int] = {}  # the highest acknowledged offset per partition

    def add(self, topic: str, partition: int, offset: int) -> None:
        with self.lock:
            self.acked.setdefault((topic, partition), []).append(offset)
            self.last[(topic, partition)] = max(self.last.get((topic, partition), -1), offset)

    def flush(self) -> None:
        with self.lock:
            pending, self.acked = self.acked, {}
        for (topic, partition), offsets in sorted(pending.items()):
            offsets.sort()  # acks of one partition arrive in order, but nothing here relies on it
            first = last = offsets[0]
            count = 1
            for offset in offsets[1:]:
                if offset == last + 1:
                    last, count = offset, count + 1
                    continue
                self._write(topic, partition, first, last, count)
                first = last = offset
                count = 1
            self._write(topic, partition, first, last, count)

    def _write(self, topic: str, partition: int, first: int, last: int, count: int) -> None:
        self.trace.write("produce", topic=topic, partition=partition, first_offset=first, last_offset=last,
                         count=count)


class LoadProducer:
    """Produces `rate` messages per second over `topics` until stopped; a named thread, stopped by `stop()`."""

    def __init__(self, bootstrap: str, topics: Mapping[str, int], trace: TraceWriter, *, rate: float,
                 keys: int = 0, message_size: int = 100, producer_factory: Any = None) -> None:
        if rate <= 0:
            raise ValueError(f"load rate must be positive, got {rate}")
        self.bootstrap = bootstrap
        self.topics = sorted(topics)
        self.rate = rate
        self.keys = keys
        self.value = b"x" * message_size
        self.ranges = OffsetRanges(trace)
        self.sent = 0
        self.failed = 0
        self._stop = threading.Event()
        self._factory = producer_factory
        self._thread = threading.Thread(target=self._run, name="lab-load-producer", daemon=True)
        self._producer: Any = None

    def start(self) -> LoadProducer:
        if self._factory is not None:
            self._producer = self._factory()
        else:
            from kafka import KafkaProducer

            # metadata refreshed every second: partitions added during the run get messages too
            self._producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks=1, linger_ms=5,
                                           client_id="lab-load", retries=3, metadata_max_age_ms=1000,
                                           enable_idempotence=False)
        self._thread.start()
        return self

    def _key(self, n: int) -> bytes | None:
        return None if self.keys == 0 else f"key-{n % self.keys}".encode()

    def _acked(self, metadata: Any) -> None:
        self.ranges.add(metadata.topic, metadata.partition, metadata.offset)

    def _failed(self, exc: BaseException) -> None:
        self.failed += 1
        if self.failed == 1:
            log.warning("lab load: a message was not acknowledged: %s", exc)

    def _run(self) -> None:
        began = time.monotonic()
        next_flush = began + FLUSH_S
        while not self._stop.is_set():
            due = int(self.rate * (time.monotonic() - began))
            while self.sent < due and not self._stop.is_set():
                topic = self.topics[self.sent % len(self.topics)]
                future = self._producer.send(topic, key=self._key(self.sent), value=self.value)
                future.add_callback(self._acked)
                future.add_errback(self._failed)
                self.sent += 1
            if time.monotonic() >= next_flush:
                self.ranges.flush()
                next_flush += FLUSH_S
            self._stop.wait(TICK_S)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop sending, wait for the acknowledgements of what was sent, write the last ranges."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        producer, self._producer = self._producer, None
        flushed = False
        try:
            if producer is not None:
                producer.flush(timeout=timeout)
            flushed = True
        finally:
            try:
                if producer is not None:
                    # kafka-python's close() flushes again first, and raises when that times out too
                    producer.close(timeout=timeout if flushed else 1.0)
            except Exception as exc:
                log.warning("lab load: the producer did not close cleanly: %s", exc)
            self.ranges.flush()  # every acknowledged offset gets its `produce` record, whatever happened above
            log.info("lab load: %d messages sent, %d not acknowledged", self.sent, self.failed)


def wait_drained(trace_dir: Path, produced: Mapping[tuple[str, int], int], timeout: float,
                 stop: threading.Event | None = None) -> bool:
    """Wait (bounded) until the members' consume records reach every partition's last produced offset, so the
    delivery audit does not count the messages still in flight at the end of the run as gaps. Each trace file is
    followed from where the last poll left it (`TraceTail`), not read again from the start."""
    deadline = time.monotonic() + timeout
    tails: dict[Path, TraceTail] = {}
    reached: dict[tuple[str, int], int] = {}
    try:
        while True:
            for path in trace_dir.glob("*.jsonl"):
                tail = tails.setdefault(path, TraceTail(path, keep_open=True))
                for record in tail.poll():
                    if record.get("type") == "consume":
                        key = (record["topic"], record["partition"])
                        reached[key] = max(reached.get(key, -1), record["last_offset"])
            if all(reached.get(key, -1) >= last for key, last in produced.items()):
                return True
            if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                missing = {f"{t}/{p}": last for (t, p), last in produced.items() if reached.get((t, p), -1) < last}
                log.warning("lab load: not every produced message was consumed within %.0f s: %s", timeout,
                            missing)
                return False
            time.sleep(0.2)
    finally:
        for tail in tails.values():
            tail.close()
