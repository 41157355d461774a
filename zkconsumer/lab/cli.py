"""`zkconsumer lab list|validate`: the shipped scenarios at a glance, and checking scenario files.

Errors follow the main CLI: one line each on stderr, exit 1 for invalid files, exit 2 for usage errors.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from zkconsumer.lab.scenario import Scenario, ScenarioError, load_scenario, shipped_names, shipped_scenario


@click.group("lab")
def lab() -> None:
    """Scenarios that run the ZooKeeper design and the broker-side group coordinator side by side."""


@lab.command("list")
@click.option("--dir", "directory", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="list the *.toml scenarios in DIR instead of the shipped ones")
@click.pass_context
def lab_list(ctx: click.Context, directory: Path | None) -> None:
    """Each scenario: what it measures, its designs, its sweep and how many runs it makes."""
    scenarios: list[Scenario] = []
    failed = False
    loaders = ([lambda name=name: shipped_scenario(name) for name in shipped_names()] if directory is None
               else [lambda path=path: load_scenario(path) for path in sorted(directory.glob("*.toml"))])
    for loader in loaders:
        try:
            scenarios.append(loader())
        except ScenarioError as exc:
            failed = True
            _echo_errors(exc)
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("Name", "Description", "Designs", "Sweep", "Runs"):
        table.add_column(column, no_wrap=column != "Description", justify="right" if column == "Runs" else "left")
    for s in scenarios:
        sweep = f"{s.sweep.axis}: {', '.join(map(str, s.sweep.values))}" if s.sweep else "-"
        table.add_row(s.name, s.summary, ", ".join(s.designs), sweep, str(s.estimated_runs))
    Console(width=200, no_color=True, soft_wrap=True).print(table)
    total = sum(s.estimated_runs for s in scenarios)
    click.echo(f"{len(scenarios)} scenarios, {total} runs (cases x repeats x designs)")
    if failed:
        ctx.exit(1)


@lab.command("validate")
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_context
def lab_validate(ctx: click.Context, files: tuple[Path, ...]) -> None:
    """Check scenario FILEs against the schema and rules (docs/scenarios.md); every problem is reported."""
    failed = 0
    for path in files:
        try:
            s = load_scenario(path)
        except ScenarioError as exc:
            failed += 1
            _echo_errors(exc)
            continue
        click.echo(f"{path}: ok ({s.name}: {s.case_count} cases x {len(s.designs)} designs = {s.estimated_runs} runs)")
    if failed:
        ctx.exit(1)


def _echo_errors(exc: ScenarioError) -> None:
    for line in exc.lines:
        click.echo(f"error: {line}", err=True)
