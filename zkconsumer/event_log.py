"""JSON lines: how a member in another process reports to the lab or a test, and how the lab writes traces.

One object per line, written and flushed as each record happens, so a reader sees every record of a writer
that is killed with SIGKILL up to its last complete line. A killed writer can leave a torn last line (no newline);
a writer that opens the file again (a restarted member appends to its predecessor's file) first ends that line,
so the torn line stays a line of its own and the new record is not glued to it. Readers skip bad lines and count
them (`LineErrors`): a torn line, a line that is not JSON or not a JSON object, an empty line.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rebalance.events import MemberEvent


class JsonLinesWriter:
    """Thread-safe appender of JSON objects; `extra` fields are added to every line. `close()` when done."""

    def __init__(self, path: Path | str, extra: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.extra = dict(extra or {})
        self._lock = threading.Lock()
        torn = _ends_mid_line(self.path)
        self._file: IO[str] | None = open(self.path, "a", encoding="utf-8")  # closed in close()
        if torn:  # a killed predecessor's torn last line: end it, or the first record here would continue it
            self._file.write("\n")
            self._file.flush()

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


def _ends_mid_line(path: Path) -> bool:
    """True if `path` exists, is not empty and does not end with a newline (a writer died mid-line)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            if f.tell() == 0:
                return False
            f.seek(-1, 2)
            return f.read(1) != b"\n"
    except FileNotFoundError:
        return False


@dataclass
class LineErrors:
    """Bad lines a reader skipped: how many, and the first one's place and reason (`file:line: reason`)."""

    count: int = 0
    first: str | None = None

    def add(self, where: str, reason: str) -> None:
        self.count += 1
        if self.first is None:
            self.first = f"{where}: {reason}"


def line_error(line: bytes | str, last: bool) -> tuple[dict[str, Any] | None, str | None]:
    """(the object on `line`, None) or (None, why the line is bad). `last`: the file's last line, which lacks its
    newline if the writer died while writing it."""
    text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
    torn = last and not text.endswith("\n")
    if not text.strip():
        return None, "empty line"
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None, "torn last line (its writer died mid-line)" if torn else "not JSON (torn or garbled line)"
    if not isinstance(value, dict):
        return None, "not a JSON object"
    return value, None


def read_json_lines(path: Path | str, errors: LineErrors | None = None) -> Iterator[dict[str, Any]]:
    """Every good line of a JSON-lines file, as an object; a bad line (a torn last line from a killed writer, a
    garbled or empty one) is skipped, and counted in `errors` if given."""
    with open(path, encoding="utf-8", errors="replace") as f:
        previous: str | None = None
        number = 0
        for line in f:  # one line behind, to know which is the last
            if previous is not None:
                yield from _parsed(previous, False, path, number, errors)
            previous, number = line, number + 1
        if previous is not None:
            yield from _parsed(previous, True, path, number, errors)


def _parsed(line: str, last: bool, path: Path | str, number: int,
            errors: LineErrors | None) -> Iterator[dict[str, Any]]:
    value, reason = line_error(line, last)
    if value is not None:
        yield value
    elif errors is not None and reason is not None:
        errors.add(f"{Path(path).name}:{number}", reason)


def read_events(path: Path | str) -> list[dict[str, Any]]:
    return list(read_json_lines(path))
