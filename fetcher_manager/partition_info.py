"""Per owned partition: where the application is (consumed) and where the fetcher is (fetched)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from fetcher_manager.topic_partition import TopicPartition

log = logging.getLogger(__name__)


class ChunkSink(Protocol):
    """Where the fetcher puts this partition's chunks: a ``chunks.ChunkQueue``. Named by what the fetcher thread
    uses of it because a chunk refers to its ``PartitionTopicInfo``, so this module cannot import the queue's, not
    even for the type checker (docs/architecture.md: no import cycles, tests/unit/test_import_graph.py); hence
    ``chunk: Any`` where it is a ``chunks.FetchedDataChunk``."""

    def put(self, chunk: Any, timeout: float | None = None,
            interrupted: Callable[[], bool] | None = None) -> bool: ...

    def wake_putters(self) -> None: ...


class PartitionTopicInfo:
    """Offsets shared by a fetcher thread, the stream's iterator and the committer.

    ``consumed_offset`` is the next offset to hand to the application (what gets committed);
    ``fetched_offset`` the next one to fetch. -1 means unknown: the fetcher resolves it through
    ``auto.offset.reset`` before its first fetch. Each offset is a single int attribute written by one
    thread at a time, and an attribute store or load is atomic in CPython, so readers on other threads
    always see a whole value without a lock (the role of Kafka's AtomicLong); the iterator writes the
    consumed offset once per message, where a lock would be measurable. For the same reason
    ``consumed_offset`` is a plain attribute rather than a property: the iterator reads and writes it for
    every message, and a property or method call there costs more than the store itself.
    """

    __slots__ = ("_fetched", "chunk_queue", "client_id", "consumed_offset", "partition", "topic")

    def __init__(self, topic: str, partition: int, chunk_queue: ChunkSink, consumed_offset: int,
                 fetched_offset: int, *, client_id: str = "") -> None:
        self.topic = topic
        self.partition = partition
        self.chunk_queue = chunk_queue
        self.client_id = client_id
        self.consumed_offset = consumed_offset
        self._fetched = fetched_offset

    def set_consumed_offset(self, offset: int) -> None:
        self.consumed_offset = offset

    @property
    def fetched_offset(self) -> int:
        return self._fetched

    def reset_fetch_offset(self, offset: int) -> None:
        self._fetched = offset

    @property
    def key(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __repr__(self) -> str:
        return (f"{self.topic}:{self.partition}: fetched offset = {self._fetched}: "
                f"consumed offset = {self.consumed_offset}")
