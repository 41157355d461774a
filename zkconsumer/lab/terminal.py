"""What the lab's commands show on a terminal, and how a run there ends.

`run_in_terminal` runs a `LabSession` under a progress bar and prints the summary table (`summary_table`); the
modes comparison prints `modes_table`. The orchestration (`runs/session.py`) knows nothing of terminals or signals:
it reports progress through a callback and raises on failure; this module turns those into a bar, one line, and
an exit status.

Ending a run here:

    running --Ctrl-C, SIGTERM, SIGHUP--> KeyboardInterrupt --> session stops every process --> exit 130
    running --UserError (a run, a server the lab starts, or --out taken)--> one line "error: ..." --> exit 1
    running --every case done--> summary table, "results: DIR" --> the summaries
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING, Any

from zkconsumer.errors import UserError
from zkconsumer.lab.designs import is_broker_side, is_zookeeper_design
from zkconsumer.lab.rules import identities
from zkconsumer.lab.runs.summary import RunSummary, fmt

if TYPE_CHECKING:
    from zkconsumer.lab.runs.mode_comparison import ModeRow
    from zkconsumer.lab.runs.session import LabSession


def run_in_terminal(session: LabSession) -> list[RunSummary]:
    """`session.run()` under a rich progress bar, then the summary table; Ctrl-C stops everything and exits 130."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    # Before the progress bar: the error is the only line.
    session.refuse_taken_out()

    def interrupt(_signum: int, _frame: object) -> None:
        # SIGTERM and SIGHUP clean up like Ctrl-C: nothing may outlive the run.
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)
    total = len(session.cases) * len(session.runs_of_case())
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=console, transient=False) as bar:
            task = bar.add_task(f"{session.scenario.name}", total=total)

            def progress(text: str | None) -> None:
                if text is None:
                    bar.advance(task)
                else:
                    bar.update(task, description=text[:80])

            summaries = session.run(progress)
    except KeyboardInterrupt:
        console.print(f"interrupted: every process stopped; the current run is marked incomplete in {session.out_dir}")
        sys.exit(130)
    except UserError as exc:
        # A run, or a server the lab starts, failed, or --out is taken: one line.
        console.print(f"error: {exc}")
        sys.exit(1)
    Console(width=200).print(summary_table(summaries))
    print(f"results: {session.out_dir}")
    return summaries


def summary_table(summaries: list[RunSummary]) -> Any:
    """A rich Table: one row per run, the per-change columns are what the herd and far-members compare."""
    from rich.table import Table

    table = Table(title="lab runs (counts per membership change in the churn window)", box=None)
    for column in ("case", "design", "N", "changes", "rebal", "attempts", "conflicts", "failed", "zk req/chg",
                   "zk notif/chg", "conn losses", "re-sent/chg", "kafka coord/chg", "moved", "revoked kept",
                   "1st owned s", "stable s", "notice s", "rebal s", "identities", "done"):
        table.add_column(column, justify="left" if column in ("case", "design") else "right")
    for s in summaries:
        zk_counts = (fmt(s.per_change(v)) if is_zookeeper_design(s.design) else "-"
                     for v in (s.zk_requests, s.zk_notifications))
        table.add_row(
            s.case, s.label, str(s.members), str(s.changes), str(s.rebalances), str(s.attempts), str(s.conflicts),
            str(s.failures), *zk_counts, *losses_cells(s),
            fmt(s.per_change(s.kafka_coordination)) if is_broker_side(s.design) else "-",
            *("-" if v is None else str(v) for v in (s.moved, s.revoked_kept)), fmt(s.first_owned_s),
            fmt(s.time_to_stable), *map(fmt, s.stable_split), identities_cell(s), done_cell(s))
    return table


def done_cell(s: RunSummary) -> str:
    """yes; NO (the run did not complete); or "gaps: ..." (it did, but some of its traffic was not counted)."""
    if not s.completed:
        return "NO"
    return f"gaps: {s.counting_gaps}" if s.counting_gaps else "yes"


def losses_cells(s: RunSummary) -> tuple[str, str]:
    """Connection losses (the members'; "3≠5 wire" where the wire saw other reconnections) and the requests re-sent
    after them, per change: "-" for a design whose members have no ZooKeeper connection."""
    if not is_zookeeper_design(s.design):
        return "-", "-"
    found = s.reconnects
    losses = str(found.losses) if found.agree else f"{found.losses}≠{found.reconnections} wire"
    return losses, fmt(s.per_change(found.re_sent))


def identities_cell(s: RunSummary) -> str:
    """"5 hold", "FAIL ..." naming each that failed; a request identity attributed to connection losses is named
    whether it holds or not ("1 hold: formula F + re-sent R after N connection losses = measured M")."""
    if s.identities_hold is None:
        return "-"
    failed = [str(i) for i in s.identities if not i.holds]
    if failed:
        return "FAIL " + ", ".join(failed)
    attributed = [str(i) for i in s.identities if isinstance(i, identities.RequestIdentity) and i.attributed]
    return f"{len(s.identities)} hold" + (": " + ", ".join(attributed) if attributed else "")


def modes_table(rows: list[ModeRow]) -> Any:
    """A rich Table of the modes comparison: one row per scenario, sweep value, design and mode."""
    from rich.table import Table

    table = Table(title="opt-in modes: mean over repeats per membership change; `x`: the ratio to the faithful zk "
                        "runs", box=None)
    columns = ("scenario", "sweep", "design+mode", "runs", "zk req/chg", "req x", "zk notif/chg", "conflicts",
               "failed att", "stable s", "stable x", "done")
    for column in columns:
        table.add_column(column, justify="left" if column in columns[:3] else "right")
    for r in rows:
        table.add_row(r.scenario, r.sweep or "-", r.label, str(r.runs), fmt(r.zk_requests),
                      _ratio_text(r.requests_ratio), fmt(r.zk_notifications), f"{r.conflicts:.1f}",
                      f"{r.failed_attempts:.1f}", fmt(r.time_to_stable), _ratio_text(r.stable_ratio),
                      f"{r.completed}/{r.runs}")
    return table


def _ratio_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
