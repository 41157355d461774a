"""One rebalance attempt with the opt-in modes beyond 0.8.2 on (docs/modes.md). With every mode off the listener
never calls this: its own `rebalance` is 0.8.2's attempt, step for step.

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
from typing import Any

from fetcher_manager.partition_info import PartitionTopicInfo
from rebalance.assignment import Assignment, AssignmentContext, TopicPartition, View
from rebalance.events import EventKind
from rebalance.listener_types import AttemptResult, ModeRefusedError

# Each function takes the member's ZKRebalancerListener (rebalance/listener.py) and runs its steps; it is typed Any
# because the listener imports this module, and imports point one way.
ZKRebalancerListener = Any

log = logging.getLogger(__name__)

BARRIER = "barrier"  # the registration's word for the consensus barrier (Registration.modes)
# How long a fetcher may take to finish the loop that may still queue a lost partition's chunk before the member
# falls back to stopping every fetcher, as 0.8.2 does (a fetcher blocked on a full queue the app does not drain).
_FETCHER_ROUND_S = 1.0
# The barrier waits at most this many backoffs for the others' acknowledgements, then the attempt fails as a
# conflict would. A member that died without acknowledging changes the view when its session expires, sooner.
_BARRIER_BACKOFFS = 10


def attempt(listener: ZKRebalancerListener) -> AttemptResult:
    modes = listener.settings.modes
    began = listener.trigger_seq
    my_topics = listener.read_own_subscription()
    if not listener.store.live_brokers():
        return listener.no_brokers()
    context = listener.build_assignment_context()
    barrier = modes.barrier and _barrier_applies(listener)
    group_assignment = listener.assign(context)
    mine = group_assignment.get(listener.consumer_id, {})
    owned = listener.ownership.owners()
    incremental = modes.incremental and _give_up(listener, owned, mine, my_topics)
    if incremental:
        gained: Assignment = {tp: t for tp, t in mine.items() if owned.get(tp) != t}
        kept = {tp: info for tp, info in _infos(listener).items() if tp in mine and tp not in gained}
    else:  # 0.8.2's order: stop every fetcher, commit, release everything, claim everything
        listener.close_fetchers(my_topics)
        listener.before_releasing_partitions()
        _release(listener, sorted(listener.ownership.owners()))
        gained, kept = dict(mine), {}
    if barrier and (result := _await_barrier(listener, context, began)) is not None:
        return result
    offsets = {} if modes.claim_on_deletion else listener.fetch_offsets(gained)
    if listener.shutting_down:
        return AttemptResult.STOPPED
    result = _claim(listener, gained, began) if modes.claim_on_deletion else (
        AttemptResult.OK if listener.claim_partitions(gained) else AttemptResult.CONFLICT)
    if result != AttemptResult.OK:
        return result
    if modes.claim_on_deletion:
        offsets = listener.fetch_offsets(gained)
    infos = listener.build_partition_infos(gained, offsets)
    listener.ownership.install({**{tp: owned[tp] for tp in kept}, **gained}, {**kept, **infos})
    listener.before_starting_fetchers(group_assignment)
    if incremental:
        listener.add_fetchers(infos)
    else:
        listener.start_fetchers(infos)
    return AttemptResult.OK


def _infos(listener: ZKRebalancerListener) -> dict[TopicPartition, PartitionTopicInfo]:
    return {TopicPartition(i.topic, i.partition): i for i in listener.ownership.infos()}


def _give_up(listener: ZKRebalancerListener, owned: Assignment, mine: Assignment, my_topics: set[str]) -> bool:
    """Incremental ownership: stop fetching, commit and release only the partitions we lose (a thread change
    counts as a loss). False if the fetchers could not let go in time: the caller then does it 0.8.2's way."""
    lost = sorted(tp for tp, thread in owned.items() if mine.get(tp) != thread)
    if not lost:
        return True
    if not listener.remove_fetchers(lost, _FETCHER_ROUND_S):
        log.warning("%s: a fetcher did not let go of %d lost partitions in %.1f s; stopping every fetcher",
                    listener.consumer_id, len(lost), _FETCHER_ROUND_S)
        return False
    listener.before_releasing_partitions(lost)
    _release(listener, lost)
    return True


def _release(listener: ZKRebalancerListener, partitions: list[TopicPartition]) -> None:
    listener.ownership.release(partitions, batch=listener.settings.modes.claim_on_deletion)


def _claim(listener: ZKRebalancerListener, gained: Assignment, began: int) -> AttemptResult:
    """Claim on deletion: claim everything; for each conflict, wait (up to the backoff in all) for the owner node
    to go, then claim it. Rolls back this attempt's claims unless every partition ends up ours."""
    ownership, store = listener.ownership, listener.store
    deadline = listener.clock() + listener.settings.backoff_ms / 1000.0
    claimed: list[TopicPartition] = []
    pending = sorted(gained)
    while pending:
        conflicts = [tp for tp in pending if not ownership.claim_one(tp, str(gained[tp]))]
        claimed += [tp for tp in pending if tp not in conflicts]
        pending = conflicts
        for tp in conflicts:
            gone = listener.sync.event()

            def on_owner(present: bool, gone=gone) -> None:
                if not present:
                    gone.set()
                    listener.wake()

            stop = store.watch_owner(tp.topic, tp.partition, on_owner)
            try:
                listener.wait_until(lambda gone=gone: gone.is_set() or listener.trigger_seq != began
                                    or listener.shutting_down, max(0.0, deadline - listener.clock()))
            finally:
                stop()
            if not gone.is_set():
                ownership.roll_back(claimed)
                if listener.shutting_down:
                    return AttemptResult.STOPPED
                return AttemptResult.VIEW_CHANGED if listener.trigger_seq != began else AttemptResult.CONFLICT
            listener.events.emit(EventKind.OWNER_GONE, topic=tp.topic, partition=tp.partition)
    return AttemptResult.OK


def _barrier_applies(listener: ZKRebalancerListener) -> bool:
    """Every member of the view must run the barrier (`every_member_runs`): the barrier is an optimisation, never a
    reason to stop owning, so one already in the group goes on without it, as 0.8.2."""
    return every_member_runs(listener, BARRIER, "zkconsumer.consensus.barrier=true", "leave it off on this one",
                             "rebalancing without it", EventKind.BARRIER_SKIPPED)


def every_member_runs(listener: ZKRebalancerListener, mode: str, setting: str, instead: str, meanwhile: str,
                      skipped: EventKind) -> bool:
    """Whether every member of the view runs `mode` (its registration says so). A member that would join a group
    with members that do not refuses, in one line naming `setting` (they would never acknowledge a barrier, or
    would compute another assignment): ModeRefusedError. One already in the group when such a member joins goes on
    without the mode until that member leaves (`skipped` says so), so the group still agrees."""
    missing = sorted(m for m, r in listener.last_registrations.items() if mode not in r.modes)
    if not missing:
        return True
    names = f"{', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}"
    # owning nothing yet, in its first rebalance: a newcomer, which can still stay out of the group
    if not listener.ownership.owners() and listener.stats.rebalances <= 1:
        raise ModeRefusedError(
            f"{listener.consumer_id}: {setting} needs every member of group {listener.store.group} to set it, and "
            f"{len(missing)} member(s) do not ({names}): set it on every member, or {instead}")
    log.warning("%s: %d member(s) without %s (%s); %s", listener.consumer_id, len(missing), setting, names, meanwhile)
    listener.events.emit(skipped, members=missing)
    return False


def view_generation(context: AssignmentContext) -> str:
    """The name of `context`'s view, `View.of(context).id` (rebalance/assignment.py): the sticky assignor names its
    record by it (rebalance/sticky_agreement.py)."""
    return View.of(context).id


def _await_barrier(listener: ZKRebalancerListener, context: AssignmentContext, began: int) -> AttemptResult | None:
    """Acknowledge our view, then wait until every member of it has acknowledged the same one (so has released
    what it loses): None to go on claiming, else the attempt's result."""
    view = View.of(context)
    previous = listener.barrier_view
    listener.store.barrier_ack(view.id, listener.consumer_id, None if previous is None else previous.id)
    listener.barrier_view = view
    members = set(view.members)
    acked: set[str] = set()

    def on_acks(children: set[str]) -> None:
        acked.clear()
        acked.update(children)
        listener.wake()

    stop = listener.store.watch_barrier(view.id, on_acks)
    try:
        done = listener.wait_until(lambda: members <= acked or listener.trigger_seq != began or listener.shutting_down,
                                   _BARRIER_BACKOFFS * listener.settings.backoff_ms / 1000.0)
    finally:
        stop()
    listener.events.emit(EventKind.BARRIER, view=view.id, view_members=len(members),
                         acked=len(members & acked))
    if listener.shutting_down:
        return AttemptResult.STOPPED
    if members <= acked:
        return None
    return AttemptResult.VIEW_CHANGED if done else AttemptResult.CONFLICT
