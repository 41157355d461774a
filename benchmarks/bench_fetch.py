"""Consume throughput on a real broker: the original Kafka 0.8.2.2 consumer, ours, and kafka-python.

Starts its own embedded ZooKeeper and Apache Kafka broker (`EmbeddedCluster.up` in a temporary directory), produces
the data once, then runs the contenders in rounds, alternating, each run in a fresh process (and a fresh group):

* original: 0.8.2.2's `ZookeeperConsumerConnector` (`Consumer.createJavaConsumerConnector`), K streams, in a JVM
  (`zkconsumer/interop/java/zkconsumer/interop/OriginalFetchBench.java`, built by `zkconsumer.interop.original`);
* ours: this project's `ZookeeperConsumerConnector`, K streams (registration and rebalance through ZooKeeper too);
* ours, fetcher manager only: `ConsumerFetcherManager` + `KafkaStream`s, partitions handed over directly;
* kafka-python: `KafkaConsumer` with `assign()` (no streams: one thread), check_crcs on (its default).

Scenarios: 1, 2 and 4 streams in one process, and a 2-member group (two processes each; kafka-python's two split
the partitions by assign()). Per run: the steady rate (messages / first to last message, so start-up and rebalance
are left out), end to end (spawning the process to the last message), and CPU seconds (the process's user + system
time from wait4, whole life; and the part between first and last message, as the process itself measured it).
The table shows medians, and ratios to the original. docs/benchmarks.md explains the method and the results.

    .venv/bin/python benchmarks/bench_fetch.py                         # make bench: 500,000 x 100 B, 3 rounds
    .venv/bin/python benchmarks/bench_fetch.py --scenarios 1 --repeat 7 --json results/fetch.json
    .venv/bin/python benchmarks/bench_fetch.py --before f362671         # plus "ours (before)", fetcher_manager/ then
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from fetch_runs import RunError, Target, Trial, contender_argv, run_group, run_single, stop_all
from kafka import KafkaProducer
from rich.console import Console
from rich.table import Table

from fetcher_manager.broker import Broker
from fetcher_manager.kafka_wire import KafkaWire
from fetcher_manager.topic_partition import TopicPartition
from zkconsumer.admin import create_topic
from zkconsumer.embedded import jvm
from zkconsumer.embedded.cluster import EmbeddedCluster
from zkconsumer.embedded.process import EmbeddedError, java_executable
from zkconsumer.errors import UserError
from zkconsumer.interop import original
from zkconsumer.zookeeper.client import ZkClient

TOPIC = "bench-fetch"
ORIGINAL, OURS, FETCHER, KAFKA_PYTHON = "original 0.8.2.2", "ours", "ours, fetchers only", "kafka-python"
BEFORE = "ours (before)"  # with --before REV: the connector running fetcher_manager/ as of REV
IMPLS = {ORIGINAL: "original", OURS: "connector", FETCHER: "fetcher", KAFKA_PYTHON: "kafka-python"}
# name -> (streams per process, processes, contenders); kafka-python has no streams, so it sits out 2 and 4.
SCENARIOS = {
    "1": ("1 stream", 1, 1, (ORIGINAL, OURS, FETCHER, KAFKA_PYTHON)),
    "2": ("2 streams", 2, 1, (ORIGINAL, OURS)),
    "4": ("4 streams", 4, 1, (ORIGINAL, OURS)),
    "group": ("2 members", 1, 2, (ORIGINAL, OURS, KAFKA_PYTHON)),
}


def produce(cluster: EmbeddedCluster, messages: int, size: int, partitions: int) -> float:
    bootstrap = cluster.bootstrap_servers
    # Through the admin module: it returns once the controller has elected every partition's leader, so neither
    # the producer nor a fetcher meets a partition without one.
    with ZkClient(cluster.zookeeper_connect, log_id="bench") as zk:
        create_topic(zk, TOPIC, partitions, bootstrap)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=10, batch_size=65536, acks=1)
    value = os.urandom(size // 2 + 1).hex().encode()[:size]
    started = time.perf_counter()
    send = producer.send
    for i in range(messages):
        send(TOPIC, key=b"%d" % i, value=value, partition=i % partitions)
    producer.flush()
    producer.close()
    return time.perf_counter() - started


def partition_sizes(broker: Broker, partitions: int) -> dict[int, int]:
    wire = KafkaWire("bench")
    try:
        return {p: wire.offset_for(broker, TopicPartition(TOPIC, p), earliest=False) for p in range(partitions)}
    finally:
        wire.close()


def run_rounds(target: Target, args: argparse.Namespace, zk: ZkClient, console: Console) -> list[Trial]:
    """Every (scenario, contender) `args.repeat` times; within a round the contenders take turns, in an order that
    rotates from round to round, so that drift in the machine's load hits all of them alike."""
    trials: list[Trial] = []
    for round_no in range(args.repeat):
        for key in args.scenarios:
            label, streams, members, contenders = SCENARIOS[key]
            if args.before:
                contenders = tuple(c for o in contenders for c in ((o, BEFORE) if o == OURS else (o,)))
            contenders = [c for c in contenders if c in args.contenders or (c == BEFORE and args.before)]
            shift = round_no % len(contenders) if contenders else 0
            for contender in contenders[shift:] + contenders[:shift]:
                group = f"bench-{key}-{IMPLS.get(contender, 'before')}-{round_no}-{uuid.uuid4().hex[:6]}"
                impl = IMPLS[OURS if contender == BEFORE else contender]
                argv_for = contender_argv(target, impl, streams, args.before_path if contender == BEFORE else None)
                if members == 1:
                    trial = run_single(target, label, contender, argv_for, group)
                else:
                    uses_zk = contender in (ORIGINAL, OURS, BEFORE)
                    trial = run_group(target, label, contender, argv_for, group, members, zk if uses_zk else None)
                trial.load_1min = os.getloadavg()[0]
                expected = sum(target.sizes.values())
                if trial.messages != expected:
                    raise RunError(f"{contender} ({label}) was timed over {trial.messages} of {expected} messages")
                trials.append(trial)
                console.print(f"  round {round_no + 1}/{args.repeat} {label:>20}  {contender:<27} "
                              f"{trial.steady_rate:>10,.0f} msg/s steady  {trial.end_to_end_s:5.2f} s e2e  "
                              f"{trial.cpu_s:5.2f} s CPU  load {trial.load_1min:.1f}"
                              + (f"  ({trial.repeated} handed out twice)" if trial.repeated else ""), highlight=False)
    return trials


def summarize(trials: list[Trial]) -> list[dict]:
    rows: dict[tuple[str, str], list[Trial]] = {}
    for trial in trials:
        rows.setdefault((trial.scenario, trial.contender), []).append(trial)
    out = []
    for (scenario, contender), runs in rows.items():
        out.append({"scenario": scenario, "contender": contender, "runs": len(runs),
                    "steady_msg_s": statistics.median(t.steady_rate for t in runs),
                    "steady_msg_s_runs": [round(t.steady_rate) for t in runs],
                    "steady_msg_s_range": (min(t.steady_rate for t in runs), max(t.steady_rate for t in runs)),
                    "second_half_msg_s": statistics.median(t.second_half_rate for t in runs),
                    "end_to_end_s": statistics.median(t.end_to_end_s for t in runs),
                    "cpu_s": statistics.median(t.cpu_s for t in runs),
                    "steady_cpu_s": statistics.median(t.steady_cpu_s for t in runs),
                    "max_rss_mb": statistics.median(max(p.max_rss_mb for p in t.processes) for t in runs),
                    "broker_cpu_s": statistics.median(t.broker_cpu_s for t in runs),
                    "repeated": sum(t.repeated for t in runs)})
    for row in out:
        base = next((r for r in out if r["scenario"] == row["scenario"] and r["contender"] == ORIGINAL), None)
        if base is not None:
            row["rate_vs_original"] = row["steady_msg_s"] / base["steady_msg_s"]
            row["second_half_vs_original"] = row["second_half_msg_s"] / base["second_half_msg_s"]
            row["cpu_vs_original"] = row["cpu_s"] / base["cpu_s"]
            row["steady_cpu_vs_original"] = row["steady_cpu_s"] / base["steady_cpu_s"]
    return out


def print_table(rows: list[dict], args: argparse.Namespace, console: Console) -> None:
    table = Table(title=f"consume {args.messages:,} x {args.size} B from {args.partitions} partitions, "
                        f"median of {args.repeat}")
    left = ("scenario", "consumer")
    for name in (*left, "steady msg/s", "min-max", "x orig.", "2nd half msg/s", "x orig.", "end to end s", "CPU s",
                 "x orig.", "steady CPU s", "x orig.", "max RSS MiB", "broker CPU s"):
        justify = "left" if name in left else "right"
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        def ratio(key: str, row: dict = row) -> str:
            return f"{row[key]:.2f}" if key in row else "-"
        low, high = row["steady_msg_s_range"]
        table.add_row(row["scenario"], row["contender"], f"{row['steady_msg_s']:,.0f}",
                      f"{low / 1000:,.0f}k-{high / 1000:,.0f}k", ratio("rate_vs_original"),
                      f"{row['second_half_msg_s']:,.0f}", ratio("second_half_vs_original"),
                      f"{row['end_to_end_s']:.2f}", f"{row['cpu_s']:.2f}", ratio("cpu_vs_original"),
                      f"{row['steady_cpu_s']:.2f}", ratio("steady_cpu_vs_original"), f"{row['max_rss_mb']:.0f}",
                      f"{row['broker_cpu_s']:.2f}")
    console.print(table)


def export_fetcher_manager(rev: str, into: Path) -> Path:
    """fetcher_manager/ as of `rev`, unpacked under `into`: put first on PYTHONPATH, it shadows the working tree's."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev, "fetcher_manager"], cwd=Path(__file__).resolve().parent.parent,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def java_version() -> str:
    done = subprocess.run([java_executable(), "-version"], capture_output=True, text=True, check=False)
    return (done.stderr.splitlines() or ["?"])[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes per message")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3, help="rounds (medians are over these)")
    parser.add_argument("--scenarios", type=lambda s: s.split(","), default=list(SCENARIOS),
                        help=f"comma-separated, of {','.join(SCENARIOS)} (default: all)")
    parser.add_argument("--contenders", type=lambda s: [c.strip() for c in s.split(",")], default=list(IMPLS),
                        help=f"comma-separated, of: {', '.join(IMPLS)} (default: all)")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="a 0.8 consumer setting for the original and ours (repeatable), e.g. "
                             "fetch.message.max.bytes=4194304; kafka-python and the fetcher-manager row keep theirs")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a run may take before it is killed")
    parser.add_argument("--json", type=Path, help="write every run and the medians here")
    parser.add_argument("--before", metavar="REV",
                        help="also run the connector with fetcher_manager/ as of this git revision (row 'ours "
                             "(before)', next to 'ours' in every round), to show a change's effect in one run")
    args = parser.parse_args(argv)
    if unknown := [s for s in args.scenarios if s not in SCENARIOS] + [c for c in args.contenders if c not in IMPLS]:
        parser.error(f"unknown scenario or contender: {unknown}")
    console = Console(width=None if sys.stdout.isatty() else 200)
    # Neither Ctrl-C nor a SIGTERM to this process reaches the servers or the consumers (their own sessions): both
    # must end in the finally blocks below. SIGINT already raises KeyboardInterrupt; make SIGTERM raise SystemExit.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    command = shlex.join(["benchmarks/bench_fetch.py", *(argv if argv is not None else sys.argv[1:])])
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-fetch-") as tmp:
        args.before_path = export_fetcher_manager(args.before, Path(tmp) / "before") if args.before else None
        try:
            classpath = str(original.build()) if ORIGINAL in args.contenders else ""
        except EmbeddedError as exc:  # no java or javac, or the sources do not compile: say so in one line
            sys.exit(f"error: {exc}; --contenders {','.join(c for c in args.contenders if c != ORIGINAL)} runs "
                     "the others")
        console.print("starting ZooKeeper and Apache Kafka ...")
        cluster = EmbeddedCluster.up(Path(tmp) / "cluster", zk_servers=1, brokers=1)
        try:
            produce_s = produce(cluster, args.messages, args.size, args.partitions)
            kafka = cluster.brokers[0]
            broker = Broker(kafka.broker_id, "127.0.0.1", kafka.port)
            target = Target(cluster.zookeeper_connect, kafka.bootstrap, f"{broker.id}:{broker.host}:{broker.port}",
                            TOPIC, partition_sizes(broker, args.partitions), Path(tmp), classpath, args.timeout,
                            kafka.process.pid, tuple(args.property))
            console.print(f"produced {args.messages:,} x {args.size} B to {args.partitions} partitions in "
                          f"{produce_s:.1f} s; Apache Kafka {jvm.classpath(jvm.KAFKA_BROKER).version_of('kafka_2.13')}"
                          f"; {os.cpu_count()} cores; load average {load_before[0]:.1f}")
            with ZkClient(cluster.zookeeper_connect, log_id="bench") as zk:
                trials = run_rounds(target, args, zk, console)
        finally:
            stop_all()
            cluster.down(purge=True)
    load_after = os.getloadavg()
    rows = summarize(trials)
    print_table(rows, args, console)
    loads = [t.load_1min for t in trials]
    console.print(f"load average (1 min) on {os.cpu_count()} cores: {load_before[0]:.1f} before, during the runs "
                  f"median {statistics.median(loads):.1f} (max {max(loads):.1f}), {load_after[0]:.1f} after",
                  highlight=False)
    console.print(f"reproduce: .venv/bin/python {command}", highlight=False)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "command": command, "messages": args.messages, "size": args.size, "partitions": args.partitions,
            "repeat": args.repeat, "cores": os.cpu_count(), "load_before": load_before, "load_after": load_after,
            "python": platform.python_version(), "java": java_version(), "properties": args.property, "summary": rows,
            "runs": [t.as_dict() for t in trials]}, indent=1))
        console.print(f"wrote {args.json}")


if __name__ == "__main__":
    try:
        main()
    except UserError as exc:  # no Java, Maven or free port: one line, as the CLI says it
        sys.exit(f"error: {exc}")
    except KeyboardInterrupt:  # everything is stopped by then; a traceback would only hide that
        print("interrupted: the benchmark's consumers, ZooKeeper and Kafka were stopped", file=sys.stderr)
        sys.exit(130)
