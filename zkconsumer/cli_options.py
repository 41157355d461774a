"""The options and the resolver every command group shares (`zkconsumer/cli.py`, `cli_consumer.py`, the watch
view's `watch/cli.py`), in a module of their own so that each command module imports them and none imports
another command module."""

from __future__ import annotations

from pathlib import Path

import click

from zkconsumer.embedded.cluster import default_zookeeper


def resolve_zookeeper(zookeeper: str | None) -> str:
    """`--zookeeper`, or the running embedded cluster's connect string."""
    found = zookeeper or default_zookeeper()
    if not found:
        raise click.UsageError(
            "no --zookeeper given and no embedded cluster is running (start one with `zkconsumer cluster up`)"
        )
    return found


dir_option = click.option("--dir", "base_dir", type=click.Path(path_type=Path), default=None,
                          help="cluster directory (default .zkconsumer/cluster or $ZKCONSUMER_CLUSTER_DIR)")
zookeeper_option = click.option("--zookeeper", "zookeeper", default=None, metavar="HOST:PORT[/CHROOT]",
                                help="zookeeper.connect (default: the running embedded cluster)")
bootstrap_option = click.option("--bootstrap", default=None,
                                help="bootstrap.servers (default: the brokers in ZooKeeper)")
