"""What the rebalance listener is given and what it reports: its settings, the collaborators it calls (a user's
rebalance callbacks, the fetchers, a timer), an attempt's result and the member's rebalance counts.
"""

from __future__ import annotations

import enum
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from fetcher_manager.partition_info import PartitionTopicInfo
from rebalance.assignment import ConsumerThreadId, TopicPartition


class ConsumerRebalanceFailedError(RuntimeError):
    """Raised to the caller of the first rebalance; later failures are only logged."""


class ModeRefusedError(ConsumerRebalanceFailedError):
    """An opt-in mode cannot work in this group (docs/modes.md): the member refuses to join; the message says why
    and what to change."""


class ConsumerRebalanceListener(Protocol):
    """The 0.9 callback interface; set it before creating streams. An exception fails the attempt."""

    def before_releasing_partitions(self, partition_ownership: dict[str, set[int]]) -> None: ...

    def before_starting_fetchers(
        self, consumer_id: str, global_partition_assignment: dict[str, dict[int, ConsumerThreadId]]
    ) -> None: ...


class FetcherControl(Protocol):
    def stop_connections(self) -> None: ...

    def start_connections(self, partition_infos: list[PartitionTopicInfo]) -> None: ...

    # incremental ownership only (docs/modes.md)
    def add_partitions(self, partition_infos: list[PartitionTopicInfo]) -> None: ...

    def remove_partitions(self, tps: list[TopicPartition], timeout_s: float) -> bool: ...


class Timer(Protocol):
    def time(self) -> AbstractContextManager[object]:
        """Time the `with` block (fetcher_manager/metrics.py's timer is one)."""


@dataclass(frozen=True)
class ModeSettings:
    """The opt-in modes beyond 0.8.2 (docs/modes.md; the `zkconsumer.*` consumer keys). All off: 0.8.2."""

    incremental: bool = False  # keep what stays ours; release only what we lose, claim only what we gain
    patience_ms: int = 0  # rebalance only after the trigger stream was quiet this long
    claim_on_deletion: bool = False  # a conflicting claim waits for the owner node's deletion
    barrier: bool = False  # nobody claims until every member acknowledged the same view

    @property
    def any_attempt_mode(self) -> bool:
        """A mode that changes the attempt itself (patience only changes when attempts begin)."""
        return self.incremental or self.claim_on_deletion or self.barrier

    def names(self) -> tuple[str, ...]:
        on = (("incremental", self.incremental), ("patient", self.patience_ms > 0),
              ("claim-on-deletion", self.claim_on_deletion), ("barrier", self.barrier))
        return tuple(name for name, enabled in on if enabled)


class AttemptResult(enum.StrEnum):
    OK = "ok"
    NO_BROKERS = "no_brokers"  # nothing to own yet: counts as success, a broker watch will trigger later
    CONFLICT = "conflict"  # an owner node was held by somebody else; this attempt's claims were rolled back
    STOPPED = "stopped"  # the member is shutting down
    ERROR = "error"  # a step raised (ZooKeeper unavailable, unreadable znode data, a user callback)
    VIEW_CHANGED = "view_changed"  # opt-in modes: the group changed while this attempt waited; retry at once


@dataclass(frozen=True)
class RebalanceSettings:
    consumer_id: str
    max_retries: int = 4
    backoff_ms: int = 2000
    auto_commit: bool = True
    exclude_internal_topics: bool = True
    # Re-registration after a session expiry retries with exponential backoff up to this (listener.py, `_register`).
    max_registration_backoff_ms: int = 30000
    modes: ModeSettings = ModeSettings()


@dataclass
class RebalanceStats:
    """How often this member rebalanced and how it went (the events carry the detail)."""

    rebalances: int = 0
    attempts: int = 0
    failed_attempts: int = 0
    conflicts: int = 0
    failures: int = 0
