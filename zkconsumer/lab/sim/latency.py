"""The latency model: per-operation empirical distributions of the round trip a client sees, sampled per member.

The tables (`latency_tables.json`, fitted by `calibrate.py` from the lab's wire records: the `latency_ms` of every
ZooKeeper reply and of the Kafka group requests the coordinator answers at once) hold 101 quantiles per
operation. A draw takes one 32-bit word from the member's own `random.Random` stream, uses its top 16 bits as an
index into a 65,536-point inverse CDF (linear between the stored quantiles), and scales it. One word per draw, so
a batch of n draws (`MemberSampler.batch`, one `getrandbits(32 * n)`) is bit for bit the same n values as n
single draws.

A member's requests leave at `send`, reach the server at `send + up` (where a read sees the tree, a write
changes it and fires watches) and the reply is back at `send + up + down`, with `up = rtt // 2`. A member may sit
`extra_ms` further away (both ways, like the lab's link delay). A watch notification takes the `down` half of a
`getData` draw to reach its member.
"""

from __future__ import annotations

import functools
import json
import random
import sys
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from zkconsumer.lab.sim.scheduler import MS

TABLES_PATH = Path(__file__).with_name("latency_tables.json")
QUANTILES = 101  # 0%, 1%, ..., 100%
_INDEX_BITS = 16
_POINTS = 1 << _INDEX_BITS

# ZkClient's counter kinds -> the opcode names of the wire records (and of the tables).
WIRE_OP = {"get_data": "getData", "get_children": "getChildren", "exists": "exists", "create": "create",
           "set_data": "setData", "delete": "delete", "close_session": "closeSession"}


@functools.cache
def _load_tables(path: str) -> dict[str, dict[str, tuple[float, ...]]]:
    raw = json.loads(Path(path).read_text())
    return {family: {op: tuple(q) for op, q in raw[family].items()} for family in ("zk", "kafka")}


def default_tables(family: str) -> Mapping[str, tuple[float, ...]]:
    """The packaged quantile tables (ms) of one wire family: "zk" (ZooKeeper, by opcode) or "kafka" (by API). A
    family is the protocol the requests speak, not a lab design: every broker-side design's requests are "kafka"."""
    return _load_tables(str(TABLES_PATH))[family]


def load_tables(path: Path, family: str = "zk") -> Mapping[str, tuple[float, ...]]:
    """Tables written by `calibrate fit --out PATH` (e.g. fitted from one run, to compare with that run)."""
    return _load_tables(str(path))[family]


@functools.cache
def _inverse_cdf(quantiles: tuple[float, ...], scale: float) -> array:
    """65,536 round trips in ns, evenly spaced in probability, linear between the stored quantiles."""
    last = len(quantiles) - 1
    points = array("q")
    for i in range(_POINTS):
        position = (i + 0.5) / _POINTS * last
        low = int(position)
        high = min(low + 1, last)
        ms = quantiles[low] + (quantiles[high] - quantiles[low]) * (position - low)
        points.append(max(1, round(ms * scale * MS)))
    return points


@dataclass(frozen=True)
class LatencyModel:
    """Per-operation round-trip distributions (ms quantiles), a common `scale`, and members placed further away
    (`extra_ms`: consumer name -> one-way delay added each way)."""

    tables: Mapping[str, tuple[float, ...]] = field(default_factory=lambda: default_tables("zk"))
    scale: float = 1.0
    extra_ms: Mapping[str, float] = field(default_factory=dict)
    fallback: str = "getData"  # an operation the tables do not know is drawn from this one
    # op -> its inverse CDF: every member's sampler asks for the same few, and hashing a table's 101 quantiles
    # for each of 10,000 members costs more than the draws
    _points: dict[str, array] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def constant(cls, ms: float, ops: tuple[str, ...] = tuple(WIRE_OP.values()), **kwargs: object) -> LatencyModel:
        """Every round trip exactly `ms` (tests that reason about orderings)."""
        return cls(tables={op: (ms,) * QUANTILES for op in ops}, **kwargs)  # type: ignore[arg-type]

    def points(self, op: str) -> array:
        points = self._points.get(op)
        if points is None:
            quantiles = self.tables.get(op) or self.tables[self.fallback]
            points = self._points[op] = _inverse_cdf(tuple(quantiles), self.scale)
        return points

    def sampler(self, seed: int, member: str) -> MemberSampler:
        return MemberSampler(self, seed, member)


class MemberSampler:
    """One member's stream of latencies. Seeded by (seed, member name) through a string, so the stream does not
    depend on the process, the hash seed, or which other members exist."""

    __slots__ = ("_extra", "_model", "_points", "_rng")

    def __init__(self, model: LatencyModel, seed: int, member: str) -> None:
        self._model = model
        self._rng = random.Random(f"{seed}:{member}")
        self._extra = round(model.extra_ms.get(member, 0.0) * MS)
        self._points: dict[str, array] = {}

    def _table(self, op: str) -> array:
        points = self._points.get(op)
        if points is None:
            points = self._points[op] = self._model.points(op)
        return points

    def rtt(self, op: str) -> int:
        """One round trip of `op` in ns, this member's extra distance included."""
        return self._table(op)[self._rng.getrandbits(32) >> (32 - _INDEX_BITS)] + 2 * self._extra

    def split(self, op: str) -> tuple[int, int]:
        """(up, down): to the server, and back."""
        rtt = self.rtt(op)
        up = rtt // 2
        return up, rtt - up

    def notification(self) -> int:
        """How long a watch notification takes to reach this member."""
        rtt = self.rtt("getData") - 2 * self._extra
        return rtt - rtt // 2 + self._extra

    def batch(self, op: str, n: int) -> list[int]:
        """n round trips, the same values as n calls of `rtt(op)`."""
        table, extra = self._table(op), 2 * self._extra
        return [table[i] + extra for i in _indexes(self._rng, n)]


def _indexes(rng: random.Random, n: int) -> Sequence[int]:
    """The top 16 bits of n 32-bit draws: one `getrandbits(32 * n)` holds the n words `getrandbits(32)` would
    return one by one, least significant first."""
    if n <= 0:
        return ()
    words = rng.getrandbits(32 * n).to_bytes(4 * n, "little")
    if sys.byteorder == "little":
        return memoryview(words).cast("H")[1::2]  # the high half of each little-endian word, at C speed
    return [int.from_bytes(words[i:i + 4], "little") >> 16 for i in range(0, 4 * n, 4)]
