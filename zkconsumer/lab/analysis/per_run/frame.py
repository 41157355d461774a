"""The time frame of one run, in Python over Arrow: its bounds, its changes and its change windows (rows of
BOUNDS_SCHEMA, CHANGES_SCHEMA and WINDOWS_SCHEMA).

What the churn window, a change, its number and its window are is defined in windows.py, and only there. This
module follows, step by step, the Spark form the tests hold it equal to (tests/analysis/spark_oracle/windows.py:
`_span` is its `build`'s per-run phases, then `_numbered`, `_starts`, `_changes`, `_bounds`, `_windows`), with
Spark's null, ordering and aggregate semantics where they differ from plain Python.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from zkconsumer.lab.analysis.owner_nodes import OWNER_PATH, OWNERS_FROM_WIRE
from zkconsumer.lab.analysis.per_run.core import (
    Row,
    claimed,
    deleted,
    equals,
    from_wire,
    greatest,
    is_in,
    least,
    median,
    picked,
    session_closed,
)
from zkconsumer.lab.analysis.windows import (
    BOUNDS_SCHEMA,
    CHANGES_SCHEMA,
    COUNTED_ACTIONS,
    WINDOW_ACTIONS,
    WINDOWS_SCHEMA,
)


def time_frame(run: pa.Table) -> tuple[Row | None, list[Row], list[Row]]:
    """(bounds, changes, windows) of one run's records (run_id, file, readers.RECORD_FIELDS), from its control
    records (`_control`); bounds is None when the run has none."""
    span = _span(run)
    if span is None:
        return None, [], []
    numbered = _numbered(run)
    changes = _changes(run, numbered, _starts(run, numbered, span["settled"]), span)
    return _bounds(run, changes, span), changes, _windows(changes, span)


# --- Spark's semantics on values -------------------------------------------------------------------------------

def _nulls_first(value: Any) -> tuple[bool, Any]:
    """A sort key for Spark's ascending order, where null comes first (in an ORDER BY and inside a struct)."""
    return value is not None, value


def _joined(members: list[str | None] | None) -> str | None:
    """F.array_join(members, ","): null for a null list; null elements are left out."""
    return None if members is None else ",".join(m for m in members if m is not None)


def _fits(row: Row, schema: Any) -> Row:
    """`row` with exactly the schema's fields, in its order."""
    return {f.name: row[f.name] for f in schema.fields}


# --- the run's records ----------------------------------------------------------------------------------------

def _all(*masks: pa.ChunkedArray) -> pa.ChunkedArray:
    """The masks' AND with SQL's nulls (Kleene logic: false wins over null), as a Spark filter sees them."""
    return functools.reduce(pc.and_kleene, masks)


def _any(*masks: pa.ChunkedArray) -> pa.ChunkedArray:
    return functools.reduce(pc.or_kleene, masks)


def _control(run: pa.Table) -> pa.ChunkedArray:
    """The control records: every record but wire, produce and consume, and of the wire the owner-node creates
    and deletes, session closes and the coordinator's error answers. A null type is none."""
    type_, proto, kind = run["type"], run["proto"], run["kind"]
    owner_node = _all(pc.equal(proto, "zk"), pc.equal(kind, "reply"), is_in(run, "op", ("create", "delete")),
                      pc.match_substring_regex(run["path"], OWNER_PATH))
    close = _all(pc.equal(proto, "zk"), pc.equal(kind, "request"), pc.equal(run["op"], "closeSession"))
    kafka_error = _all(pc.equal(proto, "kafka"), pc.equal(kind, "response"), pc.is_valid(run["error_name"]))
    wire = _all(pc.equal(type_, "wire"), _any(owner_node, close, kafka_error))
    # Spark's coalesce(~type.isin(...) | wire, false): a null anywhere counts as false (Arrow's is_in gives false,
    # not null, for a null type, so that case is taken out first)
    other = pc.invert(is_in(run, "type", ("wire", "produce", "consume")))
    return _all(pc.is_valid(type_), _any(other, pc.fill_null(wire, False)))


def _span(run: pa.Table) -> Row | None:
    """The run's phases: run_id, run_end (the last control record), settled, done and churn_end (done, else the
    run's end); None when the run has no control record (Spark's groupBy then has no row for it)."""
    control = _control(run)
    if not pc.any(control).as_py():
        return None
    phases = picked(run, equals(run, "type", "phase"), ["ts", "phase"])

    def first(phase: str) -> float | None:
        return least(*(p["ts"] for p in phases if p["phase"] == phase))

    run_end = pc.max(pc.filter(run["ts"], control)).as_py()
    done = first("done")
    return {"run_id": run["run_id"][0].as_py(), "run_end": run_end, "settled": first("settled"), "done": done,
            "churn_end": done if done is not None else run_end}


def _numbered(run: pa.Table) -> list[Row]:
    """The change-starting membership records, numbered as the orchestrator numbers them (windows.py): in
    change_index order (time, then step), each with its weight, change_index and change_number (the running sum of
    weights)."""
    mask = _all(equals(run, "type", "membership"), is_in(run, "action", WINDOW_ACTIONS))
    rows = picked(run, mask, ["design", "ts", "action", "members", "step"])
    # the window's order: ts, coalesce(step, 0), action, array_join(members, ","); ascending, nulls first
    rows.sort(key=lambda r: (_nulls_first(r["ts"]), r["step"] or 0, r["action"], _nulls_first(_joined(r["members"]))))
    number = 0
    for index, row in enumerate(rows, start=1):
        row["weight"] = 1 if row["members"] is None else max(1, len(row["members"]))
        number += row["weight"]
        row["change_index"], row["change_number"] = index, number
    return rows


# --- where each change's window starts -------------------------------------------------------------------------

def _ownership(r: Row) -> int | None:
    """1 for an ownership event that starts owning, 0 for one that stops, else None: the events a leave's start
    is read from (windows.py)."""
    type_, kind = r["type"], r["kind"]
    if type_ == "member_event" and kind == "fetchers_started":
        return 1
    # a null `partitions` is neither "[]" nor anything else in Spark: the record is no event
    if type_ == "member_event" and kind == "fetchers_stopped" and r["partitions"] not in (None, "[]"):
        return 0
    if type_ == "generation" and kind == "assigned":
        return 1
    if type_ == "generation" and kind in ("revoked", "lost"):
        return 0
    if from_wire(r) and claimed(r):
        return 1
    if from_wire(r) and (deleted(r) or session_closed(r)):
        return 0
    return None


def _events(run: pa.Table, members: set[str]) -> dict[str, list[tuple[float, int]]]:
    """Each of `members`' ownership events as (ts, start), by coalesce(member, link). Arrow picks the candidates
    (member events, generations, the owner-node wire of the designs that take owners from it); `_ownership` then
    keeps the events."""
    who = pc.coalesce(run["member"], run["link"])
    wire = _all(equals(run, "type", "wire"), equals(run, "proto", "zk"), is_in(run, "design", OWNERS_FROM_WIRE))
    mask = _all(_any(is_in(run, "type", ("member_event", "generation")), wire),
                pc.is_in(who, value_set=pa.array(sorted(members), pa.string())), pc.is_valid(run["ts"]))
    columns = ["type", "ts", "design", "member", "link", "kind", "partitions", "proto", "op", "path", "err"]
    events: dict[str, list[tuple[float, int]]] = {}
    for r in picked(run, mask, columns):
        start = _ownership(r)
        if start is not None:
            events.setdefault(r["member"] if r["member"] is not None else r["link"], []).append((r["ts"], start))
    return events


def _last_stops(change: Row, events: dict[str, list[tuple[float, int]]]) -> list[float]:
    """The times of a leave's leavers whose last ownership event at or before the record is a stop.

    The last event is Spark's max(struct(ts, start)): the latest, and at equal times a start (1) beats a stop (0),
    so a member that stopped and started again at the same instant still owns."""
    if change["action"] != "leave" or change["ts"] is None:
        return []
    stops = []
    for member in change["members"] or ():
        before = [e for e in events.get(member, ()) if e[0] <= change["ts"]]
        if before and max(before)[1] == 0:
            stops.append(max(before)[0])
    return stops


def _starts(run: pa.Table, numbered: list[Row], settled: float | None) -> list[float | None]:
    """Each change's window start, in change_index order.

    The fold: a leaver's stop moves its leave's start back only when it is later than the previous change's start
    (`floor`, itself possibly moved; `settled` before the first). The previous start, not the previous record: a
    stop before a change's moved start belongs to that change."""
    leavers = {m for c in numbered if c["action"] == "leave" for m in c["members"] or () if m is not None}
    events = _events(run, leavers) if leavers else {}
    floor = settled if settled is not None else -math.inf
    starts = []
    for change in numbered:
        # with a null floor (a change without a time) Spark's `ts > floor` is null, and no stop counts
        stops = [ts for ts in _last_stops(change, events) if floor is not None and ts > floor]
        start = least(change["ts"], min(stops, default=None))
        starts.append(start)
        floor = start
    return starts


# --- the three tables ------------------------------------------------------------------------------------------

def _first_stables(run: pa.Table) -> dict[int, Row]:
    """The first `stable` record of each change number: Spark's min(struct(ts, duration_s)), nulls first."""
    def key(r: Row) -> tuple:
        return _nulls_first(r["ts"]), _nulls_first(r["duration_s"])

    first: dict[int, Row] = {}
    for r in picked(run, equals(run, "type", "stable"), ["ts", "generation_or_rebalance", "duration_s"]):
        number = r["generation_or_rebalance"]
        # a null change number names no change (the join on it never matches)
        if number is not None and (number not in first or key(r) < key(first[number])):
            first[number] = r
    return first


def _changes(run: pa.Table, numbered: list[Row], starts: list[float | None], span: Row) -> list[Row]:
    """CHANGES_SCHEMA rows: each change's window runs to the next change's start; the last one's to
    greatest(churn_end, its start)."""
    stables = _first_stables(run)
    rows = []
    for i, c in enumerate(numbered):
        end = starts[i + 1] if i + 1 < len(starts) else greatest(span["churn_end"], starts[i])
        stable = stables.get(c["change_number"], {})
        rows.append(_fits({
            "run_id": span["run_id"], "design": c["design"], "change_index": c["change_index"],
            "change_number": c["change_number"], "action": c["action"], "change_members": _joined(c["members"]) or "",
            "step": c["step"], "weight": c["weight"], "counted": c["weight"] if c["action"] in COUNTED_ACTIONS else 0,
            "change_ts": c["ts"], "window_start": starts[i], "window_end": end,
            "stable_s": stable.get("duration_s"), "stable_ts": stable.get("ts")}, CHANGES_SCHEMA))
    return rows


def _in_churn(ts: float | None, span: Row) -> bool:
    settled, done = span["settled"], span["done"]
    return settled is not None and ts is not None and settled <= ts and (done is None or ts <= done)


def _bounds(run: pa.Table, changes: list[Row], span: Row) -> Row:
    """The BOUNDS_SCHEMA row: the churn window, and the changes and stable records counted in it."""
    counted = [c for c in changes if _in_churn(c["change_ts"], span)]
    stable = picked(run, equals(run, "type", "stable"), ["ts", "duration_s"])
    # max, median and count of duration_s skip its nulls, as Spark's aggregates do
    durations = [s["duration_s"] for s in stable if _in_churn(s["ts"], span) and s["duration_s"] is not None]
    return _fits({
        "run_id": span["run_id"], "churn_start": span["settled"], "churn_end": span["churn_end"],
        "run_end": span["run_end"], "changes": sum(c["counted"] for c in counted),
        "membership_records": len(counted), "time_to_stable_s": greatest(*durations),
        "median_stable_s": median(durations), "stable_records": len(durations)}, BOUNDS_SCHEMA)


def _windows(changes: list[Row], span: Row) -> list[Row]:
    """WINDOWS_SCHEMA rows: window 0 (settled to the first change's start, when the run settled), then each
    change's window; the last one is closed."""
    rows = []
    if span["settled"] is not None:
        first = changes[0]["window_start"] if changes else None
        rows.append({"run_id": span["run_id"], "change_index": 0, "win_start": span["settled"],
                     "win_end": greatest(first if first is not None else span["churn_end"], span["settled"]),
                     "last": not changes})
    for c in changes:
        rows.append({"run_id": span["run_id"], "change_index": c["change_index"], "win_start": c["window_start"],
                     "win_end": c["window_end"], "last": c["change_index"] == len(changes)})
    return [_fits(r, WINDOWS_SCHEMA) for r in rows]
