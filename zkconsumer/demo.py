"""`make demo`: the main job on the embedded default, start to finish, leaving nothing running."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from zkconsumer.admin import create_topic
from zkconsumer.embedded.cluster import EmbeddedCluster
from zkconsumer.zookeeper.client import ZkClient
from zkconsumer.zookeeper.tree import walk


def run_demo(echo: Callable[[str], None] = print, base_dir: Path | None = None, topic: str = "demo",
             partitions: int = 4) -> None:
    with tempfile.TemporaryDirectory(prefix="zkconsumer-demo-") as tmp:
        echo("starting the embedded cluster (real ZooKeeper + tansu broker) ...")
        cluster = EmbeddedCluster.up(base_dir or Path(tmp) / "cluster")
        try:
            echo(f"zookeeper.connect={cluster.zookeeper_connect}")
            echo(f"bootstrap.servers={cluster.bootstrap_servers}")
            with ZkClient(cluster.zookeeper_connect, log_id="demo") as zk:
                create_topic(zk, topic, partitions)
                echo(f"created topic {topic} with {partitions} partitions")
                echo("ZooKeeper tree:")
                for node in walk(zk, "/"):
                    echo("  " + node.format())
        finally:
            stopped = cluster.down()
            echo("stopped " + ", ".join(stopped))
