"""Rebalance-only members: the connector with a fetcher manager that fetches nothing.

The lab runs many of these in one process (`--members threads`) to measure the ZooKeeper side of the
rebalance at group sizes that separate processes with real fetchers could not reach on one machine. They
register, watch, rebalance, claim and commit exactly as a full member does; only the Kafka side is absent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from fetcher_manager.broker import Broker
from fetcher_manager.metrics import MetricsRegistry
from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.settings import FetchSettings


class NoFetchers:
    """Records what it was asked to fetch; starts no thread and opens no socket."""

    def __init__(self, settings: FetchSettings | None = None,
                 broker_source: Callable[[], Sequence[Broker]] | None = None,
                 metrics: MetricsRegistry | None = None) -> None:
        self._lock = threading.Lock()
        self._partitions: list[PartitionTopicInfo] = []
        self._shut_down = False

    def start_connections(self, partition_infos: list[PartitionTopicInfo]) -> None:
        with self._lock:
            if self._shut_down:
                raise RuntimeError("fetcher manager already shut down")
            self._partitions = list(partition_infos)

    def stop_connections(self) -> None:
        with self._lock:
            self._partitions = []

    def add_partitions(self, partition_infos: list[PartitionTopicInfo]) -> None:
        """Incremental ownership (docs/modes.md): fetch these too."""
        with self._lock:
            if self._shut_down:
                raise RuntimeError("fetcher manager already shut down")
            self._partitions += list(partition_infos)

    def remove_partitions(self, tps: Sequence, timeout_s: float) -> bool:
        """Incremental ownership: stop fetching these; nothing is in flight, so always at once."""
        gone = {(tp[0], tp[1]) for tp in tps}
        with self._lock:
            self._partitions = [i for i in self._partitions if (i.topic, i.partition) not in gone]
        return True

    def shutdown(self) -> None:
        with self._lock:
            self._shut_down = True
            self._partitions = []

    def join(self, timeout: float) -> bool:
        return True

    def fetching(self) -> list[tuple[str, int]]:
        """(topic, partition) of everything a real fetcher manager would be fetching now."""
        with self._lock:
            return sorted((info.topic, info.partition) for info in self._partitions)
