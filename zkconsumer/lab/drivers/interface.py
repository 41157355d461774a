"""What the lab's orchestrator needs from a design: the interface both runners implement, and the shared
environment (servers, proxies, run directory) they run in.

The orchestrator (`zkconsumer.lab.runs.case_run`) owns the clock: it starts the environment, asks the driver to start
the initial members, waits until `stable()`, applies the scenario's churn steps at their times, waits for
stability after each, and stops everything. A driver owns its members (threads or OS processes) and reports
what they do as trace records; it never decides timing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from zkconsumer.event_log import LineErrors, line_error, read_json_lines
from zkconsumer.lab.scenarios.loading import Case
from zkconsumer.lab.trace import RunDirectory, TraceWriter

log = logging.getLogger(__name__)


@dataclass
class LabEnvironment:
    """Everything a driver connects to. Members reach ZooKeeper and the broker only through the proxies."""

    run: RunDirectory
    case: Case
    group: str
    topics: dict[str, int]  # name -> partitions now (add_partitions updates it)
    zookeeper_connect: Callable[[str], str]  # member name -> its own proxied connect string (ZooKeeper's root)
    bootstrap: str  # the Kafka proxy (the broker's MEMBERS listener advertises it)
    direct_zookeeper: str  # for observers that must not be counted (owner snapshots): not through the proxy
    trace: TraceWriter  # the orchestrator's own trace file
    log_level: str = "INFO"
    extra: dict[str, Any] = field(default_factory=dict)


class DesignDriver(Protocol):
    design: str  # "zk" | "coordinator"

    def start(self, env: LabEnvironment) -> None:
        """Prepare (nothing may join yet)."""

    def join(self, name: str) -> None:
        """Start member `name` (a new member, or a restart with the same name: same consumer.id / client.id)."""

    def leave(self, name: str) -> None:
        """Graceful leave: the member closes its consumer and exits."""

    def kill(self, name: str) -> None:
        """kill -9 (processes only)."""

    def pause(self, name: str) -> None:
        """SIGSTOP (processes only); `resume` sends SIGCONT."""

    def resume(self, name: str) -> None: ...

    def expire(self, name: str) -> None:
        """A real server-side session expiry (ZooKeeper design only)."""

    def failed(self) -> dict[str, str]:
        """Members that ended on their own (a crash at start-up), each with where to look (its log)."""

    def live_members(self) -> list[str]:
        """Members started and not stopped, killed or paused."""

    def stable(self) -> bool:
        """True when the group has settled on a complete, consistent assignment of every partition."""

    def stable_since(self) -> float | None:
        """While `stable()`: the wall-clock time (`ts`) at which the last live member reached the state the
        check accepted, from that member's own record; None if a member has no such record."""

    def stats(self) -> dict[str, Any]:
        """Counts for the summary (rebalances, attempts, conflicts, failures, generations ...)."""

    def stop(self) -> None:
        """Stop every member (gracefully if possible) and free everything the driver started."""


class TraceTail:
    """Follows a JSON-lines file another process appends to: `poll()` returns the records added since the last
    call (a line not yet ended is kept for the next call). Bad lines are skipped and counted in `errors`: a torn
    line a killed writer left is ended by the next writer of the file (event_log.JsonLinesWriter), and then
    counted here once. With `keep_open` the file stays open between polls (a driver polling hundreds of members'
    files every 50 ms would otherwise spend its time in open()); `close()` it then."""

    def __init__(self, path: Path, keep_open: bool = False, offset: int = 0) -> None:
        self.path = path
        self.keep_open = keep_open
        # Where to start: a restarted member's tail skips its predecessor's records, but not a torn last line of
        # the predecessor's, which it starts at so that the line is counted as bad, whole.
        self._offset = _line_start(path, offset)
        self._partial = b""
        self._file: BinaryIO | None = None
        self._lock = threading.Lock()
        self.errors = LineErrors()

    def poll(self) -> list[dict[str, Any]]:
        with self._lock:
            chunk = self._read()
            self._offset += len(chunk)
            if not chunk:
                return []
            data = self._partial + chunk
            lines = data.split(b"\n")
            self._partial = lines.pop()
            records = []
            for line in lines:
                record, reason = line_error(line + b"\n", last=False)
                if record is not None:
                    records.append(record)
                elif reason is not None:
                    if not self.errors.count:
                        log.warning("%s: a bad line (%s): skipped and counted", self.path, reason)
                    self.errors.add(self.path.name, reason)
            return records

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def _read(self) -> bytes:
        if self._file is None:
            try:
                self._file = open(self.path, "rb")  # closed below, or in close() with keep_open
            except FileNotFoundError:
                return b""
            self._file.seek(self._offset)
        chunk = self._file.read()
        if not self.keep_open:
            self._file.close()
            self._file = None
        return chunk

    def all(self) -> list[dict[str, Any]]:
        return list(read_json_lines(self.path)) if self.path.exists() else []


def _line_start(path: Path, offset: int) -> int:
    """`offset`, or if the byte before it does not end a line, where that line starts."""
    if offset <= 0:
        return 0
    try:
        with open(path, "rb") as f:
            if f.seek(0, 2) < offset:
                return offset
            position = offset
            while position > 0:
                start = max(0, position - 4096)
                f.seek(start)
                chunk = f.read(position - start)
                if position == offset and chunk.endswith(b"\n"):
                    return offset
                newline = chunk.rfind(b"\n")
                if newline >= 0:
                    return start + newline + 1
                position = start
            return 0
    except FileNotFoundError:
        return offset
