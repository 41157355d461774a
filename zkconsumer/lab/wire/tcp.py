"""A counting TCP forwarder with per-link delay and cuts: listeners on 127.0.0.1 forwarding to one upstream.

Each accepted client connection gets its own upstream connection (see `connection.py` for how bytes flow and
are decoded). Fault injection and counting are per *link* (see `links.py`): a listener may belong to one link
(ZooKeeper: a port per member) or a connection may join one once its decoder names it (Kafka: by client_id).
"""

from __future__ import annotations

import itertools
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Self

from zkconsumer.lab.wire.connection import (
    POLL_S,
    Connection,
    StreamDecoder,
    abort_socket,
    shutdown_quietly,
)
from zkconsumer.lab.wire.links import RESET, CountedRecord, Link

log = logging.getLogger(__name__)


def host_port(address: str | tuple[str, int]) -> tuple[str, int]:
    """(host, port) from a tuple or from the first server of a connect string like `h:p,h2:p2/chroot`."""
    if isinstance(address, tuple):
        return address
    first = address.split(",")[0].split("/")[0]
    host, _, port = first.rpartition(":")
    return host or "127.0.0.1", int(port)


class TcpProxy:
    """Listeners on 127.0.0.1 forwarding to one upstream address; see the module docstring."""

    def __init__(self, upstream: tuple[str, int], decoder_factory: Callable[[Connection], StreamDecoder] | None = None,
                 sink: Callable[[Any], None] | None = None, name: str = "wire", host: str = "127.0.0.1",
                 max_queue_bytes: int = 4 << 20, connect_timeout: float = 5.0) -> None:
        self.upstream = upstream
        self.decoder_factory = decoder_factory
        self.name = name
        self.host = host
        self.max_queue_bytes = max_queue_bytes
        self.connect_timeout = connect_timeout
        self._sink = sink
        self._sink_lock = threading.Lock()
        self._lock = threading.Lock()
        self._links: dict[str, Link] = {}
        self._listeners: list[tuple[socket.socket, Link | None]] = []
        self._connections: set[Connection] = set()
        self._threads: set[threading.Thread] = set()
        self._ids = itertools.count(1)
        self._started = False
        self._stopping = threading.Event()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def sink(self) -> Callable[[Any], None] | None:
        return self._sink

    # ---- links -------------------------------------------------------------------------------------------
    def link(self, name: str) -> Link:
        """The link called `name`, created on first use (so faults can be set before the member connects)."""
        with self._lock:
            link = self._links.get(name)
            if link is None:
                link = self._links[name] = Link(name)
            return link

    @property
    def links(self) -> dict[str, Link]:
        with self._lock:
            return dict(self._links)

    def delay(self, name: str, ms: float, jitter_ms: float = 0.0) -> None:
        self.link(name).delay(ms, jitter_ms)

    def cut(self, name: str, mode: str = RESET) -> None:
        self.link(name).cut(mode)

    def restore(self, name: str) -> None:
        self.link(name).restore()

    def counters(self, name: str | None = None) -> dict[str, Any]:
        """One link's counters, or {link name: counters} for every link."""
        if name is not None:
            return self.link(name).counters.snapshot()
        return {link_name: link.counters.snapshot() for link_name, link in self.links.items()}

    def connections(self) -> list[Connection]:
        with self._lock:
            return list(self._connections)

    # ---- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> Self:
        with self._lock:
            if self._started:
                return self
            self._started = True
            listeners = list(self._listeners)
        for listener, link in listeners:
            self._start_accepting(listener, link)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Close every listener and connection and join every thread (bounded by `timeout`)."""
        self._stopping.set()
        with self._lock:
            listeners = list(self._listeners)
            connections = list(self._connections)
        for listener, _ in listeners:
            shutdown_quietly(listener, socket.SHUT_RDWR)  # wakes a blocked accept() on Linux
        for conn in connections:
            conn.close()
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                pending = [t for t in self._threads if t is not threading.current_thread()]
            if not pending:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                log.warning("%s: %d thread(s) still alive after stop: %s", self.name, len(pending),
                            [t.name for t in pending])
                break
            pending[0].join(min(remaining, 0.2))
            for conn in self.connections():  # a connection accepted while stopping
                conn.close()
        for listener, _ in listeners:
            listener.close()

    # ---- internals ---------------------------------------------------------------------------------------
    def _listen(self, link: Link | None, port: int = 0) -> int:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, port))
        listener.listen(128)
        listener.settimeout(POLL_S)
        with self._lock:
            self._listeners.append((listener, link))
            started = self._started
        if started:
            self._start_accepting(listener, link)
        return listener.getsockname()[1]

    def _start_accepting(self, listener: socket.socket, link: Link | None) -> None:
        port = listener.getsockname()[1]
        self._spawn(f"{self.name}-accept-{port}", self._accept_loop, listener, link)

    def _accept_loop(self, listener: socket.socket, link: Link | None) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            if self._stopping.is_set():
                client.close()
                break
            if link is not None and link.cut_mode == RESET:
                link.counters.add("connections", "refused")
                abort_socket(client)
                continue
            self._open(client, link)

    def _open(self, client: socket.socket, link: Link | None) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=self.connect_timeout)
        except OSError as exc:
            log.info("%s: upstream %s:%s unreachable (%s); resetting the client", self.name, *self.upstream, exc)
            abort_socket(client)
            return
        for sock in (client, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(POLL_S)
        conn = Connection(self, next(self._ids), client, upstream, link)
        with self._lock:
            self._connections.add(conn)
        if link is not None:
            link._attach(conn)
        conn._start()

    def _forget(self, conn: Connection) -> None:
        with self._lock:
            self._connections.discard(conn)

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        def run() -> None:
            try:
                target(*args)
            except Exception:
                log.exception("%s crashed", name)
            finally:
                with self._lock:
                    self._threads.discard(thread)

        thread = threading.Thread(target=run, name=name, daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()

    def _emit(self, record: CountedRecord, link: Link | None) -> None:
        if link is not None:
            link.counters.add_record(record)
        if self._sink is not None:
            with self._sink_lock:
                try:
                    self._sink(record)
                except Exception:
                    log.exception("%s: record sink raised; record dropped", self.name)
