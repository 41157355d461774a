"""What the rebalance listener needs from group storage, as a protocol.

The listener depends on this protocol, not on ZooKeeper: `zkconsumer.zookeeper.group.ZkGroupStore`
implements it over the one ZooKeeper module, and imports keep pointing one way
(connector -> rebalance -> fetcher_manager).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from fetcher_manager.broker import Broker
from rebalance.assignment import ConsumerThreadId, TopicPartition
from rebalance.subscription import Registration

Owners = dict[TopicPartition, ConsumerThreadId]


@dataclass(frozen=True)
class Claim:
    """The outcome of creating an owner node: `ok`, or a conflict with `owner` (the current owner's thread id,
    None when the node vanished before it could be read)."""

    ok: bool
    owner: str | None = None

    def __bool__(self) -> bool:
        return self.ok


class GroupStore(Protocol):
    group: str

    def registration(self, consumer_id: str) -> Registration:
        """A member's registration; raises ValueError (naming path and content) if missing or unreadable."""

    def registrations(self, consumer_ids: list[str]) -> dict[str, Registration]:
        """`registration` of each, in one batch where the store can (the same reads, in the same order)."""

    def member_ids(self) -> list[str]:
        """Children of the group's ids dir (unsorted)."""

    def all_topics(self) -> list[str]:
        """Children of /brokers/topics."""

    def live_brokers(self) -> list[Broker]:
        """Every registered broker; raises ValueError for unreadable registrations."""

    def partitions_for_topics(self, topics: Iterable[str]) -> dict[str, list[int]]:
        """topic -> ascending partition ids; a missing topic node gives an empty list."""

    def release(self, topic: str, partition: int) -> None:
        """Delete the owner node; a missing node is fine."""

    def release_many(self, partitions: list[TopicPartition]) -> None:
        """`release` of each, as one batch where the store can (opt-in modes, docs/modes.md)."""

    def watch_owner(self, topic: str, partition: int, callback: Callable[[bool], None]) -> Callable[[], None]:
        """Call `callback(node present)` now and on each change of the owner node; returns the watch's stop."""

    def barrier_ack(self, view: str, consumer_id: str, previous: str | None) -> None:
        """Acknowledge the view named `view` (a `View`'s id; and withdraw the ack of `previous`): the consensus
        barrier."""

    def watch_barrier(self, view: str, callback: Callable[[set[str]], None]) -> Callable[[], None]:
        """Call `callback(acknowledging members)` now and on each change; returns the watch's stop."""

    def read_assignment(self, view: str) -> Owners | None:
        """The sticky assignor's record of view `view` (rebalance/sticky_agreement.py), None if there is none;
        raises ValueError (naming path and content) if it is unreadable."""

    def create_assignment(self, view: str, owners: Owners) -> bool:
        """Create the record of `view` (ephemeral: it goes with this member's session) unless one exists: False if
        one did. On success it is also kept as the latest record (`latest_assignment`)."""

    def latest_assignment(self) -> Owners | None:
        """The latest record created, of whatever view: only a hint for a member that has none of its own (None if
        there is none or it is unreadable)."""

    def claim(self, topic: str, partition: int, thread_id: str) -> Claim:
        """Create the ephemeral owner node; a falsy `Claim` naming the current owner on a conflict."""

    def read_offset(self, topic: str, partition: int) -> int:
        """The stored next offset, or -1 if none; raises ValueError for a non-numeric node."""

    def write_offset(self, topic: str, partition: int, offset: int) -> None: ...

    def watch_brokers(self, callback: Callable[[], None]) -> None:
        """Call `callback` on every later change of /brokers/ids (installed once, permanent)."""
