"""One ZooKeeper-design lab member: this project's connector, reporting everything as trace records.

In a thread (`ZkMember.start()` in the orchestrator's process; rebalance-only with `fetch=False`) or as an
OS process (`python -m zkconsumer.lab.zk_member SETTINGS_JSON`), which SIGTERM stops gracefully (a leave),
SIGKILL kills, and SIGSTOP pauses. The member writes to its own trace file: every `MemberEvent` as a
`member_event`, its ZooKeeper session credentials (so the lab can force a real server-side expiry), what it
consumed as `consume` batches, and its ZooKeeper operation counters when it ends.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rebalance.events import EventKind, MemberEvent
from zkconsumer.config import ConsumerConfig
from zkconsumer.lab.trace import TraceWriter

log = logging.getLogger(__name__)
_FLUSH_S = 0.2


@dataclass(frozen=True)
class ZkMemberSettings:
    name: str  # also the consumer.id: a restart with the same name is the restart trap
    group: str
    zookeeper_connect: str  # this member's proxied connect string, with the case's chroot
    topics: dict[str, int]  # topic -> streams
    properties: dict[str, Any] = field(default_factory=dict)  # the scenario's Kafka 0.8 consumer keys
    trace_path: str = ""
    fetch: bool = True  # False: rebalance-only (NoFetchers), the lab's --members threads

    def config(self) -> ConsumerConfig:
        props = {"auto.offset.reset": "smallest", **self.properties, "group.id": self.group,
                 "zookeeper.connect": self.zookeeper_connect, "consumer.id": self.name, "client.id": self.name,
                 "consumer.timeout.ms": int(_FLUSH_S * 1000)}
        return ConsumerConfig.from_properties(props)


class _Batches:
    """Per partition, the range of offsets handed out since the last flush (one `consume` record each)."""

    def __init__(self, trace: TraceWriter, member: str) -> None:
        self.trace = trace
        self.member = member
        self.lock = threading.Lock()
        self.open: dict[tuple[str, int], list[int]] = {}  # (topic, partition) -> [first, last, count]

    def add(self, topic: str, partition: int, offset: int) -> None:
        with self.lock:
            batch = self.open.get((topic, partition))
            if batch is None or offset != batch[1] + 1:
                if batch is not None:
                    self._write(topic, partition, batch)
                self.open[(topic, partition)] = [offset, offset, 1]
            else:
                batch[1] = offset
                batch[2] += 1

    def flush(self) -> None:
        with self.lock:
            for (topic, partition), batch in self.open.items():
                self._write(topic, partition, batch)
            self.open.clear()

    def _write(self, topic: str, partition: int, batch: list[int]) -> None:
        self.trace.write("consume", member=self.member, topic=topic, partition=partition, first_offset=batch[0],
                         last_offset=batch[1], count=batch[2])


class ZkMember:
    """A connector plus the threads that drain its streams; `stop()` is the graceful leave."""

    def __init__(self, settings: ZkMemberSettings, trace: TraceWriter, zk_factory=None) -> None:
        from zkconsumer.connector import ZookeeperConsumerConnector
        from zkconsumer.members import NoFetchers

        self.settings = settings
        self.trace = trace
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._batches = _Batches(trace, settings.name)
        self.connector = ZookeeperConsumerConnector(settings.config(), zk_factory=zk_factory,
                                                    fetcher_factory=None if settings.fetch else NoFetchers)
        self.connector.add_event_listener(self._on_event)
        self._write_session()

    def start(self) -> None:
        """Register, run the first rebalance (raises if it fails) and start draining the streams."""
        streams = self.connector.create_message_streams(dict(self.settings.topics))
        if not self.settings.fetch:
            return
        for topic, topic_streams in streams.items():
            for i, stream in enumerate(topic_streams):
                thread = threading.Thread(target=self._drain, args=(stream,), daemon=True,
                                          name=f"{self.connector.consumer_id}-lab-stream-{topic}-{i}")
                thread.start()
                self._threads.append(thread)

    def stop(self) -> None:
        self._stopping.set()
        try:
            self.connector.shutdown()
        finally:
            for thread in self._threads:
                thread.join(5)
            self._batches.flush()
            self.trace.write("member_event", member=self.settings.name, kind="op_counts",
                             counts=self.connector.zk.op_counts())

    # --- reporting -----------------------------------------------------------------------------------

    def _on_event(self, event: MemberEvent) -> None:
        if event.kind in (EventKind.FETCHERS_STOPPED, EventKind.SESSION_EXPIRED):
            self._batches.flush()  # what was consumed before a stop belongs before it in the trace
        record = event.to_dict()
        record.pop("consumer_id", None)
        self.trace.write("member_event", ts=record.pop("time"), member=self.settings.name, **record)
        if event.kind == EventKind.SESSION_RENEWED:
            self._write_session()

    def _write_session(self) -> None:
        credentials = self.connector.zk.session_credentials
        if credentials is not None:
            self.trace.write("member_event", member=self.settings.name, kind="session", session=credentials[0],
                             password=credentials[1].hex())

    def _drain(self, stream) -> None:
        from fetcher_manager.stream import ConsumerTimeoutError

        iterator = iter(stream)
        while not self._stopping.is_set():
            try:
                message = next(iterator)
            except ConsumerTimeoutError:
                self._batches.flush()
                continue
            except StopIteration:
                return
            self._batches.add(message.topic, message.partition, message.offset)


def main(argv: list[str] | None = None) -> int:
    """Process entry point: settings as one JSON argument; runs until SIGTERM (leave) or SIGINT."""
    args = sys.argv[1:] if argv is None else argv
    settings = ZkMemberSettings(**json.loads(args[0]))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    trace = TraceWriter(Path(settings.trace_path), "zk")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    member = ZkMember(settings, trace)
    try:
        member.start()
        while not stop.wait(0.5):
            pass
    finally:
        member.stop()
        trace.close()
    return 0


def settings_json(settings: ZkMemberSettings) -> str:
    return json.dumps(asdict(settings), separators=(",", ":"))


if __name__ == "__main__":
    sys.exit(main())
