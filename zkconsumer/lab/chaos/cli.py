"""`zkconsumer lab chaos` (run a fault campaign, then judge it) and `zkconsumer lab chaos-check DIR` (judge a
recorded campaign again, with today's checkers). Both print the per-fault table and the number of violations, and
exit 1 when there is any (invariants 1 to 4 and 6; overlap windows are measured, never a violation), else 2 when an
invariant is unknown (its checker failed: checkers.check_all), else 0; Jepsen's test runner exits the same way."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import click

from zkconsumer.lab.chaos import faults as f
from zkconsumer.modes import MODES


def judge(run_dir: Path) -> tuple[dict[str, Any], str, int]:
    """The checkers over the history in `run_dir`: (results for chaos.json, the table as text, violations)."""
    from zkconsumer.lab.chaos.checkers import check_all
    from zkconsumer.lab.chaos.history import History
    from zkconsumer.lab.chaos.table import campaign_table, format_table

    history = History.load(run_dir)
    results = check_all(history)
    rows = campaign_table(history, results)
    violations = sum(r.violation_count for r in results if r.counts_as_violation)
    unknown = [r.invariant for r in results if r.verdict == "unknown"]
    valid: bool | str = False if violations else "unknown" if unknown else True
    document = {"valid": valid, "violations": violations, "unknown": unknown, "table": rows,
                "checks": [r.to_dict() for r in results], "bad_trace_lines": history.bad_lines}
    return document, format_table(rows), violations


def _report(run_dir: Path) -> None:
    from zkconsumer.lab.chaos.campaign import write_results

    document, table, violations = judge(run_dir)
    path = write_results(run_dir, document)
    click.echo(table)
    for check in document["checks"]:
        if check.get("first_violation"):
            click.echo(f"invariant {check['invariant']} ({check['name']}): first violation:")
            for line in check["first_violation"]:
                click.echo(f"  {line}")
        if check["verdict"] == "unknown":
            click.echo(f"invariant {check['invariant']} ({check['name']}): UNKNOWN, its checker failed: "
                       f"{check['error']}")
    unknown = document["unknown"]
    if unknown:
        click.echo(f"violations: {violations} in the invariants judged; UNKNOWN: invariant "
                   f"{', '.join(map(str, unknown))} (not judged)")
    else:
        click.echo(f"violations: {violations}")
    click.echo(f"results: {path}")
    if violations:
        raise SystemExit(1)
    if unknown:
        raise SystemExit(2)


@click.command("chaos")
@click.option("--faults", "fault_count", type=click.IntRange(0), required=True, help="how many faults to inject")
@click.option("--seed", type=int, required=True, help="draws the faults, their holds and their targets")
@click.option("--members", type=click.IntRange(1, 32), default=4, show_default=True,
              help="consumer processes in the group")
@click.option("--partitions", type=click.IntRange(1, 1000), default=12, show_default=True)
@click.option("--duration", "duration_s", type=click.FloatRange(min=1), default=None, metavar="SECONDS",
              help="stop injecting after this long, even if faults remain")
@click.option("--rate", type=click.FloatRange(min=1), default=100.0, show_default=True,
              help="messages produced per second")
@click.option("--kinds", default=None, metavar="KIND[,KIND]",
              help=f"only these fault kinds (default: all of {', '.join(f.FAULT_KINDS)})")
@click.option("--mode", default="faithful", show_default=True, metavar="MODE[+MODE]",
              help=f"the members' opt-in mode (docs/modes.md): one of {', '.join(MODES)}, or several joined with "
                   "'+'; faithful is Kafka 0.8.2")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="the campaign's directory (must not exist): its history, logs and chaos.json")
def chaos(fault_count: int, seed: int, members: int, partitions: int, duration_s: float | None, rate: float,
          kinds: str | None, mode: str, out_dir: Path) -> None:
    """Run a random fault campaign against a consuming group on 3 ZooKeeper servers and 3 brokers, then check
    its invariants over the recorded history (docs/chaos.md)."""
    from zkconsumer.lab.chaos.campaign import Campaign, CampaignSettings

    if out_dir.exists():
        raise click.UsageError(f"--out {out_dir} exists: a campaign writes a new directory (choose another path)")
    try:
        settings = CampaignSettings(fault_count, seed, members=members, partitions=partitions, duration_s=duration_s,
                                    rate=rate, kinds=f.parse_kinds(kinds), mode=mode)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    campaign = Campaign(settings, out_dir, progress=click.echo)
    # Ctrl-C or SIGTERM: stop injecting, then drain, stop and check what was recorded
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: campaign.stop.set())
    run_dir = campaign.execute()
    click.echo(f"{campaign.faults_applied} faults applied; history: {run_dir}")
    _report(run_dir)


@click.command("chaos-check")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def chaos_check(run_dir: Path) -> None:
    """Judge a recorded campaign (its directory) again with the current checkers."""
    if not (run_dir / "traces").is_dir():
        raise click.UsageError(f"{run_dir} has no traces/: not a campaign directory (made by `zkconsumer lab chaos`)")
    try:
        _report(run_dir)
    except ValueError as exc:  # a history without a campaign record: History.load names the directory
        raise click.ClickException(str(exc)) from None
