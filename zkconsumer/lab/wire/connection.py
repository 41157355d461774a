"""One proxied TCP connection: a client socket, its upstream twin, and four named threads.

A reader per direction hands each chunk to the connection's protocol decoder (which buffers, so frames split
across reads and reads holding several frames both decode), then queues it with a delivery time; the writer of
that direction sends chunks in order once due. A delay therefore never holds up the other direction, and byte
order within a direction is kept even with jitter (a chunk is never due before the one ahead of it).
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

from zkconsumer.lab.wire.links import BLACKHOLE, RESET, CountedRecord, Link

if TYPE_CHECKING:
    from zkconsumer.lab.wire.tcp import TcpProxy

log = logging.getLogger(__name__)

C2S = "c2s"  # client -> server
S2C = "s2c"  # server -> client

# Blocking calls wake at least this often to notice a close, in case shutdown() did not wake them.
POLL_S = 0.5
_READ_SIZE = 256 * 1024
_EOF = object()


class StreamDecoder(Protocol):
    """What a protocol decoder offers the forwarder; both calls are made under the connection's decode lock."""

    def feed(self, direction: str, data: bytes, ts: float, deliver_ts: float) -> None:
        """`ts`: wall time the chunk was read; `deliver_ts`: wall time it is scheduled to reach the other side."""

    def fail(self, direction: str, error: Exception, ts: float) -> None:
        """Called once when `feed` raised; the decoder should emit its `undecodable` record."""


class DecodeContext(Protocol):
    """The parts of a `Connection` a decoder may use (tests substitute a stub)."""

    conn_id: int

    @property
    def link_name(self) -> str | None: ...

    @property
    def blackholed(self) -> bool: ...

    def emit(self, record: Any) -> None: ...

    def bind(self, name: str) -> Any: ...


class _Pipe:
    """One direction's delivery queue: (due monotonic time, chunk) in order, bounded in bytes for backpressure."""

    def __init__(self, max_bytes: int) -> None:
        self._cond = threading.Condition()
        self._items: deque[tuple[float, Any]] = deque()
        self._bytes = 0
        self._max = max_bytes
        self._closed = False
        self._last_due = 0.0

    def schedule(self, now: float, delay_s: float) -> float:
        with self._cond:
            self._last_due = max(self._last_due, now + delay_s)
            return self._last_due

    def put(self, item: Any, due: float) -> bool:
        with self._cond:
            while not self._closed and self._items and self._bytes >= self._max:
                self._cond.wait(POLL_S)
            if self._closed:
                return False
            self._items.append((due, item))
            if item is not _EOF:
                self._bytes += len(item)
            self._cond.notify_all()
            return True

    def get(self) -> Any:
        """The next chunk once due, `_EOF`, or None when closed."""
        with self._cond:
            while True:
                if self._closed:
                    return None
                if not self._items:
                    self._cond.wait()
                    continue
                due, item = self._items[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                self._items.popleft()
                if item is not _EOF:
                    self._bytes -= len(item)
                self._cond.notify_all()
                return item

    def drop(self) -> int:
        """Forget everything queued; returns how many items went."""
        with self._cond:
            dropped = len(self._items)
            self._items.clear()
            self._bytes = 0
            self._cond.notify_all()
            return dropped

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


def shutdown_quietly(sock: socket.socket, how: int) -> None:
    try:
        sock.shutdown(how)
    except OSError:
        pass


def abort_socket(sock: socket.socket) -> None:
    """Close with a TCP reset rather than a FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


class Connection:
    """One client connection and its upstream twin."""

    def __init__(self, proxy: TcpProxy, conn_id: int, client: socket.socket, upstream: socket.socket,
                 link: Link | None) -> None:
        self.conn_id = conn_id
        self.link = link
        self.opened_at = time.time()
        self._proxy = proxy
        self._sockets = {C2S: (client, upstream), S2C: (upstream, client)}  # (source, destination)
        self._client = client
        self._upstream = upstream
        self._pipes = {C2S: _Pipe(proxy.max_queue_bytes), S2C: _Pipe(proxy.max_queue_bytes)}
        self._closed = threading.Event()
        self._state_lock = threading.Lock()
        self._decode_lock = threading.Lock()
        self._closing = False
        self._finished: set[str] = set()
        self._live_threads = 0
        self._lossy = False
        self._decoding = proxy.decoder_factory is not None
        self.decoder: StreamDecoder | None = proxy.decoder_factory(self) if proxy.decoder_factory else None

    def __repr__(self) -> str:
        return f"Connection(c{self.conn_id}, link={self.link_name!r}, closed={self.closed})"

    @property
    def link_name(self) -> str | None:
        return self.link.name if self.link else None

    @property
    def blackholed(self) -> bool:
        return self.link is not None and self.link.cut_mode == BLACKHOLE

    @property
    def lossy(self) -> bool:
        return self._lossy

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def emit(self, record: CountedRecord) -> None:
        self._proxy._emit(record, self.link)

    def bind(self, name: str) -> Link:
        """Attach this connection to the link `name` (Kafka: learnt from the first request's client id)."""
        if self.link is not None:
            return self.link
        link = self._proxy.link(name)
        self.link = link
        link._attach(self)
        if link.cut_mode == RESET:
            self.close(reset=True)
        return link

    def drop_queued(self) -> None:
        if sum(pipe.drop() for pipe in self._pipes.values()):
            self._lossy = True

    def close(self, reset: bool = False) -> None:
        with self._state_lock:
            if self._closing:
                return
            self._closing = True
        self._closed.set()
        for pipe in self._pipes.values():
            pipe.close()
        if reset:
            # SHUT_RD wakes our reader without sending a FIN; the final close() then sends the RST.
            try:
                self._client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            shutdown_quietly(self._client, socket.SHUT_RD)
        else:
            shutdown_quietly(self._client, socket.SHUT_RDWR)
        shutdown_quietly(self._upstream, socket.SHUT_RDWR)

    def _start(self) -> None:
        tag = f"{self._proxy.name}-{self.link_name or 'conn'}-c{self.conn_id}"
        self._live_threads = 4
        for direction in (C2S, S2C):
            self._proxy._spawn(f"{tag}-{direction}-read", self._read_loop, direction)
            self._proxy._spawn(f"{tag}-{direction}-write", self._write_loop, direction)

    def _decode(self, direction: str, data: bytes, ts: float, deliver_ts: float) -> None:
        with self._decode_lock:
            if not self._decoding or self.decoder is None:
                return
            try:
                self.decoder.feed(direction, data, ts, deliver_ts)
            except Exception as exc:
                # Forwarding must never depend on decoding: record once, then pass bytes through blind.
                self._decoding = False
                log.warning("%s c%d %s: stop decoding: %s", self._proxy.name, self.conn_id, direction, exc)
                try:
                    self.decoder.fail(direction, exc, ts)
                except Exception:
                    log.exception("decoder failure handler raised")

    def _read_loop(self, direction: str) -> None:
        source, _ = self._sockets[direction]
        pipe = self._pipes[direction]
        try:
            while not self._closed.is_set():
                try:
                    data = source.recv(_READ_SIZE)
                except TimeoutError:
                    continue
                except OSError:
                    self.close()  # e.g. reset by the peer: nothing sensible can follow in either direction
                    break
                now = time.monotonic()
                ts = time.time()
                link = self.link
                if not data:
                    if self.blackholed:
                        self._lossy = True  # the FIN is lost in the partition too
                    else:
                        pipe.put(_EOF, pipe.schedule(now, link.sample_delay() if link else 0.0))
                    break
                due = pipe.schedule(now, link.sample_delay() if link else 0.0)
                self._decode(direction, data, ts, ts + (due - now))
                if self._closed.is_set():
                    break
                if link is None and self.link is not None:
                    due = pipe.schedule(now, self.link.sample_delay())  # bound during decode: delay from now on
                if self.link is not None:
                    self.link.counters.add("bytes", direction, len(data))
                if self.blackholed:
                    self._lossy = True
                    self.link.counters.add("dropped_bytes", direction, len(data))
                    continue
                if not pipe.put(data, due):
                    break
        finally:
            self._thread_done()

    def _write_loop(self, direction: str) -> None:
        _, destination = self._sockets[direction]
        pipe = self._pipes[direction]
        finished = False
        try:
            while True:
                item = pipe.get()
                if item is None:
                    break
                if self.blackholed:
                    self._lossy = True
                    continue
                if item is _EOF:
                    # Pass the half-close on: the other direction may still carry an answer (a four-letter word).
                    shutdown_quietly(destination, socket.SHUT_WR)
                    finished = True
                    break
                if not self._send(destination, item):
                    break
        finally:
            if not finished or self._finish_direction(direction):
                self.close()
            self._thread_done()

    def _finish_direction(self, direction: str) -> bool:
        """Note a clean end of `direction`; True once both directions have ended."""
        with self._state_lock:
            self._finished.add(direction)
            return len(self._finished) == 2

    def _send(self, sock: socket.socket, data: bytes) -> bool:
        view = memoryview(data)
        while view:
            if self._closed.is_set():
                return False
            try:
                sent = sock.send(view)
            except TimeoutError:
                continue
            except OSError:
                return False
            view = view[sent:]
        return True

    def _thread_done(self) -> None:
        with self._state_lock:
            self._live_threads -= 1
            last = self._live_threads == 0
        if last:
            self._client.close()
            self._upstream.close()
            self._proxy._forget(self)
            if self.link is not None:
                self.link._detach(self)
