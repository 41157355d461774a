"""One rebalance attempt, as a strategy the listener chooses once, when it is built, from its settings' modes.

kafka-python's `ConsumerCoordinator` chooses eager or cooperative rebalancing the same way, once, from its
assignors' `RebalanceProtocol`. Here there are two attempts:

- `FaithfulAttempt`: Kafka 0.8.2's `ZKRebalancerListener.rebalance` (ZookeeperConsumerConnector.scala), step for
  step. A member with every mode off runs it and nothing else.
- `ModalAttempt` (rebalance/opt_in.py): the attempt with incremental ownership, claim on deletion or the consensus
  barrier on (docs/modes.md).

An attempt sees the member only through an `AttemptContext`: the listener's steps, the few collaborators a step
cannot hide (the store, the ownership, the events) and what the opt-in modes' waits need. The listener keeps the
loop around attempts (`synced_rebalance`), the retries and their backoff, and the triggers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from fetcher_manager.partition_info import PartitionTopicInfo
from rebalance.assignment import Assignment, AssignmentContext, TopicPartition
from rebalance.events import EventBus
from rebalance.listener_types import AttemptResult, RebalanceSettings, RebalanceStats
from rebalance.ownership import Ownership
from rebalance.store import GroupStore
from rebalance.subscription import Registration
from rebalance.sync import SyncPrimitives


class GroupMember(Protocol):
    """What `opt_in.every_member_runs` reads of a member: the registrations of the view it read, whether it owns
    anything yet, and what it names and reports. An `AttemptContext` is one; so is the sticky assignor's member
    (rebalance/sticky_agreement.py)."""

    @property
    def consumer_id(self) -> str: ...

    @property
    def store(self) -> GroupStore: ...

    @property
    def ownership(self) -> Ownership: ...

    @property
    def events(self) -> EventBus: ...

    @property
    def stats(self) -> RebalanceStats: ...

    @property
    def last_registrations(self) -> Mapping[str, Registration]: ...


@runtime_checkable
class AttemptContext(GroupMember, Protocol):
    """What an attempt may use of its member (`ZKRebalancerListener` is one): a `GroupMember`, and more. Everything
    is read-only here: an attempt changes the member only through the steps and the ownership."""

    @property
    def settings(self) -> RebalanceSettings: ...

    # --- the steps of 0.8.2's `rebalance`, in its order -----------------------------------------------

    def read_own_subscription(self) -> set[str]: ...

    def no_brokers(self) -> AttemptResult: ...

    def close_fetchers(self, topics: set[str]) -> None: ...

    def before_releasing_partitions(self, partitions: list[TopicPartition] | None = None) -> None: ...

    def release_partitions(self) -> None: ...

    def build_assignment_context(self) -> AssignmentContext: ...

    def assign(self, context: AssignmentContext) -> dict[str, Assignment]: ...

    def fetch_offsets(self, mine: Assignment) -> dict[TopicPartition, int]: ...

    @property
    def shutting_down(self) -> bool: ...

    def build_partition_infos(
        self, mine: Assignment, offsets: dict[TopicPartition, int]
    ) -> dict[TopicPartition, PartitionTopicInfo]: ...

    def claim_partitions(self, mine: Assignment) -> bool: ...

    def before_starting_fetchers(self, group_assignment: dict[str, Assignment]) -> None: ...

    def start_fetchers(self, infos: dict[TopicPartition, PartitionTopicInfo], *, more: bool = False) -> None: ...

    # --- what only the opt-in modes use (docs/modes.md) --------------------------------------------------

    def remove_fetchers(self, partitions: list[TopicPartition], timeout_s: float) -> bool: ...

    @property
    def trigger_seq(self) -> int: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def sync(self) -> SyncPrimitives: ...

    def wake(self) -> None: ...

    def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool: ...


class Attempt(Protocol):
    """One attempt of a rebalance; the listener runs it up to `rebalance.max.retries` times."""

    @property
    def closes_fetchers_after_failure(self) -> bool:
        """Whether the listener stops every fetcher after a failed attempt, before its backoff, as 0.8.2's
        `syncedRebalance` does."""

    def run(self, member: AttemptContext) -> AttemptResult: ...


class FaithfulAttempt:
    """Kafka 0.8.2's attempt (`ZKRebalancerListener.rebalance`): stop fetching and release everything, read the
    view, assign, read offsets, claim everything, start fetching."""

    closes_fetchers_after_failure = True

    def run(self, member: AttemptContext) -> AttemptResult:
        my_topics = member.read_own_subscription()
        if not member.store.live_brokers():
            return member.no_brokers()
        # 0.8.2 stops fetching before it releases (ZookeeperConsumerConnector.scala, `rebalance`): a released
        # partition may be another member's before this attempt ends, and fetching on would deliver it twice.
        member.close_fetchers(my_topics)
        member.before_releasing_partitions()
        member.release_partitions()
        context = member.build_assignment_context()
        group_assignment = member.assign(context)
        mine = group_assignment.get(member.consumer_id, {})
        offsets = member.fetch_offsets(mine)
        if member.shutting_down:
            return AttemptResult.STOPPED
        infos = member.build_partition_infos(mine, offsets)
        # 0.8.2 writes the owner nodes last: a claim that succeeds is what makes the attempt a success.
        if not member.claim_partitions(mine):
            return AttemptResult.CONFLICT
        member.ownership.install(mine, infos)
        member.before_starting_fetchers(group_assignment)
        member.start_fetchers(infos)
        return AttemptResult.OK
