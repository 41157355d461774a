"""One proxied TCP connection: a client socket and its upstream twin, driven by its proxy's event loop.

Every socket of a proxy is non-blocking and served by the proxy's one loop thread (`tcp.py`): a read hands the
chunk to the connection's protocol decoder (which buffers, so frames split across reads and reads holding
several frames both decode), then queues it for the other side with a delivery time; a chunk is sent as soon
as it is due, at once on an undelayed link. A delay therefore never holds up the other direction, and byte
order within a direction is kept even with jitter (a chunk is never due before the one ahead of it). A queue
over `max_queue_bytes` stops reading its source until it drains (backpressure).

One thread for every connection, rather than a reader and a writer per direction, is what lets one proxy
carry a few hundred members' ZooKeeper sessions at thousands of requests a second: with threads, most of the
time went to handing the GIL between them.
"""

from __future__ import annotations

import logging
import selectors
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from zkconsumer.lab.wire.links import BLACKHOLE, RESET, CountedRecord, Link

log = logging.getLogger(__name__)

C2S = "c2s"  # client -> server
S2C = "s2c"  # server -> client

# The loop wakes at least this often to notice a stop.
POLL_S = 0.5
_READ_SIZE = 256 * 1024
_EOF = object()


class StreamDecoder(Protocol):
    """What a protocol decoder offers the forwarder; both calls are made from the proxy's loop thread."""

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


class ProxyLoop(Protocol):
    """What a connection uses of the proxy whose loop thread drives it (``tcp.TcpProxy``, which imports this module
    to create its connections)."""

    name: str
    max_queue_bytes: int
    selector: selectors.BaseSelector

    @property
    def decoder_factory(self) -> Callable[[Connection], StreamDecoder] | None: ...

    def link(self, name: str) -> Link: ...

    def emit(self, record: CountedRecord, link: Link | None) -> None: ...

    def call_soon(self, fn: Callable[..., None], *args: Any) -> None: ...

    def flush_at(self, due: float, conn: Connection, way: str) -> None: ...

    def forget(self, conn: Connection) -> None: ...


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


class _Way:
    """One direction: the socket it reads, the socket it writes, and what is queued between them."""

    __slots__ = ("blocked", "bytes", "dest", "eof", "finished", "last_due", "name", "queue", "reading", "source")

    def __init__(self, name: str, source: socket.socket, dest: socket.socket) -> None:
        self.name = name
        self.source = source
        self.dest = dest
        self.queue: deque[list[Any]] = deque()  # [due monotonic time, bytes | memoryview | _EOF]
        self.bytes = 0
        self.last_due = 0.0
        self.reading = True  # False after EOF, and while the queue is over its bound
        self.eof = False  # the source has closed its side
        self.blocked = False  # the last send would have blocked: wait until `dest` is writable
        self.finished = False  # the EOF was passed on


class Connection:
    """One client connection and its upstream twin. Every method but `close`, `drop_queued` and the properties
    runs in the proxy's loop thread; those two hand themselves over to it."""

    def __init__(self, proxy: ProxyLoop, conn_id: int, client: socket.socket, upstream: socket.socket,
                 link: Link | None) -> None:
        self.conn_id = conn_id
        self.link = link
        self.opened_at = time.time()
        self._proxy = proxy
        self._client = client
        self._upstream = upstream
        self._ways = {C2S: _Way(C2S, client, upstream), S2C: _Way(S2C, upstream, client)}
        self._by_source = {client: self._ways[C2S], upstream: self._ways[S2C]}
        self._by_dest = {upstream: self._ways[C2S], client: self._ways[S2C]}
        self._interest: dict[socket.socket, int] = {}
        self._closing = False
        self._torn_down = False
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
        return self._closing

    def emit(self, record: CountedRecord) -> None:
        self._proxy.emit(record, self.link)

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
        self._proxy.call_soon(self._drop_queued)

    def close(self, reset: bool = False) -> None:
        self._closing = True  # nothing more is sent from now on, even before the loop tears the sockets down
        self._proxy.call_soon(self._teardown, reset)

    # --- in the loop thread ------------------------------------------------------------------------------

    def _register(self) -> None:
        for sock in (self._client, self._upstream):
            self._update(sock)

    def _on_event(self, sock: socket.socket, mask: int) -> None:
        if mask & selectors.EVENT_WRITE and not self._torn_down:
            self._flush(self._by_dest[sock])
        if mask & selectors.EVENT_READ and not self._torn_down:
            self._read(self._by_source[sock])

    def _read(self, way: _Way) -> None:
        try:
            data = way.source.recv(_READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._teardown(False)  # e.g. reset by the peer: nothing sensible can follow in either direction
            return
        now = time.monotonic()
        ts = time.time()
        link = self.link
        if not data:
            way.reading = False
            way.eof = True
            self._update(way.source)
            if self.blackholed:
                self._lossy = True  # the FIN is lost in the partition too
            else:
                self._queue(way, _EOF, self._due(way, now, link))
            return
        due = self._due(way, now, link)
        self._decode(way.name, data, ts, ts + (due - now))
        if self._closing:
            return
        if link is None and self.link is not None:
            due = self._due(way, now, self.link)  # bound during decode: delay from now on
        if self.link is not None:
            self.link.counters.add("bytes", way.name, len(data))
        if self.blackholed:
            self._lossy = True
            self.link.counters.add("dropped_bytes", way.name, len(data))
            return
        self._queue(way, data, due)

    @staticmethod
    def _due(way: _Way, now: float, link: Link | None) -> float:
        way.last_due = max(way.last_due, now + (link.sample_delay() if link else 0.0))
        return way.last_due

    def _queue(self, way: _Way, item: Any, due: float) -> None:
        way.queue.append([due, item])
        if item is not _EOF:
            way.bytes += len(item)
            if way.bytes >= self._proxy.max_queue_bytes and way.reading:
                way.reading = False  # resumed by _flush once the queue drains
                self._update(way.source)
        if due > time.monotonic():
            self._proxy.flush_at(due, self, way.name)
        elif len(way.queue) == 1 and not way.blocked:
            self._flush(way)

    def _flush(self, way: _Way) -> None:
        """Send what is due, in order; stop at the first chunk not yet due or a send that would block."""
        while way.queue and not self._closing:
            due, item = way.queue[0]
            if due > time.monotonic():
                break
            if self.blackholed:
                self._drop_queued()
                return
            if item is _EOF:
                way.queue.popleft()
                # Pass the half-close on: the other direction may still carry an answer (a four-letter word).
                shutdown_quietly(way.dest, socket.SHUT_WR)
                way.finished = True
                if all(w.finished for w in self._ways.values()):
                    self._teardown(False)
                return
            try:
                sent = way.dest.send(item)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self._teardown(False)
                return
            way.bytes -= sent
            if sent < len(item):
                way.queue[0][1] = memoryview(item)[sent:]
                if not way.blocked:
                    way.blocked = True
                    self._update(way.dest)
                return
            way.queue.popleft()
        if way.blocked:
            way.blocked = False
            self._update(way.dest)
        if not way.reading and not way.eof and way.bytes < self._proxy.max_queue_bytes:
            way.reading = True
            self._update(way.source)

    def _drop_queued(self) -> None:
        dropped = 0
        for way in self._ways.values():
            dropped += len(way.queue)
            way.queue.clear()
            way.bytes = 0
        if dropped:
            self._lossy = True

    def _update(self, sock: socket.socket) -> None:
        """Register `sock` for what its two directions wait for: reading it, or writing to it."""
        if self._torn_down:
            return
        mask = (selectors.EVENT_READ if self._by_source[sock].reading else 0) | \
               (selectors.EVENT_WRITE if self._by_dest[sock].blocked else 0)
        current = self._interest.get(sock, 0)
        if mask == current:
            return
        selector = self._proxy.selector
        if current and mask:
            selector.modify(sock, mask, self)
        elif mask:
            selector.register(sock, mask, self)
        else:
            selector.unregister(sock)
        self._interest[sock] = mask

    def _decode(self, direction: str, data: bytes, ts: float, deliver_ts: float) -> None:
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

    def _teardown(self, reset: bool = False) -> None:
        if self._torn_down:
            return
        self._closing = True
        self._torn_down = True
        for sock, mask in self._interest.items():
            if mask:
                try:
                    self._proxy.selector.unregister(sock)
                except (KeyError, ValueError, OSError):
                    pass
        self._interest.clear()
        if reset:
            abort_socket(self._client)
        else:
            shutdown_quietly(self._client, socket.SHUT_RDWR)
            self._client.close()
        shutdown_quietly(self._upstream, socket.SHUT_RDWR)
        self._upstream.close()
        self._proxy.forget(self)
        if self.link is not None:
            self.link._detach(self)
