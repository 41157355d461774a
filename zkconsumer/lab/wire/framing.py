"""Length-prefixed framing shared by both protocols: ZooKeeper (jute) and Kafka frame every message with a
big-endian int32 size, so one buffer class reassembles frames split across reads and splits reads holding
several frames."""

from __future__ import annotations


class FrameError(ValueError):
    """The byte stream does not look like length-prefixed frames (negative or absurd size)."""


class FrameBuffer:
    """Accumulates bytes of one direction of one connection and hands back complete frame payloads."""

    def __init__(self, max_frame: int) -> None:
        self._max_frame = max_frame
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        """Add `data`; return the payloads (without the size prefix) of every frame now complete."""
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            size = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
            if size < 0 or size > self._max_frame:
                head = bytes(buf[pos:pos + 8])
                raise FrameError(f"frame size {size} outside 0..{self._max_frame} (first bytes {head!r})")
            if end - pos - 4 < size:
                break
            frames.append(bytes(buf[pos + 4:pos + 4 + size]))
            pos += 4 + size
        # One compaction per feed, not per frame: a read holding hundreds of small frames stays linear.
        if pos:
            del buf[:pos]
        return frames
