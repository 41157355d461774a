"""Member events as JSON lines in a file: how a member in another process reports to the lab or a test.

One object per line (`MemberEvent.to_dict()`), written and flushed as each event happens, so a reader sees
every event of a member that is killed with SIGKILL up to its last completed line.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import IO, Any

from rebalance.events import MemberEvent


class EventFileWriter:
    """A subscriber for `connector.add_event_listener`; thread-safe; `close()` when the member is done."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._file: IO[str] | None = open(self.path, "a", encoding="utf-8")  # closed in close()

    def __call__(self, event: MemberEvent) -> None:
        line = json.dumps(event.to_dict(), separators=(",", ":"), default=str)
        with self._lock:
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def read_events(path: Path | str) -> list[dict[str, Any]]:
    """Every complete line of an event file (a torn last line from a killed writer is skipped)."""
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows
