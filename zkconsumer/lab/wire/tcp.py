"""A counting TCP forwarder with per-link delay and cuts: listeners on 127.0.0.1 forwarding to one upstream.

Each accepted client connection gets its own upstream connection (see `connection.py` for how bytes flow and
are decoded). Fault injection and counting are per *link* (see `links.py`): a listener may belong to one link
(ZooKeeper: a port per member) or a connection may join one once its decoder names it (Kafka: by client_id).

Every listener and connection of a proxy is served by one thread, `<name>-loop`: a selector over non-blocking
sockets plus timers for delayed chunks. Other threads (faults, stop) hand their work to it through `call_soon`.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Self

from zkconsumer.lab.wire.connection import POLL_S, Connection, StreamDecoder, abort_socket
from zkconsumer.lab.wire.links import RESET, CountedRecord, Link

log = logging.getLogger(__name__)
_NO_LINK = object()  # a listener's selector data when its connections find their link later (Kafka)


def host_port(address: str | tuple[str, int]) -> tuple[str, int]:
    """(host, port) from a tuple or from the first server of a connect string like `h:p,h2:p2/chroot`."""
    if isinstance(address, tuple):
        return address
    first = address.split(",")[0].split("/")[0]
    host, _, port = first.rpartition(":")
    return host or "127.0.0.1", int(port)


class TcpProxy:
    """Listeners on 127.0.0.1 forwarding to one upstream address; see the module docstring.

    ``selector``, ``call_soon``, ``flush_at``, ``forget`` and ``emit`` are public for its connections
    (``connection.ProxyLoop``), not for the proxy's users."""

    def __init__(self, upstream: tuple[str, int] | None,
                 decoder_factory: Callable[[Connection], StreamDecoder] | None = None,
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
        self._ids = itertools.count(1)
        self._started = False
        self._stopping = threading.Event()
        self.selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        for sock in (self._wake_r, self._wake_w):
            sock.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._calls: deque[tuple[Callable[..., None], tuple[Any, ...]]] = deque()
        self._timers: list[tuple[float, int, Connection, str]] = []
        self._timer_ids = itertools.count()
        self._thread: threading.Thread | None = None
        self._all_closed = False

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

    def forward_to(self, upstream: str | tuple[str, int]) -> None:
        """Where new connections go from now on (open ones stay where they are). A proxy may be made with no
        upstream when what it forwards to needs the proxy's port first (a broker that advertises it)."""
        self.upstream = host_port(upstream)

    # ---- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> Self:
        with self._lock:
            if self._started:
                return self
            self._started = True
            self._thread = threading.Thread(target=self._run, name=f"{self.name}-loop", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Close every listener and connection and end the loop thread (bounded by `timeout`)."""
        self._stopping.set()
        self._wake()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                log.warning("%s: loop thread still alive after stop", self.name)
                return
        if thread is None or not thread.is_alive():
            self._close_all()

    # ---- internals ---------------------------------------------------------------------------------------
    def _listen(self, link: Link | None, port: int = 0) -> int:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, port))
        listener.listen(128)
        listener.setblocking(False)
        with self._lock:
            self._listeners.append((listener, link))
        self.call_soon(self.selector.register, listener, selectors.EVENT_READ, link or _NO_LINK)
        return listener.getsockname()[1]

    def call_soon(self, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn(*args)` in the loop thread: now if this is it, else as soon as it wakes."""
        if threading.current_thread() is self._thread:
            fn(*args)
            return
        with self._lock:
            queued = self._thread is not None and self._thread.is_alive()
            if queued:
                self._calls.append((fn, args))
        if queued:
            self._wake()
        elif not self._stopping.is_set():
            fn(*args)  # not started yet: nothing runs concurrently

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:  # full (it is awake anyway) or closed
            pass

    def flush_at(self, due: float, conn: Connection, way: str) -> None:
        heapq.heappush(self._timers, (due, next(self._timer_ids), conn, way))

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                timeout = POLL_S
                if self._timers:
                    timeout = min(timeout, max(0.0, self._timers[0][0] - time.monotonic()))
                for key, mask in self.selector.select(timeout):
                    data = key.data
                    if data is None:
                        self._drain_wake()
                    elif isinstance(data, Connection):
                        data._on_event(key.fileobj, mask)  # type: ignore[arg-type]
                    else:
                        self._accept(key.fileobj, None if data is _NO_LINK else data)  # type: ignore[arg-type]
                self._run_calls()
                now = time.monotonic()
                while self._timers and self._timers[0][0] <= now:
                    _, _, conn, way = heapq.heappop(self._timers)
                    if not conn._torn_down:
                        conn._flush(conn._ways[way])
        except Exception:
            log.exception("%s: loop crashed", self.name)
        finally:
            self._run_calls()
            self._close_all()

    def _run_calls(self) -> None:
        while True:
            with self._lock:
                if not self._calls:
                    return
                fn, args = self._calls.popleft()
            try:
                fn(*args)
            except Exception:
                log.exception("%s: %s failed", self.name, getattr(fn, "__name__", fn))

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _close_all(self) -> None:
        with self._lock:
            if self._all_closed:
                return
            self._all_closed = True
        for conn in self.connections():
            conn._teardown(False)
        with self._lock:
            listeners, self._listeners = list(self._listeners), []
        for listener, _ in listeners:
            listener.close()
        for sock in (self._wake_r, self._wake_w):
            sock.close()
        self.selector.close()

    def _accept(self, listener: socket.socket, link: Link | None) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            if link is not None and link.cut_mode == RESET:
                link.counters.add("connections", "refused")
                abort_socket(client)
                continue
            self._open(client, link)

    def _open(self, client: socket.socket, link: Link | None) -> None:
        address = self.upstream
        try:
            if address is None:
                raise ConnectionRefusedError("no upstream yet (forward_to was not called)")
            upstream = socket.create_connection(address, timeout=self.connect_timeout)
        except OSError as exc:
            log.info("%s: upstream %s unreachable (%s); resetting the client", self.name, address, exc)
            abort_socket(client)
            return
        for sock in (client, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
        conn = Connection(self, next(self._ids), client, upstream, link)
        with self._lock:
            self._connections.add(conn)
        if link is not None:
            link._attach(conn)
        conn._register()

    def forget(self, conn: Connection) -> None:
        with self._lock:
            self._connections.discard(conn)

    def emit(self, record: CountedRecord, link: Link | None) -> None:
        if link is not None:
            link.counters.add_record(record)
        if self._sink is not None:
            with self._sink_lock:
                try:
                    self._sink(record)
                except Exception:
                    log.exception("%s: record sink raised; record dropped", self.name)
