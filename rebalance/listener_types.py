"""What the rebalance listener is given and what it reports: its settings, the collaborators it calls (a user's
rebalance callbacks, the fetchers, a timer), an attempt's result and the member's rebalance counts.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from fetcher_manager.partition_info import PartitionTopicInfo
from rebalance.assignment import ConsumerThreadId


class ConsumerRebalanceFailedError(RuntimeError):
    """Raised to the caller of the first rebalance; later failures are only logged."""


class ConsumerRebalanceListener(Protocol):
    """The 0.9 callback interface; set it before creating streams. An exception fails the attempt."""

    def before_releasing_partitions(self, partition_ownership: dict[str, set[int]]) -> None: ...

    def before_starting_fetchers(
        self, consumer_id: str, global_partition_assignment: dict[str, dict[int, ConsumerThreadId]]
    ) -> None: ...


class FetcherControl(Protocol):
    def stop_connections(self) -> None: ...

    def start_connections(self, partition_infos: list[PartitionTopicInfo]) -> None: ...


class Timer(Protocol):
    def time(self): ...


class AttemptResult(enum.StrEnum):
    OK = "ok"
    NO_BROKERS = "no_brokers"  # nothing to own yet: counts as success, a broker watch will trigger later
    CONFLICT = "conflict"  # an owner node was held by somebody else; this attempt's claims were rolled back
    STOPPED = "stopped"  # the member is shutting down
    ERROR = "error"  # a step raised (ZooKeeper unavailable, unreadable znode data, a user callback)


@dataclass(frozen=True)
class RebalanceSettings:
    consumer_id: str
    max_retries: int = 4
    backoff_ms: int = 2000
    auto_commit: bool = True
    exclude_internal_topics: bool = True
    # Re-registration after a session expiry retries with exponential backoff up to this (listener.py, `_register`).
    max_registration_backoff_ms: int = 30000


@dataclass
class RebalanceStats:
    """How often this member rebalanced and how it went (the events carry the detail)."""

    rebalances: int = 0
    attempts: int = 0
    failed_attempts: int = 0
    conflicts: int = 0
    failures: int = 0
