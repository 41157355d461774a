"""What every per-run family shares: picking records out of a run's Arrow table, the change window a time falls
in (`in_window`), and the owner-node reading of the ZooKeeper wire (what an owner node tells: owner_nodes.py).

Records are picked with Arrow's compute functions first and only the picked rows become Python dicts: most of a
run's lines are wire, produce and consume records that a family either skips or counts by column.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from zkconsumer.lab.analysis.owner_nodes import NODE_EXISTS, OK, OWNER_PATH, OWNERS_FROM_WIRE
from zkconsumer.lab.rules.protocol import REQUEST, ZK_PROTO, wire_category

Row = dict[str, Any]
_OWNER = re.compile(OWNER_PATH)


def picked(run: pa.Table, mask: pa.ChunkedArray | pa.Array | None, columns: Sequence[str] | None = None) -> list[Row]:
    """The rows of `run` where `mask` is true (null counts as false), as dicts of `columns` (default: all)."""
    table = run if columns is None else run.select(list(columns))
    if mask is not None:
        table = table.filter(pc.fill_null(mask, False))
    return table.to_pylist()


def equals(run: pa.Table, column: str, value: Any) -> pa.ChunkedArray:
    return pc.equal(run[column], value)


def is_in(run: pa.Table, column: str, values: Iterable[Any]) -> pa.ChunkedArray:
    return pc.is_in(run[column], value_set=pa.array(list(values), type=run.schema.field(column).type))


def in_window(t: float, window: Row) -> bool:
    """Whether `t` falls in a change window: half-open [win_start, win_end), the churn's last window closed.
    Outside every window is outside the churn."""
    return t >= window["win_start"] and (t < window["win_end"] or (bool(window["last"]) and t == window["win_end"]))


def change_indexes(t: float | None, windows: Sequence[Row]) -> list[int | None]:
    """Every change window `t` falls in (usually one; none gives [None], as a left join of the windows does)."""
    if t is None:
        return [None]
    found = [w["change_index"] for w in windows if in_window(t, w)]
    return found or [None]


def attach(rows: Iterable[Row], windows: Sequence[Row], ts: str = "ts") -> list[Row]:
    """Each row with `change_index`, the change window its `ts` falls in (`in_window`): a row in two windows appears
    twice, as a join gives it; a row in none once, with None."""
    out = []
    for row in rows:
        for index in change_indexes(row[ts], windows):
            out.append({**row, "change_index": index})
    return out


def owner_tp(path: str | None) -> str | None:
    """"topic/partition" of an owner-node path (OWNER_PATH's two groups), or None."""
    found = _OWNER.search(path or "")
    return f"{found.group(1)}/{found.group(2)}" if found else None


def _zk_reply(r: Row, op: str) -> bool:
    return (r.get("type") == "wire" and r.get("proto") == "zk" and r.get("kind") == "reply" and r.get("op") == op
            and owner_tp(r.get("path")) is not None)


def claimed(r: Row) -> bool:
    """An owner node created: the member (the record's `link`) owns the partition from the reply on."""
    return _zk_reply(r, "create") and r.get("err") == OK


def conflicted(r: Row) -> bool:
    """A claim refused: the node is someone else's (NodeExists)."""
    return _zk_reply(r, "create") and r.get("err") == NODE_EXISTS


def deleted(r: Row) -> bool:
    """An owner node deleted (released, or rolled back after a conflict): gone once the server answers."""
    return _zk_reply(r, "delete")


def session_closed(r: Row) -> bool:
    """A member closing its session: ZooKeeper deletes its ephemeral owner nodes with it."""
    return (r.get("type") == "wire" and r.get("proto") == ZK_PROTO
            and wire_category(ZK_PROTO, r.get("kind")) == REQUEST and r.get("op") == "closeSession")


def from_wire(r: Row) -> bool:
    """A record of a design whose owners come from the wire (OWNERS_FROM_WIRE)."""
    return r.get("design") in OWNERS_FROM_WIRE


# Spark's functions on plain values, where the per-run tables take a null the way Spark's aggregates do

def greatest(*values: Any) -> Any:
    """F.greatest: the largest value that is not null (null when all are)."""
    present = [v for v in values if v is not None]
    return max(present) if present else None


def least(*values: Any) -> Any:
    """F.least: the smallest value that is not null (null when all are)."""
    present = [v for v in values if v is not None]
    return min(present) if present else None


def median(values: Iterable[float | None]) -> float | None:
    """F.median: Spark's exact percentile 0.5 of the values that are not null, interpolated between the two middle
    ones with Spark's own formula (another one can differ in the last bit)."""
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    position = (len(ordered) - 1) * 0.5
    lower, higher = math.floor(position), math.ceil(position)
    low, high = ordered[lower], ordered[higher]
    if lower == higher or low == high:
        return float(low)
    return (higher - position) * low + (position - lower) * high
