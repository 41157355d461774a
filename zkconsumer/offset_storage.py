"""Where a group's offsets live: ZooKeeper, Kafka, or both (`offsets.storage`, `dual.commit.enabled`).

Kafka 0.8.2's rules (`ZookeeperConsumerConnector.commitOffsets`/`fetchOffsets`): with Kafka storage every commit
goes to the offset manager in one request; with dual commit each partition the broker accepted is then written to
ZooKeeper too, exactly as ZooKeeper storage writes it (only when it changed), and a fetch reads both and takes the
larger, so a group moving from ZooKeeper to Kafka storage member by member never goes back (docs/kafka-offsets.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Protocol

from fetcher_manager.broker import Broker
from rebalance.assignment import TopicPartition
from zkconsumer.kafka_offsets import KafkaOffsetManager, Marker, OffsetChannelSettings

log = logging.getLogger(__name__)

ZOOKEEPER, KAFKA, DUAL = "zookeeper", "kafka", "dual"


class ZkOffsets(Protocol):
    """The ZooKeeper side: `rebalance.store.GroupStore`'s offset methods."""

    def read_offset(self, topic: str, partition: int) -> int: ...

    def write_offset(self, topic: str, partition: int, offset: int) -> None: ...


def storage_mode(offsets_storage: str, dual_commit_enabled: bool) -> str:
    """`zookeeper`, `kafka` or `dual` from the two settings (0.8.2 ignores dual commit with ZooKeeper storage)."""
    if offsets_storage == ZOOKEEPER:
        return ZOOKEEPER
    return DUAL if dual_commit_enabled else KAFKA


class OffsetStorage:
    """Reads and writes offsets where the mode says. The batch forms are what `OffsetCheckpoints` uses with Kafka
    storage (one request per commit or fetch); the single forms exist for callers that read one partition."""

    def __init__(self, mode: str, zookeeper: ZkOffsets, kafka: KafkaOffsetManager | None,
                 zk_commits_meter: Marker | None = None) -> None:
        if mode not in (ZOOKEEPER, KAFKA, DUAL):
            raise ValueError(f"unknown offset storage mode {mode!r}")
        if mode != ZOOKEEPER and kafka is None:
            raise ValueError(f"offset storage mode {mode!r} needs a KafkaOffsetManager")
        self.mode = mode
        self.zookeeper = zookeeper
        self.kafka = kafka
        self.zk_commits_meter = zk_commits_meter

    def read_offset(self, topic: str, partition: int) -> int:
        return self.read_offsets([TopicPartition(topic, partition)])[TopicPartition(topic, partition)]

    def write_offset(self, topic: str, partition: int, offset: int) -> None:
        self.write_offsets({TopicPartition(topic, partition): offset})

    def read_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Next offset per partition, -1 where none; with dual commit the larger of ZooKeeper's and Kafka's."""
        wanted = list(partitions)
        if self.mode == ZOOKEEPER:
            return {tp: self.zookeeper.read_offset(tp.topic, tp.partition) for tp in wanted}
        assert self.kafka is not None
        found = self.kafka.fetch(wanted)
        if self.mode == DUAL:
            for tp in wanted:
                in_zk = self.zookeeper.read_offset(tp.topic, tp.partition)
                if in_zk > found[tp]:
                    log.info("%s: %s/%d: ZooKeeper's offset %d is ahead of Kafka's %d: using it (dual commit)",
                             self.kafka.settings.consumer_id, tp.topic, tp.partition, in_zk, found[tp])
                    found[tp] = in_zk
        return found

    def write_offsets(self, offsets: Mapping[TopicPartition, int],
                      changed: Collection[TopicPartition] | None = None) -> set[TopicPartition]:
        """Commit `offsets`; returns the partitions committed. With dual commit, those of `changed` (default: all)
        the broker accepted are written to ZooKeeper too, so ZooKeeper sees the writes ZooKeeper storage makes."""
        if self.mode == ZOOKEEPER:
            for tp in (offsets if changed is None else changed):
                self._write_zookeeper(tp, offsets[tp])
            return set(offsets)
        assert self.kafka is not None
        committed = self.kafka.commit(offsets)
        if self.mode == DUAL:
            for tp in sorted(committed if changed is None else committed.intersection(changed)):
                self._write_zookeeper(tp, offsets[tp])
        return committed

    def close(self) -> None:
        if self.kafka is not None:
            self.kafka.close()

    def _write_zookeeper(self, tp: TopicPartition, offset: int) -> None:
        self.zookeeper.write_offset(tp.topic, tp.partition, offset)
        if self.zk_commits_meter is not None:
            self.zk_commits_meter.mark()


def kafka_storage(mode: str, zookeeper: ZkOffsets, settings: OffsetChannelSettings,
                  brokers: Callable[[], list[Broker]], zk_commits_meter: Marker | None,
                  kafka_commits_meter: Marker | None) -> OffsetStorage:
    """The router of a consumer with `offsets.storage=kafka` (mode `kafka` or `dual`), owning its channel."""
    return OffsetStorage(mode, zookeeper, KafkaOffsetManager(settings, brokers, kafka_commits_meter), zk_commits_meter)
