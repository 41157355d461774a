"""Group inspection as Kafka's `ConsumerOffsetChecker` does it: offsets and owners from ZooKeeper, log sizes
from the broker when it is reachable (otherwise `unknown`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from zkconsumer.errors import InputError
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.client import ZkClient

log = logging.getLogger(__name__)
LogEndLookup = Callable[[Iterable[tuple[str, int]]], dict[tuple[str, int], int]]


@dataclass(frozen=True)
class PartitionRow:
    group: str
    topic: str
    partition: int
    offset: int | None
    log_size: int | None
    owner: str | None

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.log_size is None:
            return None
        return max(0, self.log_size - self.offset)


def list_groups(zk: ZkClient) -> list[str]:
    return sorted(zk.get_children(layout.CONSUMERS) or [])


def members(zk: ZkClient, group: str) -> list[str]:
    return sorted(zk.get_children(layout.ids_dir(group)) or [])


def describe_group(zk: ZkClient, group: str, log_end: LogEndLookup | None = None) -> list[PartitionRow]:
    """One row per partition of every topic the group has offsets or owners for (or subscribes to)."""
    if not zk.exists(layout.group_dir(group)):
        raise InputError(f"group {group!r} does not exist in ZooKeeper at {zk.connect}: see `zkconsumer groups list`")
    topics = set(zk.get_children(layout.offsets_dir(group)) or [])
    topics |= set(zk.get_children(layout.owners_dir(group)) or [])
    all_topics = zk.get_children(layout.BROKER_TOPICS) or []
    for member in members(zk, group):
        found = zk.get(layout.registration_path(group, member))
        if found is None:
            continue
        try:
            registration = codecs.decode_registration(layout.registration_path(group, member), found[0])
        except codecs.ZnodeDataError as exc:
            log.warning("%s", exc)
            continue
        topics |= set(registration.topic_streams(all_topics))
    partitions: list[tuple[str, int]] = []
    for topic in sorted(topics):
        found = zk.get(layout.topic_path(topic))
        ids: set[int] = set()
        if found is not None:
            try:
                ids = set(codecs.decode_topic_partitions(layout.topic_path(topic), found[0]))
            except codecs.ZnodeDataError as exc:
                log.warning("%s", exc)
        ids |= {int(p) for p in zk.get_children(layout.offsets_dir(group, topic)) or [] if p.isdigit()}
        partitions += [(topic, p) for p in sorted(ids)]
    sizes: dict[tuple[str, int], int] = {}
    if log_end is not None and partitions:
        try:
            sizes = log_end(partitions)
        except Exception as exc:  # the broker is optional for this view, as in ConsumerOffsetChecker
            log.warning("log sizes unavailable: %s", exc)
    rows = []
    for topic, partition in partitions:
        offset_node = zk.get(layout.offset_path(group, topic, partition))
        offset = None
        if offset_node is not None:
            try:
                offset = codecs.decode_offset(layout.offset_path(group, topic, partition), offset_node[0])
            except codecs.ZnodeDataError as exc:
                log.warning("%s", exc)
        owner_node = zk.get(layout.owner_path(group, topic, partition))
        owner = owner_node[0].decode("utf-8", "replace") if owner_node else None
        rows.append(PartitionRow(group, topic, partition, offset, sizes.get((topic, partition)), owner))
    return rows
