"""One run analysed whole, and every run at once as one grouped map over Arrow.

    trace lines --parse--groupBy(run's directory)--> analyse_run per run (executors) --one Arrow table-->
        split --> Held per table

`analyse_run` calls each family in the order its inputs need (time frame, then ownership and counts, then the
tables per change and per run) and gives every per-run table's rows. `grouped_map` makes it the function of
`applyInArrow`: a run's rows of every table come back in one Arrow table with one struct column per table
(`OUTPUT`), the layout held.py fetches a step's frames in, so the driver splits them the same way.

Each call also counts its run's lines and bad lines per file (lines.py), so the reader needs no pass of its own.
A run with no line at all is in no group: its `runs` row is made on the driver (`runs_row_without_records`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from zkconsumer.lab.analysis import delivery
from zkconsumer.lab.analysis.held import TAG, Held, to_arrow_schema
from zkconsumer.lab.analysis.migrate_tables import MIGRATE_TABLES
from zkconsumer.lab.analysis.owner_nodes import NOT_REPORTED
from zkconsumer.lab.analysis.per_run import counts, frame, lines, losses, migrate, ownership, schemas, tables
from zkconsumer.lab.analysis.per_run.core import attach
from zkconsumer.lab.analysis.readers import local_path
from zkconsumer.lab.analysis.schemas import TRACE_ERROR_SCHEMA

Row = dict[str, Any]
TABLES: dict[str, T.StructType] = {
    "wire_counts": schemas.WIRE_COUNTS, "rebalances": schemas.REBALANCES,
    "ownership_intervals": schemas.OWNERSHIP_INTERVALS, "overlaps": schemas.OVERLAPS,
    "stop_the_world": schemas.STOP_THE_WORLD, "contention": schemas.CONTENTION, "changes": schemas.CHANGES,
    "runs": schemas.RUNS, "delivery": delivery.DELIVERY_SCHEMA, "delivery_gaps": delivery.GAPS_SCHEMA,
    "migrate_steps": schemas.MIGRATE_STEPS, "migrate_totals": schemas.MIGRATE_TOTALS,
    "migrate_partitions": delivery.DELIVERY_SCHEMA, "trace_errors": TRACE_ERROR_SCHEMA,
}
# What readers.parsed_lines gives beside the record's fields: where a line was and whether it was good
LINE_COLUMNS = ["file_uri", "_pid", "_mid", "bad", "reason", "text"]
NAMES = tuple(TABLES)
# Every field nullable: a table's struct is null on the other tables' rows (held.hold says why)
OUTPUT = T.StructType([T.StructField(TAG, T.IntegerType()),
                       *[T.StructField(f"_f{i}", TABLES[name]) for i, name in enumerate(NAMES)]])


def analyse_run(run: pa.Table, info: Row, line_counts: tuple[int, int] | None) -> dict[str, list[Row]]:
    """Every per-run table of one run (`run`: its good records; `info`: its manifest row, MANIFEST_SCHEMA;
    `line_counts`: its trace lines and bad lines)."""
    bounds, changes, windows = frame.time_frame(run)
    events = ownership.ownership_events(run)
    intervals = ownership.intervals(events, bounds, run)
    overlaps = ownership.overlaps(intervals, windows)
    owned = ownership.ownership_per_change(intervals, events, windows, info.get("partitions"))
    stops = ownership.stop_the_world(events, windows)
    wire = counts.wire_counts(run, windows)
    rebalances = counts.rebalance_counts(run, windows)
    noticed = counts.split_per_change(run, changes)
    found, gaps = delivery.audit_rows(run)
    # a stop that gave partitions up, inside the churn: the pauses the tables count
    pauses = [s for s in stops if s["change_index"] is not None and (s["partitions_before"] or 0) > 0]
    per_change, per_run = _handover(run, windows, bounds, intervals)
    out = {
        "wire_counts": wire,
        "rebalances": [_unreported({**r, "generations": sorted(r["generations"] or [])}) for r in rebalances],
        "ownership_intervals": intervals, "overlaps": overlaps, "stop_the_world": stops,
        "contention": ownership.contention_events(run),
        "changes": tables.per_change(info, changes, wire, rebalances, owned, overlaps, pauses, noticed, per_change),
        "runs": [tables.per_run(info, bounds, wire, rebalances, overlaps, pauses, owned, found, line_counts, per_run,
                                counts.split_per_run(noticed, changes, bounds), counts.wire_gap_counts(run))],
        "delivery": found, "delivery_gaps": gaps,
        **migrate.migrate_tables(run, found),
    }
    return {name: [schemas.conform(r, TABLES[name]) for r in rows] for name, rows in out.items()}


def _handover(run: pa.Table, windows: list[Row], bounds: Row | None,
              intervals: list[Row]) -> tuple[dict[int, Row], Row | None]:
    """Partitions moved, revoked and kept, and the wire's rounds: per change window, and over the whole churn
    (with the identities' request counts, which are over the churn too)."""
    epochs = counts.answered_epochs(run)
    kept = ownership.revoked_kept(intervals, bounds)
    spans = counts.change_spans(windows)
    per_change: dict[int, Row] = {r["change_index"]: dict(r) for r in ownership.moved(intervals, spans,
                                                                                      ("change_index",))}
    kept_in = [r["change_index"] for r in attach(({"ts": k["revoked_ts"]} for k in kept), windows)]
    for r in counts.epoch_rounds(epochs, spans, ("change_index",), lambda span: bool(span["last"])):
        per_change.get(r["change_index"], {}).update(wire_rounds=r["wire_rounds"])
    for index, row in per_change.items():
        row["revoked_kept"] = kept_in.count(index) or None
    lost_per_change, lost = losses.connection_losses(run, windows, bounds)
    for index, row in lost_per_change.items():
        per_change.setdefault(index, {}).update(row)
    churn = counts.churn_spans(bounds)
    if not churn:
        return per_change, None
    per_run: Row = dict(ownership.moved(intervals, churn, ())[0])
    per_run["revoked_kept"] = len(kept) or None
    rounds = counts.epoch_rounds(epochs, churn, (), lambda span: True)
    per_run["wire_rounds"] = rounds[0]["wire_rounds"] if rounds else 0
    per_run.update({k: v for k, v in (counts.identity_counts(run, windows) or {}).items() if k != "run_id"})
    if lost is not None:  # connection losses over the churn (per_run/losses.py), and the re-sent per change
        changes = (bounds or {}).get("changes")
        per_run.update(lost, resent_requests_per_change=lost["resent_requests"] / changes if changes else None)
    for row in (*per_change.values(), per_run):
        row.pop("run_id", None)
        row.pop("s_start", None)
        row.pop("s_end", None)
    return per_change, per_run


def _unreported(row: Row) -> Row:
    """A rebalances row with the columns its design does not report (owner_nodes.NOT_REPORTED) null."""
    for name in NOT_REPORTED.get(row.get("design") or "", ()):
        if name in row:
            row[name] = None
    return row


def runs_row_without_records(info: Row, line_counts: tuple[int, int] | None) -> Row:
    """The `runs` row of a run none of whose lines could be read."""
    row = tables.per_run(info, None, [], [], [], [], [], [], line_counts, None, None, None)
    return schemas.conform(row, schemas.RUNS)


def grouped_map(infos: dict[str, Row], files: dict[str, tuple[str, str]]) -> Callable[[pa.Table], pa.Table]:
    """`analyse_run` as applyInArrow's function over readers.parsed_lines grouped by trace directory (`files`:
    readers.trace_files): a run's lines in, its rows of every table out (`OUTPUT`), `trace_errors` included. The
    group key is a hash of the directory, so a group may hold two runs' lines: each is analysed on its own."""
    arrow = {name: to_arrow_schema(schema) for name, schema in TABLES.items()}
    output = to_arrow_schema(OUTPUT)

    def analyse(table: pa.Table) -> pa.Table:
        names = {uri: files[local_path(uri)] for uri in pc.unique(table["file_uri"]).to_pylist()}
        run_ids = sorted({run_id for run_id, _ in names.values()})
        parts = []
        for run_id in run_ids:
            mine = [uri for uri, (owner, _) in names.items() if owner == run_id]
            of_run = table if len(run_ids) == 1 else table.filter(pc.is_in(table["file_uri"], pa.array(mine)))
            errors = lines.trace_errors(run_id, of_run, {uri: names[uri][1] for uri in mine})
            line_counts = (sum(e["lines"] for e in errors), sum(e["bad_lines"] for e in errors))
            good = of_run.filter(pc.invert(pc.fill_null(of_run["bad"], True))).drop_columns(LINE_COLUMNS)
            good = good.add_column(0, "run_id", pa.array([run_id] * good.num_rows, pa.string()))
            found = (analyse_run(good, infos[run_id], line_counts) if good.num_rows
                     else {"runs": [runs_row_without_records(infos[run_id], line_counts)]})
            parts.append(tagged({**found, "trace_errors": errors}, arrow, output))
        return pa.concat_tables(parts)

    return analyse


def tagged(found: dict[str, list[Row]], arrow: dict[str, pa.Schema], output: pa.Schema) -> pa.Table:
    """Every table's rows in one Arrow table: the table's number in TAG, its row in its own struct column."""
    parts = []
    for i, name in enumerate(NAMES):
        rows = found.get(name) or []
        if not rows:
            continue
        struct = pa.Table.from_pylist(rows, schema=arrow[name]).to_struct_array().combine_chunks()
        columns = [pa.array([i] * len(rows), pa.int32())]
        for j, field in enumerate(output):
            if j == 0:
                continue
            columns.append(struct if j == i + 1 else pa.nulls(len(rows), field.type))
        parts.append(pa.Table.from_arrays(columns, schema=output))
    return pa.concat_tables(parts) if parts else output.empty_table()


def split(table: pa.Table) -> dict[str, Held]:
    """The grouped map's output as a Held per table; the migrate tables only when some run migrates."""
    held = {}
    for i, name in enumerate(NAMES):
        column = table.filter(pc.equal(table[TAG], i))[f"_f{i}"].combine_chunks()
        if isinstance(column, pa.ChunkedArray):  # no chunk at all: an empty table
            column = pa.array([], type=column.type)
        rows = pa.Table.from_struct_array(column)
        held[name] = Held(name, TABLES[name], rows.rename_columns(TABLES[name].fieldNames()))
    if not len(held["migrate_steps"]):
        for name in MIGRATE_TABLES:
            held.pop(name)
    return held
