"""CLI commands that drive the consumer: demo (and, as they land, groups, consume, produce)."""

from __future__ import annotations

from collections.abc import Callable

import click


def register(main: click.Group, zookeeper_option: Callable, resolve_zookeeper: Callable[[str | None], str]) -> None:
    @main.command("demo")
    def demo() -> None:
        """Start the embedded cluster, create a topic, show ZooKeeper, stop everything."""
        from zkconsumer.demo import run_demo

        run_demo(click.echo)
