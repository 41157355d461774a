"""The group's offsets in Kafka, as Kafka 0.8.2's consumer keeps them with `offsets.storage=kafka`.

0.8.2 (`ZookeeperConsumerConnector.commitOffsets`/`fetchOffsets`, `ClientUtils.channelToOffsetManager`) finds the
group's offset manager with a ConsumerMetadataRequest (FindCoordinator v0) sent to a live broker read from ZooKeeper,
keeps one channel to it, commits with OffsetCommitRequest v1 (the first version stored in Kafka; v0 is ZooKeeper
storage on the broker) and fetches with OffsetFetchRequest v1. The coordinator's transient errors (the partitions
of `__consumer_offsets` are loading, moved, or not yet created) are retried after finding the coordinator again.

The wire is kafka-python's: its protocol classes (the v1 requests live in `kafka.protocol.old`, as the current
classes start at OffsetCommit v2) sent through a `KafkaNetClient` this module owns and closes. It starts no thread:
every request is driven by the caller's thread, one at a time under a lock (0.8.2's `offsetsChannelLock`).
kafka-python is imported on first use: a consumer with ZooKeeper storage (and the command line) never loads it.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fetcher_manager.broker import Broker
from rebalance.assignment import TopicPartition
from zkconsumer.errors import UserError

log = logging.getLogger(__name__)

# OffsetCommit v1 carries a commit timestamp; -1 lets the broker stamp it, as 0.8.2's default does.
_BROKER_TIMESTAMP = -1
# A group that never joined the broker's coordinator commits with generation -1 and no member id (0.8.2's
# OffsetCommitRequest defaults): the broker then stores the offsets without group membership checks.
_NO_GENERATION, _NO_MEMBER = -1, ""
# Coordinator errors after which 0.8.2 looks the coordinator up again and retries: OffsetsLoadInProgress (14),
# ConsumerCoordinatorNotAvailable (15), NotCoordinatorForConsumer (16).
_COORDINATOR_ERRORS = frozenset({14, 15, 16})
_NO_OFFSET = -1  # "no offset stored", as with ZooKeeper storage
# What to do about a partition's commit error that is not the coordinator's (measured on Apache Kafka 3.9). A
# broker accepts a commit without a generation only while the group has no coordinator-design member: once a new
# consumer with the same group.id joins (a migration), it answers UnknownMemberId (25) for every partition.
_MEMBER_ERRORS = frozenset({22, 25, 27})  # IllegalGeneration, UnknownMemberId, RebalanceInProgress
_MEMBER_HINT = ("the group has members of the coordinator design (consumers with the same group.id that joined "
                "through the broker), which only accept commits from their own members: until they leave, this "
                "member's progress is not stored in Kafka (nor, with dual commit, in ZooKeeper)")
_DEFAULT_HINT = "check that the topic exists and the group may write it"


class KafkaOffsetsError(UserError, RuntimeError):
    """The broker's offset manager refused or could not be reached; the message names the group and the fix."""


class Marker(Protocol):
    def mark(self, n: int = 1) -> None: ...


@dataclass(frozen=True)
class OffsetChannelSettings:
    """The `offsets.*` settings of 0.8.2's `ConsumerConfig` that shape the channel to the offset manager."""

    group: str
    client_id: str
    consumer_id: str
    backoff_ms: int  # offsets.channel.backoff.ms
    socket_timeout_ms: int  # offsets.channel.socket.timeout.ms
    commit_max_retries: int  # offsets.commit.max.retries

    @property
    def attempts(self) -> int:
        return 1 + self.commit_max_retries


class _Retry(Exception):
    """One attempt failed in a way 0.8.2 retries after finding the coordinator again."""


class KafkaOffsetManager:
    """Commit and fetch one group's offsets through its coordinator. `brokers` reads the live brokers (ZooKeeper's
    /brokers/ids): the first lookup, and every lookup after a failure, bootstraps from them afresh."""

    def __init__(self, settings: OffsetChannelSettings, brokers: Callable[[], list[Broker]],
                 commits_meter: Marker | None = None) -> None:
        self.settings = settings
        self._brokers = brokers
        self._meter = commits_meter
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._client: Any = None  # kafka.net.compat.KafkaNetClient, created on first use
        self._coordinator: str | None = None

    # --- public API --------------------------------------------------------------------------------

    def commit(self, offsets: Mapping[TopicPartition, int]) -> set[TopicPartition]:
        """Commit every given offset in one OffsetCommitRequest; returns the partitions the broker accepted.

        Coordinator errors are retried (up to `offsets.commit.max.retries`); any other per-partition error is
        logged as an error naming the partition and leaves it uncommitted (the caller retries it next time)."""
        if not offsets:
            return set()
        from kafka.protocol.old.commit import OffsetCommitRequest_v1

        request = OffsetCommitRequest_v1(
            group_id=self.settings.group, generation_id_or_member_epoch=_NO_GENERATION, member_id=_NO_MEMBER,
            topics=[(topic, [(p, offset, _BROKER_TIMESTAMP, "") for p, offset in partitions])
                    for topic, partitions in _by_topic(offsets.items()).items()])
        if self._meter is not None:
            self._meter.mark(len(offsets))  # 0.8.2 marks before sending: the meter counts commits attempted

        def attempt() -> set[TopicPartition]:
            response = self._send(request)
            accepted, refused = set(), {}
            for topic, partitions in response.topics:
                for partition, error in partitions:
                    if error in _COORDINATOR_ERRORS:
                        raise _Retry(_error_name(error))
                    (refused.__setitem__(TopicPartition(topic, partition), error) if error
                     else accepted.add(TopicPartition(topic, partition)))
            for tp, error in sorted(refused.items()):
                log.error("%s: group %s: the broker refused the commit of %s/%d=%d: %s; it is retried at the next "
                          "commit (%s)", self.settings.consumer_id, self.settings.group, tp.topic, tp.partition,
                          offsets[tp], _error_name(error), _MEMBER_HINT if error in _MEMBER_ERRORS else _DEFAULT_HINT)
            return accepted

        return self._with_retries("commit offsets", attempt)

    def fetch(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed next offsets in one OffsetFetchRequest; -1 where none is stored."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        from kafka.protocol.old.commit import OffsetFetchRequest_v1

        request = OffsetFetchRequest_v1(group_id=self.settings.group, topics=[
            (topic, [p for p, _ in parts]) for topic, parts in _by_topic((tp, 0) for tp in wanted).items()])

        def attempt() -> dict[TopicPartition, int]:
            response = self._send(request)
            found: dict[TopicPartition, int] = {}
            for topic, answers in response.topics:
                for partition, offset, _metadata, error in answers:
                    if error in _COORDINATOR_ERRORS:
                        raise _Retry(_error_name(error))
                    if error:
                        raise KafkaOffsetsError(
                            f"group {self.settings.group}: the broker refused to read the offset of {topic}/{partition}"
                            f": {_error_name(error)}; check that the topic exists and the group may read it")
                    found[TopicPartition(topic, partition)] = offset if offset >= 0 else _NO_OFFSET
            missing = [tp for tp in wanted if tp not in found]
            if missing:
                raise _Retry(f"no answer for {len(missing)} partition(s)")
            return found

        return self._with_retries("fetch offsets", attempt)

    def close(self) -> None:
        """Stop retrying at once and close the connections; later calls raise."""
        self._closed.set()
        with self._lock:
            self._drop_client()

    # --- channel -----------------------------------------------------------------------------------

    def _with_retries(self, what: str, attempt: Callable[[], Any]) -> Any:
        last = ""
        for number in range(1, self.settings.attempts + 1):
            if self._closed.is_set():
                raise KafkaOffsetsError(f"group {self.settings.group}: cannot {what}: the consumer is shutting down")
            with self._lock:
                try:
                    return attempt()
                except _Retry as exc:
                    last = str(exc)
                    self._coordinator = None  # 0.8.2 drops the channel and looks the coordinator up again
            log.info("%s: group %s: %s failed (attempt %d of %d): %s", self.settings.consumer_id,
                     self.settings.group, what, number, self.settings.attempts, last)
            if number < self.settings.attempts:
                self._closed.wait(self.settings.backoff_ms / 1000.0)
        raise KafkaOffsetsError(
            f"group {self.settings.group}: could not {what} in Kafka after {self.settings.attempts} attempt(s): "
            f"{last}; check that the brokers registered in ZooKeeper are up and serve __consumer_offsets, or raise "
            "offsets.commit.max.retries / offsets.channel.socket.timeout.ms")

    def _send(self, request: Any) -> Any:
        """Send to the coordinator (looked up first if needed); a broken channel or a timeout is a `_Retry`."""
        node = self._coordinator or self._find_coordinator()
        assert self._client is not None
        try:
            return self._client.send_and_receive(node, request, timeout_ms=self.settings.socket_timeout_ms)
        except Exception as exc:  # as 0.8.2: any failure of the channel drops it, and the attempt is retried
            self._drop_client()
            raise _Retry(f"coordinator {node}: {_describe(exc)}") from exc

    def _find_coordinator(self) -> str:
        """ConsumerMetadataRequest to a live broker until one names the coordinator, every
        `offsets.channel.backoff.ms`. 0.8.2 blocks here forever; we give up after `offsets.channel.socket.timeout.ms`
        and let the caller's retries decide, so a coordinator that never appears ends in an error, not a hang."""
        deadline = time.monotonic() + self.settings.socket_timeout_ms / 1000.0
        while True:
            problem = self._ask_for_coordinator()
            if problem is None:
                assert self._coordinator is not None
                return self._coordinator
            if time.monotonic() >= deadline or self._closed.wait(self.settings.backoff_ms / 1000.0):
                raise _Retry(f"no coordinator: {problem}")

    def _ask_for_coordinator(self) -> str | None:
        """One lookup; None when the coordinator is known, else why not."""
        from kafka.errors import KafkaError
        from kafka.protocol.metadata import FindCoordinatorRequest

        try:
            client = self._client or self._connect()
            node = client.least_loaded_node()
            if node is None:
                self._drop_client()
                return "no broker reachable"
            response = client.send_and_receive(node, FindCoordinatorRequest[0](key=self.settings.group),
                                               timeout_ms=self.settings.socket_timeout_ms)
        except (KafkaError, OSError) as exc:
            self._drop_client()
            return _describe(exc)
        except _NoBrokers as exc:
            return str(exc)
        if response.error_code:
            return _error_name(response.error_code)
        self._coordinator = client.cluster.add_coordinator(response, "group", self.settings.group)
        log.info("%s: group %s: offset manager is broker %d at %s:%d", self.settings.consumer_id,
                 self.settings.group, response.node_id, response.host, response.port)
        return None

    def _connect(self) -> Any:
        from kafka.net.compat import KafkaNetClient

        brokers = self._brokers()
        if not brokers:
            raise _NoBrokers("no broker registered in ZooKeeper")
        random.shuffle(brokers)  # 0.8.2 asks a random live broker
        client = KafkaNetClient(bootstrap_servers=[f"{b.host}:{b.port}" for b in brokers],
                                client_id=self.settings.client_id, request_timeout_ms=self.settings.socket_timeout_ms,
                                reconnect_backoff_ms=self.settings.backoff_ms)
        try:
            client.check_version(timeout_ms=self.settings.socket_timeout_ms)
        except BaseException:
            client.close()
            raise
        self._client = client
        return client

    def _drop_client(self) -> None:
        client, self._client, self._coordinator = self._client, None, None
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a broken connection must not hide why it broke
                log.debug("%s: error closing the offset channel", self.settings.consumer_id, exc_info=True)


class _NoBrokers(Exception):
    pass


def _by_topic(items: Iterable[tuple[TopicPartition, int]]) -> dict[str, list[tuple[int, int]]]:
    grouped: dict[str, list[tuple[int, int]]] = {}
    for tp, value in sorted(items):
        grouped.setdefault(tp.topic, []).append((tp.partition, value))
    return grouped


def _describe(exc: BaseException) -> str:
    text = str(exc)  # kafka-python's errors already start with their class name
    return text if text.startswith(type(exc).__name__) else f"{type(exc).__name__}: {text}"


def _error_name(code: int) -> str:
    from kafka.errors import for_code

    return f"{for_code(code).__name__} ({code})"
