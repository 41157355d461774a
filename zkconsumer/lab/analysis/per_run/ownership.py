"""Ownership of one run, in Python over Arrow: events, intervals, overlaps, per-change coverage, stop-the-world
pauses, partitions moved, partitions revoked for nothing and contention events, computed from one run's records.
What an ownership event and an interval are is defined in zkconsumer/lab/analysis/ownership.py; what each table's
rows are, in its function's docstring here.

Each function gives, for that run, the rows its namesake in the Spark form the tests hold it equal to gives
(tests/analysis/spark_oracle/ownership.py), keyed by its columns, with Spark's semantics where they matter: events
ordered by (ts, ev), an END before a START at one instant; a join drops null keys; greatest/least skip nulls;
from_json gives null (here: no events) for text that does not parse.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from zkconsumer.lab.analysis.ownership import END, GIVE_UP, STALE_GENERATION, START
from zkconsumer.lab.analysis.per_run.core import (
    Row,
    attach,
    claimed,
    conflicted,
    deleted,
    equals,
    from_wire,
    greatest,
    in_window,
    is_in,
    least,
    owner_tp,
    picked,
    session_closed,
)
from zkconsumer.lab.designs import BROKER_SIDE_DESIGNS
from zkconsumer.lab.rules.protocol import backs_off

_COLUMNS = ("run_id", "design", "type", "ts", "member", "kind", "partitions", "added", "offsets", "action",
            "members", "proto", "link", "op", "path", "err", "result", "api_name", "error_name")
_TP = re.compile(r"^(.*)/(\d+)$", re.ASCII)  # the Spark form's regexp_extract pattern (\d is ASCII in Java)
_INT_MAX = 2**31 - 1


# --- reading the records ---------------------------------------------------------------------------------------

# Masks combine with Kleene logic: a field a record lacks is null, and plain and_/or_ would make the whole mask
# null there (dropping, say, a member event because its `op` is null), where Spark's `|` gives true.

def _rows(run: pa.Table, mask: pa.ChunkedArray) -> list[Row]:
    return picked(run, mask, _COLUMNS)


def _typed(run: pa.Table, type_: str, kinds: Iterable[str]) -> pa.ChunkedArray:
    return pc.and_kleene(equals(run, "type", type_), is_in(run, "kind", kinds))


def _zk_wire(run: pa.Table) -> pa.ChunkedArray:
    return pc.and_kleene(equals(run, "type", "wire"), equals(run, "proto", "zk"))


def _json(text: str | None) -> Any:
    """from_json's reading: the first JSON value of the text (Spark ignores what follows it), None if none."""
    if text is None:
        return None
    try:
        return json.JSONDecoder().raw_decode(text.lstrip())[0]
    except ValueError:
        return None


def _partition_list(text: str | None) -> list[str | None] | None:
    """from_json(text, PARTITION_LIST): a list of strings, or None. Spark keeps a non-string element as its JSON
    text (a number as Java prints it: only integers and plain decimals read the same here)."""
    value = _json(text)
    if not isinstance(value, list):
        return None
    return [v if v is None or isinstance(v, str) else json.dumps(v, separators=(",", ":")) for v in value]


def _offset_keys(text: str | None) -> list[str] | None:
    """map_keys(from_json(text, OFFSET_MAP)): the object's keys, or None when it is not an object of longs."""
    value = _json(text)
    if not isinstance(value, dict):
        return None
    # one value that is not a long (or null) makes the whole map null
    if any(v is not None and (isinstance(v, bool) or not isinstance(v, int) or not -2**63 <= v < 2**63)
           for v in value.values()):
        return None
    return list(value)


def _by(rows: Iterable[Row], *keys: str) -> dict[tuple, list[Row]]:
    """Rows grouped by `keys` (a window's partitionBy: null is a key like any other)."""
    groups: dict[tuple, list[Row]] = defaultdict(list)
    for row in rows:
        groups[tuple(row[k] for k in keys)].append(row)
    return groups


def _in_order(events: Iterable[Row]) -> list[Row]:
    """(ts, ev): an END (0) before a START (1) at one instant. Rows equal in both keep their input order, where
    Spark's order is undefined."""
    return sorted(events, key=lambda e: (e["ts"], e["ev"]))


# --- ownership events ------------------------------------------------------------------------------------------

def ownership_events(run: pa.Table) -> list[Row]:
    """The run's ownership events (ownership.py says which records give them): run_id, design, member, tp
    ("topic/partition"), ts, ev (START | END), reason."""
    member_events = _typed(run, "member_event", ("fetchers_started", "fetchers_stopped"))
    generations = _typed(run, "generation", ("assigned", "revoked", "lost"))
    owner_nodes = pc.and_kleene(_zk_wire(run), is_in(run, "op", ("create", "delete", "closeSession")))
    membership = pc.and_kleene(equals(run, "type", "membership"), is_in(run, "action", ("kill", "expire")))
    mask = pc.or_kleene(pc.or_kleene(member_events, generations), pc.or_kleene(owner_nodes, membership))
    rows = _rows(run, mask)
    owned = [event for r in rows for event in _owned(r)]
    return owned + _ended(owned, rows)


def _owned(r: Row) -> list[Row]:
    """The events one record gives: one per partition it starts or ends."""
    type_, kind, member = r["type"], r["kind"], r["member"]
    if type_ == "member_event" and kind == "fetchers_started":
        tps, ev, reason = _offset_keys(r["offsets"]), START, kind
    elif type_ == "member_event" and kind == "fetchers_stopped":
        tps, ev, reason = _partition_list(r["partitions"]), END, kind
    elif type_ == "generation" and kind == "assigned":
        # under the incremental protocols `added` is what the callback gained; else the whole assignment
        added = _partition_list(r["added"])
        tps, ev, reason = added if added is not None else _partition_list(r["partitions"]), START, kind
    elif type_ == "generation" and kind in ("revoked", "lost"):
        tps, ev, reason = _partition_list(r["partitions"]), END, kind
    elif from_wire(r) and (claimed(r) or deleted(r)):
        member, tps = r["link"], [owner_tp(r["path"])]
        ev, reason = (START, "owner created") if claimed(r) else (END, "owner deleted")
    else:
        return []
    return [{"run_id": r["run_id"], "design": r["design"], "member": member, "tp": tp, "ts": r["ts"], "ev": ev,
             "reason": reason} for tp in tps or ()]


def _ends(rows: Iterable[Row]) -> dict[str, list[tuple[float, str, bool]]]:
    """member -> (ts, reason, for owner nodes only) of what ends everything the member had."""
    ends: dict[str, list[tuple[float, str, bool]]] = defaultdict(list)
    for r in rows:
        if r["type"] == "membership" and r["action"] in ("kill", "expire"):
            killed = r["action"] == "kill"
            for member in r["members"] or ():
                ends[member].append((r["ts"], "killed" if killed else "session expired", not killed))
        elif session_closed(r) and r["link"] is not None:
            ends[r["link"]].append((r["ts"], "session closed", True))
    return ends


def _ended(owned: list[Row], rows: list[Row]) -> list[Row]:
    """An END for every partition a member ever had, at each of its ends (the join of the distinct (design, member,
    tp) on member: a null member joins nothing)."""
    ends = _ends(rows)
    out = []
    for run_id, design, member, tp in dict.fromkeys((e["run_id"], e["design"], e["member"], e["tp"]) for e in owned):
        for ts, reason, wire_only in ends.get(member, ()) if member is not None else ():
            if not wire_only or from_wire({"design": design}):
                out.append({"run_id": run_id, "design": design, "member": member, "tp": tp, "ts": ts, "ev": END,
                            "reason": reason})
    return out


# --- intervals -------------------------------------------------------------------------------------------------

def intervals(events: Sequence[Row], bounds: Row | None, run: pa.Table) -> list[Row]:
    """The run's ownership intervals (ownership.py): run_id, design, member, tp, topic, partition, start, end,
    length_s, end_reason, open_at_end, stale_since, basis (what an interval is: "fetching", "generation" or "owner
    node", owner_nodes.py). `bounds`: its BOUNDS_SCHEMA row; none, as the inner join gives, no rows."""
    if bounds is None:
        return []
    paired = []
    for group in _by(events, "member", "tp").values():
        ordered = _in_order(group)
        # lead() over (run_id, member, tp): each START ends at the event after it, or at the run's end
        for event, following in zip(ordered, [*ordered[1:], None], strict=True):
            if event["ev"] == START:
                paired.append(_paired(event, following, bounds["run_end"]))
    stale = _stale_since(paired, _expiries(run))
    for row in paired:
        row["stale_since"] = stale.get((row["member"], row["tp"], row["start"]))
    return paired


def _paired(start: Row, following: Row | None, run_end: float | None) -> Row:
    topic, partition = _topic_partition(start["tp"])
    next_ts, next_reason = (following["ts"], following["reason"]) if following is not None else (None, None)
    end = next_ts if next_ts is not None else greatest(run_end, start["ts"])
    design = start["design"]
    basis = ("owner node" if from_wire(start) else "generation" if design in BROKER_SIDE_DESIGNS else "fetching")
    return {"run_id": start["run_id"], "design": design, "member": start["member"], "tp": start["tp"],
            "topic": topic, "partition": partition, "start": start["ts"], "end": end,
            "length_s": None if end is None else end - start["ts"],
            "end_reason": next_reason if next_reason is not None else "trace end",
            "open_at_end": next_ts is None, "basis": basis}


def _topic_partition(tp: str | None) -> tuple[str | None, int | None]:
    """regexp_extract's groups 1 and 2, the second cast to int. Where Spark's cast fails (no match, or a number past
    an int) its ANSI mode stops the query; here the partition is None."""
    if tp is None:
        return None, None
    found = _TP.search(tp)
    if not found:
        return "", None
    partition = int(found.group(2))
    return found.group(1), partition if partition <= _INT_MAX else None


def _expiries(run: pa.Table) -> dict[str, list[float]]:
    """member -> the times it reported its ZooKeeper session expired."""
    found: dict[str, list[float]] = defaultdict(list)
    for r in picked(run, _typed(run, "member_event", ("session_expired",)), ["member", "ts"]):
        found[r["member"]].append(r["ts"])
    return found


def _stale_since(paired: list[Row], expiries: dict[str, list[float]]) -> dict[tuple, float]:
    """(member, tp, start) -> the first expiry in [start, end). Spark groups by that key, so intervals sharing it
    (duplicate starts) share the earliest expiry of any of them; a null key joins nothing."""
    stale: dict[tuple, float] = {}
    for row in paired:
        key = (row["member"], row["tp"], row["start"])
        if None in key or row["end"] is None:
            continue
        for t in expiries.get(row["member"], ()):
            if row["start"] <= t < row["end"] and (key not in stale or t < stale[key]):
                stale[key] = t
    return stale


# --- what the intervals tell -----------------------------------------------------------------------------------

def overlaps(iv: Sequence[Row], windows: Sequence[Row]) -> list[Row]:
    """Two different members fetching one partition at once (split brain): every pair of different members'
    intervals on one partition that overlap. run_id, design, tp, member_a, member_b, start, end, overlap_s,
    after_expiry (one of them had lost its ZooKeeper session by then; null for the designs whose owners come from
    the wire, which report no expiry of their own), change_index (of the overlap's start, core.attach)."""
    found = []
    for (tp,), group in _by(iv, "tp").items():
        if tp is None:
            continue
        for a in group:
            for b in group:
                if _member_before(a, b) and a["start"] < b["end"] and b["start"] < a["end"]:
                    found.append(_overlap(a, b))
    return attach(found, windows, ts="start")


def _member_before(a: Row, b: Row) -> bool:
    # Spark compares strings by their UTF-8 bytes: the order of code points, as Python's
    return a["member"] is not None and b["member"] is not None and a["member"] < b["member"]


def _overlap(a: Row, b: Row) -> Row:
    start, end = max(a["start"], b["start"]), min(a["end"], b["end"])

    def stale(side: Row) -> bool:
        return side["stale_since"] is not None and side["stale_since"] <= start

    # null for the designs whose owners come from the wire: they report no session expiry
    after_expiry = None if from_wire(a) else stale(a) or stale(b)
    return {"run_id": a["run_id"], "design": a["design"], "tp": a["tp"], "member_a": a["member"],
            "member_b": b["member"], "start": start, "end": end, "after_expiry": after_expiry,
            "overlap_s": end - start}


def coverage(iv: Iterable[Row]) -> list[Row]:
    """The union of every member's intervals per partition: tp, start, end of each island (disjoint)."""
    islands = []
    for (tp,), group in _by(iv, "tp").items():
        current: Row | None = None
        for row in sorted(group, key=lambda r: (r["start"], r["end"])):
            # a new island when the row starts after everything before it has ended
            if current is None or row["start"] > current["end"]:
                current = {"tp": tp, "start": row["start"], "end": row["end"]}
                islands.append(current)
            else:
                current["end"] = max(current["end"], row["end"])
    return islands


def ownership_per_change(iv: Sequence[Row], events: Sequence[Row], windows: Sequence[Row],
                         partitions: int | None) -> list[Row]:
    """Per change window (change_index > 0): unowned_partition_s, convergence_s and n_partitions.

    unowned_partition_s: window length x partitions, less the time each partition was fetched by someone.
    convergence_s: from the window's start to its last ownership event, if every partition is fetched after it
    (null when the window ends with some partition unowned). The partition count is the scenario's (`partitions`,
    the run's manifest count), or the number seen fetched when that is larger (partitions added during the run)."""
    islands = coverage(iv)
    # countDistinct over every island of the run (each island meets every window)
    n = max(partitions or 0, len({i["tp"] for i in islands if i["tp"] is not None}))
    out = []
    for w in windows:
        if w["change_index"] is None or w["change_index"] <= 0:
            continue
        start, end = w["win_start"], w["win_end"]
        last_event = greatest(*(e["ts"] for e in events if in_window(e["ts"], w)))
        at = last_event if last_event is not None else start
        covered = sum(_positive(least(i["end"], end) - greatest(i["start"], start)) for i in islands)
        owned_at_end = sum(1 for i in islands if i["start"] <= at < i["end"])
        out.append({"run_id": w["run_id"], "change_index": w["change_index"],
                    "unowned_partition_s": (end - start) * n - covered,
                    "convergence_s": at - start if owned_at_end >= n else None, "n_partitions": n})
    return out


def _positive(overlap: float) -> float:
    return overlap if overlap > 0 else 0.0


def stop_the_world(events: Iterable[Row], windows: Sequence[Row]) -> list[Row]:
    """Per member: from giving its partitions up (fetchers stopped; revoked or lost) to getting some back (fetchers
    restarted; assigned): each member's first stop after a start (or its first event), to its next start. A
    repeated stop before the restart (a retried attempt) belongs to the first one; a kill is no stop.

    run_id, design, member, stopped_ts, restarted_ts, pause_s (null: never restarted, e.g. it left),
    partitions_before, partitions_after, change_index (of the stop)."""
    counts: dict[tuple, int] = defaultdict(int)  # the events of one instant, counted: partitions
    for e in events:
        if e["reason"] is not None and e["reason"] != "killed":
            counts[(e["run_id"], e["design"], e["member"], e["ts"], e["ev"])] += 1
    per_member = _by(({"run_id": k[0], "design": k[1], "member": k[2], "ts": k[3], "ev": k[4], "partitions": n}
                      for k, n in counts.items()), "member")
    stops = []
    for group in per_member.values():
        ordered = _in_order(group)
        for i, row in enumerate(ordered):
            if row["ev"] == END and (i == 0 or ordered[i - 1]["ev"] == START):
                stops.append(_stop(row, ordered[i + 1:]))
    return attach(stops, windows, ts="stopped_ts")


def _stop(stop: Row, after: list[Row]) -> Row:
    # first(..., ignorenulls) over the following rows: the first START after the stop
    restart = next((r for r in after if r["ev"] == START), None)
    restarted = restart["ts"] if restart is not None else None
    return {"run_id": stop["run_id"], "design": stop["design"], "member": stop["member"], "stopped_ts": stop["ts"],
            "restarted_ts": restarted, "pause_s": None if restarted is None else restarted - stop["ts"],
            "partitions_before": stop["partitions"],
            "partitions_after": restart["partitions"] if restart is not None else None}


# --- the handover ----------------------------------------------------------------------------------------------

def _owners_at(iv: Iterable[Row], t: float | None, after_events_at: bool) -> dict[str | None, str | None]:
    """tp -> who owned it at `t`, after every ownership event before it (and, with `after_events_at`, at it), as
    handover.Handover folds them: of two members at once the greatest name (Handover keeps the last of its members
    in sorted order), None when only null members do."""
    owners: dict[str | None, str | None] = {}
    if t is None:
        return owners
    for row in iv:
        holds = ((row["start"] <= t and (row["end"] > t or row["open_at_end"])) if after_events_at
                 else (row["start"] < t and row["end"] >= t))
        if holds:
            owners[row["tp"]] = greatest(owners.get(row["tp"]), row["member"])
    return owners


def moved(iv: Sequence[Row], spans: Iterable[Row], keys: tuple[str, ...]) -> list[Row]:
    """Per span (run_id, *keys, s_start, s_end): `partitions_moved`, the partitions whose owner at the span's end
    differs from the owner at its start (nobody counts as an owner: a partition left unowned moved too).

    The start is the state the events before it left, the end the state after the events at it, as
    zkconsumer/lab/rules/handover.py takes them (its window opens before the record at `settled` and closes after the
    one at `done`)."""
    out = []
    for span in spans:
        before = _owners_at(iv, span["s_start"], False)
        after = _owners_at(iv, span["s_end"], True)
        changed = sum(1 for tp in {*before, *after} - {None} if before.get(tp) != after.get(tp))
        # the full join on tp matches no null tp: each side's null-tp owner stands alone against a null
        changed += sum(1 for side in (before, after) if side.get(None) is not None)
        out.append({"run_id": span["run_id"], **{k: span[k] for k in keys}, "partitions_moved": changed})
    return out


def revoked_kept(iv: Sequence[Row], bounds: Row | None) -> list[Row]:
    """One row per partition revoked for nothing: a member's interval on it that the member gave up (GIVE_UP)
    inside the churn window, and the same member's next interval on it starting inside the window too. It is the
    stop-the-world of an eager protocol, which revokes everything and gives most of it back; an incremental one
    revokes only what moves.

    run_id, design, member, tp, revoked_ts, regained_ts."""
    if bounds is None:
        return []
    low, high = bounds["churn_start"], bounds["churn_end"]

    def inside(t: float | None) -> bool:
        return t is not None and low is not None and high is not None and low <= t <= high

    out = []
    for group in _by(iv, "member", "tp").values():
        # lead(start) ordered by start: intervals that start together keep their input order (Spark's is undefined)
        ordered = sorted(group, key=lambda r: r["start"])
        for row, following in zip(ordered, [*ordered[1:], None], strict=True):
            regained = following["start"] if following is not None else None
            if row["end_reason"] in GIVE_UP and inside(row["end"]) and inside(regained):
                out.append({"run_id": row["run_id"], "design": row["design"], "member": row["member"],
                            "tp": row["tp"], "revoked_ts": row["end"], "regained_ts": regained})
    return out


# --- contention ------------------------------------------------------------------------------------------------

def contention_events(run: pa.Table) -> list[Row]:
    """What the split-brain section shows when it happened: run_id, design, member, ts, what, tp.

    what: "owner NodeExists" (a ZooKeeper design's owner-node create refused: someone still owns `tp`; from the
    wire, so both ZooKeeper designs alike), "owner create" (any owner-node create: two members claiming one
    partition in rebalance attempts that overlap in time computed different assignments, split_brain.py),
    "attempt begin" and "attempt end" (a rebalance attempt's bounds), "backoff after <result>" (an attempt that
    failed and sleeps rebalance.backoff.ms; it ends the attempt too), "rebalance failed", "session expired",
    "lost" (a coordinator member's assignment lost) and "<api> <error>" (a coordinator member answered
    STALE_GENERATION: its generation is not the coordinator's)."""
    creates = pc.and_kleene(_zk_wire(run), pc.and_kleene(equals(run, "kind", "reply"), equals(run, "op", "create")))
    member_events = _typed(run, "member_event", ("attempt_end", "attempt_begin", "rebalance_failed",
                                                 "session_expired"))
    stale = pc.and_kleene(pc.and_kleene(equals(run, "type", "wire"), equals(run, "proto", "kafka")),
                    pc.and_kleene(equals(run, "kind", "response"), is_in(run, "error_name", STALE_GENERATION)))
    mask = pc.or_kleene(pc.or_kleene(creates, member_events), pc.or_kleene(_typed(run, "generation", ("lost",)), stale))
    out = []
    for r in _rows(run, mask):
        what = _what(r)
        if what is not None:
            out.append({"run_id": r["run_id"], "design": r["design"],
                        "member": r["member"] if r["member"] is not None else r["link"], "ts": r["ts"], "what": what,
                        "tp": owner_tp(r["path"]) if _owner_create(r) else None})
    return out


def _owner_create(r: Row) -> bool:
    """Any reply to an owner-node create, whatever its error (claimed and conflicted are two of them)."""
    return (r["type"] == "wire" and r["proto"] == "zk" and r["kind"] == "reply" and r["op"] == "create"
            and owner_tp(r["path"]) is not None)


def _what(r: Row) -> str | None:
    type_, kind = r["type"], r["kind"]
    if _owner_create(r):
        return "owner NodeExists" if conflicted(r) else "owner create"
    if type_ == "member_event":
        if kind == "attempt_end":
            return f"backoff after {r['result']}" if backs_off(r["result"]) else "attempt end"
        return {"attempt_begin": "attempt begin", "rebalance_failed": "rebalance failed",
                "session_expired": "session expired"}.get(kind)
    if type_ == "generation" and kind == "lost":
        return "lost"
    if type_ == "wire" and r["proto"] == "kafka" and r["error_name"] in STALE_GENERATION:
        return " ".join(v for v in (r["api_name"], r["error_name"]) if v is not None)
    return None
