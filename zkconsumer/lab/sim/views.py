"""The identical-view shortcut: compute once what members with provably identical views would each compute.

In one rebalance attempt a member lists the ids dir, lists /brokers/topics, reads **every** member's registration
(M reads: the M² of the herd over the group) and runs the assignor over the result. At N = 10,000 executing
those 10⁸ reads and 10⁴ assignments is out of reach, and it is also pointless: members that read the same
registrations compute the same thing.

What replaces the registration reads of one attempt (`MemberShortcut.build_context`, installed as the
listener's `build_assignment_context`; the ids and topics listings before and the partition-map read after stay
real requests):

1. The M reads are one pipelined batch, as the listener sends them (`ZkClient.get_many`): timed exactly as the
   real batch is (`SimZkClient.batch`: the same draw, the same queues), and served at one instant.
2. At that instant, if the group's view is still the one this member's listing saw (`SimServer.view_epoch`),
   every read returns what that view holds: the M `getData` are *counted* (server and client counters), not
   sent. Otherwise they are made for real, at that instant, exactly as full execution makes them.
3. The registrations of one epoch are decoded once (`SharedView`), the assignment context of one (view,
   partitions) is built once, and `assign_group` runs once per context: an assignor's group result depends only
   on the group's threads and partitions, which are the same for every member of the view.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rebalance import sticky_agreement
from rebalance.assignment import Assignment, AssignmentContext
from rebalance.subscription import Registration
from zkconsumer.zookeeper import codecs, layout

if TYPE_CHECKING:
    from rebalance.listener import ZKRebalancerListener
    from zkconsumer.lab.sim.zk_env import SimServer, SimZkClient


@dataclass
class SharedView:
    """What every member reading the registrations at one view epoch gets (for one topic list)."""

    epoch: int
    members: tuple[str, ...]
    subscriptions: dict[str, dict[str, int]]
    # the decoded registrations (the listener's `last_registrations`: whether every member runs a mode)
    registrations: dict[str, Registration] = dataclasses.field(default_factory=dict)
    topics: set[str] = dataclasses.field(default_factory=set)
    error_at: int | None = None  # index of the first registration whose read would fail
    fail: Callable[[], object] | None = None  # raises that read's error (a fresh exception for each member)
    contexts: dict[tuple, tuple[AssignmentContext, dict[str, Assignment] | None]] = dataclasses.field(
        default_factory=dict)
    # sticky_agreement.assign's work that depends only on the context (its `shared=`), one per context key
    sticky: dict[tuple, dict] = dataclasses.field(default_factory=dict)

    @functools.cached_property
    def member_set(self) -> frozenset[str]:
        return frozenset(self.members)


@dataclass
class ShortcutStats:
    batches: int = 0  # attempts whose registration reads were counted as a batch
    counted_reads: int = 0  # registration reads counted, not executed
    executed_reads: int = 0  # registration reads sent to the server (own ones, and all of them without a batch)
    views: int = 0  # distinct views decoded
    assignments: int = 0  # assign_group runs


class ViewCache:
    def __init__(self, group: str, exclude_internal_topics: bool) -> None:
        self.group = group
        self.exclude_internal_topics = exclude_internal_topics
        self.stats = ShortcutStats()
        self._views: dict[tuple[int, tuple[str, ...]], SharedView] = {}
        self.partition_maps: dict[tuple[str, int], list[int]] = {}

    def view(self, server: SimServer, members: list[str], all_topics: list[str]) -> SharedView:
        """The registrations as they are now (the epoch of `members`), decoded once per epoch and topic list."""
        key = (server.view_epoch, tuple(all_topics))
        view = self._views.get(key)
        if view is None:
            if len(self._views) > 8:  # old epochs are never read again once the group moved on
                self._views.clear()
            view = self._views[key] = self._decode(server, members, all_topics)
            self.stats.views += 1
        return view

    def _decode(self, server: SimServer, members: list[str], all_topics: list[str]) -> SharedView:
        view = SharedView(server.view_epoch, tuple(members), {})
        for index, member_id in enumerate(members):
            path = layout.registration_path(self.group, member_id)
            read = functools.partial(_subscription, path, server.peek(path), all_topics, self.exclude_internal_topics)
            try:
                view.subscriptions[member_id] = read()
                view.registrations[member_id] = codecs.decode_registration(path, server.peek(path))
            except Exception:  # the real read fails here too (unreadable data): the batch stops at this index
                view.error_at, view.fail = index, read
                break
        view.topics = {t for subscription in view.subscriptions.values() for t in subscription}
        return view


def _subscription(path: str, raw: bytes | None, all_topics: list[str], exclude: bool) -> dict[str, int]:
    """What `store.registration(m).topic_streams(...)` makes of a registration node's data."""
    return codecs.decode_registration(path, raw).topic_streams(all_topics, exclude)


class MemberShortcut:
    """One member's `build_assignment_context` and `assign` under the shortcut (installed on its listener): the
    same requests, in the same order, at the same times, with the same results as the listener's own."""

    def __init__(self, cache: ViewCache, server: SimServer, client: SimZkClient,
                 listener: ZKRebalancerListener) -> None:
        self.cache = cache
        self.server = server
        self.client = client
        self.listener = listener
        self.consumer_id = listener.consumer_id
        self._shared: dict[int, tuple[SharedView, tuple]] = {}  # id(context) -> where its assignment is kept
        # Incremental ownership reads only the registrations of members it has not seen (the listener's
        # `_read_registrations`): the members of its last view, which the registrations it keeps are of.
        self.incremental = listener.settings.modes.incremental
        self._seen: frozenset[str] | None = None  # the members of its last view read, None before the first
        self._kept: Mapping[str, Registration] = {}  # their registrations (a shared view's, read-only)

    def build_context(self) -> AssignmentContext:
        """Stands in for `ZKRebalancerListener.build_assignment_context`."""
        store = self.listener.store
        members = store.member_ids()
        all_topics = store.all_topics()
        unseen = self._unseen(members)
        found = self.client.batch(len(unseen), functools.partial(self._registrations, members, unseen, all_topics))
        if isinstance(found, SharedView):
            self.listener.last_registrations = found.registrations
            self._seen, self._kept = found.member_set, found.registrations
            return self._member_context(found, self._partitions(found.topics))
        self.listener.last_registrations = found
        self._seen, self._kept = frozenset(found), found
        subscriptions = {m: r.topic_streams(all_topics, self.cache.exclude_internal_topics) for m, r in found.items()}
        topics = {t for subscription in subscriptions.values() for t in subscription}
        return AssignmentContext.build(self.consumer_id, subscriptions, store.partitions_for_topics(topics))

    def _unseen(self, members: list[str]) -> list[str]:
        """The registrations this attempt reads: all of them, or with incremental ownership those of members that
        were not in its last view (a member re-registers under a new id only by leaving first, and the simulated
        changes never rewrite a registration with another subscription, so the kept ones are current)."""
        if not self.incremental or self._seen is None:
            return members
        return [m for m in members if m not in self._seen]

    def _registrations(self, members: list[str], unseen: list[str],
                       all_topics: list[str]) -> SharedView | dict[str, Registration]:
        """At the instant the server has served the member's batch of registration reads: the shared view if the
        group's view is still the one its listing saw, else the reads made for real (`ZkGroupStore.registrations`,
        on the scheduler's thread: untimed, the batch's time is already spent), the kept ones beside them."""
        cache, client = self.cache, self.client
        if members and client.ids_epoch_seen == self.server.view_epoch:
            view = cache.view(self.server, members, all_topics)
            self._count_reads(len(unseen))  # all are sent; the first bad one fails the attempt
            cache.stats.batches += 1
            if view.fail is not None and (len(unseen) == len(members) or view.members[view.error_at] in unseen):
                view.fail()
            return view
        fresh = self.listener.store.registrations(unseen)
        return {m: fresh[m] if m in fresh else self._kept[m] for m in members}

    def _count_reads(self, n: int) -> None:
        """The reads the batch stands for, on the server's and the client's counters (what the wire would show)."""
        self.cache.stats.counted_reads += n
        if n:
            self.server.count(self.client.session_id, "get_data", n)  # type: ignore[arg-type]
            self.client._count("get_data", n)

    def _partitions(self, topics: set[str]) -> dict[str, list[int]]:
        """`ZkGroupStore.partitions_for_topics` (the same requests), decoding each version of a topic's node once:
        10,000 members decoding a 10,000-partition map each would cost more than the rest of the simulation."""
        cache = self.cache
        result = {}
        for topic in topics:
            path = layout.topic_path(topic)
            found = self.client.get(path)
            if found is None:
                result[topic] = []
                continue
            key = (path, found[1].mzxid)
            decoded = cache.partition_maps.get(key)
            if decoded is None:
                decoded = cache.partition_maps[key] = codecs.decode_topic_partitions(path, found[0])
            result[topic] = decoded
        return result

    def _member_context(self, view: SharedView, partitions: Mapping[str, list[int]]) -> AssignmentContext:
        key = tuple(sorted((t, id(p)) for t, p in partitions.items()))  # decoded maps are shared: one id per version
        entry = view.contexts.get(key)
        if entry is None:
            base = AssignmentContext.build("", view.subscriptions, partitions)
            entry = view.contexts[key] = (base, None)
        base = entry[0]
        me = self.consumer_id
        own = view.subscriptions.get(me, {})
        mine = AssignmentContext.build(me, {me: own}, {}).my_topic_thread_ids
        context = dataclasses.replace(base, consumer_id=me, my_topic_thread_ids=mine)
        self._shared[id(context)] = (view, key)
        return context

    def assign(self, context: AssignmentContext) -> dict[str, Assignment]:
        """Stands in for `ZKRebalancerListener.assign`: one `assign_group` per shared context. The result is shared
        read-only (the listener only reads it: its own part is copied by `Ownership.install`)."""
        shared = self._shared.pop(id(context), None)
        if self.listener.assignor.uses_previous:  # sticky: the view's agreed record, its requests made for real
            reuse = None if shared is None else shared[0].sticky.setdefault(shared[1], {})
            return sticky_agreement.assign(self.listener, context, shared=reuse)
        if shared is None:
            return self.listener.assignor.assign_group(context)
        view, key = shared
        base, result = view.contexts[key]
        if result is None:
            result = self.listener.assignor.assign_group(context)
            view.contexts[key] = (base, result)
            self.cache.stats.assignments += 1
        return result
