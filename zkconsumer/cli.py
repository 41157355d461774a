"""The `zkconsumer` command line: embedded cluster, topics, ZooKeeper inspection, groups, consume/produce.

Errors are one line on stderr and a non-zero exit (usage errors exit 2, failures exit 1).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from zkconsumer import extras
from zkconsumer.admin import alter_partitions, create_topic, describe_topic, list_topics
from zkconsumer.cli_consumer import COMMANDS
from zkconsumer.cli_options import bootstrap_option, dir_option, resolve_zookeeper, zookeeper_option
from zkconsumer.embedded.cluster import EmbeddedCluster, default_dir
from zkconsumer.errors import UserError
from zkconsumer.zookeeper.client import ZkClient
from zkconsumer.zookeeper.tree import walk

# UserError covers the embedded cluster, topic admin, ZooKeeper reachability, config, znode data, bad arguments and
# the lab's scenarios and runs; anything else is an internal error and keeps its traceback.
USER_ERRORS: tuple[type[Exception], ...] = (UserError,)


class OneLineErrors(click.Group):
    """Print usage and runtime errors as one line instead of click's multi-line usage block.

    Command groups listed in `LAZY` are imported only when invoked (or listed in --help), so a command that
    does not need them (the lab's many member processes, for one) does not pay for their imports. It is also one of
    the CLI's two ways into the lab, with `demo` (no product module imports zkconsumer.lab:
    tests/test_import_rules.py). Without its extra the command is a stand-in: any invocation of it, --help included,
    is one line naming the extra (zkconsumer/extras.py)."""

    # name: (the command, the extra it needs); `watch` asks for its extra itself, as `watch --once` needs none
    LAZY: dict[str, tuple[str, str | None]] = {"lab": ("zkconsumer.lab.cli:lab", "lab"),
                                                "watch": ("zkconsumer.watch.cli:watch", None)}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.LAZY])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.LAZY:
            return super().get_command(ctx, cmd_name)
        target, extra = self.LAZY[cmd_name]
        if extra is not None and extras.missing(extra) is not None:
            return _needs_extra(cmd_name, extra)
        return extras.load(target)

    def main(self, *args, **kwargs):  # type: ignore[override]
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
        except click.exceptions.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(130)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx else "zkconsumer"
            click.echo(f"error: {exc.format_message()} (see `{where} --help`)", err=True)
            sys.exit(2)
        except click.ClickException as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except USER_ERRORS as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)


def _needs_extra(name: str, extra: str) -> click.Command:
    """Stands in for command `name` when its extra is missing: listed in --help as needing it, and any invocation,
    whatever its arguments, fails with extras' one line."""

    def fail(args: tuple[str, ...]) -> None:
        extras.require(extra, f"zkconsumer {name}")

    return click.Command(name, callback=fail, add_help_option=False, short_help=f"(needs the '{extra}' extra)",
                         params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True})


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="log more (-v info, -vv debug)")
def main(verbose: int) -> None:
    """Kafka 0.8's ZooKeeper-balanced high-level consumer, rebuilt in Python."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The client libraries log every failed connection attempt; a command reports the outcome in one line of its
    # own (or, for a running consumer, one line per state change), so their logs show only with -v.
    third_party = logging.CRITICAL if verbose == 0 else logging.WARNING if verbose == 1 else logging.DEBUG
    logging.getLogger("kazoo").setLevel(third_party)
    logging.getLogger("kafka").setLevel(third_party)


# --- cluster ----------------------------------------------------------------------------------------

@main.group()
def cluster() -> None:
    """Run a real ZooKeeper (or ensemble) and Apache Kafka brokers in ZooKeeper mode, in the background; with
    `up --kraft`, also an Apache Kafka 4.x broker in KRaft mode for the modern group protocols."""


@cluster.command("up")
@click.option("--zk-servers", type=click.IntRange(1, 9), default=1, show_default=True, help="ZooKeeper servers")
@click.option("--zk-port", type=click.IntRange(1, 65535), default=None, help="client port (single server only)")
@click.option("--brokers", type=click.IntRange(0, 9), default=1, show_default=True,
              help="Kafka brokers (0: ZooKeeper only)")
@click.option("--broker-port", type=click.IntRange(1, 65535), default=None, help="broker port (single broker only)")
@click.option("--no-broker", is_flag=True, help="start ZooKeeper only (same as --brokers 0)")
@click.option("--purge", is_flag=True, help="start from empty data (default: keep the last run's topics and offsets)")
@click.option("--tls", is_flag=True, help="ZooKeeper also on a TLS port, with a throw-away CA (docs/security.md)")
@click.option("--kraft", is_flag=True,
              help="also an Apache Kafka 4.x broker in KRaft mode (no ZooKeeper), beside the others, for the modern "
                   "group protocols; prints its kraft bootstrap.servers")
@dir_option
def cluster_up(zk_servers: int, zk_port: int | None, brokers: int, broker_port: int | None, no_broker: bool,
               purge: bool, tls: bool, kraft: bool, base_dir: Path | None) -> None:
    """Start the cluster and return; prints zookeeper.connect and bootstrap.servers (and, with --kraft, the KRaft
    broker's as `kraft bootstrap.servers=`)."""
    if tls:
        extras.require("tls", "zkconsumer cluster up --tls")
    if kraft:
        extras.require("lab", "zkconsumer cluster up --kraft")
    c = EmbeddedCluster.up(base_dir or default_dir(), zk_servers, zk_port, broker_port,
                           brokers=0 if no_broker else brokers, purge=purge, tls=tls, kraft=1 if kraft else 0)
    click.echo(f"zookeeper.connect={c.zookeeper_connect}")
    for key, value in (c.tls_settings or {}).items():
        click.echo(f"TLS: {key}={value}")
    if c.bootstrap_servers:
        click.echo(f"bootstrap.servers={c.bootstrap_servers}")
    if c.kraft_bootstrap_servers:
        click.echo(f"kraft bootstrap.servers={c.kraft_bootstrap_servers}")
    click.echo(f"state: {c.base_dir / 'state.json'}")


@cluster.command("status")
@dir_option
def cluster_status(base_dir: Path | None) -> None:
    """Each ZooKeeper server's mode, each broker (id, address, registered), the controller and the topics; each
    KRaft broker (id, address, alive, Kafka version, roles)."""
    c = EmbeddedCluster.load(base_dir or default_dir())
    st = c.status()
    click.echo(f"zookeeper.connect={st.zookeeper_connect}")
    for key, value in (c.tls_settings or {}).items():
        click.echo(f"TLS: {key}={value}")
    for server_id, port, mode in st.modes:
        click.echo(f"zookeeper server {server_id} 127.0.0.1:{port} {mode or 'down'}")
    if st.bootstrap_servers:
        click.echo(f"bootstrap.servers={st.bootstrap_servers}")
    for b in st.brokers:
        state = "up" if b.alive and b.registered else "up, not registered" if b.alive else "down"
        role = " controller" if b.broker_id == st.controller else ""
        click.echo(f"kafka broker {b.broker_id} {b.address} {state}{role}")
    click.echo("topics: " + (", ".join(st.topics) if st.topics else "(none)"))
    if st.kraft_bootstrap_servers:
        click.echo(f"kraft bootstrap.servers={st.kraft_bootstrap_servers}")
    for k in st.kraft:
        click.echo(f"kraft broker {k.node_id} {k.address} {'up' if k.alive else 'down'} "
                   f"(mode KRaft, Kafka {k.version or 'unknown'}, {k.roles.replace(',', '+')})")


@cluster.command("down")
@click.option("--purge", is_flag=True, help="also delete ZooKeeper's data and the brokers' logs")
@dir_option
def cluster_down(purge: bool, base_dir: Path | None) -> None:
    """Stop every process the cluster started (by pid); the data stays for the next `up` unless --purge."""
    stopped = EmbeddedCluster.load(base_dir or default_dir()).down(purge=purge)
    click.echo("stopped " + (", ".join(stopped) if stopped else "nothing (it was not running)")
               + ("; data deleted" if purge else ""))


# --- topics and ZooKeeper inspection ------------------------------------------------------------------

@main.group()
def topic() -> None:
    """Topic administration."""


@topic.command("create")
@click.argument("name")
@click.option("--partitions", type=click.IntRange(1, 10000), required=True)
@click.option("--replication-factor", type=click.IntRange(1, 9), default=1, show_default=True)
@zookeeper_option
@bootstrap_option
def topic_create(name: str, partitions: int, replication_factor: int, zookeeper: str | None,
                 bootstrap: str | None) -> None:
    """Create a topic through the brokers; returns once the controller has written it to ZooKeeper."""
    with ZkClient(resolve_zookeeper(zookeeper), log_id="cli") as zk:
        create_topic(zk, name, partitions, bootstrap, replication_factor)
    click.echo(f"created topic {name} with {partitions} partitions")


@topic.command("alter")
@click.argument("name")
@click.option("--partitions", type=click.IntRange(1, 10000), required=True, help="the new total")
@zookeeper_option
@bootstrap_option
def topic_alter(name: str, partitions: int, zookeeper: str | None, bootstrap: str | None) -> None:
    """Add partitions to a topic (CreatePartitions); consumers' topic watches fire."""
    with ZkClient(resolve_zookeeper(zookeeper), log_id="cli") as zk:
        alter_partitions(zk, name, partitions, bootstrap)
    click.echo(f"topic {name} now has {partitions} partitions")


@topic.command("list")
@zookeeper_option
def topic_list(zookeeper: str | None) -> None:
    """Every topic in ZooKeeper, one per line."""
    with ZkClient(resolve_zookeeper(zookeeper), log_id="cli") as zk:
        for name in list_topics(zk):
            click.echo(name)


@topic.command("describe")
@click.argument("names", nargs=-1)
@zookeeper_option
def topic_describe(names: tuple[str, ...], zookeeper: str | None) -> None:
    """Partitions, leaders, replicas and ISR of NAMES (default: every topic), as kafka-topics --describe."""
    with ZkClient(resolve_zookeeper(zookeeper), log_id="cli") as zk:
        for name in names or list_topics(zk):
            infos = describe_topic(zk, name)
            if not infos:
                raise click.ClickException(f"topic {name!r} does not exist")
            rf = len(infos[0].replicas)
            click.echo(f"Topic: {name}\tPartitionCount: {len(infos)}\tReplicationFactor: {rf}")
            for p in infos:
                leader = "none" if p.leader is None else p.leader
                click.echo(f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {leader}\t"
                           f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")


@main.group()
def zk() -> None:
    """ZooKeeper inspection."""


@zk.command("tree")
@click.argument("path", default="/")
@zookeeper_option
def zk_tree(path: str, zookeeper: str | None) -> None:
    """Dump PATH and everything below it; ephemeral nodes show their session."""
    if not path.startswith("/"):
        raise click.BadParameter(f"{path!r} must start with '/'", param_hint="PATH")
    with ZkClient(resolve_zookeeper(zookeeper), log_id="cli") as client:
        nodes = list(walk(client, path))
    if not nodes:
        raise click.ClickException(f"{path} does not exist")
    for node in nodes:
        click.echo(node.format())


for command in COMMANDS:
    main.add_command(command)

