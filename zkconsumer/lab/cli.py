"""`zkconsumer lab list|validate`: the shipped scenarios at a glance, and checking scenario files.

Errors follow the main CLI: one line each on stderr, exit 1 for invalid files, exit 2 for usage errors.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from zkconsumer.errors import InputError
from zkconsumer.lab.designs import select_designs
from zkconsumer.lab.scenarios.loading import (
    Scenario,
    ScenarioError,
    expand_cases,
    find_scenario,
    load_scenario,
    shipped_names,
    shipped_scenario,
)


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


@lab.command("analyze")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="report directory: tables/ (Parquet) and report.html")
@click.option("--predict-to", type=click.IntRange(1), default=1024, show_default=True, metavar="N",
              help="simulate joins up to this group size next to the real runs")
@click.option("--no-predict", is_flag=True, help="skip the scale simulation")
@click.option("--force", is_flag=True, help="replace the report and tables already in --out")
@click.option("--master", default=None, metavar="URL",
              help="run on this Spark cluster, e.g. spark://host:7077, instead of local[2] (docs/analysis.md)")
def lab_analyze(run_dirs: tuple[Path, ...], out_dir: Path, predict_to: int, no_predict: bool, force: bool,
                master: str | None) -> None:
    """Analyse lab runs with PySpark (local[2], or a cluster's --master): Parquet tables and a self-contained
    HTML report.

    Each RUN_DIR is a run directory or a `lab run --out` tree of them. The same job runs under spark-submit:
    spark-submit zkconsumer/lab/analysis/job.py RUN_DIR... --out DIR (docs/analysis.md)."""
    from rich.console import Console

    from zkconsumer.lab.analysis.job import analyze, session

    written = [p for p in (out_dir / "report.html", out_dir / "tables") if p.exists()]
    if written and not force:
        raise InputError(f"--out {out_dir} already holds a report ({written[0].name}): give another --out, or "
                         "--force to replace it")
    console = Console(stderr=True)
    try:
        with console.status("Spark: reading traces and computing the tables ...", spinner="dots"):
            spark = None if master is None else session(master=master)  # else analyze starts local[2]
            result = analyze(list(run_dirs), out_dir, spark, predict_to=None if no_predict else predict_to)
    finally:
        from pyspark.sql import SparkSession

        started = SparkSession.getActiveSession()
        if started is not None:  # the session analyze() started: its JVM is stopped here, not at exit
            started.stop()
    click.echo(f"{result.runs} runs, {result.trace_lines} trace lines ({result.bad_lines} bad) in "
               f"{result.seconds:.1f} s")
    if result.bad_lines:
        click.echo(f"bad trace lines: see {result.tables['trace_errors']} and the report")
    click.echo(f"tables: {result.out_dir / 'tables'}")
    click.echo(f"report: {result.report}")


@lab.command("run")
@click.argument("scenario")
@click.option("--design", default="both", show_default=True, metavar="DESIGN[,DESIGN]",
              help="zk, original (Kafka 0.8.2.2's own consumer, needs a JDK), coordinator (eager), cooperative "
                   "(KIP-429), consumer (KIP-848), or a comma list of them; both: zk + coordinator; all: every "
                   "design this machine can run (docs/designs.md)")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="results directory: one run directory per case and design")
@click.option("--members", "process_mode", type=click.Choice(["processes", "threads"]), default=None,
              help="members as OS processes (default) or rebalance-only threads in member host processes (large N)")
@click.option("--values", default=None, metavar="V1,V2,...", help="run only these sweep values")
@click.option("--repeats", type=click.IntRange(1), default=None, help="run only the first N repeats")
@click.option("--zookeeper", default=None, metavar="HOST:PORT[,...]", help="external ZooKeeper (default: embedded)")
@click.option("--bootstrap", default=None, metavar="HOST:PORT",
              help="external broker (default: embedded Apache Kafka); needs --zookeeper (its own), and the listener "
                   "it names must advertise --kafka-proxy-port")
@click.option("--kafka-proxy-port", type=click.IntRange(0, 65535), default=0, show_default=True)
@click.option("--mode", "mode", default="faithful", show_default=True, metavar="MODE[,MODE]",
              help="the zk design's opt-in modes (docs/modes.md), one run each; the other designs run once")
@click.option("--settings", "group_settings", type=click.Choice(["same", "shipped"]), default="same",
              show_default=True, help="same: every broker-side design with the scenario's session and heartbeat; "
                                      "shipped: each at its client's and broker's defaults (docs/designs.md)")
def lab_run(scenario: str, design: str, out_dir: Path, process_mode: str | None, values: str | None,
            repeats: int | None, zookeeper: str | None, bootstrap: str | None, kafka_proxy_port: int,
            mode: str, group_settings: str) -> None:
    """Run SCENARIO (a file or a shipped name) on both designs and print a summary per run."""
    from zkconsumer.lab.modes_cli import parse_modes
    from zkconsumer.lab.runs.session import LabSession, select_cases
    from zkconsumer.lab.terminal import run_in_terminal

    if bootstrap is not None and zookeeper is None:
        raise click.UsageError("--bootstrap needs --zookeeper: an external broker registers itself and its topics "
                               "in its own ZooKeeper, which the ZooKeeper design's members must read")
    found = find_scenario(scenario)
    cases = select_cases(found, values, repeats)
    designs = select_designs(found.designs, design)
    modes = parse_modes(mode)
    if not cases or not designs:
        raise click.UsageError(f"nothing to run: {found.name} has designs {found.designs} and "
                               f"{len(expand_cases(found))} cases before --values/--repeats")
    # before the toolchain check: a mode given to a design that has none is refused whatever the machine has
    session = LabSession(found, cases, designs, out_dir, process_mode=process_mode, zookeeper=zookeeper,
                         bootstrap=bootstrap, kafka_proxy_port=kafka_proxy_port, modes=modes,
                         group_settings=group_settings)
    if "original" in designs:
        from zkconsumer.embedded.process import EmbeddedError
        from zkconsumer.lab.drivers.original import check_toolchain

        try:  # before any server starts: a missing JDK is one line naming the fix
            check_toolchain()
        except EmbeddedError as exc:
            raise click.ClickException(str(exc)) from None
    run_in_terminal(session)


@lab.command("lesson")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=Path("lesson.html"),
              show_default=True, help="the HTML page to write")
@click.option("--case", default=None, help="the case to replay (default: the first with both designs)")
@click.option("--step", "churn_step", type=click.IntRange(0), default=None,
              help="the churn step to replay (default: the first)")
def lab_lesson(run_dir: Path, out: Path, case: str | None, churn_step: int | None) -> None:
    """A self-contained page replaying one membership change of RUN_DIR (a `lab run` output) step by step on
    both designs, side by side (docs/lesson.md)."""
    from zkconsumer.lab.lesson import LessonError, build_lesson, write_lesson

    try:
        lesson = build_lesson(run_dir, case=case, step=churn_step)
    except LessonError as exc:
        raise click.ClickException(str(exc)) from None
    path = write_lesson(lesson, out)
    counts = ", ".join(f"{d}: {len(r.steps)} steps" for d, r in lesson.designs.items())
    click.echo(f"lesson: {path.resolve()} ({lesson.case}, churn step {lesson.change_index}; {counts})")


def _add_chaos_commands() -> None:
    """The fault campaign's commands live with it (zkconsumer/lab/chaos/cli.py); heavy imports stay lazy there."""
    from zkconsumer.lab.chaos.cli import chaos, chaos_check

    lab.add_command(chaos)
    lab.add_command(chaos_check)


def _add_modes_command() -> None:
    """`lab modes` compares the opt-in modes (zkconsumer/lab/modes_cli.py)."""
    from zkconsumer.lab.modes_cli import modes

    lab.add_command(modes)


_add_chaos_commands()
_add_modes_command()
