"""Fetched data chunks and the bounded queue that carries them from fetcher threads to a stream."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass

from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class FetchedDataChunk:
    """One partition's slice of one fetch response: raw record set plus where it was fetched from."""

    records: bytes
    valid_bytes: int  # complete batches at the start of ``records``; 0 with data = message too large
    topic_info: PartitionTopicInfo
    fetch_offset: int


class _Shutdown:
    def __repr__(self) -> str:
        return "SHUTDOWN_COMMAND"


SHUTDOWN_COMMAND = _Shutdown()  # the sentinel that ends a stream's iteration for good


class ChunkQueue:
    """Bounded FIFO of chunks (``queued.max.message.chunks``): a full queue blocks its fetcher (back-pressure)."""

    def __init__(self, capacity: int, name: str = "") -> None:
        if capacity < 1:
            raise ValueError("a chunk queue holds at least one chunk")
        self.capacity = capacity
        self.name = name
        self._items: deque[FetchedDataChunk | _Shutdown] = deque()
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._not_full = threading.Condition(self._lock)

    def put(self, chunk: FetchedDataChunk, timeout: float | None = None,
            interrupted: Callable[[], bool] | None = None) -> bool:
        """Append, waiting while full; False if ``timeout`` seconds passed first or ``interrupted()`` holds after a
        ``wake_putters`` (callers poll their stop flag)."""
        with self._not_full:
            if len(self._items) >= self.capacity:
                deadline = None if timeout is None else time.monotonic() + timeout
                while len(self._items) >= self.capacity:
                    if interrupted is not None and interrupted():
                        return False
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._not_full.wait(remaining)
            self._items.append(chunk)
            self._not_empty.notify()
            return True

    def wake_putters(self) -> None:
        """Wake every put waiting for room, to look at its `interrupted` (a fetcher asked to stop)."""
        with self._not_full:
            self._not_full.notify_all()

    def take(self, timeout: float | None = None) -> FetchedDataChunk | _Shutdown | None:
        """Next chunk, waiting up to ``timeout`` seconds (None = forever); None on timeout.

        The shutdown sentinel is returned but left in place, so every later take sees it too.
        """
        with self._not_empty:
            if not self._items:
                deadline = None if timeout is None else time.monotonic() + timeout
                while not self._items:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return None
                    self._not_empty.wait(remaining)
            head = self._items[0]
            if head is SHUTDOWN_COMMAND:
                return head
            self._items.popleft()
            self._not_full.notify()
            return head

    def put_shutdown_sentinel(self) -> None:
        """Queue the end-of-stream marker without blocking, even past the bound (fetchers are stopped by then)."""
        with self._lock:
            self._items.append(SHUTDOWN_COMMAND)
            self._not_empty.notify_all()

    def clear(self) -> int:
        """Drop everything queued (rebalance); returns how many chunks were dropped."""
        with self._lock:
            dropped = len(self._items)
            self._items.clear()
            self._not_full.notify_all()
            return dropped

    def drop_partitions(self, keys: Collection[TopicPartition]) -> int:
        """Drop the queued chunks of these partitions (incremental ownership: they are no longer ours); returns
        how many were dropped. The others keep their order."""
        with self._lock:
            kept = deque(c for c in self._items
                         if not isinstance(c, FetchedDataChunk) or c.topic_info.key not in keys)
            dropped = len(self._items) - len(kept)
            self._items = kept
            if dropped:
                self._not_full.notify_all()
            return dropped

    def qsize(self) -> int:
        with self._lock:
            return len(self._items)

    def __repr__(self) -> str:
        return f"ChunkQueue({self.name or id(self)}, {self.qsize()}/{self.capacity})"
