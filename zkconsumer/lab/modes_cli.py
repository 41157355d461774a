"""`zkconsumer lab modes`: the opt-in modes (zkconsumer/modes.py, docs/modes.md) side by side on the scenarios
they are meant to change, next to the faithful mode, the coordinator design and, with --original, Kafka 0.8.2.2's
own consumer.

Each scenario runs as `lab run SCENARIO --design zk,coordinator[,original] --mode M1,M2,...` would: the same
servers, cases and settings for every run of it, the zk design once per mode and the other designs once. The table
at the end has one row per (scenario, sweep value, design and mode), the mean over its repeats, with the zk
design's ZooKeeper requests and time to stable as ratios against the faithful mode's (runs/mode_comparison.py,
shown by terminal.modes_table). This module parses and calls.
"""

from __future__ import annotations

from pathlib import Path

import click

from zkconsumer.errors import InputError
from zkconsumer.lab.designs import FAITHFUL, MODE_DESIGN, select_designs
from zkconsumer.lab.runs.summary import RunSummary
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

    from zkconsumer.lab.runs.mode_comparison import mode_rows
    from zkconsumer.lab.runs.session import LabSession, select_cases
    from zkconsumer.lab.scenarios.loading import find_scenario
    from zkconsumer.lab.terminal import modes_table, run_in_terminal

    names = parse_modes(mode_list)
    wanted = parse_values(values)
    found = [find_scenario(n.strip()) for n in scenarios.split(",") if n.strip()]
    unused = sorted(set(wanted) - {s.name for s in found} - set(DEFAULT_VALUES))
    if unused:
        raise InputError(f"--values for {', '.join(unused)}: not among --scenarios {scenarios}")
    if original:
        from zkconsumer.embedded.process import EmbeddedError
        from zkconsumer.lab.drivers.original import check_toolchain

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
        results += [(session.scenario.name, s) for s in run_in_terminal(session)]
    Console(width=200).print(modes_table(mode_rows(results)))
    if FAITHFUL not in names:
        click.echo(f"no {FAITHFUL} runs: the ratio columns are empty")
    click.echo(f"results: {out_dir}  (report: zkconsumer lab analyze {out_dir} --out REPORT)")
