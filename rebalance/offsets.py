"""Offsets in ZooKeeper as the 0.8.2 connector keeps them: read before claiming, commit only what changed."""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterable, Mapping
from typing import Protocol, runtime_checkable

from rebalance.assignment import TopicPartition
from rebalance.events import EventBus, EventKind

log = logging.getLogger(__name__)


class ConsumedOffsets(Protocol):
    """A partition's position as the app has consumed it (fetcher_manager's PartitionTopicInfo)."""

    topic: str
    partition: int

    @property
    def consumed_offset(self) -> int: ...


class Marker(Protocol):
    def mark(self, n: int = 1) -> None: ...


class OffsetStore(Protocol):
    """Where offsets are read and written: `GroupStore` (ZooKeeper), or with `offsets.storage=kafka` the router of
    zkconsumer/offset_storage.py, a `BatchOffsetStore`."""

    def read_offset(self, topic: str, partition: int) -> int: ...

    def write_offset(self, topic: str, partition: int, offset: int) -> None: ...


@runtime_checkable
class BatchOffsetStore(OffsetStore, Protocol):
    """A store that reads and writes many partitions' offsets at once (zkconsumer/offset_storage.py's
    `OffsetStorage`): `OffsetCheckpoints` then uses these forms instead of the single ones, one OffsetFetchRequest
    per fetch and one OffsetCommitRequest per commit, as 0.8.2's connector does with Kafka storage
    (docs/kafka-offsets.md)."""

    def read_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...

    def write_offsets(self, offsets: Mapping[TopicPartition, int],
                      changed: Collection[TopicPartition] | None = None) -> set[TopicPartition]: ...


class OffsetCheckpoints:
    """Remembers the last offset written or read per partition (`checkpointedZkOffsets`)."""

    def __init__(self, store: OffsetStore, consumer_id: str, commits_meter: Marker | None = None,
                 events: EventBus | None = None) -> None:
        self.store = store
        # Looked at once, not per fetch or commit: an isinstance check against a runtime-checkable protocol looks
        # for each of its methods.
        self._batch_store = store if isinstance(store, BatchOffsetStore) else None
        self.consumer_id = consumer_id
        self.commits_meter = commits_meter
        self.events = events or EventBus(consumer_id)
        self._checkpoints: dict[TopicPartition, int] = {}
        self._lock = threading.Lock()
        self._fenced = False

    def fetch(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Stored next offsets (-1 where none); each becomes the checkpoint, so an unchanged offset is not rewritten."""
        if self._batch_store is not None:
            offsets = self._batch_store.read_offsets(list(partitions))
        else:
            offsets = {tp: self.store.read_offset(tp.topic, tp.partition) for tp in partitions}
        with self._lock:
            self._checkpoints.update(offsets)
        return offsets

    def fence(self) -> None:
        """The session that claimed our partitions has expired: write nothing until `reset` (the new session's
        state is set up). Not in 0.8.2, whose auto-commit could write the old partitions' offsets under the new
        session before the rebalancer cleared its registry: a member woken from a pause longer than its session
        then moved a partition's offset back, below what its new owner had committed (docs/chaos.md)."""
        with self._lock:
            self._fenced = True

    def commit(self, infos: Iterable[ConsumedOffsets]) -> int:
        """Write the consumed offset of every given partition that changed; returns how many were written."""
        if self._batch_store is not None:
            return self._commit_batch(infos, self._batch_store)
        written = 0
        for info in infos:
            tp = TopicPartition(info.topic, info.partition)
            offset = info.consumed_offset
            with self._lock:
                unchanged = self._checkpoints.get(tp) == offset
                fenced = self._fenced
            if fenced:
                log.info("%s: not committing: the session that owned the partitions has expired", self.consumer_id)
                return written
            if offset < 0 or unchanged:
                continue
            # A member paused between sending a write and reading its answer reports the commit when it wakes,
            # long after the server applied it: `sent` orders commits as the server saw them.
            sent = self.events.now()
            self.store.write_offset(tp.topic, tp.partition, offset)
            with self._lock:
                self._checkpoints[tp] = offset
            written += 1
            if self.commits_meter is not None:
                self.commits_meter.mark()
            log.info("%s: committed %s/%d=%d", self.consumer_id, tp.topic, tp.partition, offset)
            self.events.emit(EventKind.COMMIT, topic=tp.topic, partition=tp.partition, offset=offset, sent=sent)
        return written

    def _commit_batch(self, infos: Iterable[ConsumedOffsets], store: BatchOffsetStore) -> int:
        """Kafka storage, as 0.8.2 commits to the offset manager: every owned partition in one request (which
        also keeps the broker from expiring an idle partition's offset); only the changed ones count as written
        and, with dual commit, are written to ZooKeeper."""
        with self._lock:
            if self._fenced:
                log.info("%s: not committing: the session that owned the partitions has expired", self.consumer_id)
                return 0
        offsets = {TopicPartition(i.topic, i.partition): i.consumed_offset for i in infos}
        offsets = {tp: offset for tp, offset in offsets.items() if offset >= 0}
        if not offsets:
            return 0
        with self._lock:
            changed = {tp for tp, offset in offsets.items() if self._checkpoints.get(tp) != offset}
        sent = self.events.now()
        committed = store.write_offsets(offsets, changed)
        with self._lock:
            self._checkpoints.update({tp: offsets[tp] for tp in committed})
        written = sorted(committed & changed)
        for tp in written:
            log.info("%s: committed %s/%d=%d", self.consumer_id, tp.topic, tp.partition, offsets[tp])
            self.events.emit(EventKind.COMMIT, topic=tp.topic, partition=tp.partition, offset=offsets[tp], sent=sent)
        return len(written)

    def reset(self) -> None:
        with self._lock:
            self._checkpoints.clear()
            self._fenced = False
