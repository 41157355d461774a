"""JSON lines: how a member in another process reports to the lab or a test, and how the lab writes traces.

One object per line, written and flushed as each record happens, so a reader sees every record of a writer
that is killed with SIGKILL up to its last complete line (a torn last line is skipped by `read_json_lines`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from rebalance.events import MemberEvent


class JsonLinesWriter:
    """Thread-safe appender of JSON objects; `extra` fields are added to every line. `close()` when done."""

    def __init__(self, path: Path | str, extra: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.extra = dict(extra or {})
        self._lock = threading.Lock()
        self._file: IO[str] | None = open(self.path, "a", encoding="utf-8")  # closed in close()

    def write(self, record: Mapping[str, Any]) -> None:
        line = json.dumps({**self.extra, **record}, separators=(",", ":"), default=str)
        with self._lock:
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


class EventFileWriter(JsonLinesWriter):
    """A subscriber for `connector.add_event_listener` writing each `MemberEvent.to_dict()` as a line."""

    def __call__(self, event: MemberEvent) -> None:
        self.write(event.to_dict())


def read_json_lines(path: Path | str) -> Iterator[dict[str, Any]]:
    """Every complete line of a JSON-lines file; a torn last line from a killed writer is skipped."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def read_events(path: Path | str) -> list[dict[str, Any]]:
    return list(read_json_lines(path))
