"""Which chunk queue and stream serve each (topic, consumer thread): the connector binds, the listener uses."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TypeVar

from fetcher_manager.stream import ChunkQueue, KafkaStream
from rebalance.assignment import ConsumerThreadId, TopicPartition

_T = TypeVar("_T")


class StreamBindings:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bound: dict[tuple[str, ConsumerThreadId], tuple[ChunkQueue, KafkaStream]] = {}

    def bind(self, topic: str, thread_id: ConsumerThreadId, queue: ChunkQueue, stream: KafkaStream) -> None:
        with self._lock:
            self._bound[(topic, thread_id)] = (queue, stream)

    def queue_for(self, topic: str, thread_id: ConsumerThreadId) -> ChunkQueue:
        with self._lock:
            try:
                return self._bound[(topic, thread_id)][0]
            except KeyError:
                raise KeyError(f"no stream is bound to topic {topic!r} thread {thread_id}") from None

    def topics(self) -> set[str]:
        with self._lock:
            return {topic for topic, _ in self._bound}

    def bindings(self) -> list[tuple[str, ConsumerThreadId, ChunkQueue]]:
        with self._lock:
            return [(topic, thread, queue) for (topic, thread), (queue, _) in sorted(self._bound.items())]

    def clear(self, topics: Iterable[str]) -> None:
        """Empty the queues of `topics` and drop the current chunk of *every* stream (Kafka's closeFetchers)."""
        wanted = set(topics)
        with self._lock:
            items = list(self._bound.items())
        for (topic, _thread), (queue, _stream) in items:
            if topic in wanted:
                queue.clear()
        for stream in self.streams():
            stream.clear()

    def drop_partitions(self, keys: set[TopicPartition]) -> None:
        """Incremental ownership: drop the queued chunks and the streams' current chunks of these partitions only;
        the others' messages keep flowing to the application."""
        for queue in self.queues():
            queue.drop_partitions(keys)
        for stream in self.streams():
            stream.clear_if_partition(keys)

    def queues(self) -> list[ChunkQueue]:
        """Distinct queues (wildcard subscriptions share one queue across topics)."""
        with self._lock:
            return _distinct(queue for queue, _stream in self._bound.values())

    def streams(self) -> list[KafkaStream]:
        with self._lock:
            return _distinct(stream for _queue, stream in self._bound.values())


def _distinct(items: Iterable[_T]) -> list[_T]:
    """Each object once (the same object, not an equal one), in the order first seen."""
    seen: dict[int, _T] = {}
    for item in items:
        seen.setdefault(id(item), item)
    return list(seen.values())
