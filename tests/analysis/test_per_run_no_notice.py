"""A run in which no record is a notice (no member saw the change on the wire before it was stable): the noticing
split of its changes has no incumbent, and the per-run analysis does not fail on it. Synthetic runs of a few
thousand events (zkconsumer/lab/analysis/synthetic.py) are such runs, and once stopped the whole analysis."""

from __future__ import annotations

import pyarrow as pa

from zkconsumer.lab.analysis.per_run import counts

NOTICE_COLUMNS = ("type", "proto", "kind", "error_name", "api_name", "assigned", "link", "client_id")


def _run(rows: list[dict]) -> pa.Table:
    columns = {name: [r.get(name) for r in rows] for name in NOTICE_COLUMNS}
    types = {name: pa.string() for name in NOTICE_COLUMNS} | {"assigned": pa.int64()}
    table = pa.table({name: pa.array(values, type=types[name]) for name, values in columns.items()})
    return table.append_column("ts", pa.array([r["ts"] for r in rows], type=pa.float64()))


def _change() -> dict:
    return {"run_id": "r", "change_index": 0, "change_ts": 10.0, "stable_s": 2.0, "change_members": "m9"}


def test_a_change_no_record_noticed_is_split_without_incumbents() -> None:
    run = _run([{"ts": 9.0, "type": "wire", "proto": "zk", "kind": "request", "link": "m1"},
                {"ts": 10.5, "type": "member_event", "kind": "claim"}])
    [row] = counts.split_per_change(run, [_change()])
    assert row["change_index"] == 0 and row["noticed_by"] == 0


def test_a_notice_is_still_found_beside_records_that_are_not() -> None:
    run = _run([{"ts": 9.0, "type": "wire", "proto": "zk", "kind": "request", "link": "m1"},
                {"ts": 10.4, "type": "wire", "proto": "zk", "kind": "event", "link": "m1"}])
    [row] = counts.split_per_change(run, [_change()])
    assert row["noticed_by"] == 1
