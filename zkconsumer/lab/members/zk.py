"""One ZooKeeper-design lab member: this project's connector, reporting everything as trace records.

As an OS process (`python -m zkconsumer.lab.members.zk SETTINGS_JSON`), which SIGTERM or the end of its stdin (the
lab is gone) stops gracefully (a leave), SIGKILL kills, and SIGSTOP pauses; or as a thread of a member host
(`MemberHost`, `python -m zkconsumer.lab.members.zk --host NAME`): one process running up to a few dozen rebalance-
only members (`fetch=False`) as threads, driven by JSON-lines commands on its stdin (the lab's `--members threads`).
The member writes to its own trace file: every `MemberEvent` as a `member_event`, its ZooKeeper session id, each
message it consumed as a `consume` record, each request its ZooKeeper client sent again after a failed send
(`resent`: zkconsumer/lab/rules/reconnects.py), and its ZooKeeper operation counters when it ends. The session's
password,
which the lab needs to force a real server-side expiry, goes to the driver over the member's control channel only
(`SessionChannel`; a host's replies for its members), never into a trace or a log.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.handlers.utils import selector_select

from rebalance.events import EventKind, MemberEvent
from zkconsumer.config import ConsumerConfig
from zkconsumer.lab.members.process import StopRequest
from zkconsumer.lab.trace import TraceWriter

log = logging.getLogger(__name__)
_STOP_CHECK_S = 0.2  # consumer.timeout.ms of the draining streams: how often they look at the stop flag
_HOST_STOP_S = 15.0
HEALTH_S = 1.0  # how often a member process writes its `health` record (docs/traces.md)


@dataclass(frozen=True)
class ZkMemberSettings:
    name: str  # also the consumer.id: a restart with the same name is the restart trap
    group: str
    zookeeper_connect: str  # this member's proxied connect string (the broker's ZooKeeper root)
    topics: dict[str, int]  # topic -> streams
    properties: dict[str, Any] = field(default_factory=dict)  # the scenario's Kafka 0.8 consumer keys
    trace_path: str = ""
    fetch: bool = True  # False: rebalance-only (NoFetchers), the lab's --members threads
    # A member process's stdout is its launcher's control channel (`SessionChannel`): the session credentials go
    # there (the lab's driver and the fault campaign's members read it). Off, the credentials go nowhere: the
    # launcher cannot force the session's expiry, and the trace still holds only the session id.
    control: bool = False

    def config(self) -> ConsumerConfig:
        props = {"auto.offset.reset": "smallest", **self.properties, "group.id": self.group,
                 "zookeeper.connect": self.zookeeper_connect, "consumer.id": self.name, "client.id": self.name,
                 "consumer.timeout.ms": int(_STOP_CHECK_S * 1000)}
        return ConsumerConfig.from_properties(props)


class _ConsumeLog:
    """One `consume` record per message, written (and flushed to the file) as the stream hands it out.

    Not batched: a member can be killed (kill -9) at any moment, and the next owner of its partitions re-reads
    from the last committed offset. What the killed member was handed after that commit is exactly the
    duplicates the delivery audit must count, so none of it may wait in memory for a flush that never comes."""

    def __init__(self, trace: TraceWriter, member: str) -> None:
        self.trace = trace
        self.member = member

    def add(self, topic: str, partition: int, offset: int) -> None:
        self.trace.write("consume", member=self.member, topic=topic, partition=partition, first_offset=offset,
                         last_offset=offset, count=1)


@dataclass
class ConsumeWindow:
    """How long one stream's consumed offset ran ahead of its `consume` records.

    The connector's iterator moves a partition's consumed offset (what the auto-commit thread writes to
    ZooKeeper) as it hands a message out, so the message's record can only be written after: for that time a
    commit can include an offset this member has not recorded. Each window is timed from `next()` returning to
    the record's flush (the few bytecodes between the move and the return inside `next()` are not included: a
    lower bound by well under a microsecond)."""

    messages: int = 0
    total_s: float = 0.0
    max_s: float = 0.0

    def add(self, seconds: float) -> None:
        self.messages += 1
        self.total_s += seconds
        self.max_s = max(self.max_s, seconds)


class ZkMember:
    """A connector plus the threads that drain its streams; `stop()` is the graceful leave."""

    def __init__(self, settings: ZkMemberSettings, trace: TraceWriter, zk_factory=None,
                 on_session: Callable[[int, bytes], None] | None = None) -> None:
        from zkconsumer.connector import ZookeeperConsumerConnector
        from zkconsumer.members import NoFetchers

        self.settings = settings
        self.trace = trace
        self._on_session = on_session  # where the session's credentials go: the control channel
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._consumed = _ConsumeLog(trace, settings.name)
        self._windows: list[ConsumeWindow] = []  # one per stream, each written by its own drain thread only
        self._started_at = time.monotonic()
        self.connector = ZookeeperConsumerConnector(settings.config(), zk_factory=zk_factory,
                                                    fetcher_factory=None if settings.fetch else NoFetchers)
        self.connector.add_event_listener(self._on_event)
        if hasattr(self.connector.zk, "on_resend"):  # the real client's (the in-memory one never loses a connection)
            self.connector.zk.on_resend(self._on_resend)
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
            self.trace.write("member_event", member=self.settings.name, kind="op_counts",
                             counts=self.connector.zk.op_counts())
            if self._windows:
                self.trace.write("member_event", member=self.settings.name, kind="consume_window",
                                 messages=sum(w.messages for w in self._windows),
                                 total_s=sum(w.total_s for w in self._windows),
                                 max_s=max(w.max_s for w in self._windows),
                                 elapsed_s=time.monotonic() - self._started_at, streams=len(self._windows))

    # --- reporting -----------------------------------------------------------------------------------

    def report_health(self) -> None:
        """A `health` record: the process's threads, so that a checker can tell a hung member (its records stop
        while it is neither paused nor dead) and a leaking one (its threads grow from fault to fault)."""
        names = sorted(t.name for t in threading.enumerate())
        self.trace.write("health", member=self.settings.name, threads=len(names), thread_names=names,
                         pid=os.getpid())

    def _on_event(self, event: MemberEvent) -> None:
        record = event.to_dict()
        record.pop("consumer_id", None)
        self.trace.write("member_event", ts=record.pop("time"), member=self.settings.name, **record)
        if event.kind == EventKind.SESSION_RENEWED:
            self._write_session()

    def _on_resend(self, op: str, path: str, after: str) -> None:
        # one request sent again after its send failed (a connection loss): the lab's `resent` kind
        # (rules/reconnects.py)
        self.trace.write("member_event", member=self.settings.name, kind="resent", op=op, path=path, after=after)

    def _write_session(self) -> None:
        credentials = self.connector.zk.session_credentials
        if credentials is None:
            return
        # the id only: traces are shared, and the password is what lets anyone take the session over
        self.trace.write("member_event", member=self.settings.name, kind="session", session=credentials[0])
        if self._on_session is not None:
            self._on_session(credentials[0], credentials[1])
        # without a control channel (ZkMemberSettings.control) the launcher cannot force this session's expiry

    def _drain(self, stream) -> None:
        from fetcher_manager.stream import ConsumerTimeoutError

        iterator = iter(stream)
        window = ConsumeWindow()
        self._windows.append(window)
        clock = time.perf_counter
        while not self._stopping.is_set():
            try:
                message = next(iterator)
            except ConsumerTimeoutError:
                continue
            except StopIteration:
                return
            advanced = clock()  # the consumed offset already includes this message (ConsumerIterator.__next__)
            self._consumed.add(message.topic, message.partition, message.offset)
            window.add(clock() - advanced)


class MemberHost:
    """Members as threads of this process, for the lab's `--members threads`: several hosts spread a large group
    over the machine's cores (one process would hold every member's kazoo client behind one GIL).

    Commands, one JSON object a line: `{"op": "join", "settings": {...}}` starts a member (its first rebalance
    runs in a thread of its own), `{"op": "leave", "name": ...}` stops one gracefully, `{"op": "stop"}` (or the
    end of the input) stops them all and ends the host. Replies, one JSON object a line: `{"name", "event":
    "started" | "failed" | "left", "error"}`, and `{"event": "stopped"}` last. What members do goes to their
    own trace files, as from a member process.
    """

    def __init__(self, reply: Callable[[dict[str, Any]], None]) -> None:
        self._reply = reply
        self._lock = threading.Lock()
        self._members: dict[str, _Hosted] = {}
        self._threads: list[threading.Thread] = []

    def handle(self, command: dict[str, Any]) -> bool:
        """Apply one command; False once the host should end (after `stop`)."""
        op = command.get("op")
        if op == "join":
            settings = ZkMemberSettings(**command["settings"])
            hosted = _Hosted(settings, self._reply)
            with self._lock:
                old = self._members.pop(settings.name, None)
                self._members[settings.name] = hosted
            if old is not None:
                old.stop()
            self._spawn(f"lab-{settings.name}-start", self._start, hosted)
        elif op == "leave":
            with self._lock:
                hosted = self._members.pop(command["name"], None)
            if hosted is None:
                self._reply({"name": command["name"], "event": "left"})
            else:
                self._spawn(f"lab-{hosted.settings.name}-leave", self._leave, hosted)
        elif op == "stop":
            self.stop()
            return False
        return True

    def stop(self) -> None:
        with self._lock:
            members, self._members = list(self._members.values()), {}
        for hosted in members:
            self._spawn(f"lab-{hosted.settings.name}-leave", self._leave, hosted)
        deadline = time.monotonic() + _HOST_STOP_S
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._reply({"event": "stopped"})

    def _start(self, hosted: _Hosted) -> None:
        try:
            hosted.start()
            self._reply({"name": hosted.settings.name, "event": "started"})
        except BaseException as exc:  # reported by the driver as a failed member
            log.warning("lab member %s: failed to start: %s", hosted.settings.name, exc)
            self._reply({"name": hosted.settings.name, "event": "failed", "error": f"{type(exc).__name__}: {exc}"})

    def _leave(self, hosted: _Hosted) -> None:
        hosted.stop()
        self._reply({"name": hosted.settings.name, "event": "left"})

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()


class _Hosted:
    """One member of a host: made and started by `start()` (in its start thread), stopped by `stop()`."""

    def __init__(self, settings: ZkMemberSettings, reply: Callable[[dict[str, Any]], None]) -> None:
        self.settings = settings
        self._reply = reply
        self.member: ZkMember | None = None
        self.trace: TraceWriter | None = None
        self._lock = threading.Lock()
        self._stopped = False
        self._started = threading.Event()

    def start(self) -> None:
        try:
            with self._lock:
                if self._stopped:
                    return
                self.trace = TraceWriter(Path(self.settings.trace_path), "zk")
                self.member = ZkMember(self.settings, self.trace, on_session=self._session)
        finally:
            self._started.set()
        self.member.start()

    def _session(self, session: int, password: bytes) -> None:
        self._reply(session_message(session, password, self.settings.name))

    def stop(self) -> None:
        self._started.wait(_HOST_STOP_S)  # a member still connecting is stopped once it has a connector
        with self._lock:
            self._stopped = True
            member, trace = self.member, self.trace
        try:
            if member is not None:
                member.stop()
        except Exception:
            log.exception("lab member %s: error while leaving", self.settings.name)
        finally:
            if trace is not None:
                trace.close()


def _select(rlist: list, wlist: list, xlist: list, timeout: float | None = None) -> tuple[list, list, list]:
    """`select.select`, falling back to kazoo's own selector-based select for a descriptor above FD_SETSIZE.

    kazoo 2.11's threading handler selects through `kazoo.handlers.utils.selector_select`, which builds and
    closes a new epoll selector on every call, and its connection loop selects about five times per request
    (wake-up, writable, header, body): in a host of dozens of members that is most of the process's time.
    The requests sent are the same either way; only how the connection thread waits for its socket changes.
    """
    try:
        return select.select(rlist, wlist, xlist, timeout)
    except ValueError:  # a descriptor >= FD_SETSIZE (1024)
        return selector_select(rlist, wlist, xlist, timeout)


def host_main(name: str, level: str) -> int:
    """A member host's process: commands on stdin until `stop` or the end of the input (the lab went away)."""
    SequentialThreadingHandler.select = lambda _handler, *args, **kwargs: _select(*args, **kwargs)
    logging.basicConfig(level=level, format=f"%(asctime)s %(levelname)s {name} %(threadName)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(max(logging.getLogger().level, logging.WARNING))
    # Ctrl-C reaches the whole process group: the lab stops its hosts itself, through their stdin.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out_lock = threading.Lock()

    def reply(message: dict[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":"))
        with out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    host = MemberHost(reply)
    for line in sys.stdin:
        if line.strip() and not host.handle(json.loads(line)):
            return 0
    host.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Process entry point: settings as one JSON argument; runs until SIGTERM (leave) or SIGINT. `--host NAME
    [LEVEL]` runs a member host instead (`MemberHost`)."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "--host":
        return host_main(args[1], args[2] if len(args) > 2 else "WARNING")
    settings = ZkMemberSettings(**json.loads(args[0]))
    control = _control_channel() if settings.control else None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    trace = TraceWriter(Path(settings.trace_path), "zk")
    # A handler that takes no lock (member_process.StopRequest has why).
    stop = StopRequest()
    stop.install()
    # stdin is the lifeline: the lab holds the other end of the pipe, so its end of file means the lab is gone
    # (even by kill -9) and the member leaves as on SIGTERM instead of living on in a group nobody measures.
    threading.Thread(target=_leave_at_end_of_input, args=(stop,), name=f"{settings.name}-lifeline",
                     daemon=True).start()
    member = ZkMember(settings, trace, on_session=control)
    try:
        member.start()
        while not stop.wait(HEALTH_S):
            member.report_health()
    finally:
        member.stop()
        trace.close()
    return 0


def _leave_at_end_of_input(stop: StopRequest) -> None:
    # os.read on the descriptor, not sys.stdin.buffer: a daemon thread blocked inside the buffered reader holds its
    # lock, and the interpreter aborts on that lock at exit (SIGABRT, "could not acquire lock for <stdin> at
    # interpreter shutdown") after a SIGTERM leave; the raw read holds nothing.
    while os.read(sys.stdin.fileno(), 4096):
        pass
    stop.set()


def session_message(session: int, password: bytes, name: str | None = None) -> dict[str, Any]:
    """The control-channel line with a member's session credentials (read by `SessionChannel`, `HostProcess`)."""
    return {**({"name": name} if name is not None else {}), "event": "session", "session": session,
            "password": password.hex()}


def _control_channel() -> Callable[[int, bytes], None]:
    """A member process's control channel: the stdout its launcher reads (`SessionChannel`). Anything else written
    to stdout (a library's print) goes to stderr, the member's log, so the channel carries only these lines."""
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")  # for the process's life
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    lock = threading.Lock()

    def send(session: int, password: bytes) -> None:
        line = json.dumps(session_message(session, password), separators=(",", ":"))
        with lock:
            channel.write(line + "\n")
            channel.flush()

    return send


class SessionChannel:
    """The launcher's end of a member process's control channel (its stdout, `ZkMemberSettings.control`): a named
    thread reads it to its end (the member's exit) and keeps the latest session credentials it reported."""

    def __init__(self, stream: Any, name: str) -> None:
        self._stream = stream
        self._latest: tuple[int, str] | None = None
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, name=f"lab-{name}-control", daemon=True)
        self._thread.start()

    def session(self, timeout: float = 0.0) -> tuple[int, str] | None:
        """(session id, password hex) as last reported; waits up to `timeout` for a first report."""
        with self._changed:
            self._changed.wait_for(lambda: self._latest is not None, timeout)
            return self._latest

    def join(self, timeout: float) -> None:
        """After the member's exit: the reader ends at the channel's end."""
        self._thread.join(timeout)

    def _read(self) -> None:
        for line in self._stream:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("event") == "session":
                with self._changed:
                    self._latest = (int(message["session"]), str(message["password"]))
                    self._changed.notify_all()
        self._stream.close()


def settings_json(settings: ZkMemberSettings) -> str:
    return json.dumps(asdict(settings), separators=(",", ":"))


if __name__ == "__main__":
    sys.exit(main())
