"""`zkconsumer lab modes`: the opt-in modes (zkconsumer/modes.py, docs/modes.md) side by side on the scenarios
they are meant to change, next to the faithful mode, the coordinator design and, with --original, Kafka 0.8.2.2's
own consumer.

Each scenario runs as `lab run SCENARIO --design zk,coordinator[,original] --mode M1,M2,...` would: the same
servers, cases and settings for every run of it, the zk design once per mode and the other designs once. The table
at the end has one row per (scenario, sweep value, design and mode), the mean over its repeats, with the zk
design's ZooKeeper requests and time to stable as ratios against the faithful mode's. The Spark report's "Opt-in
modes" section has the same rows with the metrics only the traces' full analysis gives (modes_tables.py).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import click

from zkconsumer.errors import InputError
from zkconsumer.lab.designs import FAITHFUL, MODE_DESIGN, is_zookeeper_design, select_designs
from zkconsumer.lab.summary import RunSummary
from zkconsumer.modes import MODES, is_mode

COMPARED_SCENARIOS = ("herd", "staggered-join", "rolling-restart", "far-members", "crash")
# The herd sweeps N up to 64; every mode at every N is hours. Without --values it runs at the file's own group size.
DEFAULT_VALUES = {"herd": [8]}


def parse_modes(text: str) -> list[str]:
    """`--mode faithful,incremental`: known names, in the order given, each once."""
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if not is_mode(n)]
    if unknown or not names:
        raise InputError(f"--mode {text!r}: {', '.join(unknown) or 'no mode'} is not one of {', '.join(MODES)} "
                         "(or a comma list of them)")
    return names


def parse_values(items: tuple[str, ...]) -> dict[str, list[int]]:
    """`--values herd=4,16 --values far-members=100`; a bare `4,16` is the herd's. Integers, each once."""
    found: dict[str, list[int]] = dict(DEFAULT_VALUES)
    for item in items:
        scenario, _, values = item.rpartition("=") if "=" in item else ("herd", "", item)
        try:
            found[scenario.strip()] = list(dict.fromkeys(int(v) for v in values.split(",") if v.strip()))
        except ValueError:
            raise InputError(f"--values {item!r}: give SCENARIO=V1,V2 with integer sweep values, e.g. herd=4,16") \
                from None
    return found


@dataclass
class ModeRow:
    """The mean of one (scenario, sweep value, design label)'s repeats, as the summary table counts them."""

    scenario: str
    sweep: str
    label: str
    design: str
    runs: int
    completed: int
    zk_requests: float | None
    zk_notifications: float | None
    conflicts: float
    failed_attempts: float
    time_to_stable: float | None
    requests_ratio: float | None = None  # against the faithful zk runs of the same scenario and sweep value
    stable_ratio: float | None = None


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def mode_rows(summaries: list[tuple[str, RunSummary]]) -> list[ModeRow]:
    """(scenario name, summary) pairs in, one row per scenario, sweep value and label out, in the order met."""
    groups: dict[tuple[str, str, str], list[RunSummary]] = defaultdict(list)
    for scenario, s in summaries:
        sweep = ",".join(f"{k}={v}" for k, v in s.sweep.items())
        groups[(scenario, sweep, s.label)].append(s)
    rows = []
    for (scenario, sweep, label), runs in groups.items():
        zk = is_zookeeper_design(runs[0].design)
        rows.append(ModeRow(
            scenario, sweep, label, runs[0].design, len(runs), sum(s.completed for s in runs),
            _mean([s.per_change(s.zk_requests) for s in runs]) if zk else None,
            _mean([s.per_change(s.zk_notifications) for s in runs]) if zk else None,
            statistics.fmean(s.conflicts for s in runs), statistics.fmean(s.failed_attempts for s in runs),
            _mean([s.time_to_stable for s in runs])))
    faithful = {(r.scenario, r.sweep): r for r in rows if r.label == MODE_DESIGN}
    for r in rows:
        base = faithful.get((r.scenario, r.sweep))
        if base is not None and r.design == MODE_DESIGN:
            r.requests_ratio = _ratio(r.zk_requests, base.zk_requests)
            r.stable_ratio = _ratio(r.time_to_stable, base.time_to_stable)
    return rows


def _ratio(value: float | None, base: float | None) -> float | None:
    return value / base if value is not None and base else None


def render_rows(rows: list[ModeRow]):
    from rich.table import Table

    from zkconsumer.lab.summary import fmt as num

    table = Table(title="opt-in modes: mean over repeats per membership change; `x`: the ratio to the faithful zk "
                        "runs", box=None)
    columns = ("scenario", "sweep", "design+mode", "runs", "zk req/chg", "req x", "zk notif/chg", "conflicts",
               "failed att", "stable s", "stable x", "done")
    for column in columns:
        table.add_column(column, justify="left" if column in columns[:3] else "right")
    for r in rows:
        table.add_row(r.scenario, r.sweep or "-", r.label, str(r.runs), num(r.zk_requests),
                      _ratio_text(r.requests_ratio), num(r.zk_notifications), f"{r.conflicts:.1f}",
                      f"{r.failed_attempts:.1f}", num(r.time_to_stable), _ratio_text(r.stable_ratio),
                      f"{r.completed}/{r.runs}")
    return table


def _ratio_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


@click.command("modes")
@click.option("--scenarios", default=",".join(COMPARED_SCENARIOS), show_default=True, metavar="NAME[,NAME]",
              help="scenarios to run (files or shipped names)")
@click.option("--modes", "mode_list", default=",".join(MODES), show_default=True, metavar="MODE[,MODE]",
              help="the zk design's modes (docs/modes.md)")
@click.option("--original", is_flag=True, help="also run Kafka 0.8.2.2's own consumer (needs a JDK)")
@click.option("--values", multiple=True, metavar="[SCENARIO=]V1,V2",
              help="sweep values of a scenario (repeatable); a bare list is the herd's [default: herd=8]")
@click.option("--repeats", type=click.IntRange(1), default=None, help="run only the first N repeats")
@click.option("--members", "process_mode", type=click.Choice(["processes", "threads"]), default=None,
              help="members as OS processes or rebalance-only threads (as `lab run`)")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="results directory: one run directory per case, design and mode (zk+MODE)")
def modes(scenarios: str, mode_list: str, original: bool, values: tuple[str, ...], repeats: int | None,
          process_mode: str | None, out_dir: Path) -> None:
    """Run each scenario on the zk design once per mode, and once on the coordinator design (and the original
    with --original); print one comparison table."""
    from rich.console import Console

    from zkconsumer.lab.scenario import find_scenario
    from zkconsumer.lab.session import LabSession, select_cases

    names = parse_modes(mode_list)
    wanted = parse_values(values)
    found = [find_scenario(n.strip()) for n in scenarios.split(",") if n.strip()]
    unused = sorted(set(wanted) - {s.name for s in found} - set(DEFAULT_VALUES))
    if unused:
        raise InputError(f"--values for {', '.join(unused)}: not among --scenarios {scenarios}")
    if original:
        from zkconsumer.embedded.process import EmbeddedError
        from zkconsumer.lab.original_driver import check_toolchain

        try:  # before any server starts
            check_toolchain()
        except EmbeddedError as exc:
            raise click.ClickException(str(exc)) from None
    sessions = []
    for scenario in found:
        listed = wanted.get(scenario.name)
        cases = select_cases(scenario, ",".join(map(str, listed)) if listed and scenario.sweep else None, repeats)
        designs = select_designs(scenario.designs, "zk,coordinator" + (",original" if original else ""))
        if MODE_DESIGN not in designs:
            raise InputError(f"scenario {scenario.name} does not run the {MODE_DESIGN} design: it has no modes to "
                             "compare")
        session = LabSession(scenario, cases, designs, out_dir, process_mode=process_mode, modes=names)
        session.refuse_taken_out()  # every scenario's, before the first server starts
        sessions.append(session)
    results: list[tuple[str, RunSummary]] = []
    for session in sessions:
        results += [(session.scenario.name, s) for s in session.run_cli()]
    Console(width=200).print(render_rows(mode_rows(results)))
    if FAITHFUL not in names:
        click.echo(f"no {FAITHFUL} runs: the ratio columns are empty")
    click.echo(f"results: {out_dir}  (report: zkconsumer lab analyze {out_dir} --out REPORT)")
