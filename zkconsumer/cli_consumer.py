"""CLI commands that drive the consumer: demo, groups list/describe, consume, produce. They parse and call:
the console consumer is `zkconsumer/console.py`, the producer `zkconsumer/console_producer.py`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from zkconsumer import extras
from zkconsumer.admin import bootstrap_from_zookeeper
from zkconsumer.cli_options import bootstrap_option, resolve_zookeeper, zookeeper_option
from zkconsumer.zookeeper.client import ZkClient

# The main job's group sizes (zkconsumer/lab/main_job.py's DEFAULT_VALUES, where they are explained), for --help only:
# importing the lab here would make every command need the lab extra. tests/test_extras.py keeps the two equal.
MAIN_JOB_VALUES = "1,4,16,32,64"

FORMATS = {
    "value": "{value}",
    "kv": "{key}\t{value}",
    "full": "{topic}\t{partition}\t{offset}\t{key}\t{value}",
    "offsets": "{topic} {partition} {offset}",
}


def _shown(data: object) -> object:
    return "null" if data is None else data


def _parse_properties(pairs: tuple[str, ...]) -> dict[str, str]:
    props = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--consumer-property")
        props[key.strip()] = value.strip()
    return props


@click.command("demo")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("results/demo"),
              show_default=True, help="runs under OUT/runs, the report under OUT/report")
@click.option("--values", default=None, show_default=MAIN_JOB_VALUES, metavar="N1,N2,...",
              help="group sizes of the herd scenario")
@click.option("--members", "process_mode", type=click.Choice(["threads", "processes"]), default="threads",
              show_default=True, help="members as rebalance-only threads, or full consumers in processes")
@click.option("--predict-to", type=click.IntRange(1), default=1024, show_default=True,
              help="the scale simulation predicts joins up to this group size")
@click.option("--consumer", "consumer_tour", is_flag=True,
              help="instead: produce and consume with a two-member group and show ZooKeeper (a quick tour)")
def demo(out_dir: Path, values: str | None, process_mode: str, predict_to: int, consumer_tour: bool) -> None:
    """The main job: herd on both designs against the embedded servers, Spark analysis, HTML report."""
    if consumer_tour:
        from zkconsumer.demo import run_demo

        run_demo(click.echo)
        return
    run_main_job = extras.load("zkconsumer.lab.main_job:run_main_job", "lab", "zkconsumer demo",
                               "`zkconsumer demo --consumer` needs none")
    sizes = {} if values is None else {"values": values}
    run_main_job(out_dir, **sizes, process_mode=process_mode, predict_to=predict_to)


@click.group()
def groups() -> None:
    """Inspect ZooKeeper-based consumer groups (like ConsumerOffsetChecker)."""


@groups.command("list")
@zookeeper_option
def groups_list(zookeeper: str | None) -> None:
    """Every group under /consumers."""
    from zkconsumer.groups import list_groups

    with ZkClient(resolve_zookeeper(zookeeper), log_id="cli") as zk:
        for group in list_groups(zk):
            click.echo(group)


@groups.command("describe")
@zookeeper_option
@click.option("--group", required=True)
def groups_describe(zookeeper: str | None, group: str) -> None:
    """Group Topic Pid Offset logSize Lag Owner, one line per partition."""
    from zkconsumer.groups import describe_group
    from zkconsumer.logsize import log_end_lookup

    with ZkClient(resolve_zookeeper(zookeeper), log_id="cli") as zk:
        rows = describe_group(zk, group, log_end_lookup(zk))
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner"):
        table.add_column(column, no_wrap=True)

    def show(value: object) -> str:
        return "unknown" if value is None else str(value)

    for row in rows:
        table.add_row(row.group, row.topic, str(row.partition), show(row.offset), show(row.log_size),
                      show(row.lag), row.owner or "none")
    Console(width=200, no_color=True, soft_wrap=True).print(table)


@click.command("consume")
@zookeeper_option
@click.option("--group", default=None, help="group.id (default: a fresh console-consumer-<n> group)")
@click.option("--topic", default=None, help="topic to consume")
@click.option("--whitelist", default=None, help="regex of topics to consume (instead of --topic)")
@click.option("--blacklist", default=None, help="regex of topics to skip (instead of --topic)")
@click.option("--streams", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--from-beginning", is_flag=True, help="start at the earliest offset when the group has none")
@click.option("--max-messages", type=click.IntRange(1), default=None)
@click.option("--timeout-ms", type=int, default=None, help="exit after this long without a message")
@click.option("--consumer-id", default=None, help="consumer.id (default: generated)")
@click.option("--throttle-ms", type=click.IntRange(0), default=0, help="sleep after each message (simulated work)")
@click.option("--consumer-config", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None)
@click.option("--consumer-property", "properties", multiple=True, metavar="KEY=VALUE")
@click.option("--events", "events_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="append the member's events (JSON lines) to this file")
@click.option("--format", "fmt", default="value", show_default=True,
              help=f"one of {', '.join(FORMATS)} or a template like '{{partition}}:{{offset}} {{value}}'")
def consume(zookeeper: str | None, group: str | None, topic: str | None, whitelist: str | None,
            blacklist: str | None, streams: int, from_beginning: bool, max_messages: int | None,
            timeout_ms: int | None, consumer_id: str | None, throttle_ms: int, consumer_config: Path | None,
            properties: tuple[str, ...], fmt: str, events_path: Path | None) -> None:
    """Consume through a ZooKeeper-balanced group, like kafka-console-consumer --zookeeper."""
    from zkconsumer import console

    if sum(x is not None for x in (topic, whitelist, blacklist)) != 1:
        raise click.UsageError("give exactly one of --topic, --whitelist, --blacklist")
    config = console.console_config(consumer_config, zookeeper, resolve_zookeeper, group=group,
                                    from_beginning=from_beginning, timeout_ms=timeout_ms, consumer_id=consumer_id,
                                    overrides=_parse_properties(properties))
    template = FORMATS.get(fmt, fmt)

    def emit(message) -> None:
        # Kafka's console consumer prints a null key or value as "null".
        click.echo(template.format(topic=message.topic, partition=message.partition, offset=message.offset,
                                   key=_shown(message.key), value=_shown(message.value)))
        sys.stdout.flush()

    topics = topic if topic is not None else console.topic_filter(whitelist, blacklist)
    count = console.consume(config, topics, streams, emit, max_messages, throttle_ms, events_path)
    click.echo(f"Processed a total of {count} messages", err=True)


@click.command("produce")
@zookeeper_option
@bootstrap_option
@click.option("--topic", required=True)
@click.option("--num-messages", type=click.IntRange(1), default=None, help="generate N messages instead of stdin")
@click.option("--key-prefix", default="key", show_default=True, help="generated keys are <prefix>-<i mod keys>")
@click.option("--keys", type=click.IntRange(1), default=100, show_default=True)
def produce(zookeeper: str | None, bootstrap: str | None, topic: str, num_messages: int | None, key_prefix: str,
            keys: int) -> None:
    """Produce test data: one message per stdin line (`key<TAB>value` sets a key), or --num-messages N."""
    from zkconsumer.console_producer import generated_lines, produce

    if bootstrap is None:
        with ZkClient(resolve_zookeeper(zookeeper), log_id="cli") as zk:
            bootstrap = bootstrap_from_zookeeper(zk)
    lines = (generated_lines(num_messages, key_prefix, keys) if num_messages is not None
             else (line.rstrip("\n") for line in sys.stdin))
    started = time.monotonic()
    produced = produce(bootstrap, topic, lines)
    if produced.failed:
        raise click.ClickException(f"{len(produced.failed)} of {produced.sent} messages to {topic} were not "
                                   f"written: {produced.failed[0]}")
    click.echo(f"produced {produced.sent} messages to {topic} in {time.monotonic() - started:.1f} s", err=True)


COMMANDS = (demo, groups, consume, produce)
