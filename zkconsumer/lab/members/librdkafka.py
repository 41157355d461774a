"""One lab member of the cooperative or the consumer-protocol design: a librdkafka consumer (confluent-kafka) in
the run's group, reporting what its rebalance callbacks hand it as the same trace records the eager design's
kafka-python member writes (members/coordinator.py), so the analysis reads every broker-side member alike.

    protocol "cooperative"  the classic protocol (JoinGroup/SyncGroup) with `partition.assignment.strategy =
                            cooperative-sticky` (KIP-429): a rebalance revokes only the partitions that move, and a
                            second rebalance hands them to their new owner
    protocol "consumer"     the consumer group protocol (`group.protocol = consumer`, KIP-848): the broker computes
                            the assignment (`group.remote.assignor`: uniform or range) and hands it out in
                            ConsumerGroupHeartbeat responses; the session and heartbeat are the broker's settings
                            (`group.consumer.session.timeout.ms`, `group.consumer.heartbeat.interval.ms`)

In a thread (`LibrdkafkaMember.start()`) or as an OS process (`python -m zkconsumer.lab.members.librdkafka
SETTINGS_JSON`, or `-` to read the JSON from stdin's first line), which SIGTERM, SIGINT, a `stop` line on stdin or
the end of stdin stop gracefully (the consumer's close: revoke, commit, leave), SIGKILL kills and SIGSTOP pauses.

Under both protocols librdkafka calls the rebalance callbacks with INCREMENTAL partitions (librdkafka's
INTRODUCTION.md, "Rebalance Callback Changes"; `rd_kafka_cgrp_handle_assignment` in src/rdkafka_cgrp.c), always
as a revoke of what leaves followed at once by an assign of what arrives, the assign called even when nothing
arrives. The member keeps its whole assignment itself and writes:

    generation  kind "assigned": `partitions` = the WHOLE assignment after the change, `added` = what this
                callback added (possibly nothing: a round that only confirmed or only took away);
                kind "revoked" / "lost": `partitions` = what was taken away, `remaining` = what the member still
                owns (the eager member writes no `remaining`: nothing remains there).
                Every one carries `generation: null` (confluent-kafka exposes neither the classic generation id nor
                the KIP-848 member epoch; the Kafka proxy reads those off the wire), `round` (this member's count
                of assign callbacks, the member-side stand-in for a generation: an assign carries its new round, a
                revoke or loss the round it cuts short) and `member_id` (`Consumer.memberid()`).
    assignment  after every change of the whole assignment (an assign, and also a revoke or loss): `partitions`.
    consume     what was handed out, in runs of offsets (coordinator_member._Batches).

The callbacks run inside `poll()`, on the member's own poll thread, so a record's `ts` is when that poll served
the rebalance, up to one poll timeout (`poll_timeout_ms`, 100 ms by default: keep it small) after librdkafka's
main thread received it.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from zkconsumer.lab.members.coordinator import _Batches
from zkconsumer.lab.members.process import JsonSettings, run_member
from zkconsumer.lab.trace import TraceWriter
from zkconsumer.lab.wire import kafka_codec
from zkconsumer.lab.wire.frames import read_frame
from zkconsumer.lab.wire.tcp import host_port

log = logging.getLogger(__name__)

PROTOCOLS: tuple[str, ...] = ("cooperative", "consumer")
REMOTE_ASSIGNORS: tuple[str, ...] = ("uniform", "range")
FLUSH_S = 0.2  # consume batches are written at least this often while messages keep coming
# How long a stop waits for the consumer's close (final revoke, auto-commit, leave). Under the consumer protocol
# librdkafka retries the closing commit for up to the broker's session timeout (INTRODUCTION.md, "Closing /
# Auto-Commit"), which the lab keeps at a few seconds.
CLOSE_BOUND_S = 20.0
# Errors a poll reports that mean the member cannot go on: the consumer protocol asked of a broker that lacks it,
# a group or topic the member may not read.
# ConsumerGroupHeartbeat's api key (clients/src/main/resources/common/message/ConsumerGroupHeartbeatRequest.json),
# and the version librdkafka sends, the only one it accepts (`rd_kafka_ConsumerGroupHeartbeatRequest` in
# src/rdkafka_request.c): v1, Kafka 4.0's (v0 was Kafka 3.7 to 3.9's early access, which a ZooKeeper-mode broker
# lists too).
CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_HEARTBEAT_VERSION = 1
_PROBE_TIMEOUT_S = 10.0
_HOPELESS = {KafkaError.UNSUPPORTED_VERSION, KafkaError._UNSUPPORTED_FEATURE, KafkaError.GROUP_AUTHORIZATION_FAILED,
             KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.UNSUPPORTED_ASSIGNOR, KafkaError.INVALID_CONFIG}


class LibrdkafkaMemberError(RuntimeError):
    """The member cannot go on; the message is one line naming the cause and the fix."""


@dataclass(frozen=True)
class LibrdkafkaMemberSettings(JsonSettings):
    name: str  # also client.id: the Kafka proxy's link for this member
    group: str
    topics: list[str]
    bootstrap: str  # the Kafka proxy
    run_path: str  # the run directory; the trace goes to traces/<name>.jsonl
    protocol: str = "cooperative"  # one of PROTOCOLS
    # The consumer protocol's server-side assignor (group.remote.assignor); None = the broker's first configured one
    # (Kafka 4: uniform). Refused under cooperative, whose assignor is the members' cooperative-sticky.
    remote_assignor: str | None = None
    # Classic protocol only (cooperative); None = librdkafka's default. The consumer protocol refuses them: the
    # broker owns the session and the heartbeat there.
    session_timeout_ms: int | None = None
    heartbeat_interval_ms: int | None = None
    # Both protocols: librdkafka leaves the group when the application stops polling for this long; under the
    # classic protocol it is also the JoinGroup rebalance timeout.
    max_poll_interval_ms: int = 30000
    # topic.metadata.refresh.interval.ms: how soon a cooperative group's leader sees added partitions (the broker
    # sees them itself under the consumer protocol).
    metadata_max_age_ms: int = 300_000
    # The ZooKeeper design's auto.commit.enable and auto.commit.interval.ms, as the eager member takes them.
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 60_000
    incarnation: int = 1  # 1 for the first start of this name, 2 for its first restart, ...
    log_level: str = "INFO"
    poll_timeout_ms: int = 100  # how late a callback's record can be (module docstring)
    extra: dict[str, Any] = field(default_factory=dict)  # more librdkafka configuration properties

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)} (librdkafka's group protocols; the "
                             f"eager one runs kafka-python's coordinator_member), not {self.protocol!r}")
        if self.protocol == "consumer":
            owned = {"session_timeout_ms": (self.session_timeout_ms, "group.consumer.session.timeout.ms"),
                     "heartbeat_interval_ms": (self.heartbeat_interval_ms, "group.consumer.heartbeat.interval.ms")}
            for key, (value, broker_key) in owned.items():
                if value is not None:
                    raise ValueError(f"{key} is a classic-protocol setting: under the consumer protocol (KIP-848) "
                                     f"the broker owns it ({broker_key}): leave it unset")
        if self.remote_assignor is not None and self.protocol != "consumer":
            raise ValueError(f"remote_assignor {self.remote_assignor!r} is the consumer protocol's: the cooperative "
                             "design's members assign with cooperative-sticky; leave it unset")
        if self.remote_assignor is not None and self.remote_assignor not in REMOTE_ASSIGNORS:
            raise ValueError(f"remote_assignor must be one of {', '.join(REMOTE_ASSIGNORS)}, "
                             f"not {self.remote_assignor!r}")
        if not 0 < self.poll_timeout_ms <= 1000:
            raise ValueError(f"poll_timeout_ms must be in (0, 1000] (it bounds how late a rebalance is recorded), "
                             f"not {self.poll_timeout_ms}")

    def consumer_config(self) -> dict[str, Any]:
        """librdkafka configuration properties (CONFIGURATION.md) for `confluent_kafka.Consumer`."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap, "client.id": self.name, "group.id": self.group,
            "auto.offset.reset": "earliest", "enable.auto.commit": self.enable_auto_commit,
            "auto.commit.interval.ms": self.auto_commit_interval_ms,
            # The member stores an offset only once the `consume` record that covers it is written (_flush), so no
            # auto-commit (librdkafka's own thread, any time) includes an offset the trace has not recorded.
            "enable.auto.offset.store": False,
            "max.poll.interval.ms": self.max_poll_interval_ms,
            "topic.metadata.refresh.interval.ms": self.metadata_max_age_ms,
        }
        if self.protocol == "cooperative":
            config.update({"group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky"})
            if self.session_timeout_ms is not None:
                config["session.timeout.ms"] = self.session_timeout_ms
            if self.heartbeat_interval_ms is not None:
                config["heartbeat.interval.ms"] = self.heartbeat_interval_ms
        else:
            config["group.protocol"] = "consumer"
            if self.remote_assignor is not None:
                config["group.remote.assignor"] = self.remote_assignor
        return {**config, **self.extra}

    @property
    def stop_bound_s(self) -> float:
        """How long a graceful stop may take: the last poll, then the close."""
        return self.poll_timeout_ms / 1000 + CLOSE_BOUND_S


def partition_names(partitions: list[TopicPartition]) -> list[str]:
    return sorted(f"{tp.topic}/{tp.partition}" for tp in partitions)


def require_consumer_protocol(settings: LibrdkafkaMemberSettings) -> None:
    """Fail at once, in one line, when the bootstrap broker cannot run the consumer protocol.

    librdkafka does not report it: finding no ConsumerGroupHeartbeat v1 in the coordinator's ApiVersions, it marks
    the coordinator dead and looks for it again, for ever, saying so only in its `cgrp` debug log
    (`rd_kafka_cgrp_coord_dead` in src/rdkafka_cgrp.c). So the member asks ApiVersions itself, once, on a
    connection of its own under its own client id (librdkafka opens each of its connections with an ApiVersions
    too). A broker it cannot reach is librdkafka's to retry and report."""
    from kafka.protocol.metadata import ApiVersionsRequest

    request = ApiVersionsRequest[0]()
    request.with_header(correlation_id=1, client_id=settings.name)
    first = settings.bootstrap.split(",")[0].strip()
    try:
        with socket.create_connection(host_port(first), timeout=_PROBE_TIMEOUT_S) as sock:
            sock.sendall(request.encode(header=True, framed=True))
            payload = read_frame(sock)
    except OSError as exc:
        log.warning("lab member %s: could not ask %s for its APIs (%s); librdkafka will retry", settings.name,
                    first, exc)
        return
    response_class = kafka_codec.response_class(request.API_KEY, request.API_VERSION)
    assert response_class is not None  # kafka-python knows ApiVersions v0
    answer = response_class.decode(payload[4:], version=0).to_dict(json=False)
    newest = {k["api_key"]: k["max_version"] for k in answer["api_keys"]}.get(CONSUMER_GROUP_HEARTBEAT)
    if newest is None or newest < CONSUMER_GROUP_HEARTBEAT_VERSION:
        offered = "none" if newest is None else f"v{newest} at most"
        raise LibrdkafkaMemberError(
            f"lab member {settings.name}: the consumer group protocol (KIP-848) needs a broker that answers "
            f"ConsumerGroupHeartbeat v{CONSUMER_GROUP_HEARTBEAT_VERSION}, Apache Kafka 4.x in KRaft mode; {first} "
            f"offers {offered}: run the consumer design against a Kafka 4 broker")


def describe(error: KafkaError, settings: LibrdkafkaMemberSettings) -> str:
    """One line for a librdkafka error: its name and reason, and for the known hopeless ones, the fix."""
    text = f"{error.name()}: {error.str()}"
    if settings.protocol == "consumer" and error.code() in (KafkaError.UNSUPPORTED_VERSION,
                                                            KafkaError._UNSUPPORTED_FEATURE):
        return (f"{text}: the consumer group protocol (KIP-848) needs a broker that answers ConsumerGroupHeartbeat, "
                f"Apache Kafka 4.x in KRaft mode; {settings.bootstrap} does not (run the cooperative design there)")
    if error.code() == KafkaError.UNSUPPORTED_ASSIGNOR:
        return (f"{text}: remote_assignor {settings.remote_assignor!r} is not among the broker's "
                "group.consumer.assignors")
    if error.code() in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED):
        return f"{text}: grant client {settings.name} read access to group {settings.group} and its topics"
    return text


class LibrdkafkaMember:
    """A consumer and one thread, `lab-<name>-poll`, that polls it, serves its rebalance callbacks and closes it
    (librdkafka's close must not race a poll on another thread, and a short poll makes a stop prompt)."""

    def __init__(self, settings: LibrdkafkaMemberSettings, trace: TraceWriter) -> None:
        self.settings = settings
        self.name = settings.name
        self.trace = trace
        self.error: BaseException | None = None
        self.partitions: set[str] = set()  # the whole assignment
        self.round = 0  # assign callbacks so far
        self._batches = _Batches(trace, settings.name)
        # No generation on the member side (module docstring): consume records carry null.
        self._batches.generation = None  # type: ignore[assignment]
        self._to_store: dict[tuple[str, int], int] = {}  # offsets handed out, stored at the next flush
        self._last_flush = time.monotonic()
        self._fatal: KafkaError | None = None
        self._warned: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lab-{self.name}-poll", daemon=True)

    # --- control (any thread) --------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        """Ask for a graceful leave; returns at once (`join` waits for it)."""
        self._stop.set()

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self.alive

    def stop(self, timeout: float | None = None) -> bool:
        self.request_stop()
        return self.join(self.settings.stop_bound_s if timeout is None else timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def threads(self) -> list[threading.Thread]:
        return [self._thread]

    # --- the poll thread -----------------------------------------------------------------------------------

    def _run(self) -> None:
        consumer: Consumer | None = None
        try:
            if self.settings.protocol == "consumer":
                require_consumer_protocol(self.settings)
            config = {**self.settings.consumer_config(), "error_cb": self._on_error,
                      "logger": logging.getLogger(f"librdkafka.{self.name}")}
            try:
                consumer = Consumer(config)
            except KafkaException as exc:
                raise LibrdkafkaMemberError(f"lab member {self.name}: librdkafka refused its configuration: "
                                            f"{exc.args[0].str()}") from exc
            consumer.subscribe(list(self.settings.topics), on_assign=self._on_assign, on_revoke=self._on_revoke,
                               on_lost=self._on_lost)
            log.info("lab member %s: subscribed to %s in group %s (%s protocol)", self.name, self.settings.topics,
                     self.settings.group, self.settings.protocol)
            self._poll_loop(consumer)
        except LibrdkafkaMemberError as exc:
            # Its message is the one line that says what to fix.
            self.error = exc
            log.error("%s", exc)
        except BaseException as exc:
            self.error = exc
            log.exception("lab member %s: failed", self.name)
        finally:
            self._stop.set()
            if consumer is not None:
                self._close(consumer)
            self._batches.flush()
            log.info("lab member %s: stopped", self.name)

    def _poll_loop(self, consumer: Consumer) -> None:
        # A short poll loses nothing here: librdkafka runs the group protocol on its own threads and queues the
        # rebalance for the next poll (kafka-python loses a join that completes between polls, hence the eager
        # member's long poll). The timeout bounds how late a callback's record is, and how long a stop waits.
        timeout = self.settings.poll_timeout_ms / 1000
        while not self._stop.is_set():
            # While records wait to be written, take the rest of what librdkafka has queued without waiting, then
            # write them all: one flush per fetched batch, as the eager member writes one per poll.
            message = consumer.poll(0 if self._to_store else timeout)
            if self._fatal is not None:
                raise LibrdkafkaMemberError(f"lab member {self.name}: {describe(self._fatal, self.settings)}")
            if message is None:
                self._flush(consumer)
                continue
            if message.error() is not None:
                self._on_message_error(message)
                continue
            self._handed_out(message)
            if time.monotonic() - self._last_flush >= FLUSH_S:
                self._flush(consumer)
        self._flush(consumer)

    def _handed_out(self, message: Message) -> None:
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        self._batches.add(topic, partition, offset, offset, 1)
        self._to_store[(topic, partition)] = offset + 1

    def _flush(self, consumer: Consumer, store: bool = True) -> None:
        """Write the open consume batches, then store their offsets for the next auto-commit."""
        self._batches.flush()
        self._last_flush = time.monotonic()
        offsets, self._to_store = self._to_store, {}
        if not (store and offsets and self.settings.enable_auto_commit):
            return
        try:
            consumer.store_offsets(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()])
        except KafkaException as exc:
            # A partition this poll's callback has just taken away: its offsets are not this member's to commit.
            log.info("lab member %s: offsets not stored (%s)", self.name, exc.args[0].str())

    def _on_message_error(self, message: Message) -> None:
        error: KafkaError = message.error()
        if error.fatal() or error.code() in _HOPELESS:
            self._fatal = error
            raise LibrdkafkaMemberError(f"lab member {self.name}: {describe(error, self.settings)}")
        if error.code() == KafkaError._PARTITION_EOF:
            return
        level = logging.INFO if error.code() in self._warned else logging.WARNING
        self._warned.add(error.code())
        log.log(level, "lab member %s: %s (%s/%s); polling on", self.name, describe(error, self.settings),
                message.topic(), message.partition())

    def _on_error(self, error: KafkaError) -> None:
        """librdkafka's error_cb (served in poll): client-wide errors. Most are transient (a broker connection
        lost, all brokers down for a moment) and librdkafka retries them; a fatal one ends the member."""
        if error.fatal() or error.code() in _HOPELESS:
            self._fatal = self._fatal or error
            return
        level = logging.INFO if error.code() in self._warned else logging.WARNING
        self._warned.add(error.code())
        log.log(level, "lab member %s: %s", self.name, describe(error, self.settings))

    def _close(self, consumer: Consumer) -> None:
        log.info("lab member %s: closing (final revoke, commit, leave)", self.name)
        try:
            # Serves the final revoke callback (on this thread), commits what the last flush stored, leaves.
            consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.warning("lab member %s: close failed: %s", self.name, exc)
            self.error = self.error or exc

    # --- rebalance callbacks (inside poll or close, on the poll thread) --------------------------------------

    def _on_assign(self, consumer: Consumer, added: list[TopicPartition]) -> None:
        names = partition_names(added)
        self.partitions.update(names)
        self.round += 1
        whole = sorted(self.partitions)
        self.trace.write("generation", member=self.name, generation=None, kind="assigned", partitions=whole,
                         added=names, round=self.round, member_id=consumer.memberid() or None)
        self.trace.write("assignment", member=self.name, partitions=whole, generation=None, round=self.round)
        log.info("lab member %s: round %d assigned %s (now %s)", self.name, self.round, names, whole)

    def _on_revoke(self, consumer: Consumer, revoked: list[TopicPartition]) -> None:
        # What was consumed under the old assignment goes before its end, its offsets stored while still owned
        # (librdkafka commits them as it unassigns, when auto-commit is on).
        self._flush(consumer)
        self._taken("revoked", consumer, revoked)

    def _on_lost(self, consumer: Consumer, lost: list[TopicPartition]) -> None:
        # Lost partitions may be another member's already: write what was consumed, store nothing.
        self._flush(consumer, store=False)
        self._taken("lost", consumer, lost)

    def _taken(self, kind: str, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        names = partition_names(partitions)
        self.partitions.difference_update(names)
        remaining = sorted(self.partitions)
        self.trace.write("generation", member=self.name, generation=None, kind=kind, partitions=names,
                         remaining=remaining, round=self.round, member_id=consumer.memberid() or None)
        self.trace.write("assignment", member=self.name, partitions=remaining, generation=None, round=self.round)
        log.info("lab member %s: round %d %s %s (remaining %s)", self.name, self.round, kind, names, remaining)


def main(argv: list[str] | None = None) -> int:
    """Process entry point (members/process.py): settings as one JSON argument (or `-`: the first line of stdin)."""
    # the protocol names the design: "cooperative" or "consumer" (designs.py)
    return run_member("zkconsumer.lab.members.librdkafka", argv, LibrdkafkaMemberSettings.from_json,
                      lambda s: s.protocol, LibrdkafkaMember, lambda m: m.stop())

if __name__ == "__main__":
    sys.exit(main())
