"""The report's "Migration to the coordinator design" section: one table per migrate run (migrate_tables.py's
rows): each step's duplicates and dead time, and the run's total with the delivery audit's duplicates and gaps."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from zkconsumer.lab.analysis.herd_view import fmt_cell


@dataclass
class MigrateSection:
    steps: list[dict[str, Any]] = field(default_factory=list)  # migrate_steps rows
    totals: list[dict[str, Any]] = field(default_factory=list)  # migrate_totals rows


STEP_COLUMNS = [  # (heading, column, digits)
    ("produced", "produced", 0), ("consumed", "consumed", 0), ("duplicates", "duplicates", 0),
    ("dead time s", "dead_time_s", 2), ("longest partition stall s", "partition_stall_s", 2),
]

INTRO = ("<p class=note>A ZooKeeper-design group under load, rolled one member at a time to coordinator-design "
         "members of the same group id (docs/migrate.md). A step's window runs from its start to the next step's. "
         "Duplicates: consumptions of an offset already consumed earlier in the run, counted in the window they "
         "happened in; while both halves are live each assigns every partition to its own members, so they are "
         "expected. Dead time: the longest stretch in which the whole group consumed nothing, from the last message "
         "consumed before to the first after. Longest partition stall: the longest time one partition had messages "
         "waiting and none consumed. Gaps: produced offsets no member consumed, over the whole run.</p>")


def _cells(row: dict[str, Any]) -> str:
    return "".join(f"<td>{html.escape(fmt_cell(row.get(c), d))}</td>" for _, c, d in STEP_COLUMNS)


def run_table(run_id: str, steps: list[dict[str, Any]], total: dict[str, Any]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h, _, _ in STEP_COLUMNS)
    t0 = min((s["start_ts"] for s in steps), default=0.0)
    body = "".join(
        f"<tr data-step='{s['step']}'><td>{s['step']}</td><td>{html.escape(str(s['member']))}</td>"
        f"<td>{s['start_ts'] - t0:.1f}</td>{_cells(s)}</tr>" for s in steps)
    summary = (f"<tr class=total><td colspan=3>run: {total.get('steps', 0)} steps; "
               f"{fmt_cell(total.get('duplicates_before'), 0)} duplicates before the first; "
               f"{fmt_cell(total.get('missing'), 0)} gaps (offsets never consumed)</td>"
               f"<td>{fmt_cell(total.get('produced'), 0)}</td><td></td>"
               f"<td>{fmt_cell(total.get('duplicates'), 0)}</td><td>{fmt_cell(total.get('dead_time_s'), 2)}</td>"
               f"<td>{fmt_cell(total.get('partition_stall_s'), 2)}</td></tr>")
    return (f"<h3>{html.escape(run_id)}</h3><table class=migrate><thead><tr><th>step</th><th>member</th>"
            f"<th>at s</th>{head}</tr></thead><tbody>{body}{summary}</tbody></table>")


def migrate_section(section: MigrateSection) -> list[str]:
    """The section's HTML parts: its heading, what the columns mean, and one table per migrate run."""
    parts = ["<h2 id=migrate>Migration to the coordinator design</h2>", INTRO]
    for total in sorted(section.totals, key=lambda t: t["run_id"]):
        steps = sorted((s for s in section.steps if s["run_id"] == total["run_id"]), key=lambda s: s["start_ts"])
        parts.append(run_table(total["run_id"], steps, total))
    return parts
