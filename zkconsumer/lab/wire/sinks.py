"""Ready-made record sinks for the proxies: an in-memory collector (tests, live lab views) and a JSON-lines
file writer (lab runs). Proxies serialise calls into their sink, but a collector may be read concurrently,
so both guard their state."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol


class WireRecord(Protocol):
    kind: str

    def to_dict(self) -> dict[str, Any]: ...


class RecordCollector:
    """Keeps every record (optionally only those `keep` accepts); `records()` returns a snapshot copy."""

    def __init__(self, keep: Callable[[Any], bool] | None = None) -> None:
        self._keep = keep
        self._lock = threading.Lock()
        self._records: list[Any] = []

    def __call__(self, record: Any) -> None:
        if self._keep is None or self._keep(record):
            with self._lock:
                self._records.append(record)

    def records(self) -> list[Any]:
        with self._lock:
            return list(self._records)

    def where(self, **fields: Any) -> list[Any]:
        """Records whose attributes equal every given value, e.g. `where(kind="event", path="/a")`."""
        return [r for r in self.records() if all(getattr(r, k, None) == v for k, v in fields.items())]

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)


class JsonLinesSink:
    """Appends `record.to_dict()` as one JSON line per record; `close()` flushes and closes the file."""

    def __init__(self, path: Path | str) -> None:
        self._lock = threading.Lock()
        self._file = Path(path).open("a", encoding="utf-8")

    def __call__(self, record: WireRecord) -> None:
        line = json.dumps(record.to_dict(), separators=(",", ":"))
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> JsonLinesSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
