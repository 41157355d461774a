"""Server-side counters from ZooKeeper's `mntr` four-letter word, once or on a timer.

The proxies count what each member sends; `mntr` is the server's own view (zk_packets_received/sent,
zk_watch_count, zk_num_alive_connections, latencies), useful to cross-check the wire counts.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Self

log = logging.getLogger(__name__)


def four_letter_word(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """Send `word` and read until the server closes; raises OSError when the server is unreachable."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _number(text: str) -> int | float | str:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def parse_mntr(text: str) -> dict[str, Any]:
    """`key<TAB>value` lines to a dict; integers become int, decimals float, the rest stay strings."""
    result: dict[str, Any] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("\t")
        if sep:
            result[key.strip()] = _number(value.strip())
    if not result:
        # e.g. "mntr is not executed because it is not in the whitelist."
        raise ValueError(f"not an mntr answer: {text.strip()[:200]!r}")
    return result


def mntr(host: str, port: int, timeout: float = 2.0) -> dict[str, Any]:
    """One sample: the parsed `mntr` answer plus `ts` (wall time the answer was read)."""
    text = four_letter_word(host, port, "mntr", timeout)
    sample = parse_mntr(text)
    sample["ts"] = time.time()
    return sample


class MntrSampler:
    """A named thread handing one `mntr(host, port)` dict to `sink` every `interval_s` (first one at start).

    A failed sample is logged and counted in `errors`, never raised: a lab run keeps sampling through a
    server restart.
    """

    def __init__(self, host: str, port: int, sink: Callable[[dict[str, Any]], None], interval_s: float = 1.0,
                 name: str = "mntr-sampler", timeout: float = 2.0) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.host = host
        self.port = port
        self.interval_s = interval_s
        self.name = name
        self.timeout = timeout
        self.samples = 0
        self.errors = 0
        self._sink = sink
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Self:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"{self.name}-{self.port}", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Stop and join; bounded by `timeout` (default: the four-letter-word timeout plus one second)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout + 1.0 if timeout is None else timeout)
            if self._thread.is_alive():
                log.warning("%s did not stop in time", self._thread.name)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                sample = mntr(self.host, self.port, self.timeout)
            except (OSError, ValueError) as exc:
                self.errors += 1
                log.warning("mntr %s:%s failed: %s", self.host, self.port, exc)
            else:
                self.samples += 1
                try:
                    self._sink(sample)
                except Exception:
                    log.exception("mntr sink raised")
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
