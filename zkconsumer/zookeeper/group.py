"""`GroupStore` over ZooKeeper: the consumer group's znodes, read and written through `ZkClient`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from kazoo.exceptions import NodeExistsError, NotEmptyError

from fetcher_manager.broker import Broker
from rebalance.assignment import ConsumerThreadId, TopicPartition
from rebalance.convergence import GroupSnapshot
from rebalance.store import Claim
from rebalance.subscription import Registration
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.client import ZkClient

log = logging.getLogger(__name__)


def read_brokers(zk: ZkClient, *, skip_bad: bool = False) -> list[Broker]:
    """Every broker registered under /brokers/ids, sorted by id.

    A broker that leaves between list and read is simply not live. An unreadable registration raises
    `ZnodeDataError` (a rebalance attempt must see the whole cluster), or with `skip_bad` is logged and skipped
    (the leader finder and the CLI can still use the other brokers).
    """
    brokers = []
    for child in zk.get_children(layout.BROKER_IDS) or []:
        path = f"{layout.BROKER_IDS}/{child}"
        try:
            if not child.isdigit():
                raise codecs.ZnodeDataError(path, None, "broker ids must be integers")
            found = zk.get(path)
            if found is not None:
                brokers.append(codecs.decode_broker(path, int(child), found[0]))
        except codecs.ZnodeDataError as exc:
            if not skip_bad:
                raise
            log.warning("%s: %s", zk.log_id, exc)
    return sorted(brokers)


class ZkGroupStore:
    def __init__(self, zk: ZkClient, group: str) -> None:
        self.zk = zk
        self.group = group
        self._broker_watch_installed = False

    def registration(self, consumer_id: str) -> Registration:
        path = layout.registration_path(self.group, consumer_id)
        found = self.zk.get(path)
        if found is None:
            raise codecs.ZnodeDataError(path, None, "the registration vanished between list and read")
        return codecs.decode_registration(path, found[0])

    def registrations(self, consumer_ids: list[str]) -> dict[str, Registration]:
        """Every member's registration, read in one pipelined batch (`ZkClient.get_many`): the M reads of a
        rebalance cost one round trip instead of M. Raises as `registration` does for the first bad one."""
        paths = [layout.registration_path(self.group, c) for c in consumer_ids]
        result = {}
        for consumer_id, path, found in zip(consumer_ids, paths, self.zk.get_many(paths), strict=True):
            if found is None:
                raise codecs.ZnodeDataError(path, None, "the registration vanished between list and read")
            result[consumer_id] = codecs.decode_registration(path, found[0])
        return result

    def member_ids(self) -> list[str]:
        return self.zk.get_children(layout.ids_dir(self.group)) or []

    def all_topics(self) -> list[str]:
        return self.zk.get_children(layout.BROKER_TOPICS) or []

    def live_brokers(self) -> list[Broker]:
        return read_brokers(self.zk)

    def partitions_for_topics(self, topics: Iterable[str]) -> dict[str, list[int]]:
        result = {}
        for topic in topics:
            path = layout.topic_path(topic)
            found = self.zk.get(path)
            result[topic] = [] if found is None else codecs.decode_topic_partitions(path, found[0])
        return result

    def release(self, topic: str, partition: int) -> None:
        self.zk.delete(layout.owner_path(self.group, topic, partition))

    def release_many(self, partitions: list[TopicPartition]) -> None:
        self.zk.delete_many([layout.owner_path(self.group, tp.topic, tp.partition) for tp in partitions])

    def watch_owner(self, topic: str, partition: int, callback: Callable[[bool], None]) -> Callable[[], None]:
        """Call `callback(present)` now and on every change of the owner node; returns a function that stops it."""
        handle = self.zk.watch_data(layout.owner_path(self.group, topic, partition),
                                    lambda data: callback(data is not None), initial=True)
        return handle.stop

    def barrier_ack(self, view: str, consumer_id: str, previous: str | None) -> None:
        """Acknowledge a view (consensus barrier, docs/modes.md): an ephemeral child of the view's node; our ack of
        the previous view is deleted, and its node too once empty (a non-empty one stays for the others)."""
        try:
            self.zk.create(layout.barrier_ack_path(self.group, view, consumer_id), b"", ephemeral=True)
        except NodeExistsError:
            pass  # acknowledged in an earlier attempt on the same view
        if previous is not None and previous != view:
            self.zk.delete(layout.barrier_ack_path(self.group, previous, consumer_id))
            try:
                self.zk.delete(layout.barrier_dir(self.group, previous))
            except NotEmptyError:
                pass

    def watch_barrier(self, view: str, callback: Callable[[set[str]], None]) -> Callable[[], None]:
        """Call `callback(members that acknowledged)` now and on every change; returns a function that stops it."""
        handle = self.zk.watch_children(layout.barrier_dir(self.group, view),
                                        lambda children: callback(set(children)), initial=True)
        return handle.stop

    def read_assignment(self, view: str) -> dict[TopicPartition, ConsumerThreadId] | None:
        path = layout.assignment_path(self.group, view)
        found = self.zk.get(path)
        return None if found is None else codecs.decode_assignment_record(path, found[0])[1]

    def create_assignment(self, view: str, owners: dict[TopicPartition, ConsumerThreadId]) -> bool:
        """An ephemeral record of the view (rebalance/sticky_agreement.py: why ephemeral), then the same bytes as
        the directory's data, the hint for members without a record of their own (a plain set: last writer wins)."""
        data = codecs.encode_assignment_record(view, owners)
        try:
            self.zk.create(layout.assignment_path(self.group, view), data, ephemeral=True)
        except NodeExistsError:
            return False
        self.zk.set(layout.assignment_dir(self.group), data)
        return True

    def latest_assignment(self) -> dict[TopicPartition, ConsumerThreadId] | None:
        path = layout.assignment_dir(self.group)
        found = self.zk.get(path)
        if found is None or found[0] is None:
            return None
        try:
            return codecs.decode_assignment_record(path, found[0])[1]
        except codecs.ZnodeDataError as exc:
            log.warning("%s: ignoring the latest sticky assignment: %s", self.zk.log_id, exc)
            return None

    def claim(self, topic: str, partition: int, thread_id: str) -> Claim:
        ours, current = self.zk.create_ephemeral_expect_conflict(layout.owner_path(self.group, topic, partition),
                                                                 thread_id.encode())
        return Claim(ours, None if current is None else current.decode("utf-8", "replace"))

    def read_offset(self, topic: str, partition: int) -> int:
        path = layout.offset_path(self.group, topic, partition)
        found = self.zk.get(path)
        return -1 if found is None else codecs.decode_offset(path, found[0])

    def write_offset(self, topic: str, partition: int, offset: int) -> None:
        self.zk.set(layout.offset_path(self.group, topic, partition), codecs.encode_offset(offset))

    def watch_brokers(self, callback: Callable[[], None]) -> None:
        if self._broker_watch_installed:
            return
        self._broker_watch_installed = True
        self.zk.watch_children(layout.BROKER_IDS, lambda _children: callback(), initial=False)


def read_group_snapshot(zk: ZkClient, group: str) -> GroupSnapshot:
    """One read of everything convergence depends on. A member that leaves while we read is left out; an
    unreadable registration raises `ZnodeDataError` naming its path."""
    registrations = {}
    for member in zk.get_children(layout.ids_dir(group)) or []:
        path = layout.registration_path(group, member)
        found = zk.get(path)
        if found is not None:
            registrations[member] = codecs.decode_registration(path, found[0])
    all_topics = tuple(sorted(zk.get_children(layout.BROKER_TOPICS) or []))
    wanted = {t for r in registrations.values() for t in r.topic_streams(all_topics, exclude_internal_topics=False)}
    store = ZkGroupStore(zk, group)
    partitions = {topic: tuple(ids) for topic, ids in store.partitions_for_topics(sorted(wanted)).items()}
    owners = {}
    for topic in zk.get_children(layout.owners_dir(group)) or []:
        for partition in zk.get_children(layout.owners_dir(group, topic)) or []:
            found = zk.get(f"{layout.owners_dir(group, topic)}/{partition}")
            if found is not None and partition.isdigit():
                owners[TopicPartition(topic, int(partition))] = (found[0] or b"").decode("utf-8", "replace")
    return GroupSnapshot(group, registrations, all_topics, partitions, owners)
