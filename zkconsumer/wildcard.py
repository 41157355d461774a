"""`WildcardStreamsHandler`: the streams of `create_message_streams_by_filter` follow every topic a whitelist or
blacklist allows, now and later. Kafka 0.8.2 keeps this apart from the connector too: `WildcardStreamsHandler` in
ZookeeperConsumerConnector.scala, a `TopicEventHandler` fed by a `ZookeeperTopicEventWatcher` on /brokers/topics.

Where we differ from it (docs/DESIGN.md, "Faithful to 0.8.2, and where we deliberately differ", "Wildcard topic
change"): 0.8.2 binds and rebalances synchronously on ZooKeeper's event thread; here the watch callback only records
the topic list and hands the work to the listener's watcher thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from fetcher_manager.stream import ChunkQueue, KafkaStream
from rebalance.subscription import TopicFilter
from rebalance.sync import THREADING, Event, SyncPrimitives
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.client import WatchHandle, ZkClient

# The connector's logger: these lines were the connector's, and the log prints the logger's name (the CLI's format
# in zkconsumer/cli.py), so they keep it.
log = logging.getLogger("zkconsumer.connector")

Bind = Callable[[str, int, ChunkQueue, KafkaStream], None]


class Watcher(Protocol):
    """What the handler needs of the rebalance listener (`ZKRebalancerListener`): its watcher thread."""

    @property
    def started(self) -> bool: ...

    def submit(self, task: Callable[[], None]) -> None: ...

    def trigger(self, reason: str = "") -> None: ...


class WildcardStreamsHandler:
    """The shared streams of one `create_message_streams_by_filter`, bound to every allowed topic.

    States (which one holds follows from `start`, `stop` and the connector's `closing` event)::

        created ──start(): watch /brokers/topics, wait for its first list, apply it──▶ watching
        watching ──topic list changed: recorded, apply submitted to the watcher thread──▶ watching
        watching ──closing set (connector.shutdown() began)──▶ closing: a change is recorded, nothing is applied
        closing ──stop(): the watch handle ends at its next notification──▶ stopped

    `start()` raises RuntimeError if the first topic list does not arrive within the ZooKeeper request timeout; the
    connector's caller then sees that error from `create_message_streams_by_filter`.

    Threads: the topic-watch callback `_on_topics_changed` runs on kazoo's event thread (its first call runs in the
    thread that installs the watch, inside `start()`). The first apply runs in the caller's thread (inside `start()`,
    before the listener's watcher thread exists); every later apply runs on the watcher thread, as a task submitted
    there, outside the rebalance lock and never at the same time as a rebalance. So two applies never overlap.

    The lock rule: `_lock` guards the latest topic list (`_latest`) and the allowed set (`_topics`), and is never
    taken under another lock of ours.
    - On kazoo's thread, `_on_topics_changed` holds it only to store the list; it then (after releasing it) sets
      `_seen` and `submit`s, which takes the listener's condition briefly.
    - `_apply` holds it while it binds each newly allowed topic to the shared streams; `bind` takes
      `StreamBindings._lock` and the metrics registry's lock (a FetchQueueSize gauge per stream) inside it, and the
      "wildcard topics now" line is logged inside it. These two are leaf locks taken in this order only.
    - It is released before `watch_topics` (the connector's `_watch_topic_data`, which holds the connector's
      `_watch_lock` across a ZooKeeper round trip that takes `ZkClient`'s counter lock) and before `trigger`.
    """

    def __init__(self, consumer_id: str, topic_filter: TopicFilter, pairs: list[tuple[ChunkQueue, KafkaStream]], *,
                 zk: ZkClient, watcher: Watcher, bind: Bind, watch_topics: Callable[[set[str]], None],
                 closing: Event, exclude_internal_topics: bool, sync: SyncPrimitives = THREADING) -> None:
        self.consumer_id = consumer_id
        self.topic_filter = topic_filter
        self._pairs = pairs
        self._zk = zk
        self._watcher = watcher
        self._bind = bind
        self._watch_topics = watch_topics
        self._closing = closing  # the connector's: set first thing in its shutdown()
        self._exclude_internal_topics = exclude_internal_topics
        self._lock = sync.lock()
        self._topics: set[str] = set()  # replaced, never mutated: a reader may keep the set it got
        self._latest: list[str] | None = None
        self._seen = sync.event()
        self._watch: WatchHandle | None = None

    @property
    def streams(self) -> list[KafkaStream]:
        return [stream for _, stream in self._pairs]

    @property
    def topics(self) -> set[str]:
        """The topics the filter allows, as last applied."""
        with self._lock:
            return self._topics

    def start(self) -> set[str]:
        """Watch the topic list, wait for its first value and bind the streams to what it allows (no rebalance:
        the connector's first rebalance follows). Returns the allowed topics."""
        self._watch = self._zk.watch_children(layout.BROKER_TOPICS, self._on_topics_changed)
        if not self._seen.wait(self._zk.request_timeout_s):
            raise RuntimeError(f"{self.consumer_id}: the topic list under {layout.BROKER_TOPICS} never arrived")
        self._apply(first=True)
        return self.topics

    def stop(self) -> None:
        """End the topic watch (at its next notification). The connector calls it in shutdown(), after `closing`
        is set, under the rebalance lock."""
        if self._watch is not None:
            self._watch.stop()

    def _on_topics_changed(self, children: list[str]) -> None:
        """Wildcard topic watcher, on kazoo's thread: record and hand the work to the watcher thread."""
        with self._lock:
            self._latest = list(children)
        self._seen.set()
        if self._watcher.started and not self._closing.is_set():
            self._watcher.submit(self._apply)

    def _apply(self, first: bool = False) -> None:
        """Bind newly allowed topics to the shared streams, watch them, and rebalance if the set changed."""
        if self._closing.is_set():
            return
        with self._lock:
            children = self._latest or []
            allowed = {t for t in children if self.topic_filter.is_topic_allowed(t, self._exclude_internal_topics)}
            added = allowed - self._topics
            if allowed == self._topics:
                return
            log.info("%s: wildcard topics now %s", self.consumer_id, sorted(allowed))
            for topic in sorted(added):
                for i, (queue, stream) in enumerate(self._pairs):
                    self._bind(topic, i, queue, stream)
            self._topics = allowed
        if not first:
            self._watch_topics(allowed)
            self._watcher.trigger("wildcard topic set changed")
