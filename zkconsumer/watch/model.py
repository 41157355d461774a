"""A consumer group as ZooKeeper shows it: read it (`read_group`), infer member states (`build_view`), print it
(`render_text`).

Everything here is a read: `read_group` makes only get/get_children calls and installs no watch. The znode
formats are Kafka 0.8.2's (docs/watch.md, `zkconsumer/zookeeper/codecs.py`), so a group of Scala consumers
reads the same. How states are inferred from ZooKeeper alone is documented in docs/watch.md.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import click

from fetcher_manager.topic_partition import TopicPartition
from rebalance.subscription import Registration
from zkconsumer.errors import InputError
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.client import ZkClient

log = logging.getLogger(__name__)

REGISTERING = "registering"
REBALANCING = "rebalancing"
OWNING = "owning"
IDLE = "idle"
FAILED = "failed"

# Kafka 0.8.2 defaults: rebalance.max.retries=4 x rebalance.backoff.ms=2000 is 8 s of retrying before a member
# gives up (ZookeeperConsumerConnector.syncedRebalance); 20 s leaves room for slow ZooKeeper round trips.
DEFAULT_FAILED_AFTER_MS = 20_000


@dataclass(frozen=True)
class MemberRecord:
    """`/consumers/<g>/ids/<id>`: the decoded registration (None if unreadable) and the node's creation time."""

    consumer_id: str
    registration: Registration | None
    registered_ms: int
    error: str | None = None


@dataclass(frozen=True)
class OwnerRecord:
    """`/consumers/<g>/owners/<t>/<p>`: the owning thread id (`<consumer id>-<stream>`) and the claim time."""

    thread_id: str
    claimed_ms: int


@dataclass
class GroupData:
    """The raw group, as read. `offsets` maps to None when the node holds something that is not an offset;
    `log_ends` is None when no broker answered."""

    group: str
    members: dict[str, MemberRecord] = field(default_factory=dict)
    all_topics: tuple[str, ...] = ()
    topic_partitions: dict[str, tuple[int, ...]] = field(default_factory=dict)
    owners: dict[TopicPartition, OwnerRecord] = field(default_factory=dict)
    offsets: dict[TopicPartition, int | None] = field(default_factory=dict)
    log_ends: dict[TopicPartition, int] | None = None
    last_activity_ms: int = 0
    # The newest owner-node ctime ever seen: the live view keeps it after the node is released.
    last_claim_ms: int = 0


@dataclass(frozen=True)
class MemberView:
    consumer_id: str
    subscription: str
    state: str
    owned: tuple[TopicPartition, ...]
    attempt: int | None = None
    reason: str = ""

    @property
    def state_label(self) -> str:
        if self.state == OWNING:
            return f"owning {len(self.owned)}"
        if self.state == REBALANCING and self.attempt:
            return f"rebalancing (attempt {self.attempt})"
        if self.state == FAILED and self.reason:
            return f"failed: {self.reason}"
        return self.state


@dataclass(frozen=True)
class PartitionView:
    topic: str
    partition: int
    owner: str | None
    owner_registered: bool
    offset: int | None
    offset_unreadable: bool
    log_end: int | None

    @property
    def key(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.offset)


@dataclass(frozen=True)
class GroupView:
    group: str
    members: tuple[MemberView, ...]
    partitions: tuple[PartitionView, ...]
    brokers_reachable: bool

    @property
    def owned_count(self) -> int:
        return sum(1 for p in self.partitions if p.owner is not None)


def owner_consumer(thread_id: str) -> str | None:
    """The consumer id of a thread id `<consumer id>-<stream>` (ConsumerThreadId.toString in Kafka 0.8.2)."""
    consumer, dash, stream = thread_id.rpartition("-")
    return consumer if dash and stream.isdigit() else None


def _ctime(stat: object) -> int:
    return int(getattr(stat, "ctime", 0) or 0)


def read_member(zk: ZkClient, group: str, consumer_id: str) -> MemberRecord | None:
    """One registration; None if it vanished. Unreadable JSON is kept, with the error, so the view can show it."""
    path = layout.registration_path(group, consumer_id)
    found = zk.get(path)
    if found is None:
        return None
    data, stat = found
    try:
        return MemberRecord(consumer_id, codecs.decode_registration(path, data), _ctime(stat))
    except codecs.ZnodeDataError as exc:
        return MemberRecord(consumer_id, None, _ctime(stat), str(exc))


def read_owner(zk: ZkClient, group: str, tp: TopicPartition) -> OwnerRecord | None:
    found = zk.get(layout.owner_path(group, tp.topic, tp.partition))
    if found is None:
        return None
    return OwnerRecord((found[0] or b"").decode("utf-8", "replace"), _ctime(found[1]))


def decode_offset(path: str, data: bytes | None) -> int | None:
    try:
        return codecs.decode_offset(path, data)
    except codecs.ZnodeDataError as exc:
        log.warning("%s", exc)
        return None


def read_topic_partitions(zk: ZkClient, topic: str) -> tuple[int, ...] | None:
    path = layout.topic_path(topic)
    found = zk.get(path)
    if found is None:
        return None
    try:
        return tuple(codecs.decode_topic_partitions(path, found[0]))
    except codecs.ZnodeDataError as exc:
        log.warning("%s", exc)
        return None


def subscribed_topics(data: GroupData) -> set[str]:
    """Every topic a registered member asks for (a wildcard evaluated against /brokers/topics, excluding
    internal topics as Kafka's default `exclude.internal.topics=true` does)."""
    topics: set[str] = set()
    for member in data.members.values():
        if member.registration is not None:
            topics |= set(member.registration.topic_streams(data.all_topics))
    return topics


def has_wildcard(data: GroupData) -> bool:
    return any(m.registration is not None and m.registration.is_wildcard for m in data.members.values())


def shown_partitions(data: GroupData) -> list[TopicPartition]:
    """Partitions of subscribed topics, plus any partition the group has an owner or offset node for."""
    found = {TopicPartition(t, p) for t in subscribed_topics(data) for p in data.topic_partitions.get(t, ())}
    found |= set(data.owners) | set(data.offsets)
    return sorted(found)


def read_group(zk: ZkClient, group: str) -> GroupData:
    """The whole group in one pass of plain reads (no watches). Raises InputError if the group does not exist."""
    if not zk.exists(layout.group_dir(group)):
        raise InputError(f"group {group!r} does not exist in ZooKeeper at {zk.connect}: "
                         "check --group (see `zkconsumer groups list`) and --zookeeper")
    data = GroupData(group)
    for consumer_id in sorted(zk.get_children(layout.ids_dir(group)) or []):
        member = read_member(zk, group, consumer_id)
        if member is not None:
            data.members[consumer_id] = member
    if has_wildcard(data):
        data.all_topics = tuple(sorted(zk.get_children(layout.BROKER_TOPICS) or []))
    for topic in sorted(zk.get_children(layout.owners_dir(group)) or []):
        for child in zk.get_children(layout.owners_dir(group, topic)) or []:
            if child.isdigit():
                owner = read_owner(zk, group, TopicPartition(topic, int(child)))
                if owner is not None:
                    data.owners[TopicPartition(topic, int(child))] = owner
    for topic in sorted(zk.get_children(layout.offsets_dir(group)) or []):
        for child in zk.get_children(layout.offsets_dir(group, topic)) or []:
            path = f"{layout.offsets_dir(group, topic)}/{child}"
            found = zk.get(path) if child.isdigit() else None
            if found is not None:
                data.offsets[TopicPartition(topic, int(child))] = decode_offset(path, found[0])
    for topic in sorted(subscribed_topics(data) | {tp.topic for tp in [*data.owners, *data.offsets]}):
        partitions = read_topic_partitions(zk, topic)
        if partitions is not None:
            data.topic_partitions[topic] = partitions
    times = [m.registered_ms for m in data.members.values()] + [o.claimed_ms for o in data.owners.values()]
    data.last_activity_ms = max(times, default=0)
    return data


# --- inference ----------------------------------------------------------------------------------------

def subscription_text(registration: Registration | None) -> str:
    if registration is None:
        return "?"
    if registration.is_wildcard:
        regex, streams = next(iter(registration.subscription.items()))
        return f"{registration.pattern} {regex!r}:{streams}"
    return ",".join(f"{topic}:{streams}" for topic, streams in sorted(registration.subscription.items()))


def build_view(data: GroupData, now_ms: int, *, failed_after_ms: int = DEFAULT_FAILED_AFTER_MS,
               attempts: Mapping[str, int] | None = None) -> GroupView:
    """Member states as far as ZooKeeper shows them (docs/watch.md, "How states are inferred").

    `attempts` (live view only) is the attempt number the watcher counted for a member since the last
    membership change; a one-shot read has no history and says just "rebalancing".
    """
    partitions = shown_partitions(data)
    registered = set(data.members)
    owned_by: dict[str, list[TopicPartition]] = {}
    for tp, owner in data.owners.items():
        consumer = owner_consumer(owner.thread_id)
        if consumer is not None:
            owned_by.setdefault(consumer, []).append(tp)
    subscribed = subscribed_topics(data)
    # A partition nobody alive owns: the group has not (yet) settled on an assignment that covers it.
    uncovered = [tp for tp in partitions if tp.topic in subscribed
                 and (tp not in data.owners or owner_consumer(data.owners[tp].thread_id) not in registered)]
    last_claim_ms = max([data.last_claim_ms, *(o.claimed_ms for o in data.owners.values())])
    stale = now_ms - data.last_activity_ms > failed_after_ms
    members = []
    for consumer_id in sorted(data.members):
        member = data.members[consumer_id]
        owned = tuple(sorted(owned_by.get(consumer_id, ())))
        attempt = (attempts or {}).get(consumer_id)
        wanted = member.registration is not None and any(
            data.topic_partitions.get(t) for t in member.registration.topic_streams(data.all_topics))
        state, reason = _member_state(member, owned, bool(uncovered), wanted, last_claim_ms, stale)
        members.append(MemberView(consumer_id, subscription_text(member.registration), state, owned,
                                  attempt if state == REBALANCING else None, reason))
    rows = []
    for tp in partitions:
        owner = data.owners.get(tp)
        offset = data.offsets.get(tp)
        rows.append(PartitionView(
            tp.topic, tp.partition, owner.thread_id if owner else None,
            owner is not None and owner_consumer(owner.thread_id) in registered,
            offset, tp in data.offsets and offset is None,
            None if data.log_ends is None else data.log_ends.get(tp)))
    return GroupView(data.group, tuple(members), tuple(rows), data.log_ends is not None)


def _member_state(member: MemberRecord, owned: tuple[TopicPartition, ...], group_uncovered: bool, wanted: bool,
                  last_claim_ms: int, stale: bool) -> tuple[str, str]:
    if member.registration is None:
        return FAILED, "unreadable registration"
    if owned:
        # Owning while other partitions are still unowned means claims are in flight, unless nothing has changed
        # for a long time (then another member gave up and this one is done).
        return (REBALANCING, "") if group_uncovered and not stale else (OWNING, "")
    if not wanted:
        return IDLE, ""
    if member.registered_ms > last_claim_ms:
        # Every rebalance releases and re-creates all owner nodes (ZKRebalancerListener.rebalance), so no claim
        # newer than the registration means no rebalance has finished a claim since this member joined.
        return (FAILED, "no claim since it registered") if stale else (REGISTERING, "")
    if group_uncovered:
        return (FAILED, "owns nothing while partitions stay unowned") if stale else (REBALANCING, "")
    return IDLE, ""


# --- plain text ---------------------------------------------------------------------------------------

def _table(headers: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    rows = [list(headers), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def owned_text(owned: Iterable[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(owned):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in by_topic.items()) or "-"


def dash(value: int | None) -> str:
    return "-" if value is None else str(value)


def owner_text(row: PartitionView) -> str:
    if row.owner is None:
        return "-"
    return row.owner if row.owner_registered else f"{row.owner} (not registered)"


def offset_text(row: PartitionView) -> str:
    return "?" if row.offset_unreadable else dash(row.offset)


STATE_COLORS = {OWNING: "green", REBALANCING: "yellow", REGISTERING: "cyan", IDLE: "white", FAILED: "red"}


def render_text(view: GroupView, *, color: bool = False) -> str:
    """The `--once` snapshot: members sorted by id, partitions by (topic, partition); no times, so two reads of
    a settled group print the same text. `color` styles the member states (only used on a terminal)."""
    lag_total = sum(p.lag or 0 for p in view.partitions)
    lines = [
        f"group {view.group}",
        f"members {len(view.members)}  partitions {len(view.partitions)}  owned {view.owned_count}  "
        f"lag {lag_total if view.brokers_reachable else '-'}"
        + ("" if view.brokers_reachable else "  (no broker reachable: log end and lag shown as -)"),
        "",
    ]
    member_rows = [[m.consumer_id, m.state_label, m.subscription, owned_text(m.owned)] for m in view.members]
    member_lines = _table(["MEMBER", "STATE", "SUBSCRIPTION", "OWNS"], member_rows)
    if color:
        start = max(len(m.consumer_id) for m in [*view.members, MemberView("MEMBER", "", "", ())]) + 2
        for i, member in enumerate(view.members, start=1):
            end = start + len(member.state_label)
            styled = click.style(member.state_label, fg=STATE_COLORS[member.state])
            member_lines[i] = member_lines[i][:start] + styled + member_lines[i][end:]
    lines += member_lines if view.members else ["(no members registered)"]
    lines.append("")
    partition_rows = [[p.topic, str(p.partition), owner_text(p), offset_text(p), dash(p.log_end), dash(p.lag)]
                      for p in view.partitions]
    lines += _table(["TOPIC", "PARTITION", "OWNER", "OFFSET", "LOG-END", "LAG"], partition_rows) \
        if view.partitions else ["(no partitions)"]
    return "\n".join(lines)
