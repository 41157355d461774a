"""The report's "Opt-in modes" section: the `modes` table's rows (modes_tables.py), one per scenario, sweep value
and design+mode, with each metric's ratio to the faithful zk runs beside it."""

from __future__ import annotations

import html
from typing import Any

from zkconsumer.lab.analysis.herd_view import fmt_cell

COLUMNS = [  # (heading, modes column, digits, its ratio column or None)
    ("runs", "runs", 0, None),
    ("ZooKeeper requests per change", "zk_requests_per_change", 1, "zk_requests_per_change_x"),
    ("notifications per change", "zk_notifications_per_change", 1, "zk_notifications_per_change_x"),
    ("owner conflicts", "owner_conflicts", 1, None),
    ("failed attempts", "failed_attempts", 1, None),
    ("time to stable s", "time_to_stable_s", 2, "time_to_stable_s_x"),
    ("unowned partition-s", "unowned_partition_s", 2, "unowned_partition_s_x"),
    ("stop-the-world per member, median s", "median_pause_s", 2, "median_pause_s_x"),
    ("stop-the-world max s", "max_pause_s", 2, None),
    ("partitions moved per change", "partitions_moved_per_change", 1, "partitions_moved_per_change_x"),
]

INTRO = ("<p class=note>Each opt-in mode (docs/modes.md) on the zk design, next to the faithful mode (Kafka 0.8.2's "
         "behaviour), the coordinator design and, where it ran, Kafka 0.8.2.2's own consumer, on the same scenario "
         "settings. Each row is the mean over its repeats of the per-run figures of the runs table (counts over the "
         "churn window; requests and notifications per membership change); <i>&times;</i> is the ratio to the faithful "
         "zk row of the same scenario and sweep value (below 1: the mode costs less). Owner conflicts are the "
         "owner-node claims ZooKeeper refused because another member held the node; failed attempts are rebalance "
         "attempts that did not end ok or no_brokers (zkconsumer/lab/rules/protocol.py), which includes an attempt a "
         "mode abandoned for a newer view (view_changed: retried at once, without the backoff). Partitions moved are "
         "those whose owner after a change differs from the owner before it (the sticky assignor, "
         "<code>incremental+sticky</code>, moves only what balance requires).</p>")


def _sweep(row: dict[str, Any]) -> str:
    if row.get("sweep_axis") is None:
        return ""
    value = row.get("sweep_value")
    shown = int(value) if isinstance(value, float) and value.is_integer() else value
    return f"{row['sweep_axis']}={shown}"


def modes_table_html(rows: list[dict[str, Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" + ("<th>&times;</th>" if ratio else "") for h, _, _, ratio in COLUMNS)
    body = []
    for r in rows:
        cells = "".join(f"<td>{html.escape(fmt_cell(r.get(c), d))}</td>"
                        + (f"<td class=ratio>{html.escape(fmt_cell(r.get(ratio), 2))}</td>" if ratio else "")
                        for _, c, d, ratio in COLUMNS)
        scenario, label = html.escape(str(r["scenario"])), html.escape(str(r["label"]))
        body.append(f"<tr data-label='{label}' data-scenario='{scenario}'><td>{scenario}</td>"
                    f"<td>{html.escape(_sweep(r))}</td><td>{label}</td>{cells}</tr>")
    return (f"<table class=modes><thead><tr><th>scenario</th><th>sweep</th><th>design+mode</th>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def modes_section(rows: list[dict[str, Any]]) -> list[str]:
    return ["<h2 id=modes>Opt-in modes</h2>", INTRO, modes_table_html(rows)]
