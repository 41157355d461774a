"""Which partitions this consumer owns: the local registry and its owner znodes (claim, roll back, release)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from fetcher_manager.partition_info import PartitionTopicInfo
from rebalance.assignment import Assignment, ConsumerThreadId, TopicPartition
from rebalance.events import EventBus, EventKind
from rebalance.store import GroupStore

log = logging.getLogger(__name__)


class Ownership:
    """The `topicRegistry` of the Scala connector plus the owner-node operations that keep ZooKeeper in step."""

    def __init__(self, store: GroupStore, consumer_id: str, events: EventBus | None = None) -> None:
        self.store = store
        self.consumer_id = consumer_id
        self.events = events or EventBus(consumer_id)
        self._lock = threading.Lock()
        self._infos: dict[TopicPartition, PartitionTopicInfo] = {}
        self._owners: dict[TopicPartition, ConsumerThreadId] = {}

    # --- reads -------------------------------------------------------------------------------------

    def infos(self) -> list[PartitionTopicInfo]:
        with self._lock:
            return list(self._infos.values())

    def owners(self) -> dict[TopicPartition, ConsumerThreadId]:
        with self._lock:
            return dict(self._owners)

    def partitions_by_topic(self) -> dict[str, set[int]]:
        result: dict[str, set[int]] = {}
        for tp in self.owners():
            result.setdefault(tp.topic, set()).add(tp.partition)
        return result

    # --- changes -----------------------------------------------------------------------------------

    def release_all(self) -> None:
        """Delete every owner node we hold (missing ones are fine), then forget them."""
        for tp in sorted(self.owners()):
            self.store.release(tp.topic, tp.partition)
            self._released(tp)
        self.forget()

    def release(self, partitions: list[TopicPartition], *, batch: bool = False) -> None:
        """Delete these owner nodes and forget them, keeping the rest (opt-in modes, docs/modes.md). `batch` sends
        the deletes as one pipelined batch: members waiting to claim them hear of all at once."""
        if batch:
            self.store.release_many(partitions)
        else:
            for tp in partitions:
                self.store.release(tp.topic, tp.partition)
        for tp in partitions:
            self._released(tp)
        with self._lock:
            for tp in partitions:
                self._infos.pop(tp, None)
                self._owners.pop(tp, None)

    def _released(self, tp: TopicPartition) -> None:
        """Report one owner node deleted (the RELEASE event, emitted only here), once its delete has answered:
        `release_all` right after each delete, `release` after the last one."""
        log.info("%s: released partition %s", self.consumer_id, tp)
        self.events.emit(EventKind.RELEASE, topic=tp.topic, partition=tp.partition)

    def forget(self) -> None:
        """Drop the registry without touching ZooKeeper (after a session expiry the nodes are already gone)."""
        with self._lock:
            self._infos.clear()
            self._owners.clear()

    def claim(self, decision: Assignment) -> bool:
        """Create an owner node for every decided partition; on any conflict delete this attempt's claims.

        Kafka tries every partition even after a conflict (so the log shows all of them), then rolls back
        everything it created in this attempt, including nodes accepted because they held our own id.
        """
        claimed: list[TopicPartition] = []
        conflict = False
        for tp in sorted(decision):
            if self.claim_one(tp, str(decision[tp])):
                claimed.append(tp)
            else:
                conflict = True
        if conflict:
            self.roll_back(claimed)
            return False
        return True

    def claim_one(self, tp: TopicPartition, thread: str) -> bool:
        """Create one owner node; False on a conflict (logged and reported, as 0.8.2 logs each)."""
        outcome = self.store.claim(tp.topic, tp.partition, thread)
        self.events.emit(EventKind.CLAIM, topic=tp.topic, partition=tp.partition, thread=thread, ok=outcome.ok,
                         owner=thread if outcome.ok else outcome.owner)
        if outcome.ok:
            log.info("%s: %s successfully owned partition %s", self.consumer_id, thread, tp)
        else:
            log.info("%s: waiting for the partition ownership of %s to be deleted (owned by %s)",
                     self.consumer_id, tp, outcome.owner)
        return outcome.ok

    def roll_back(self, claimed: list[TopicPartition]) -> None:
        """Delete the owner nodes this attempt created (after a conflict elsewhere)."""
        for tp in claimed:
            self.store.release(tp.topic, tp.partition)
            self.events.emit(EventKind.ROLLBACK, topic=tp.topic, partition=tp.partition)

    def install(self, decision: Assignment, infos: Mapping[TopicPartition, PartitionTopicInfo]) -> None:
        with self._lock:
            self._owners = dict(decision)
            self._infos = dict(infos)
