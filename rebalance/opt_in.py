"""`ModalAttempt`: one rebalance attempt with the opt-in modes beyond 0.8.2 on (docs/modes.md). The listener
chooses it, once, when incremental ownership, claim on deletion or the barrier is on; with every mode off it runs
`FaithfulAttempt` (rebalance/attempts.py), 0.8.2's attempt, step for step.

    read the view ──▶ (barrier: every member opted in?) ──▶ assign
        ──▶ give up what we lose: stop fetching it, commit it, release its owner nodes
            (incremental: only the lost partitions; otherwise all, as 0.8.2; claim on deletion: deletes batched)
        ──▶ (barrier: acknowledge the view, wait until every member of it has: nobody has released too late)
        ──▶ claim what we gain (claim on deletion: a conflict waits for the owner node's deletion)
        ──▶ read the gained partitions' offsets (after the claim with claim on deletion: the previous owner
            committed before it released, so the read cannot miss its last commit)
        ──▶ install, fetch what we gained (incremental: the fetchers of kept partitions never stopped)

Any wait wakes early on a newer trigger (a membership or topic change): the attempt then ends VIEW_CHANGED and the
listener starts the next one at once, from a fresh view, without the backoff.
"""

from __future__ import annotations

import logging

from fetcher_manager.partition_info import PartitionTopicInfo
from rebalance.assignment import Assignment, AssignmentContext, TopicPartition, View
from rebalance.attempts import AttemptContext, GroupMember
from rebalance.events import EventKind
from rebalance.listener_types import AttemptResult, ModeRefusedError, ModeSettings

log = logging.getLogger(__name__)

BARRIER = "barrier"  # the registration's word for the consensus barrier (Registration.modes)
# How long a fetcher may take to finish the loop that may still queue a lost partition's chunk before the member
# falls back to stopping every fetcher, as 0.8.2 does (a fetcher blocked on a full queue the app does not drain).
_FETCHER_ROUND_S = 1.0
# The barrier waits at most this many backoffs for the others' acknowledgements, then the attempt fails as a
# conflict would. A member that died without acknowledging changes the view when its session expires, sooner.
_BARRIER_BACKOFFS = 10


class ModalAttempt:
    """The attempt of the module's docstring, for `modes` (at least one of incremental, claim on deletion and
    barrier on)."""

    def __init__(self, modes: ModeSettings) -> None:
        self.modes = modes
        self.barrier_view: View | None = None  # the view this member last acknowledged at the barrier

    @property
    def closes_fetchers_after_failure(self) -> bool:
        # Incremental: what a failed attempt kept is still ours and still fetched (docs/modes.md).
        return not self.modes.incremental

    def run(self, member: AttemptContext) -> AttemptResult:
        modes = self.modes
        began = member.trigger_seq
        my_topics = member.read_own_subscription()
        if not member.store.live_brokers():
            return member.no_brokers()
        context = member.build_assignment_context()
        barrier = modes.barrier and _barrier_applies(member)
        group_assignment = member.assign(context)
        mine = group_assignment.get(member.consumer_id, {})
        owned = member.ownership.owners()
        incremental = modes.incremental and self._give_up(member, owned, mine)
        if incremental:
            gained: Assignment = {tp: t for tp, t in mine.items() if owned.get(tp) != t}
            kept = {tp: info for tp, info in _infos(member).items() if tp in mine and tp not in gained}
        else:  # 0.8.2's order: stop every fetcher, commit, release everything, claim everything
            member.close_fetchers(my_topics)
            member.before_releasing_partitions()
            self._release(member, sorted(member.ownership.owners()))
            gained, kept = dict(mine), {}
        if barrier and (result := self._await_barrier(member, context, began)) is not None:
            return result
        offsets = {} if modes.claim_on_deletion else member.fetch_offsets(gained)
        if member.shutting_down:
            return AttemptResult.STOPPED
        result = _claim(member, gained, began) if modes.claim_on_deletion else (
            AttemptResult.OK if member.claim_partitions(gained) else AttemptResult.CONFLICT)
        if result != AttemptResult.OK:
            return result
        if modes.claim_on_deletion:
            offsets = member.fetch_offsets(gained)
        infos = member.build_partition_infos(gained, offsets)
        member.ownership.install({**{tp: owned[tp] for tp in kept}, **gained}, {**kept, **infos})
        member.before_starting_fetchers(group_assignment)
        member.start_fetchers(infos, more=incremental)
        return AttemptResult.OK

    def _give_up(self, member: AttemptContext, owned: Assignment, mine: Assignment) -> bool:
        """Incremental ownership: stop fetching, commit and release only the partitions we lose (a thread change
        counts as a loss). False if the fetchers could not let go in time: the caller then does it 0.8.2's way."""
        lost = sorted(tp for tp, thread in owned.items() if mine.get(tp) != thread)
        if not lost:
            return True
        if not member.remove_fetchers(lost, _FETCHER_ROUND_S):
            log.warning("%s: a fetcher did not let go of %d lost partitions in %.1f s; stopping every fetcher",
                        member.consumer_id, len(lost), _FETCHER_ROUND_S)
            return False
        member.before_releasing_partitions(lost)
        self._release(member, lost)
        return True

    def _release(self, member: AttemptContext, partitions: list[TopicPartition]) -> None:
        member.ownership.release(partitions, batch=self.modes.claim_on_deletion)

    def _await_barrier(self, member: AttemptContext, context: AssignmentContext,
                       began: int) -> AttemptResult | None:
        """Acknowledge our view, then wait until every member of it has acknowledged the same one (so has released
        what it loses): None to go on claiming, else the attempt's result."""
        view = View.of(context)
        previous = self.barrier_view
        member.store.barrier_ack(view.id, member.consumer_id, None if previous is None else previous.id)
        self.barrier_view = view
        members = set(view.members)
        acked: set[str] = set()

        def on_acks(children: set[str]) -> None:
            acked.clear()
            acked.update(children)
            member.wake()

        stop = member.store.watch_barrier(view.id, on_acks)
        try:
            done = member.wait_until(
                lambda: members <= acked or member.trigger_seq != began or member.shutting_down,
                _BARRIER_BACKOFFS * member.settings.backoff_ms / 1000.0)
        finally:
            stop()
        member.events.emit(EventKind.BARRIER, view=view.id, view_members=len(members),
                            acked=len(members & acked))
        if member.shutting_down:
            return AttemptResult.STOPPED
        if members <= acked:
            return None
        return AttemptResult.VIEW_CHANGED if done else AttemptResult.CONFLICT


def _infos(member: AttemptContext) -> dict[TopicPartition, PartitionTopicInfo]:
    return {TopicPartition(i.topic, i.partition): i for i in member.ownership.infos()}


def _claim(member: AttemptContext, gained: Assignment, began: int) -> AttemptResult:
    """Claim on deletion: claim everything; for each conflict, wait (up to the backoff in all) for the owner node
    to go, then claim it. Rolls back this attempt's claims unless every partition ends up ours."""
    ownership = member.ownership
    deadline = member.clock() + member.settings.backoff_ms / 1000.0
    claimed: list[TopicPartition] = []
    pending = sorted(gained)
    while pending:
        conflicts = [tp for tp in pending if not ownership.claim_one(tp, str(gained[tp]))]
        claimed += [tp for tp in pending if tp not in conflicts]
        pending = conflicts
        for tp in conflicts:
            if not _owner_deleted(member, tp, began, deadline):
                ownership.roll_back(claimed)
                if member.shutting_down:
                    return AttemptResult.STOPPED
                return AttemptResult.VIEW_CHANGED if member.trigger_seq != began else AttemptResult.CONFLICT
            member.events.emit(EventKind.OWNER_GONE, topic=tp.topic, partition=tp.partition)
    return AttemptResult.OK


def _owner_deleted(member: AttemptContext, tp: TopicPartition, began: int, deadline: float) -> bool:
    """Wait, until `deadline` (the member's clock), for `tp`'s owner node to be deleted; a newer trigger or the
    member stopping ends the wait early. Whether it was deleted."""
    gone = member.sync.event()

    def on_owner(present: bool) -> None:
        if not present:
            gone.set()
            member.wake()

    stop = member.store.watch_owner(tp.topic, tp.partition, on_owner)
    try:
        member.wait_until(lambda: gone.is_set() or member.trigger_seq != began or member.shutting_down,
                          max(0.0, deadline - member.clock()))
    finally:
        stop()
    return gone.is_set()


def _barrier_applies(member: AttemptContext) -> bool:
    """Every member of the view must run the barrier (`every_member_runs`): the barrier is an optimisation, never a
    reason to stop owning, so one already in the group goes on without it, as 0.8.2."""
    return every_member_runs(member, BARRIER, "zkconsumer.consensus.barrier=true", "leave it off on this one",
                             "rebalancing without it", EventKind.BARRIER_SKIPPED)


def every_member_runs(member: GroupMember, mode: str, setting: str, instead: str, meanwhile: str,
                      skipped: EventKind) -> bool:
    """Whether every member of the view runs `mode` (its registration says so). A member that would join a group
    with members that do not refuses, in one line naming `setting` (they would never acknowledge a barrier, or
    would compute another assignment): ModeRefusedError. One already in the group when such a member joins goes on
    without the mode until that member leaves (`skipped` says so), so the group still agrees."""
    missing = sorted(m for m, r in member.last_registrations.items() if mode not in r.modes)
    if not missing:
        return True
    names = f"{', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}"
    # owning nothing yet, in its first rebalance: a newcomer, which can still stay out of the group
    if not member.ownership.owners() and member.stats.rebalances <= 1:
        raise ModeRefusedError(
            f"{member.consumer_id}: {setting} needs every member of group {member.store.group} to set it, and "
            f"{len(missing)} member(s) do not ({names}): set it on every member, or {instead}")
    log.warning("%s: %d member(s) without %s (%s); %s", member.consumer_id, len(missing), setting, names, meanwhile)
    member.events.emit(skipped, members=missing)
    return False


def view_id(context: AssignmentContext) -> str:
    """The name of `context`'s view, `View.of(context).id` (rebalance/assignment.py): the sticky assignor names its
    record by it (rebalance/sticky_agreement.py)."""
    return View.of(context).id
