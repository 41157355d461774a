"""Links: the unit of fault injection and counting in the proxies (one per lab member).

A link holds a delay (with jitter), a cut state and counters; the forwarder consults it for every chunk of
every connection attached to it. `cut("reset")` closes the link's connections with a TCP reset and refuses new
ones; `cut("blackhole")` keeps them open but forwards nothing. Bytes that met a blackhole are gone, as in a
partition; because a TCP stream cannot resume after losing bytes in its middle, `restore()` resets every
connection that lost bytes (the client then reconnects), while the connections that lost nothing carry on.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any, Protocol

log = logging.getLogger(__name__)

RESET = "reset"
BLACKHOLE = "blackhole"
CUT_MODES = (RESET, BLACKHOLE)


class CountedRecord(Protocol):
    def counter_keys(self) -> Iterable[tuple[str, Any]]: ...


class LinkedConnection(Protocol):
    """What a link does to the connections attached to it (``connection.Connection``, which imports this module)."""

    @property
    def lossy(self) -> bool: ...

    def close(self, reset: bool = False) -> None: ...

    def drop_queued(self) -> None: ...


class Counters:
    """Thread-safe tallies: category -> key -> count."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[str, Counter] = {}

    def add(self, category: str, key: Any, n: int = 1) -> None:
        with self._lock:
            self._data.setdefault(category, Counter())[key] += n

    def add_record(self, record: CountedRecord) -> None:
        keys = list(record.counter_keys())
        with self._lock:
            for category, key in keys:
                self._data.setdefault(category, Counter())[key] += 1

    def get(self, category: str, key: Any) -> int:
        with self._lock:
            return self._data.get(category, Counter())[key]

    def snapshot(self) -> dict[str, dict[Any, int]]:
        with self._lock:
            return {category: dict(counts) for category, counts in self._data.items()}


class Link:
    """A named path through a proxy (one lab member): its delay, its cut state, its counters."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counters = Counters()
        self._lock = threading.Lock()
        self._delay_s = 0.0
        self._jitter_s = 0.0
        self._cut: str | None = None
        self._connections: set[LinkedConnection] = set()

    def __repr__(self) -> str:
        return f"Link({self.name!r}, delay_ms={self.delay_ms}, jitter_ms={self.jitter_ms}, cut={self._cut})"

    @property
    def delay_ms(self) -> float:
        return self._delay_s * 1000.0

    @property
    def jitter_ms(self) -> float:
        return self._jitter_s * 1000.0

    @property
    def cut_mode(self) -> str | None:
        return self._cut

    def connections(self) -> list[LinkedConnection]:
        with self._lock:
            return list(self._connections)

    def delay(self, ms: float, jitter_ms: float = 0.0) -> None:
        """Delay every chunk, both directions, by `ms` ± uniform `jitter_ms` (never below zero)."""
        if ms < 0 or jitter_ms < 0:
            raise ValueError(f"delay and jitter must be >= 0, got {ms} and {jitter_ms}")
        with self._lock:
            self._delay_s = ms / 1000.0
            self._jitter_s = jitter_ms / 1000.0

    def cut(self, mode: str = RESET) -> None:
        if mode not in CUT_MODES:
            raise ValueError(f"cut mode must be one of {CUT_MODES}, got {mode!r}")
        with self._lock:
            self._cut = mode
            connections = list(self._connections)
        log.info("link %s cut (%s), %d connection(s)", self.name, mode, len(connections))
        for conn in connections:
            if mode == RESET:
                conn.close(reset=True)
            else:
                conn.drop_queued()

    def restore(self) -> None:
        with self._lock:
            was = self._cut
            self._cut = None
            connections = list(self._connections)
        lossy = [conn for conn in connections if conn.lossy]
        log.info("link %s restored (was %s); resetting %d connection(s) that lost bytes", self.name, was, len(lossy))
        for conn in lossy:
            conn.close(reset=True)

    def sample_delay(self) -> float:
        """One delay draw in seconds."""
        with self._lock:
            delay, jitter = self._delay_s, self._jitter_s
        if jitter:
            delay += random.uniform(-jitter, jitter)
        return max(0.0, delay)

    def _attach(self, conn: LinkedConnection) -> None:
        with self._lock:
            self._connections.add(conn)
        self.counters.add("connections", "opened")

    def _detach(self, conn: LinkedConnection) -> None:
        with self._lock:
            self._connections.discard(conn)
        self.counters.add("connections", "closed")
