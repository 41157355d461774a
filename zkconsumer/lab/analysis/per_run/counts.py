"""The counts of one run: its wire by member and operation, its members' rebalance events, the identities' requests,
the noticing split, the epochs the coordinator answered, and the counting gaps.

What is counted is defined in herd.py (the wire, its notifications and the rounds), zkconsumer/lab/rules/noticing.py
(the noticing split) and zkconsumer/lab/rules/gaps.py (the counting gaps); each function's docstring says what its rows
are. Each gives, for this run and row for row, what its namesake in the Spark form the tests hold it equal to gives
(tests/analysis/spark_oracle/herd.py, notice_split.py and metrics.py).

The wire is most of a run's lines, so it is never turned into one dict per record: the records are grouped by
every value a rule or a key reads (Arrow's group_by), and the protocol rules, in their Python form
(rules/protocol.py, rules/noticing.py, rules/gaps.py), are applied once per distinct combination. The member events and
generation records are few and are read as dicts.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from zkconsumer.lab.analysis.closed_forms import API_COLUMNS
from zkconsumer.lab.analysis.per_run.core import Row, attach, change_indexes, conflicted, equals, is_in, picked
from zkconsumer.lab.rules import gaps
from zkconsumer.lab.rules.noticing import notice_member, split
from zkconsumer.lab.rules.protocol import (
    GROUP_HEARTBEAT_API,
    REQUEST,
    is_conflict,
    is_coordination_request,
    is_failed_attempt,
    wire_category,
)

Rule = Callable[[Row], Any]


# --- the wire, grouped ---------------------------------------------------------------------------------------

def _all(*masks: pa.ChunkedArray) -> pa.ChunkedArray:
    out = masks[0]
    for mask in masks[1:]:
        out = pc.and_kleene(out, mask)
    return pc.fill_null(out, False)


def _wire(run: pa.Table, columns: Sequence[str], *masks: pa.ChunkedArray) -> pa.Table:
    """The wire records of `run` (and of `masks`), only `columns` of them."""
    return run.select(list(columns)).filter(_all(equals(run, "type", "wire"), *masks))


def _counted(table: pa.Table, keys: Sequence[str]) -> list[Row]:
    """One dict per distinct combination of `keys` (nulls are a value, as in Spark's groupBy), with its count `n`."""
    if table.num_rows == 0:
        return []
    grouped = table.group_by(list(keys), use_threads=False).aggregate([([], "count_all")])
    return [{**row, "n": row.pop("count_all")} for row in grouped.to_pylist()]


def _rows_where(table: pa.Table, columns: Sequence[str], rule: Rule) -> pa.Table:
    """The rows of `table` where `rule` holds, the rule asked once per distinct combination of `columns` (the values
    it reads) rather than once per row."""
    numbered = table.select(list(columns)).append_column("_row", pa.array(np.arange(table.num_rows)))
    groups = numbered.group_by(list(columns), use_threads=False).aggregate([("_row", "list")])
    chosen = [i for i, values in enumerate(groups.select(list(columns)).to_pylist()) if rule(values)]
    # typed: an empty list would be an Arrow array of type null, which `take` has no kernel for
    indices = pa.array(chosen, type=pa.int64())
    return table.take(pc.list_flatten(groups["_row_list"].take(indices)))


def _attached(table: pa.Table, windows: Sequence[Row], ts: str = "ts") -> pa.Table:
    """core.attach over a table: each row with its `change_index`, a row in two windows twice and in none
    once, with null (the left join's rows)."""
    positions, index = _change_rows(table[ts], windows)
    return table.take(positions).append_column("change_index", index)


def _change_rows(ts: pa.ChunkedArray, windows: Sequence[Row]) -> tuple[np.ndarray, pa.Array]:
    """(row positions, change_index) of `_attached`.

    The windows' edges cut time into stretches (each edge itself, and the open spans between and around them) over
    which every window's answer is the same, so core.change_indexes is asked once per stretch, at a time inside it,
    and each row takes its stretch's answer: the rule is core.in_window's, not restated here."""
    edges = np.unique(np.array([w[k] for w in windows for k in ("win_start", "win_end")], dtype=float))
    n = len(edges)
    # stretch 2i: the open span below edges[i] (2n: above the last edge); 2i + 1: edges[i]; 2n + 1: no time at all.
    # Between two neighbouring floats there is no float, so a midpoint that rounds onto an edge meets no row.
    at = np.empty(2 * n + 1)
    at[1::2] = edges
    at[0::2] = [-np.inf, *((edges[:-1] + edges[1:]) / 2), np.inf] if n else [-np.inf]
    answers = [change_indexes(float(t), windows) for t in at] + [change_indexes(None, windows)]

    t = ts.to_numpy(zero_copy_only=False).astype(float)
    i = np.searchsorted(edges, t)
    exact = (i < n) & (edges[np.minimum(i, n - 1)] == t) if n else np.zeros(len(t), dtype=bool)
    stretch = np.where(exact, 2 * i + 1, 2 * i)
    stretch[pc.is_null(ts).to_numpy(zero_copy_only=False)] = 2 * n + 1
    return _expanded(stretch, answers)


def _expanded(stretch: np.ndarray, answers: list[list[int | None]]) -> tuple[np.ndarray, pa.Array]:
    """Each row once per change index of its stretch's answer: (row positions, change_index)."""
    positions, values, nulls = [], [], []
    for j in range(max(map(len, answers))):  # the j-th window of each row (a second only where windows overlap)
        has = np.array([len(a) > j for a in answers])
        value = np.array([a[j] if len(a) > j and a[j] is not None else 0 for a in answers])
        null = np.array([len(a) > j and a[j] is None for a in answers])
        rows = np.flatnonzero(has[stretch])
        positions.append(rows)
        values.append(value[stretch[rows]])
        nulls.append(null[stretch[rows]])
    return np.concatenate(positions), pa.array(np.concatenate(values), mask=np.concatenate(nulls), type=pa.int32())


# --- wire counts -----------------------------------------------------------------------------------------------

# every value wire_counts' category, op, code, member and coordination read
_WIRE_KEYS = ("run_id", "design", "change_index", "link", "client_id", "proto", "kind", "op", "opcode", "api_name",
              "api_key", "error_name", "assigned", "member_epoch", "owned")


def _category(g: Row) -> str | None:
    """A wire record's category: request | notification (a broker-side design's notices are responses), or None."""
    return wire_category(g["proto"], g["kind"], g["error_name"], g["api_name"], g["assigned"])


def _coalesce(value: Any, default: Any) -> Any:
    return value if value is not None else default


def wire_counts(run: pa.Table, windows: Sequence[Row]) -> list[Row]:
    """run_id, design, change_index, member, proto, category, op, code, coordination, count."""
    wire = _attached(_wire(run, ["ts", *(k for k in _WIRE_KEYS if k != "change_index")]), windows)
    totals: dict[tuple, int] = defaultdict(int)
    for g in _counted(wire, _WIRE_KEYS):
        category = _category(g)
        if category is None:
            continue
        zk, kafka = g["proto"] == "zk", g["proto"] == "kafka"
        # Spark's when(zk, ...).otherwise(...): a null proto takes the otherwise branch
        op = _coalesce(g["op"], "watch event") if zk else g["api_name"]
        code = g["opcode"] if zk else g["api_key"]
        coordination = (kafka and category == REQUEST
                        and is_coordination_request(g["api_name"], g["member_epoch"], g["owned"]))
        key = (g["run_id"], g["design"], g["change_index"], _coalesce(g["link"], g["client_id"]), g["proto"],
               category, op, code, coordination)
        totals[key] += g["n"]
    names = ("run_id", "design", "change_index", "member", "proto", "category", "op", "code", "coordination")
    return [{**dict(zip(names, key, strict=True)), "count": n} for key, n in totals.items()]


# --- the members' rebalance events -----------------------------------------------------------------------------

_EVENT_COLUMNS = ("run_id", "design", "ts", "member", "link", "type", "kind", "result", "generation", "proto", "op",
                  "path", "err")
_EVENT_COUNTS: dict[str, Callable[[Row], bool]] = {
    "rebalances": lambda e: e["type"] == "member_event" and e["kind"] == "rebalance_begin",
    "attempts": lambda e: e["kind"] == "attempt_end",
    "failed_attempts": lambda e: e["kind"] == "attempt_end" and is_failed_attempt(e["result"]),
    "conflicts": lambda e: e["kind"] == "attempt_end" and is_conflict(e["result"]),
    "owner_conflicts": lambda e: e["refused"],
    "rebalance_failures": lambda e: e["kind"] == "rebalance_failed",
    "session_expiries": lambda e: e["kind"] == "session_expired",
    "assignments": lambda e: e["type"] == "generation" and e["kind"] == "assigned",
    "revocations": lambda e: e["type"] == "generation" and e["kind"] == "revoked",
    "losses": lambda e: e["type"] == "generation" and e["kind"] == "lost",
}


def rebalance_counts(run: pa.Table, windows: Sequence[Row]) -> list[Row]:
    """Per change and member: the split-brain symptoms members report about themselves, and (ZooKeeper designs)
    the owner-node claims ZooKeeper refused, from the wire (`owner_conflicts`, owner_nodes.py). run_id, design,
    change_index, member, the counts of `_EVENT_COUNTS`, and `generations`: the distinct generations assigned,
    sorted (Spark's collect_set has no order)."""
    # the member events and generation records, and the owner-node creates conflicted() judges
    zk_create = _all(equals(run, "type", "wire"), equals(run, "proto", "zk"), equals(run, "kind", "reply"),
                     equals(run, "op", "create"))
    candidates = pc.or_kleene(is_in(run, "type", ("member_event", "generation")), zk_create)
    events = [{**r, "member": _coalesce(r["member"], r["link"]), "refused": conflicted(r)}
              for r in picked(run, candidates, _EVENT_COLUMNS) if r["type"] != "wire" or conflicted(r)]
    groups: dict[tuple, list[Row]] = defaultdict(list)
    for e in attach(events, windows):
        groups[(e["run_id"], e["design"], e["change_index"], e["member"])].append(e)
    return [{"run_id": run_id, "design": design, "change_index": index, "member": member,
             **{name: sum(1 for e in group if counts(e)) for name, counts in _EVENT_COUNTS.items()},
             "generations": sorted({e["generation"] for e in group if _EVENT_COUNTS["assignments"](e)
                                    and e["generation"] is not None})}
            for (run_id, design, index, member), group in groups.items()]


# --- the identities' counts ------------------------------------------------------------------------------------

def _list_size(text: str | None) -> int:
    """size(coalesce(from_json(text, array<string>), [])): a JSON list's length, 0 for anything else."""
    try:
        value = json.loads(text) if text is not None else None
    except ValueError:  # from_json gives null for text that does not parse
        return 0
    return len(value) if isinstance(value, list) else 0


def identity_counts(run: pa.Table, windows: Sequence[Row]) -> Row | None:
    """Over the churn window: the requests of each API the identities count (`API_COLUMNS`), the consumer
    protocol's joins (`epoch_zero_heartbeats`: ConsumerGroupHeartbeats sent with member epoch 0) and the partitions
    members revoked (`revoked_partitions`), which is what identities.broker_side_join is evaluated on. run_id and
    those columns; None when no Kafka request and no revocation falls in it (Spark then has no row)."""
    requests = _wire(run, ("run_id", "ts", "api_name", "member_epoch"), equals(run, "proto", "kafka"),
                     equals(run, "kind", "request"))
    inside = _attached(requests, windows)
    counts = _counted(inside.filter(pc.is_valid(inside["change_index"])), ("run_id", "api_name", "member_epoch"))
    revoked = [r for r in attach(picked(run, _all(equals(run, "type", "generation"), equals(run, "kind", "revoked")),
                                        ("run_id", "ts", "partitions")), windows)
               if r["change_index"] is not None]
    if not counts and not revoked:
        return None
    row = {"run_id": (counts or revoked)[0]["run_id"], **dict.fromkeys(API_COLUMNS.values(), 0),
           "epoch_zero_heartbeats": 0, "revoked_partitions": sum(_list_size(r["partitions"]) for r in revoked)}
    for g in counts:
        if g["api_name"] in API_COLUMNS:
            row[API_COLUMNS[g["api_name"]]] += g["n"]
        if g["api_name"] == GROUP_HEARTBEAT_API and g["member_epoch"] == 0:
            row["epoch_zero_heartbeats"] += g["n"]
    return row


# --- the noticing split (zkconsumer/lab/rules/noticing.py) -----------------------------------------------------------

_NOTICE_VALUES = ("type", "proto", "kind", "error_name", "api_name", "assigned")


def _is_notice(values: Row) -> bool:
    # notice_member answers whose notice a record is; whether it is one does not depend on the member, and the
    # member is taken as Spark takes it, coalesce(link, client_id)
    return notice_member({**values, "link": "member"}) is not None


def _notices(run: pa.Table) -> list[tuple[float, str]]:
    """(ts, member) of every notice of the run with a time and a member. One without either never counts: its
    join condition is null (for a null member, Spark's array_contains(changed, null) is)."""
    found = _rows_where(run, _NOTICE_VALUES, _is_notice)
    member = pc.coalesce(found["link"], found["client_id"])
    return [(t, m) for t, m in zip(found["ts"].to_pylist(), member.to_pylist(), strict=True)
            if t is not None and m is not None]


def split_per_change(run: pa.Table, changes: Sequence[Row]) -> list[Row]:
    """run_id, change_index, noticing_s, rebalancing_s, noticed_by: one row per change that became stable."""
    settled = [c for c in changes if c["stable_s"] is not None]
    notices = _notices(run) if settled else []
    out = []
    for c in settled:
        parts = split(c["change_ts"], c["stable_s"], (c["change_members"] or "").split(","), notices)
        out.append({"run_id": c["run_id"], "change_index": c["change_index"], "noticing_s": parts.noticing_s,
                    "rebalancing_s": parts.rebalancing_s, "noticed_by": parts.incumbents})
    return out


def split_per_run(per_change: Sequence[Row], changes: Sequence[Row], bounds: Row | None) -> Row | None:
    """run_id, noticing_s, rebalancing_s of the change with the run's longest time to stable in the churn window
    (ties to the earliest change), or None."""
    if bounds is None or bounds["churn_start"] is None or bounds["churn_end"] is None:
        return None
    split_of = {p["change_index"]: p for p in per_change}
    rows = [(c, split_of[c["change_index"]]) for c in changes
            if c["change_index"] in split_of and c["change_ts"] is not None
            and bounds["churn_start"] <= c["change_ts"] <= bounds["churn_end"]]
    if not rows:
        return None
    _, longest = max(rows, key=lambda pair: (pair[0]["stable_s"], -pair[0]["change_index"]))
    return {"run_id": bounds["run_id"], "noticing_s": longest["noticing_s"], "rebalancing_s": longest["rebalancing_s"]}


# --- the epochs the coordinator answered -----------------------------------------------------------------------

def answered_epochs(run: pa.Table) -> pa.Table:
    """run_id, ts, epoch: every generation (JoinGroup) or group epoch (ConsumerGroupHeartbeat) a coordinator's
    answer carries (`epoch_after`; 0 and below are no epoch), as a table: a consumer protocol run answers every
    heartbeat with its epoch."""
    answers = _wire(run, ("run_id", "ts", "epoch_after"), equals(run, "proto", "kafka"),
                    equals(run, "kind", "response"), pc.greater(run["epoch_after"], 0))
    return answers.rename_columns(["run_id", "ts", "epoch"])


def change_spans(windows: Sequence[Row]) -> list[Row]:
    """The spans the wire's rounds are counted per change over (run.py): each change window."""
    return [{"run_id": w["run_id"], "change_index": w["change_index"], "s_start": w["win_start"],
             "s_end": w["win_end"], "last": w["last"]}
            for w in windows if w["change_index"] is not None and w["change_index"] > 0]


def churn_spans(bounds: Row | None) -> list[Row]:
    """The span the wire's rounds are counted per run over (run.py): the churn window, if it has one."""
    if bounds is None or bounds["churn_start"] is None:
        return []
    return [{"run_id": bounds["run_id"], "s_start": bounds["churn_start"], "s_end": bounds["churn_end"]}]


def _number(value: float | None) -> float:
    return np.nan if value is None else value  # a null bound compares false, as NaN does


def epoch_rounds(epochs: pa.Table, spans: Sequence[Row], keys: tuple[str, ...],
                 closed: Callable[[Row], bool]) -> list[Row]:
    """Per span (run_id, *keys, s_start, s_end): `wire_rounds`, the distinct epochs answered inside it above the
    newest answered before it. `closed(span)`: whether a span includes its end (the churn does; a change window
    only when it is the churn's last)."""
    out = []
    for span in spans:
        mine = epochs.filter(pc.fill_null(pc.equal(epochs["run_id"], span["run_id"]), False))
        t = mine["ts"].to_numpy(zero_copy_only=False).astype(float)
        epoch = mine["epoch"].to_numpy(zero_copy_only=False)
        start, end = _number(span["s_start"]), _number(span["s_end"])
        before = epoch[t < start].max(initial=-1)  # coalesce(max(before), -1)
        inside = (t >= start) & ((t < end) | (bool(closed(span)) & (t == end)))
        rounds = int(np.count_nonzero(np.unique(epoch[inside]) > before))
        out.append({"run_id": span["run_id"], **{k: span[k] for k in keys}, "wire_rounds": rounds})
    return out


# --- the counting gaps (zkconsumer/lab/rules/gaps.py) ----------------------------------------------------------------

def wire_gap_counts(run: pa.Table) -> Row | None:
    """run_id, undecodable_streams, blackholed_requests over the whole run (what tables.with_counting_gaps
    reports); None when it has no wire record."""
    groups = _counted(_wire(run, ("run_id", "type", "kind", "dropped")), ("run_id", "type", "kind", "dropped"))
    if not groups:
        return None
    return {"run_id": groups[0]["run_id"],
            "undecodable_streams": sum(g["n"] for g in groups if gaps.is_undecodable(g)),
            "blackholed_requests": sum(g["n"] for g in groups if gaps.is_blackholed_request(g))}
