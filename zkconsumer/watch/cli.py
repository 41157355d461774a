"""`zkconsumer watch`: the live view of a group, or with `--once` a plain-text snapshot (docs/watch.md).

Imported only when the command runs (`OneLineErrors.LAZY` in zkconsumer/cli.py): textual is not loaded by
any other command.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from zkconsumer import extras
from zkconsumer.cli_options import resolve_zookeeper, zookeeper_option
from zkconsumer.watch import lag, model
from zkconsumer.zookeeper.client import ZkClient

if TYPE_CHECKING:
    from fetcher_manager.broker import Broker
    from zkconsumer.watch.live import GroupWatcher

WRITE_KINDS = ("create", "set_data", "delete")


@click.command("watch")
@zookeeper_option
@click.option("--group", required=True, help="the consumer group (group.id)")
@click.option("--bootstrap", default=None, metavar="HOST:PORT[,...]",
              help="broker for log end offsets (default: the brokers registered in /brokers/ids)")
@click.option("--once", is_flag=True, help="print one plain-text snapshot and exit")
@click.option("--failed-after", type=click.FloatRange(min=0.1), default=model.DEFAULT_FAILED_AFTER_MS / 1000,
              show_default=True, metavar="SECONDS",
              help="call a member failed when the group has been unsettled this long")
@click.option("--no-lag", is_flag=True, help="do not ask any broker (log end and lag shown as -)")
@click.option("--op-counts", type=click.Path(path_type=Path), default=None, hidden=True,
              help="write this view's ZooKeeper request counts as JSON at exit (tests check there are no writes)")
def watch(zookeeper: str | None, group: str, bootstrap: str | None, once: bool, failed_after: float, no_lag: bool,
          op_counts: Path | None) -> None:
    """Watch a ZooKeeper-based consumer group: members and their state, each partition's owner, offset and lag,
    and a log of joins, claims and ownership changes as they happen. Read-only: never writes to ZooKeeper."""
    connect = resolve_zookeeper(zookeeper)
    if logging.getLogger().level >= logging.WARNING:
        # kazoo logs each failed connection attempt; the error below already says ZooKeeper is unreachable.
        logging.getLogger("kazoo").setLevel(logging.ERROR)
    brokers = lag.parse_bootstrap(bootstrap) if bootstrap else None
    failed_after_ms = int(failed_after * 1000)
    if not once:
        extras.require("watch", "the live view of zkconsumer watch", "`zkconsumer watch --once` needs none")
    if not once and not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise click.UsageError("the live view needs a terminal; use --once for a plain-text snapshot")
    zk = ZkClient(connect, session_timeout_ms=10000, connection_timeout_ms=5000, log_id="watch").start()
    try:
        if once:
            _print_once(zk, group, brokers, failed_after_ms, no_lag)
        else:
            _run_live(zk, connect, group, brokers, failed_after_ms, no_lag)
    finally:
        counts = zk.op_counts()
        zk.close()
        if op_counts is not None:
            op_counts.write_text(json.dumps(counts, sort_keys=True))
    writes = {kind: counts[kind] for kind in WRITE_KINDS if counts.get(kind)}
    if writes:  # cannot happen (nothing here calls a write); checked so a regression is loud, not silent
        raise click.ClickException(f"internal error: the watch view sent ZooKeeper writes {writes}")


def _print_once(zk: ZkClient, group: str, brokers: list[Broker] | None, failed_after_ms: int, no_lag: bool) -> None:
    data = model.read_group(zk, group)
    if not no_lag:
        data.log_ends = lag.log_end_offsets(lag.brokers_to_ask(zk, brokers), model.shown_partitions(data))
    view = model.build_view(data, int(time.time() * 1000), failed_after_ms=failed_after_ms)
    click.echo(model.render_text(view, color=sys.stdout.isatty()))


def _run_live(zk: ZkClient, connect: str, group: str, brokers: list[Broker] | None, failed_after_ms: int,
              no_lag: bool) -> None:
    from zkconsumer.watch.app import WatchApp
    from zkconsumer.watch.live import GroupWatcher

    watcher = GroupWatcher(zk, group, bootstrap=brokers, lag_interval_s=0 if no_lag else 2.0,
                           failed_after_ms=failed_after_ms)
    watcher.start()
    # Log records would draw over the screen: while the view runs they go to its log pane instead.
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = [LogPaneHandler(watcher)]
    try:
        watcher.wait_idle(5.0)
        WatchApp(watcher, connect).run()
    finally:
        root.handlers = saved
        watcher.stop()


class LogPaneHandler(logging.Handler):
    """Forwards warnings and errors to the view's log pane."""

    def __init__(self, watcher: GroupWatcher) -> None:
        super().__init__(logging.WARNING)
        self.watcher = watcher

    def emit(self, record: logging.LogRecord) -> None:
        self.watcher.note("connection" if record.levelno >= logging.ERROR else "info",
                          f"{record.levelname.lower()}: {record.name}: {record.getMessage()}")
