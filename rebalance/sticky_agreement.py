"""How members of a ZooKeeper-balanced group agree on a sticky assignment (`partition.assignment.strategy=sticky`,
docs/modes.md), which each of them still computes alone.

The problem. A sticky assignment is a function of the view (members, subscriptions, partitions: what range reads)
*and* of who owned what before. The owner nodes change while members release and claim, so two members that read
them at different moments compute different assignments, and keep conflicting.

The agreed snapshot: one record per view. The view is named by its hash (`opt_in.view_id`, the name the
consensus barrier acknowledges). Under `/consumers/<g>/zkconsumer-assignment/<view>` there is at most one record,
the whole group's assignment for that view, and it is never rewritten: a member computes one and *creates* it; a
create that finds the node there (another member was first) reads that one instead.
Every member of a view therefore installs the content of the one node, whoever wrote it and from whatever
previous assignment. The previous assignment a writer starts from (its own last record, or the directory's hint of
the latest record for a member that has none) only decides how few partitions move, never whether members agree;
in a settled group every member starts from the same record and computes the same content anyway.

Per view, the record goes through these states (M is a member whose view is V):

    absent ──(M: compute from its previous record; create ok)──────────────────────▶ written (by M's session)
    written ──(M: create → NodeExists: another member was first; read)──▶ written  (M installs theirs)
    written ──(M, again on the view it installed last: read)──▶ written  (nothing can change it)
    written ──(the writer's session ends: the ephemeral node goes)──▶ absent

Why it is race-free:

1. Content never changes while the node exists: it is only created, never set.
2. The node disappears only when its writer's session ends, and a member writes only the record of a view that
   contains itself. A client has one session at a time, so while V is the group's view and its record exists, the
   writer's registration in V and the record belong to the same session (a registration of an earlier session was
   gone before the record was written; one of a later session was written after the record had gone). So the
   record of V disappears only when V stops being the group's view: the writer's registration goes at the same
   moment, which fires every member's watch of the ids directory.
3. After the last change to the view every member gets a trigger and runs an attempt that reads the view afresh,
   then installs the record of that view: the one its create made, or the one its create found (read then).
   By 2 the record, once there, stays for as long as the view does, and by 1 its
   content is fixed: every member's last attempt installs the same assignment. Before that, a member acting on a
   stale view may install another view's record, as a 0.8.2 member acts on a stale view; its claims conflict and
   the trigger it has pending sets it right.

Nothing is cached across attempts: a view can come back (a member leaves and returns) with a new record written
in between by members that saw the change, so each attempt creates or reads the record again.

Create first. Every member of a new view creates its record at once instead of reading first: the first create
makes it, every other one finds it there and reads it. So each member spends exactly two requests on a new view (a
create, then the read, or for the one whose create made it, the hint's set), however their attempts interleave. Read
first, it was one request for a member that came after the record and three for one that came before it (a read
finding none, a create finding it, the read): the members of a join into 16, all told of it at the same moment,
made 2 to 13 creates (1 to 12 losers, the join's cost 188 to 210 requests) depending only on timing. A member retrying
the view it installed last reads first (the record is there unless its writer left): one request.

A view that comes back while the writer of its old record is still alive gets that old record again (the member
that returned gets its old partitions back): agreed, balanced, but not necessarily the fewest moves from the
assignment in between. Records are ephemeral, so they go with their writers; a long-lived member keeps the records
of every view it wrote first until it leaves.

Only members that all run the sticky assignor can agree this way: a sticky member's registration says so
(`"zkconsumer.modes":["sticky"]`). A new member refuses to join a group with a member that does not; one already in
the group when such a member joins uses range (what a faithful member computes on the same view) until it leaves.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from rebalance.assignment import Assignment, AssignmentContext, ConsumerThreadId, TopicPartition
from rebalance.assignors import PartitionAssignor, RangeAssignor
from rebalance.attempts import GroupMember
from rebalance.events import EventKind
from rebalance.opt_in import every_member_runs, view_id
from rebalance.sticky import moved_partitions

log = logging.getLogger(__name__)

STICKY = "sticky"  # the registration's word for the sticky assignor (Registration.modes)

Owners = dict[TopicPartition, ConsumerThreadId]


class StickyMember(GroupMember, Protocol):
    """What `assign` reads and writes of a member (`ZKRebalancerListener` is one): what `every_member_runs` reads,
    its assignor, and the record it installed last (kept across attempts, written only here)."""

    @property
    def assignor(self) -> PartitionAssignor: ...

    sticky_previous: Owners | None  # the record of the view installed last: the previous assignment of the next
    sticky_view: str | None  # the view of that record

class StaleViewError(RuntimeError):
    """The view this attempt read is already gone (the record vanished, or the member is not in it): the attempt
    fails and the next one reads the new view."""


def assign(listener: StickyMember, context: AssignmentContext, *,
           shared: dict[str, Any] | None = None) -> dict[str, Assignment]:
    """The group's assignment for `context`'s view, the same on every member of the view (the module's docstring).

    `shared`: a dict from a caller whose members share one context's view (the simulation's identical-view
    shortcut, zkconsumer/lab/sim/views.py), in which what depends on the view alone (its name, the check that a
    record fits it, the assignment computed from one previous assignment, the group's assignment from one record)
    is computed once instead of once per member."""
    if not _sticky_applies(listener):
        return RangeAssignor().assign_group(context)
    memo: dict[str, Any] = {} if shared is None else shared
    if "view" not in memo:
        memo.update(view=view_id(context), consumers=frozenset(context.consumers), fits=_fit(context))
    if listener.consumer_id not in memo["consumers"]:
        raise StaleViewError(f"{listener.consumer_id} is not in the view it read; its registration went meanwhile")
    store, view = listener.store, memo["view"]
    previous: Owners | None = listener.sticky_previous
    created = False
    # A retry of the view this member installed last reads its record (it is there unless the view changed); a new
    # view is written first and read only if another member was first (the module's docstring, "Create first").
    record = store.read_assignment(view) if listener.sticky_view == view else None
    if record is None:
        base = previous if previous is not None else (store.latest_assignment() or {})
        if memo.get("base") != base or "computed" not in memo:  # members of a settled group share their base
            memo.update(base=dict(base), computed=_flat(listener.assignor.assign_group_from(context, base)))
        computed = memo["computed"]
        created = store.create_assignment(view, computed)
        record = computed if created else store.read_assignment(view)
        if record is None:
            raise StaleViewError(f"the sticky assignment of view {view} was deleted as it was read: its writer left")
    _check_fits(view, record, memo["fits"])
    listener.sticky_previous, listener.sticky_view = dict(record), view
    listener.events.emit(EventKind.STICKY, view=view, created=created,
                         moved=None if previous is None else moved_partitions(previous, record))
    if memo.get("record") != record:
        result: dict[str, Assignment] = {consumer: {} for consumer in context.consumers}
        for tp in sorted(record):
            thread = record[tp]
            result[thread.consumer][tp] = thread
        memo.update(record=dict(record), result=result)
    agreed: dict[str, Assignment] = memo["result"]
    return agreed


def _flat(group_assignment: Mapping[str, Assignment]) -> Owners:
    return {tp: thread for assignment in group_assignment.values() for tp, thread in assignment.items()}


def _fit(context: AssignmentContext) -> tuple[set[TopicPartition], dict[str, set[ConsumerThreadId]]]:
    """What a record of `context`'s view must assign: its partitions, and to which threads each topic's may go."""
    threads = {topic: set(ths) for topic, ths in context.consumers_for_topic.items()}
    expected = {TopicPartition(t, p) for t, ths in threads.items() if ths for p in context.partitions_for_topic[t]}
    return expected, threads


def _check_fits(view: str, record: Mapping[TopicPartition, ConsumerThreadId],
                fit: tuple[set[TopicPartition], dict[str, set[ConsumerThreadId]]]) -> None:
    """The record of a view assigns exactly the view's partitions (`_fit`), each to a thread subscribed to its
    topic; else its node was written by something else than a sticky member (the attempt fails naming it)."""
    expected, threads = fit
    misfits = sorted(tp for tp, thread in record.items() if thread not in threads.get(tp.topic, ()))
    if set(record) != expected or misfits:
        raise ValueError(f"the sticky assignment record of view {view} does not fit the view (partitions missing "
                         f"or extra, or owned by threads not subscribed: {misfits[:3]}); it was not written by a "
                         "sticky member of this group")


def _sticky_applies(listener: StickyMember) -> bool:
    """Every member of the view must run the sticky assignor (`opt_in.every_member_runs`): members that do not
    compute range, so a sticky one already in the group computes range like them until they leave."""
    return every_member_runs(listener, STICKY, "partition.assignment.strategy=sticky", "use range on this one",
                             "assigning with range", EventKind.STICKY_SKIPPED)
