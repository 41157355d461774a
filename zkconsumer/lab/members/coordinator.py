"""One coordinator-design lab member: a kafka-python `KafkaConsumer` in the run's group, reporting what the
broker's group coordinator hands it as trace records.

In a thread (`CoordinatorMember.start()` in the orchestrator's process) or as an OS process
(`python -m zkconsumer.lab.members.coordinator SETTINGS_JSON`, or `-` to read the JSON from stdin's first
line), which SIGTERM, SIGINT, a `stop` line on stdin or the end of stdin stop gracefully (LeaveGroup), SIGKILL
kills and SIGSTOP pauses. The member writes its own trace file: `generation` records (assigned / revoked /
lost, from its rebalance listener), an `assignment` record after each assignment, and what it consumed as
`consume` batches.

kafka-python 3.0.12 loses a JoinGroup/SyncGroup that completes while no `poll()` is waiting for it (the next
poll sends a new JoinGroup, which costs the whole group another rebalance), so the member never polls with a
short timeout: it long-polls, and a stop request wakes that poll instead (`_wake`).

The consumer is used by its poll thread alone, the close included. A stop used to close it from a second thread
while the poll thread was still inside `poll()`, and the two raced whenever the stop met a rejoin (one the
member's heartbeat had just asked for, or a JoinGroup in flight): the poll's join loop
(BaseCoordinator.join_group_async) went on with its JoinGroup/SyncGroup, or answered the UNKNOWN_MEMBER_ID that the
close's LeaveGroup earned its pending JoinGroup with a fresh JoinGroup (maybe_leave_group_async ends in
reset_generation, which sets rejoin_needed), so group requests followed the LeaveGroup. A member id joined that
way never leaves: the coordinator waits for it, up to a session timeout, before the rest of the group settles,
and the member's poll goes on taking part in generations after it was asked to stop.
Now the wake only ends the poll after its current round (a join in progress completes first, so a stop
mid-rebalance still waits for that rebalance), and the poll thread closes the consumer, with nothing polling.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from zkconsumer.lab.members.process import JsonSettings, run_member
from zkconsumer.lab.trace import TraceWriter

log = logging.getLogger(__name__)

FLUSH_S = 0.2  # consume batches are written at least this often
CLOSE_TIMEOUT_MS = 5000  # KafkaConsumer.close: auto-commit and LeaveGroup budget
ASSIGNORS = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}


@dataclass(frozen=True)
class CoordinatorMemberSettings(JsonSettings):
    name: str  # also the client_id: the Kafka proxy's link, and the prefix of the coordinator's member id
    group: str
    topics: list[str]
    bootstrap: str  # the Kafka proxy
    run_path: str  # the run directory; the trace goes to traces/<name>.jsonl
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 2000
    max_poll_interval_ms: int = 30000
    assignor: str = "range"
    metadata_max_age_ms: int = 300_000  # how soon the group leader sees added partitions (and rebalances)
    # The ZooKeeper design's auto.commit.enable and auto.commit.interval.ms, so both designs commit alike
    # (Scenario.coordinator_commit_interval_ms); Kafka 0.8's defaults, not kafka-python's 5000.
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 60_000
    incarnation: int = 1  # 1 for the first start of this name, 2 for its first restart, ...
    log_level: str = "INFO"
    extra: dict[str, Any] = field(default_factory=dict)  # more KafkaConsumer keyword arguments

    def __post_init__(self) -> None:
        if self.assignor not in ASSIGNORS:
            raise ValueError(f"assignor must be one of {', '.join(ASSIGNORS)}, not {self.assignor!r}")

    def consumer_config(self) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap, "client_id": self.name, "group_id": self.group,
            "session_timeout_ms": self.session_timeout_ms, "heartbeat_interval_ms": self.heartbeat_interval_ms,
            "max_poll_interval_ms": self.max_poll_interval_ms, "metadata_max_age_ms": self.metadata_max_age_ms,
            "partition_assignment_strategy": [ASSIGNORS[self.assignor]],
            "auto_offset_reset": "earliest", "enable_auto_commit": self.enable_auto_commit,
            "auto_commit_interval_ms": self.auto_commit_interval_ms, **self.extra,
        }

    @property
    def poll_timeout_ms(self) -> int:
        # Longer than any join can take (the JoinGroup request timeout is max_poll_interval_ms + 5 s), so a join
        # that a poll starts always completes inside that poll; a stop wakes the poll (CoordinatorMember._wake).
        return self.max_poll_interval_ms + 10_000

    @property
    def settle_bound_s(self) -> float:
        """How long a stop waits for the woken poll (a rebalance in progress) before closing from the stop thread."""
        return min(self.max_poll_interval_ms, self.session_timeout_ms + 3000) / 1000


def assignment_generation(consumer: KafkaConsumer) -> int:
    """The group generation id of the assignment a rebalance listener is being told about.

    kafka-python 3.0.12 calls `on_partitions_assigned` from `ConsumerCoordinator._on_join_complete_async`, in
    the same IO-loop step that stored the JoinGroup response's generation and without an await in between, so
    the public `group_metadata()` snapshot is that assignment's generation (the one `GroupCoordinator.doSyncGroup`
    answered for). In `on_partitions_revoked` it is still the generation being left; after a forced eviction
    (`on_partitions_lost`) it has been reset to -1.
    """
    return consumer.group_metadata().generation_id


def _described(exc: BaseException) -> str:
    """`Type: message`, once: kafka-python's errors already start their message with their type's name."""
    text = str(exc)
    return text if text.startswith(type(exc).__name__) else f"{type(exc).__name__}: {text}"


def partition_names(partitions: Any) -> list[str]:
    return sorted(f"{tp.topic}/{tp.partition}" for tp in partitions)


class _Batches:
    """Per partition, the offsets handed out since the last flush (one `consume` record each run of offsets)."""

    def __init__(self, trace: TraceWriter, member: str) -> None:
        self.trace = trace
        self.member = member
        self.generation = -1
        self._lock = threading.Lock()
        self._open: dict[tuple[str, int], list[int]] = {}  # (topic, partition) -> [first, last, count]

    def add(self, topic: str, partition: int, first: int, last: int, count: int) -> None:
        with self._lock:
            batch = self._open.get((topic, partition))
            if batch is not None and first == batch[1] + 1:
                batch[1], batch[2] = last, batch[2] + count
                return
            if batch is not None:
                self._write(topic, partition, batch)
            self._open[(topic, partition)] = [first, last, count]

    def add_offsets(self, topic: str, partition: int, offsets: list[int]) -> None:
        """Offsets in the order handed out; a gap (compaction, transaction markers) starts a new run."""
        start = 0
        for i in range(1, len(offsets) + 1):
            if i == len(offsets) or offsets[i] != offsets[i - 1] + 1:
                self.add(topic, partition, offsets[start], offsets[i - 1], i - start)
                start = i

    def flush(self) -> None:
        with self._lock:
            for (topic, partition), batch in self._open.items():
                self._write(topic, partition, batch)
            self._open.clear()

    def _write(self, topic: str, partition: int, batch: list[int]) -> None:
        self.trace.write("consume", member=self.member, topic=topic, partition=partition, first_offset=batch[0],
                         last_offset=batch[1], count=batch[2], generation=self.generation)


class _Listener(ConsumerRebalanceListener):
    """Runs on the consumer's IO thread (the one that heartbeats): it only writes trace lines."""

    def __init__(self, member: CoordinatorMember) -> None:
        self.member = member

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.member._revoked("revoked", revoked)

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.member._assigned(assigned)

    def on_partitions_lost(self, lost: Any) -> None:
        self.member._revoked("lost", lost)


class CoordinatorMember:
    """A consumer plus two threads: `-poll` (the long poll, and the close) and `-aux` (flushes batches, bounds the
    stop)."""

    def __init__(self, settings: CoordinatorMemberSettings, trace: TraceWriter) -> None:
        self.settings = settings
        self.name = settings.name
        self.trace = trace
        self.error: BaseException | None = None
        self.generation = -1  # of the latest assignment
        self.partitions: list[str] = []
        self._batches = _Batches(trace, settings.name)
        self._stop = threading.Event()
        self._polling_done = threading.Event()  # the poll loop has ended (the close follows on that thread)
        self._lock = threading.Lock()  # _consumer, _closing, and the consumer's wake flag
        self._consumer: KafkaConsumer | None = None
        self._closing = False  # someone has begun to close the consumer: nobody wakes it, nobody closes it again
        self._threads = [threading.Thread(target=self._poll_loop, name=f"lab-{self.name}-poll", daemon=True),
                         threading.Thread(target=self._aux_loop, name=f"lab-{self.name}-aux", daemon=True)]

    # --- control (any thread) --------------------------------------------------------------------------

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def request_stop(self) -> None:
        """Ask for a graceful leave; returns at once (`join` waits for it)."""
        self._stop.set()
        self._wake()

    def join(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))
        return not self.alive

    def stop(self, timeout: float = 30.0) -> bool:
        self.request_stop()
        return self.join(timeout)

    @property
    def alive(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    @property
    def threads(self) -> list[threading.Thread]:
        return list(self._threads)

    def _wake(self) -> None:
        """End the poll in progress after its current round, without touching the consumer's state.

        kafka-python 3.0.12 has no `KafkaConsumer.wakeup()`; its `poll()` runs `_poll_once` rounds `while not
        self._closed` (kafka/consumer/group.py, `poll`) and returns {} once that flag is set, after the round in
        progress: a fetch wait (at most fetch_max_wait_ms, or the time to the next heartbeat), or a join, which
        `_poll_once` awaits to its end (ConsumerCoordinator.poll -> ensure_active_group). Setting the flag is all
        `close()` does before its own work (group.py, `close`); the poll thread clears it again under `_lock` and
        then calls the real `close()` (`_close`)."""
        with self._lock:
            if self._consumer is not None and not self._closing:
                self._consumer._closed = True

    # --- the two threads ---------------------------------------------------------------------------------

    def _poll_loop(self) -> None:
        stage = "bootstrap"  # KafkaConsumer() reaches a broker and asks its API versions before it returns
        consumer: KafkaConsumer | None = None
        try:
            consumer = KafkaConsumer(**self.settings.consumer_config())
            stage = "poll"
            with self._lock:
                self._consumer = consumer
            if not self._stop.is_set():  # not stopped while connecting
                consumer.subscribe(topics=list(self.settings.topics), listener=_Listener(self))
                log.info("lab member %s: subscribed to %s in group %s", self.name, self.settings.topics,
                         self.settings.group)
            while not self._stop.is_set():
                try:
                    batches = consumer.poll(timeout_ms=self.settings.poll_timeout_ms)
                except Exception as exc:
                    if self._stop.is_set():  # woken before the poll began (IllegalStateError), or a late error
                        break
                    log.warning("lab member %s: poll failed (%s: %s); polling again", self.name,
                                type(exc).__name__, exc)
                    self._stop.wait(1.0)
                    continue
                for tp, records in batches.items():
                    self._batches.add_offsets(tp.topic, tp.partition, [record.offset for record in records])
                # Written before the loop goes on, as the ZooKeeper design's member writes each message before it
                # takes the next. poll() auto-commits the positions of what earlier polls returned (kafka-python
                # commits only inside poll() and close()), so no commit can include an offset not yet recorded.
                self._batches.flush()
        except BaseException as exc:
            self.error = exc
            log.exception("lab member %s: failed", self.name)
            # The driver names the member and why in the run's status (CoordinatorDriver.failed): an exit code
            # alone cannot tell a member that never reached the broker from one that crashed later.
            self.trace.write("member_event", member=self.name, kind="failed", stage=stage, error=_described(exc))
        finally:
            self._polling_done.set()
            self._stop.set()
            try:
                if consumer is not None:
                    self._close(consumer)  # here, with no poll running: nothing can send a JoinGroup after it
            except BaseException as exc:
                self.error = self.error or exc
                log.exception("lab member %s: close failed", self.name)

    def _aux_loop(self) -> None:
        try:
            while not self._stop.wait(FLUSH_S):
                self._batches.flush()
            # The woken poll ends after its round; a round that waits in a join ends with the join, which a group
            # that lost a member completes within a session timeout. Beyond that bound the member closes from here,
            # as it did for every stop before: a late leave rather than none.
            if not self._polling_done.wait(self.settings.settle_bound_s):
                consumer = self._consumer
                log.warning("lab member %s: still polling %.0f s after the stop (a rebalance that does not end): "
                            "closing it from the stop thread", self.name, self.settings.settle_bound_s)
                if consumer is not None:
                    self._close(consumer)
            self._polling_done.wait(CLOSE_TIMEOUT_MS / 1000 + 5)
        except BaseException as exc:
            self.error = self.error or exc
            log.exception("lab member %s: stop failed", self.name)
        finally:
            self._batches.flush()
            log.info("lab member %s: stopped", self.name)

    def _close(self, consumer: KafkaConsumer) -> None:
        """Close once (LeaveGroup), from whichever thread gets here first; bounded by CLOSE_TIMEOUT_MS."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            consumer._closed = False  # the wake's flag (`_wake`): close() returns at once while it is set
            # kafka-python sends LeaveGroup only for a member with an id that is not UNJOINED
            # (BaseCoordinator.maybe_leave_group_async): what the member was when it closed, for whoever checks.
            before = consumer.group_metadata()
        log.info("lab member %s: closing (LeaveGroup)", self.name)
        began = time.monotonic()
        consumer.close(timeout_ms=CLOSE_TIMEOUT_MS)
        self.trace.write("member_event", member=self.name, kind="closed", member_id=before.member_id,
                         group_state=before.state, generation=before.generation_id,
                         duration_s=round(time.monotonic() - began, 3))

    # --- rebalance listener (the consumer's IO thread) -----------------------------------------------------

    def _assigned(self, assigned: Any) -> None:
        consumer = self._consumer
        generation = assignment_generation(consumer) if consumer is not None else -1
        partitions = partition_names(assigned)
        self.generation, self.partitions = generation, partitions
        self._batches.generation = generation
        member_id = consumer.group_metadata().member_id if consumer is not None else None
        self.trace.write("generation", member=self.name, generation=generation, kind="assigned",
                         partitions=partitions, member_id=member_id)
        self.trace.write("assignment", member=self.name, partitions=partitions, generation=generation)
        log.info("lab member %s: generation %s assigned %s", self.name, generation, partitions)

    def _revoked(self, kind: str, partitions: Any) -> None:
        self._batches.flush()  # what was consumed under the old assignment goes before its end
        if not partitions and self.generation < 0:
            return  # kafka-python "revokes" nothing before the first join: not an event of the group
        consumer = self._consumer
        now = assignment_generation(consumer) if consumer is not None else -1
        # After an eviction the client has already reset its generation: report the one that was lost.
        generation = now if now >= 0 else self.generation
        self.trace.write("generation", member=self.name, generation=generation, kind=kind,
                         partitions=partition_names(partitions))
        log.info("lab member %s: generation %s %s %s", self.name, generation, kind, partition_names(partitions))


def main(argv: list[str] | None = None) -> int:
    """Process entry point (members/process.py): settings as one JSON argument (or `-`: the first line of stdin)."""
    # kafka-python's DEBUG logs every request: the proxy counts those already.
    return run_member("zkconsumer.lab.members.coordinator", argv, CoordinatorMemberSettings.from_json,
                      lambda _: "coordinator", CoordinatorMember,
                      lambda m: m.stop(timeout=m.settings.settle_bound_s + CLOSE_TIMEOUT_MS / 1000 + 5),
                      quiet=("kafka",))

if __name__ == "__main__":
    sys.exit(main())
