"""One lab member of the consumer-java design: Kafka's own Java consumer (kafka-clients 4.x, `group.protocol =
consumer`, KIP-848) in a JVM of its own (zkconsumer/interop/java_consumer.py), in the run's group, reporting what
its rebalance listener is handed as the same trace records the librdkafka member writes (members/librdkafka.py), so
the analysis reads both clients of the consumer protocol alike.

Only as an OS process (`python -m zkconsumer.lab.members.java SETTINGS_JSON`, or `-` to read the JSON from stdin's
first line): this wrapper, which writes the trace, and the JVM it starts. SIGTERM, SIGINT, a `stop` line on stdin
or the end of stdin stop gracefully (the JVM's close: revoke, leave with member epoch -1). The JVM reads a pipe
from this wrapper on its stdin and closes the consumer when it ends, so a wrapper killed -9 by anyone leaves no JVM
behind. The lab's own kill and pause must reach the consumer itself, not only its wrapper: the wrapper writes the
JVM's pid to `jvm_pid_path`, and the driver (drivers/coordinator.py) sends SIGKILL, SIGSTOP and SIGCONT there first.

The Java listener is handed incremental partitions, as librdkafka's callbacks are (the consumer protocol's
reconciliation, ConsumerMembershipManager in kafka-clients), and the JVM driver (ModernConsumerDriver.java) keeps
the whole assignment from them. The member writes:

    generation  kind "assigned": `partitions` = the WHOLE assignment after the change, `added` = what this
                callback added (possibly nothing, but never an empty whole assignment: librdkafka calls no assign
                for one, and the driver would take it for the member's share); kind "revoked" / "lost":
                `partitions` = what was taken away, `remaining` = what the member still owns. Every one carries
                `member_epoch`, the member epoch the consumer held when the listener ran
                (`groupMetadata().generationId()`: unlike confluent-kafka, the Java client exposes it), `round`
                (this member's count of assign callbacks, as the librdkafka member counts them: an assign carries
                its new round, a revoke or loss the round it cuts short) and `member_id`. `generation` is null, as
                the librdkafka member's: it is the group's generation (docs/traces.md), and a member epoch is not
                one. An incumbent's assign after a revoke runs at its old epoch (it reaches the group epoch only
                once the coordinator has its acknowledgement), the joiner's at the new one, so one join shows two
                member epochs where the group epoch advanced once; the Kafka proxy counts group epochs off the wire.
    assignment  after every change of the whole assignment: `partitions`.
    consume     what each poll returned, in runs of offsets (coordinator_member._Batches), `generation` null.

A record's `ts` is the JVM's clock when the listener ran (every event line carries it), not when this wrapper read
the line.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zkconsumer.interop.java_consumer import STOP_GRACE_S, JavaConsumerMember
from zkconsumer.interop.original import InteropError
from zkconsumer.lab.members.coordinator import _Batches
from zkconsumer.lab.members.process import JsonSettings, run_member
from zkconsumer.lab.trace import TraceWriter

log = logging.getLogger(__name__)

DESIGN = "consumer-java"
FLUSH_S = 0.2  # consume batches are written at least this often while messages keep coming
# How long the event thread waits for the next line before it looks again; nothing depends on it but how often an
# idle member wakes up (the JVM's end wakes it at once).
_IDLE_WAIT_S = 30.0
# The JVM driver's event kinds that mean the consumer cannot go on (ModernConsumerDriver.java: bad arguments, a
# configuration the client refuses, a poll that failed).
_FATAL_WHERE = ("args", "create", "poll")


def jvm_pid_path(run_path: str | Path, name: str, incarnation: int) -> Path:
    """Where the member's wrapper writes its JVM's pid, one file per incarnation (a restarted member's driver must
    never signal the pid of an earlier JVM, which the system may have given to another process since)."""
    return Path(run_path) / "jvm" / f"{name}-{incarnation}.pid"


@dataclass(frozen=True)
class JavaMemberSettings(JsonSettings):
    name: str  # also client.id: the Kafka proxy's link for this member
    group: str
    topics: list[str]
    bootstrap: str  # the Kafka proxy
    run_path: str  # the run directory; the trace goes to traces/<name>.jsonl, the JVM's files to jvm/
    # group.remote.assignor (uniform or range, checked by the scenario); None = the broker's first configured one
    remote_assignor: str | None = None
    # The Java client leaves the group when the application stops polling for this long (the session and the
    # heartbeat are the broker's under the consumer protocol: the client refuses them).
    max_poll_interval_ms: int = 30000
    metadata_max_age_ms: int = 300_000
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 60_000
    incarnation: int = 1  # 1 for the first start of this name, 2 for its first restart, ...
    log_level: str = "INFO"
    extra: dict[str, Any] = field(default_factory=dict)  # more Java consumer properties

    def properties(self) -> dict[str, Any]:
        """Java consumer properties (ConsumerConfig) beyond those the JVM driver sets itself."""
        return {"max.poll.interval.ms": self.max_poll_interval_ms, "metadata.max.age.ms": self.metadata_max_age_ms,
                "auto.commit.interval.ms": self.auto_commit_interval_ms, **self.extra}

    @property
    def workdir(self) -> Path:
        return Path(self.run_path) / "jvm"

    @property
    def pid_path(self) -> Path:
        return jvm_pid_path(self.run_path, self.name, self.incarnation)

    @property
    def stop_bound_s(self) -> float:
        """How long a graceful stop may take: the JVM's close, then SIGKILL and the reap."""
        return STOP_GRACE_S + 10


class JavaMember:
    """A `JavaConsumerMember` and one thread, `lab-<name>-events`, that turns its event lines into trace records.
    The thread ends when the JVM's output does, so stopping the JVM stops it."""

    def __init__(self, settings: JavaMemberSettings, trace: TraceWriter) -> None:
        self.settings = settings
        self.name = settings.name
        self.trace = trace
        self.error: str | None = None
        self.round = 0  # assign callbacks so far
        self.epoch: int | None = None
        self.member_id: str | None = None
        self._batches = _Batches(trace, settings.name)
        # No group generation on the member side (module docstring): consume records carry null.
        self._batches.generation = None  # type: ignore[assignment]
        self._unwritten = False  # consume batches added since the last flush
        self._last_flush = time.monotonic()
        self._seen = 0  # event lines handled so far
        self.consumer = JavaConsumerMember(settings.bootstrap, settings.group, settings.topics, settings.name,
                                           settings.workdir, settings.remote_assignor,
                                           auto_commit=settings.enable_auto_commit,
                                           properties=settings.properties())
        self._thread = threading.Thread(target=self._run, name=f"lab-{self.name}-events", daemon=True)

    def start(self) -> None:
        """Start the JVM (compiling its driver first if the JVM cache has no build) and follow its events."""
        self.consumer.start(wait=False)
        pid = self.consumer.pid
        self.settings.pid_path.parent.mkdir(parents=True, exist_ok=True)
        self.settings.pid_path.write_text(f"{pid}\n")
        log.info("lab member %s: JVM pid %s started (log %s)", self.name, pid, self.consumer.log_path)
        self._thread.start()

    def stop(self) -> None:
        """The JVM's graceful close (SIGTERM; SIGKILL after the driver's grace), then the rest of its events."""
        ended_first = self.consumer.returncode is not None
        code = self.consumer.stop()
        self._thread.join(timeout=10)
        # The JVM's output is read to its end once stop() returns: whatever the thread left is written here.
        for event in self.consumer.events[self._seen:]:
            self._on_event(event)
        self._seen = len(self.consumer.events)
        self._flush()
        self.settings.pid_path.unlink(missing_ok=True)
        if ended_first and self.error is None:
            self.error = f"lab member {self.name}: the JVM ended on its own (exit {code}; log {self.consumer.log_path})"
        if self.error is not None:
            log.error("%s", self.error)
        log.info("lab member %s: JVM exited with code %s", self.name, code)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # --- the event thread ----------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            # A short wait while consume batches are open, so that an idle member still writes them soon.
            wait_s = FLUSH_S if self._unwritten else _IDLE_WAIT_S
            try:
                event = self.consumer.wait_for(lambda _: True, wait_s, "an event", self._seen)
            except InteropError:
                self._flush()
                if self.consumer.returncode is not None:
                    # The JVM is gone: stop() writes any line still on its way.
                    return
                continue
            self._seen += 1
            self._on_event(event)
            if time.monotonic() - self._last_flush >= FLUSH_S:
                self._flush()

    def _flush(self) -> None:
        self._batches.flush()
        self._unwritten = False
        self._last_flush = time.monotonic()

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        ts = event["ts"] / 1000 if "ts" in event else None
        if "epoch" in event:
            self.epoch, self.member_id = event["epoch"], event.get("member_id") or None
        if kind == "consumed":
            self._batches.add(event["topic"], event["partition"], event["first_offset"], event["last_offset"],
                              event["count"])
            self._unwritten = True
        elif kind == "assigned" and not event["partitions"] and not event["added"]:
            # The Java client calls the listener for an empty first target too (a joiner whose share other
            # members still own); librdkafka calls no assign then, and the driver takes a member's first
            # assignment as its share having arrived, so the member records none, as the librdkafka one.
            log.info("lab member %s: epoch %s assigned nothing yet", self.name, self.epoch)
        elif kind == "assigned":
            self.round += 1
            self.trace.write("generation", ts=ts, member=self.name, generation=None, member_epoch=self.epoch,
                             kind="assigned", partitions=event["partitions"], added=event["added"], round=self.round,
                             member_id=self.member_id)
            self.trace.write("assignment", ts=ts, member=self.name, partitions=event["partitions"],
                             generation=None, member_epoch=self.epoch, round=self.round)
            log.info("lab member %s: round %d epoch %s assigned %s (now %s)", self.name, self.round, self.epoch,
                     event["added"], event["partitions"])
        elif kind in ("revoked", "lost"):
            # What was consumed under the old assignment goes before its end.
            self._flush()
            self.trace.write("generation", ts=ts, member=self.name, generation=None, member_epoch=self.epoch, kind=kind,
                             partitions=event["partitions"], remaining=event["remaining"], round=self.round,
                             member_id=self.member_id)
            self.trace.write("assignment", ts=ts, member=self.name, partitions=event["remaining"],
                             generation=None, member_epoch=self.epoch, round=self.round)
            log.info("lab member %s: round %d epoch %s %s %s (remaining %s)", self.name, self.round, self.epoch,
                     kind, event["partitions"], event["remaining"])
        elif kind == "error":
            text = f"lab member {self.name}: Java consumer {event.get('where')}: {event.get('error')}"
            if event.get("where") in _FATAL_WHERE:
                self.error = self.error or text
            log.warning("%s", text)
        elif kind != "epoch":
            log.info("lab member %s: JVM %s", self.name, json.dumps(event, separators=(",", ":")))


def main(argv: list[str] | None = None) -> int:
    """Process entry point (members/process.py): settings as one JSON argument (or `-`: the first line of stdin).
    No JDK or a failed compile ends it with one line that names the fix."""
    return run_member("zkconsumer.lab.members.java", argv, JavaMemberSettings.from_json, lambda _: DESIGN, JavaMember,
                      lambda m: m.stop(), start_errors=(InteropError,))

if __name__ == "__main__":
    sys.exit(main())
