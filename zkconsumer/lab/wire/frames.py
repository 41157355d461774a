"""One Kafka frame read from a blocking socket: a 4-byte big-endian size, then that many bytes. For the lab's own
direct requests to a broker (what a run's servers are, `runs/server_info.py`; a librdkafka member's probe), which
go around the proxies and their decoder (`kafka_codec.py`)."""

from __future__ import annotations

import socket
import struct


def read_exactly(sock: socket.socket, size: int) -> bytes:
    """`size` bytes from `sock`; ConnectionError if the peer closes first."""
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def read_frame(sock: socket.socket) -> bytes:
    """The payload of the next size-prefixed frame on `sock` (the size itself not included)."""
    return read_exactly(sock, struct.unpack(">i", read_exactly(sock, 4))[0])
