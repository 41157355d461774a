"""Consume throughput: our ConsumerFetcherManager + KafkaStream(s) versus kafka-python's KafkaConsumer.

Starts its own embedded ZooKeeper and Apache Kafka broker (`EmbeddedCluster.up` in a temporary directory, stopped
at the end, on Ctrl-C or SIGTERM too), produces the data once, then alternates the two consumers over the same
topic (same process, one consuming thread per stream, all partitions from offset 0) and reports the median
messages/s of each and their ratio. kafka-python runs with its defaults (check_crcs=True, like our iterator, which
always validates batch CRCs); a third, informational row turns its CRC check off.

    .venv/bin/python benchmarks/bench_fetch.py                   # 200,000 x 100 B, 8 partitions, 1 stream
    .venv/bin/python benchmarks/bench_fetch.py --streams 8 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from rich.console import Console
from rich.table import Table

from fetcher_manager.broker import Broker
from fetcher_manager.manager import ConsumerFetcherManager
from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.settings import FetchSettings
from fetcher_manager.stream import ChunkQueue, ConsumerTimeoutError, KafkaStream
from zkconsumer.admin import create_topic
from zkconsumer.embedded import jvm
from zkconsumer.embedded.cluster import EmbeddedCluster
from zkconsumer.zookeeper.client import ZkClient

TOPIC = "bench-fetch"
STALL_S = 30.0  # give up if no message arrives for this long (a broken run, not a slow one)


def produce(cluster: EmbeddedCluster, messages: int, size: int, partitions: int) -> float:
    bootstrap = cluster.bootstrap_servers
    # Through the admin module: it returns once the controller has elected every partition's leader, so neither
    # the producer nor a fetcher meets a partition without one.
    with ZkClient(cluster.zookeeper_connect, log_id="bench") as zk:
        create_topic(zk, TOPIC, partitions, bootstrap)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=10, batch_size=65536)
    value = os.urandom(size // 2).hex().encode()[:size]
    started = time.perf_counter()
    for i in range(messages):
        producer.send(TOPIC, key=b"%d" % i, value=value, partition=i % partitions)
    producer.flush()
    producer.close()
    return time.perf_counter() - started


def run_ours(broker: Broker, messages: int, partitions: int, streams: int) -> float:
    settings = FetchSettings(client_id="bench", consumer_id="bench_ours", auto_offset_reset="smallest")
    queues = [ChunkQueue(2) for _ in range(streams)]  # queued.max.message.chunks default
    kafka_streams = [KafkaStream(q, consumer_timeout_ms=int(STALL_S * 1000)) for q in queues]
    infos = [PartitionTopicInfo(TOPIC, p, queues[p % streams], -1, -1) for p in range(partitions)]
    counts = [0] * streams
    share = [0] * streams  # message i went to partition i % partitions; partition p feeds stream p % streams
    for p in range(partitions):
        share[p % streams] += messages // partitions + (1 if p < messages % partitions else 0)

    def drain(index: int) -> None:
        it = iter(kafka_streams[index])
        target, n = share[index], 0
        try:
            while n < target:
                next(it)
                n += 1
        except ConsumerTimeoutError:
            pass
        counts[index] = n

    manager = ConsumerFetcherManager(settings, lambda: [broker])
    started = time.perf_counter()
    manager.start_connections(infos)
    try:
        if streams == 1:
            drain(0)
        else:
            threads = [threading.Thread(target=drain, args=(i,), name=f"bench-stream-{i}") for i in range(streams)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        elapsed = time.perf_counter() - started
    finally:
        manager.shutdown()
    if sum(counts) != messages:
        raise SystemExit(f"ours consumed {sum(counts)} of {messages} messages")
    return messages / elapsed


def run_kafka_python(bootstrap: str, messages: int, partitions: int, check_crcs: bool = True) -> float:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, check_crcs=check_crcs,
                             consumer_timeout_ms=int(STALL_S * 1000))
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    started = time.perf_counter()
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    count = 0
    for _ in consumer:
        count += 1
        if count >= messages:
            break
    elapsed = time.perf_counter() - started
    consumer.close()
    if count != messages:
        raise SystemExit(f"kafka-python consumed {count} of {messages} messages")
    return messages / elapsed


def compare(cluster: EmbeddedCluster, args: argparse.Namespace, console: Console) -> dict[str, list[float]]:
    """Produce once, then run every contender `args.repeat` times, interleaved so drift hits everyone alike."""
    produce_s = produce(cluster, args.messages, args.size, args.partitions)
    kafka_version = jvm.classpath(jvm.KAFKA_BROKER).version_of("kafka_2.13")
    console.print(f"produced {args.messages:,} x {args.size} B to {args.partitions} partitions in {produce_s:.1f} s; "
                  f"Apache Kafka {kafka_version}; CRC-32C: crc32c (C) for both; {os.cpu_count()} cores")
    kafka = cluster.brokers[0]
    broker = Broker(kafka.broker_id, "127.0.0.1", kafka.port)
    bootstrap = kafka.bootstrap
    contenders: dict[str, Callable[[], float]] = {
        f"ours ({args.streams} stream{'s' if args.streams > 1 else ''})":
            lambda: run_ours(broker, args.messages, args.partitions, args.streams),
        "kafka-python (defaults)": lambda: run_kafka_python(bootstrap, args.messages, args.partitions),
    }
    if not args.no_crc_row:
        contenders["kafka-python (check_crcs=False)"] = lambda: run_kafka_python(
            bootstrap, args.messages, args.partitions, check_crcs=False)
    results: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(args.repeat):
        for name, run in contenders.items():
            results[name].append(run())
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes per message")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--streams", type=int, default=1, help="KafkaStreams (one consuming thread each)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-crc-row", action="store_true", help="skip kafka-python with check_crcs=False")
    args = parser.parse_args(argv)
    console = Console()
    # The servers run detached, so neither Ctrl-C nor a SIGTERM to this process reaches them: both must end in the
    # finally below, which stops them. SIGINT already raises KeyboardInterrupt; make SIGTERM raise SystemExit.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

    with tempfile.TemporaryDirectory(prefix="bench-fetch-") as tmp:
        console.print("starting ZooKeeper and Apache Kafka ...")
        cluster = EmbeddedCluster.up(Path(tmp), zk_servers=1, brokers=1)
        try:
            results = compare(cluster, args, console)
        finally:
            cluster.down(purge=True)

    table = Table(title=f"consume {args.messages:,} messages, median of {args.repeat}")
    table.add_column("consumer")
    table.add_column("runs (msg/s)")
    table.add_column("median msg/s", justify="right")
    medians = {name: statistics.median(runs) for name, runs in results.items()}
    for name, runs in results.items():
        table.add_row(name, ", ".join(f"{r:,.0f}" for r in runs), f"{medians[name]:,.0f}")
    console.print(table)
    ours_name, kp_name = list(results)[:2]
    console.print(f"ratio ours / kafka-python (defaults): [bold]{medians[ours_name] / medians[kp_name]:.2f}x[/bold]")
    if not args.no_crc_row:
        nocrc = medians["kafka-python (check_crcs=False)"]
        console.print(f"ratio ours / kafka-python (check_crcs=False): {medians[ours_name] / nocrc:.2f}x")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # the servers are stopped by then; a traceback would only hide that
        print("interrupted: the benchmark's ZooKeeper and Kafka were stopped", file=sys.stderr)
        sys.exit(130)
