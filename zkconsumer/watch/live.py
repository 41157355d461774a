"""Keep a `GroupData` current from ZooKeeper watches, with one watch per node shown and no writes.

Watches (docs/watch.md, "What is watched"):

* children of `/consumers/<g>`, `/consumers/<g>/ids`, `/consumers/<g>/owners`, `/consumers/<g>/offsets`
  (and `/brokers/topics` while a member has a wildcard subscription);
* data of `/brokers/topics/<t>` for every topic shown, and of `/consumers/<g>/owners/<t>/<p>` and
  `/consumers/<g>/offsets/<t>/<p>` for every partition shown (an exists-watch while the node is missing, so a
  claim is seen as the owner node's creation).

Registrations get no watch of their own: Kafka 0.8.2 never rewrites one in place (registerConsumerInZK
creates it once per session), so the `ids` children watch plus one read per new member sees everything.

Watch callbacks run on kazoo's threads and only queue what changed (as the connector's do, docs/DESIGN.md);
the reads that follow and the bookkeeping run on the `zkconsumer-watch-reader` thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from fetcher_manager.broker import Broker
from fetcher_manager.topic_partition import TopicPartition
from zkconsumer.errors import InputError
from zkconsumer.watch import lag, model
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.client import ZkClient, ZkUnavailableError
from zkconsumer.zookeeper.operations import WatchHandle

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Notification:
    """One line of the view's log. `kind`: joined, left, claim, release, moved, rollback, commit, topic,
    connection, info. `key` is the partition or member it concerns (for highlighting)."""

    at: float
    kind: str
    text: str
    key: TopicPartition | str | None = None


class GroupWatcher:
    """Start with `start()` (raises InputError if the group does not exist), read with `view()`, stop with
    `stop()`. The caller owns `zk` and closes it after `stop()`."""

    def __init__(self, zk: ZkClient, group: str, *, bootstrap: list[Broker] | None = None,
                 lag_interval_s: float = 2.0, failed_after_ms: int = model.DEFAULT_FAILED_AFTER_MS) -> None:
        self.zk = zk
        self.group = group
        self.bootstrap = bootstrap
        self.lag_interval_s = lag_interval_s
        self.failed_after_ms = failed_after_ms
        self._lock = threading.Lock()
        self._data = model.GroupData(group)
        self._version = 0
        self._notifications: list[Notification] = []
        self._recent: dict[TopicPartition | str, tuple[str, float]] = {}
        self._events: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._stopping = threading.Event()
        self._watches: dict[str, tuple[str, WatchHandle]] = {}
        self._seen: set[str] = set()  # paths whose first (initial) report has been processed
        self._topics: set[str] = set()
        # Attempt counting (docs/watch.md): per member, owned-anything at the last membership change, and how
        # often its owned set has gone from something to nothing since.
        self._trigger_owned: dict[str, bool] = {}
        self._emptied: dict[str, int] = {}
        self._claimed_after_trigger: set[TopicPartition] = set()
        self._last_owner: dict[TopicPartition, str] = {}
        self._threads: list[threading.Thread] = []

    # --- lifecycle --------------------------------------------------------------------------------

    def start(self) -> GroupWatcher:
        if not self.zk.exists(layout.group_dir(self.group)):
            raise InputError(f"group {self.group!r} does not exist in ZooKeeper at {self.zk.connect}: "
                             "check --group (see `zkconsumer groups list`) and --zookeeper")
        self.zk.on_state_change(lambda state: self._events.put(("state", state)))
        self._threads = [threading.Thread(target=self._read_loop, name="zkconsumer-watch-reader", daemon=True)]
        if self.lag_interval_s > 0:
            self._threads.append(threading.Thread(target=self._lag_loop, name="zkconsumer-watch-lag", daemon=True))
        self._watch_children(layout.group_dir(self.group))
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """End every watch (each recipe stops at its next notification) and join both threads."""
        self._stopping.set()
        for _kind, handle in list(self._watches.values()):
            handle.stop()
        for thread in self._threads:
            thread.join(timeout=10)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """True once every queued change has been processed (the view has caught up with ZooKeeper)."""
        deadline = time.monotonic() + timeout
        while self._events.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    # --- what the view reads ----------------------------------------------------------------------

    @property
    def version(self) -> int:
        with self._lock:
            return self._version

    def view(self) -> model.GroupView:
        with self._lock:
            return model.build_view(self._data, int(time.time() * 1000), failed_after_ms=self.failed_after_ms,
                                    attempts=self._attempts())

    def take_notifications(self) -> list[Notification]:
        with self._lock:
            taken, self._notifications = self._notifications, []
            return taken

    def recent_changes(self, within_s: float) -> dict[TopicPartition | str, str]:
        """Partitions and members that changed in the last `within_s` seconds, with the kind of change."""
        cutoff = time.monotonic() - within_s
        with self._lock:
            return {key: kind for key, (kind, at) in self._recent.items() if at >= cutoff}

    def watched_paths(self) -> dict[str, str]:
        """path -> "children" or "data": every watch this view holds (one per path)."""
        return {path: kind for path, (kind, _handle) in self._watches.items()}

    # --- watches: callbacks only queue ------------------------------------------------------------

    def _watch_children(self, path: str) -> None:
        if path in self._watches or self._stopping.is_set():
            return
        handle = self.zk.watch_children(path, lambda children: self._events.put(("children", path, children)),
                                        create_missing=False)
        self._watches[path] = ("children", handle)

    def _watch_data(self, path: str) -> None:
        if path in self._watches or self._stopping.is_set():
            return
        handle = self.zk.watch_data(path, lambda data: self._events.put(("data", path, data)))
        self._watches[path] = ("data", handle)

    # --- the reader thread ------------------------------------------------------------------------

    def _read_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                event = self._events.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                self._handle(event)
            except ZkUnavailableError as exc:
                log.warning("watch: %s", exc)
            except Exception:
                log.exception("watch: handling %s failed", event[:2])
            finally:
                self._events.task_done()

    def _handle(self, event: tuple[Any, ...]) -> None:
        kind = event[0]
        if kind == "state":
            self._notify("connection", f"ZooKeeper connection {event[1]}")
            return
        path = event[1]
        first = path not in self._seen
        self._seen.add(path)
        if kind == "children":
            if event[2] is None:
                return
            self._on_children(path, sorted(event[2]), first)
        else:
            self._on_data(path, event[2], first)
        with self._lock:
            self._version += 1

    def _on_children(self, path: str, children: list[str], first: bool) -> None:
        group_dir = layout.group_dir(self.group)
        if path == group_dir:
            for name in ("ids", "owners", "offsets"):
                if name in children:
                    self._watch_children(f"{group_dir}/{name}")
                else:  # deleted (by an admin tool): its watch ended; watch it again if it comes back
                    self._watches.pop(f"{group_dir}/{name}", None)
        elif path == layout.ids_dir(self.group):
            self._sync_members(children, first)
        elif path in (layout.owners_dir(self.group), layout.offsets_dir(self.group)):
            for topic in children:
                self._show_topic(topic)
        elif path == layout.BROKER_TOPICS:
            with self._lock:
                self._data.all_topics = tuple(children)
            self._show_subscribed_topics()

    def _on_data(self, path: str, data: bytes | None, first: bool) -> None:
        parts = path.split("/")
        if path.startswith(layout.BROKER_TOPICS + "/"):
            self._on_topic_metadata(parts[-1], first)
        elif path.startswith(layout.owners_dir(self.group) + "/"):
            self._on_owner(TopicPartition(parts[-2], int(parts[-1])), first)
        elif path.startswith(layout.offsets_dir(self.group) + "/"):
            self._on_offset(TopicPartition(parts[-2], int(parts[-1])), path, data, first)

    # --- members ----------------------------------------------------------------------------------

    def _sync_members(self, children: list[str], first: bool) -> None:
        with self._lock:
            known = set(self._data.members)
        joined = [c for c in children if c not in known]
        left = sorted(known - set(children))
        records = {c: model.read_member(self.zk, self.group, c) for c in joined}
        with self._lock:
            for consumer_id in left:
                del self._data.members[consumer_id]
            for consumer_id, record in records.items():
                if record is not None:
                    self._data.members[consumer_id] = record
            if joined or left:
                self._membership_changed()
        for consumer_id in left:
            self._notify("left", f"member left {consumer_id}", consumer_id)
        for consumer_id, record in records.items():
            if record is not None and not first:
                what = model.subscription_text(record.registration) if record.registration else record.error
                self._notify("joined", f"member joined {consumer_id} ({what})", consumer_id)
        if has_wildcard := model.has_wildcard(self._data):
            self._watch_children(layout.BROKER_TOPICS)
        if first:
            self._notify("info", f"watching group {self.group}: {len(children)} members"
                         + (" (wildcard subscriptions)" if has_wildcard else ""))
        self._show_subscribed_topics()

    def _membership_changed(self) -> None:
        """A rebalance trigger (ZKRebalancerListener.handleChildChange): restart every member's attempt count."""
        owned = self._owned_by_member()
        self._trigger_owned = {m: bool(owned.get(m)) for m in self._data.members}
        self._emptied = dict.fromkeys(self._data.members, 0)
        self._claimed_after_trigger.clear()
        self._data.last_activity_ms = int(time.time() * 1000)

    def _owned_by_member(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for owner in self._data.owners.values():
            consumer = model.owner_consumer(owner.thread_id)
            if consumer is not None:
                counts[consumer] = counts.get(consumer, 0) + 1
        return counts

    def _attempts(self) -> dict[str, int]:
        """Attempt n of the rebalance since the last membership change: every attempt but the first starts after
        the member's claims were rolled back (owned went to nothing); the first release does not count."""
        return {m: max(1, 1 + self._emptied.get(m, 0) - (1 if self._trigger_owned.get(m) else 0))
                for m in self._data.members}

    # --- topics and partitions --------------------------------------------------------------------

    def _show_subscribed_topics(self) -> None:
        with self._lock:
            topics = model.subscribed_topics(self._data)
        for topic in sorted(topics):
            self._show_topic(topic)

    def _show_topic(self, topic: str) -> None:
        if topic in self._topics:
            return
        self._topics.add(topic)
        self._watch_data(layout.topic_path(topic))
        # Partitions the group has nodes for but the topic metadata lacks (a deleted topic): one read each.
        for directory in (layout.owners_dir(self.group, topic), layout.offsets_dir(self.group, topic)):
            for child in self.zk.get_children(directory) or []:
                if child.isdigit():
                    self._show_partition(TopicPartition(topic, int(child)))

    def _show_partition(self, tp: TopicPartition) -> None:
        self._watch_data(layout.owner_path(self.group, tp.topic, tp.partition))
        self._watch_data(layout.offset_path(self.group, tp.topic, tp.partition))

    def _on_topic_metadata(self, topic: str, first: bool) -> None:
        partitions = model.read_topic_partitions(self.zk, topic)
        with self._lock:
            before = self._data.topic_partitions.get(topic)
            if partitions is None:
                self._data.topic_partitions.pop(topic, None)
            else:
                self._data.topic_partitions[topic] = partitions
        if partitions is not None and before is not None and partitions != before and not first:
            self._notify("topic", f"topic {topic} now has {len(partitions)} partitions", topic)
        for partition in partitions or ():
            self._show_partition(TopicPartition(topic, partition))

    def _on_owner(self, tp: TopicPartition, first: bool) -> None:
        # The watch says the node changed; the read also gives the claim time (ctime) the inference uses.
        record = model.read_owner(self.zk, self.group, tp)
        with self._lock:
            before = self._data.owners.get(tp)
            if record == before:
                return
            owned_before = self._owned_by_member()
            if record is None:
                del self._data.owners[tp]
            else:
                self._data.owners[tp] = record
                self._data.last_claim_ms = max(self._data.last_claim_ms, record.claimed_ms)
            owned_after = self._owned_by_member()
            for member, count in owned_before.items():
                if count and not owned_after.get(member):
                    self._emptied[member] = self._emptied.get(member, 0) + 1
            self._data.last_activity_ms = int(time.time() * 1000)
        if first:
            return
        if record is None:
            self._on_release(tp, before)
        else:
            self._on_claim(tp, before, record)

    def _on_release(self, tp: TopicPartition, before: model.OwnerRecord | None) -> None:
        if before is None:
            return
        self._last_owner[tp] = before.thread_id
        consumer = model.owner_consumer(before.thread_id)
        # A claim made in this rebalance and deleted before any membership change, by a member still registered,
        # is a rollback: reflectPartitionOwnershipDecision deletes its claims when one of them conflicted.
        if (tp in self._claimed_after_trigger and consumer is not None
                and self.zk.exists(layout.registration_path(self.group, consumer))):
            self._notify("rollback", f"rollback {tp.topic}/{tp.partition} by {before.thread_id} "
                                     "(a claim of this attempt conflicted)", tp)
        else:
            self._notify("release", f"release {tp.topic}/{tp.partition} by {before.thread_id}", tp)
        self._claimed_after_trigger.discard(tp)

    def _on_claim(self, tp: TopicPartition, before: model.OwnerRecord | None, record: model.OwnerRecord) -> None:
        self._claimed_after_trigger.add(tp)
        previous = before.thread_id if before is not None else self._last_owner.get(tp)
        self._last_owner[tp] = record.thread_id
        if previous is not None and model.owner_consumer(previous) != model.owner_consumer(record.thread_id):
            self._notify("moved", f"moved {tp.topic}/{tp.partition} {previous} -> {record.thread_id}", tp)
        else:
            self._notify("claim", f"claim {tp.topic}/{tp.partition} by {record.thread_id}", tp)

    def _on_offset(self, tp: TopicPartition, path: str, data: bytes | None, first: bool) -> None:
        offset = None if data is None else model.decode_offset(path, data)
        with self._lock:
            before = self._data.offsets.get(tp)
            if data is None:
                self._data.offsets.pop(tp, None)
            else:
                self._data.offsets[tp] = offset
        if not first and data is not None and offset != before:
            self._notify("commit", f"commit {tp.topic}/{tp.partition} offset {model.dash(offset)}", tp)

    def note(self, kind: str, text: str) -> None:
        """Add a line to the log (the CLI sends warnings here while the full-screen view owns the terminal)."""
        self._notify(kind, text)

    def _notify(self, kind: str, text: str, key: TopicPartition | str | None = None) -> None:
        with self._lock:
            self._notifications.append(Notification(time.time(), kind, text, key))
            if key is not None:
                self._recent[key] = (kind, time.monotonic())
            self._version += 1

    # --- log end offsets --------------------------------------------------------------------------

    def _lag_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                with self._lock:
                    partitions = model.shown_partitions(self._data)
                ends = lag.log_end_offsets(lag.brokers_to_ask(self.zk, self.bootstrap), partitions)
                with self._lock:
                    if ends != self._data.log_ends:
                        self._data.log_ends = ends
                        self._version += 1
            except ZkUnavailableError as exc:
                log.info("watch: broker list unavailable: %s", exc)
            except Exception:
                log.exception("watch: log end lookup failed")
            self._stopping.wait(self.lag_interval_s)
