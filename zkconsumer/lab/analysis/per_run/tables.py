"""The tables per change and per run of one run: every family's counts joined on the change or the run
(docs/analysis.md says what each column means; herd.py what the wire's and the rounds' counts are).

Each function takes what the families found for the run (rows as dicts) and gives rows of `schemas.CHANGES` and
`schemas.RUNS`. A column a family has no row for is null, then 0 where the job fills it (`PER_CHANGE`,
`HANDOVER` and the other counts), then null again where the design does not report it (owner_nodes.NOT_REPORTED).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from zkconsumer.lab.analysis.closed_forms import API_COLUMNS
from zkconsumer.lab.analysis.herd import REBALANCE_TOTALS
from zkconsumer.lab.analysis.owner_nodes import NOT_REPORTED
from zkconsumer.lab.analysis.per_run.core import greatest, median
from zkconsumer.lab.designs import BROKER_SIDE_DESIGNS, ZOOKEEPER_DESIGNS
from zkconsumer.lab.rules import gaps
from zkconsumer.lab.rules.protocol import HEARTBEAT_APIS, KAFKA_PROTO, NOTIFICATION, REQUEST, ZK_PROTO

Row = dict[str, Any]
PER_CHANGE = ("zk_requests", "zk_notifications", "kafka_requests", "kafka_coordination", "kafka_heartbeats",
              "rebalance_notices")
# What a change cost the partitions (zkconsumer/lab/rules/handover.py): owners changed, and partitions revoked from a
# member that got them back; normalised per change like the wire counts
HANDOVER = ("partitions_moved", "revoked_kept")
CHANGE_ZEROS = (*PER_CHANGE, *HANDOVER, "overlaps", "overlap_s", "pauses")
RUN_ZEROS = ("changes", "membership_records", *PER_CHANGE, "overlaps", "overlap_s", "trace_lines", "bad_lines",
             "rebalances", *REBALANCE_TOTALS, "stable_records", "owner_conflicts", "revoked_kept",
             "epoch_zero_heartbeats", "revoked_partitions", *API_COLUMNS.values())


def _sum(values: Iterable[Any]) -> Any:
    """Spark's `sum`: null over no (non-null) value."""
    found = [v for v in values if v is not None]
    return sum(found) if found else None


def grouped(rows: Iterable[Row], key: Callable[[Row], Any]) -> dict[Any, list[Row]]:
    out: dict[Any, list[Row]] = defaultdict(list)
    for row in rows:
        out[key(row)].append(row)
    return out


def wire_totals(counts: Sequence[Row]) -> Row:
    """The six wire totals over `counts` (counts.wire_counts rows): ZooKeeper requests and notifications, Kafka
    requests, coordination requests, heartbeats (those that coordinate nothing) and rebalance notices."""
    def total(test: Callable[[Row], bool]) -> int:
        return sum(r["count"] for r in counts if test(r))

    def zk(r: Row) -> bool:
        return r["proto"] == ZK_PROTO

    def kafka_request(r: Row) -> bool:
        return r["proto"] == KAFKA_PROTO and r["category"] == REQUEST

    return {"zk_requests": total(lambda r: zk(r) and r["category"] == REQUEST),
            "zk_notifications": total(lambda r: zk(r) and r["category"] == NOTIFICATION),
            "kafka_requests": total(kafka_request),
            "kafka_coordination": total(lambda r: kafka_request(r) and bool(r["coordination"])),
            "kafka_heartbeats": total(lambda r: kafka_request(r) and r["op"] in HEARTBEAT_APIS
                                      and r["coordination"] is False),
            "rebalance_notices": total(lambda r: r["proto"] == KAFKA_PROTO and r["category"] == NOTIFICATION)}


def rebalance_totals(rows: Sequence[Row]) -> Row:
    """Sums over the members of one group of counts.rebalance_counts rows (all inside the churn). `rebalances` is
    the summary's: syncedRebalance runs for the ZooKeeper design, distinct generations for the broker-side designs
    (one generation is one group rebalance, however many members took part), where `with_rounds` replaces it with
    the wire's epochs when the members report none (`generations_seen`: the distinct generations the members
    reported)."""
    design = rows[0]["design"]
    generations = len({g for r in rows for g in (r["generations"] or ()) if g is not None})
    out: Row = {"rebalances": generations if design in BROKER_SIDE_DESIGNS else _sum(r["rebalances"] for r in rows),
                "generations_seen": generations}
    for column in REBALANCE_TOTALS:
        out[column] = _sum(r[column] for r in rows)
    # a ZooKeeper-protocol count: it does not apply to the broker-side designs (null there, not 0)
    out["owner_conflicts"] = _sum(r["owner_conflicts"] for r in rows) if design in ZOOKEEPER_DESIGNS else None
    return out


def with_rounds(row: Row) -> Row:
    """`rounds` and `rebalances`: a broker-side design's rounds are its members' generations where they report them,
    else the wire's; a ZooKeeper design has no rounds and keeps its syncedRebalance runs as `rebalances`."""
    seen, wire_rounds = row.pop("generations_seen", None), row.pop("wire_rounds", None)
    if row.get("design") in BROKER_SIDE_DESIGNS:
        row["rounds"] = seen if seen is not None and seen > 0 else (wire_rounds or 0)
        row["rebalances"] = row["rounds"]
    else:
        row["rounds"] = None
    return row


def unreported(row: Row) -> Row:
    """`owner_conflicts` only for the ZooKeeper designs; null where the design does not report a column
    (owner_nodes.NOT_REPORTED)."""
    design = row.get("design")
    row["owner_conflicts"] = (row.get("owner_conflicts") or 0) if design in ZOOKEEPER_DESIGNS else None
    for name in NOT_REPORTED.get(design or "", ()):
        if name in row:
            row[name] = None
    return row


def _fill(row: Row, columns: Iterable[str]) -> Row:
    for column in columns:
        if row.get(column) is None:
            row[column] = 0
    return row


def per_change(info: Row, changes: Sequence[Row], counts: Sequence[Row], rebalances: Sequence[Row],
               owned: Sequence[Row], overlaps: Sequence[Row], pauses: Sequence[Row], noticed: Sequence[Row],
               handover: dict[int, Row]) -> list[Row]:
    """One `changes` row per change: its record and window, the run's scenario, and every family's figures for
    its window. `pauses` are the stop-the-world rows in the churn (a stop with partitions to give up);
    `handover` the partitions moved, revoked and kept and the wire's rounds per change index."""
    counts_by = grouped((r for r in counts if r["change_index"] is not None), lambda r: r["change_index"])
    rebalances_by = grouped((r for r in rebalances if r["change_index"] is not None), lambda r: r["change_index"])
    overlaps_by = grouped((r for r in overlaps if r["change_index"] is not None), lambda r: r["change_index"])
    pauses_by = grouped(pauses, lambda r: r["change_index"])
    owned_by = {r["change_index"]: r for r in owned}
    noticed_by = {r["change_index"]: r for r in noticed}
    out = []
    for change in changes:
        index = change["change_index"]
        row: Row = {**change, **{k: info.get(k) for k in ("scenario", "case", "process_mode", "members")}}
        if index in counts_by:
            row.update(wire_totals(counts_by[index]))
        if index in rebalances_by:
            row.update(rebalance_totals(rebalances_by[index]))
        if index in owned_by:
            row.update({k: owned_by[index][k] for k in ("unowned_partition_s", "convergence_s", "n_partitions")})
        if index in overlaps_by:
            row.update(overlaps=len(overlaps_by[index]), overlap_s=_sum(r["overlap_s"] for r in overlaps_by[index]))
        if index in pauses_by:
            found = [r["pause_s"] for r in pauses_by[index]]
            row.update(pauses=sum(1 for p in found if p is not None), max_pause_s=greatest(*found),
                       median_pause_s=median(found))
        if index in noticed_by:
            row.update({k: noticed_by[index][k] for k in ("noticing_s", "rebalancing_s", "noticed_by")})
        row.update(handover.get(index, {}))
        out.append(unreported(with_rounds(_fill(row, CHANGE_ZEROS))))
    return out


def per_run(info: Row, bounds: Row | None, counts: Sequence[Row], rebalances: Sequence[Row],
            overlaps: Sequence[Row], pauses: Sequence[Row], owned: Sequence[Row], delivery: Sequence[Row],
            lines: tuple[int, int] | None, handover: Row | None, split: Row | None, wire_gaps: Row | None) -> Row:
    """The run's `runs` row: its manifest, the summary's counts over the churn window and every family's totals
    (`pauses` as in `per_change`; `lines` the run's trace lines and bad lines; `split` its noticing split)."""
    row: Row = dict(info)
    if bounds is not None:
        row.update({k: v for k, v in bounds.items() if k != "run_id"})
    inside = [r for r in counts if r["change_index"] is not None]
    if inside:
        row.update(wire_totals(inside))
    churned = [r for r in rebalances if r["change_index"] is not None]
    if churned:
        row.update(rebalance_totals(churned))
    counted = [r for r in overlaps if r["change_index"] is not None]
    if counted:
        row.update(overlaps=len(counted), overlap_s=_sum(r["overlap_s"] for r in counted),
                   max_overlap_s=greatest(*(r["overlap_s"] for r in counted)))
    if pauses:
        found = [r["pause_s"] for r in pauses]
        row.update(median_pause_s=median(found), max_pause_s=greatest(*found))
    if owned:
        row.update(unowned_partition_s=_sum(r["unowned_partition_s"] for r in owned),
                   max_convergence_s=greatest(*(r["convergence_s"] for r in owned)),
                   unconverged_changes=sum(1 for r in owned if r["convergence_s"] is None))
    if delivery:
        row.update(expected_basis=delivery[0]["expected_basis"],
                   **{k: _sum(r[k] for r in delivery) for k in ("consumed_offsets", "duplicates", "missing")})
    if lines is not None:
        row.update(trace_lines=lines[0], bad_lines=lines[1])
    row.update(handover or {})
    row = unreported(with_rounds(_fill(row, RUN_ZEROS)))
    changes = row.get("changes") or 0
    for column in (*PER_CHANGE, *HANDOVER):
        value = row.get(column)
        row[f"{column}_per_change"] = value / changes if changes > 0 and value is not None else None
    row.update({k: (split or {}).get(k) for k in ("noticing_s", "rebalancing_s")})
    return with_counting_gaps(row, wire_gaps)


def with_counting_gaps(row: Row, found: Row | None) -> Row:
    """`undecodable_streams` and `blackholed_requests` (counts.wire_gap_counts), and `counting_gaps`, the reason the
    run's counts are incomplete (with `bad_lines`: zkconsumer/lab/rules/gaps.py, the same phrase as the lab summary), or
    null."""
    row["undecodable_streams"] = (found or {}).get("undecodable_streams") or 0
    row["blackholed_requests"] = (found or {}).get("blackholed_requests") or 0
    row["counting_gaps"] = gaps.describe(row["undecodable_streams"], row["blackholed_requests"],
                                         row.get("bad_lines") or 0)
    return row
