"""One consumer process of benchmarks/bench_fetch.py: consume exactly N messages, print timings as JSON lines.

The Python counterpart of `OriginalFetchBench.java`, with the same protocol, so every contender is measured the same
way, each in a process of its own:

    fetch_child.py connector    --zookeeper ZK --group G --consumer-id C --topic T --streams K (--messages N|--wait-go)
                                [--property KEY=VALUE ...]
    fetch_child.py fetcher      --broker ID:HOST:PORT --topic T --partitions 0,1,... --streams K --messages N
    fetch_child.py kafka-python --bootstrap HOST:PORT --topic T --partitions 0,1,... (--messages N | --wait-go)

`connector` is this project's `ZookeeperConsumerConnector` (registration, rebalance, leader finder, fetchers,
streams); `fetcher` only its `ConsumerFetcherManager` and `KafkaStream`s with the partitions handed over directly;
`kafka-python` a `KafkaConsumer` with `assign()`. stdout: {"event": "ready"} once consuming could start, then
{"event": "result", ...}. With --wait-go, iteration starts when "go N" arrives on stdin. End of stdin means the bench
is gone, and the process exits at once.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator

PROCESS_CLOCK = time.process_time  # CLOCK_PROCESS_CPUTIME_ID: every thread of this process, like the JVM's figure


def emit(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def exit_when_stdin_closes() -> None:
    """The bench holds our stdin; once it is gone (even killed by SIGKILL) nothing is left to report to."""

    def watch() -> None:
        sys.stdin.readline()
        os._exit(3)

    threading.Thread(target=watch, name="bench-stdin-watchdog", daemon=True).start()


def read_target(args: argparse.Namespace) -> int:
    if not args.wait_go:
        return args.messages
    line = sys.stdin.readline()
    if not line:
        os._exit(3)
    return int(line.removeprefix("go").strip())


def process_start() -> float:
    """This process's start as epoch seconds, from /proc (the same instant the JVM's ProcessHandle reports)."""
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rpartition(")")[2].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    return boot + start_ticks / os.sysconf("SC_CLK_TCK")


class Tally:
    """Counts messages over all streams (next() of itertools.count is atomic under the GIL: no lock per message)
    and notes the wall and CPU clocks at the first and the target-th message."""

    def __init__(self) -> None:
        self._count = itertools.count(1)
        self.target = 0
        self.consumed = 0
        self.first = self.half = self.last = self.cpu_first = self.cpu_half = self.cpu_last = -1.0
        self.key_bytes = self.value_bytes = 0
        self.done = threading.Event()
        self._lock = threading.Lock()

    def drain(self, messages: Iterator, stop: Callable[[], bool] = lambda: False) -> None:
        """Consume from one stream until it ends (or `stop`), doing per message what OriginalFetchBench does: read
        the key and the value and add up their lengths (the bench's messages have both), and count. The clocks
        are read only at the marks (first, half, target), so the loop costs an application's minimum.
        A failure ends the process at once, saying why: the bench would otherwise wait for its timeout."""
        count, mark = self._count, 1
        keys = values = 0
        try:
            for message in messages:
                keys += len(message.key)
                values += len(message.value)
                n = next(count)
                if n >= mark:
                    mark = self._note(n)
                    if n >= self.target and stop():
                        break
        except Exception as exc:
            emit(event="error", error=repr(exc))
            os._exit(5)
        with self._lock:
            self.key_bytes += keys
            self.value_bytes += values

    def _note(self, n: int) -> int:
        """Note the clocks if `n` is a mark; the next mark this thread must look out for."""
        half = max(1, self.target // 2)
        if n == 1:
            self.first, self.cpu_first = time.time(), PROCESS_CLOCK()
        if n == half:
            self.half, self.cpu_half = time.time(), PROCESS_CLOCK()
        if n == self.target:
            self.last, self.cpu_last = time.time(), PROCESS_CLOCK()
            self.done.set()
        return next((m for m in (half, self.target) if m > n), sys.maxsize)

    def result(self, streams: int) -> dict:
        self.consumed = next(self._count) - 1
        return {"event": "result", "messages": self.consumed, "target": self.target, "first": self.first,
                "half": self.half, "last": self.last, "cpu_half": self.cpu_half,
                "cpu_first": self.cpu_first, "cpu_last": self.cpu_last, "cpu_end": PROCESS_CLOCK(),
                "key_bytes": self.key_bytes, "value_bytes": self.value_bytes, "start": process_start(),
                "streams": streams}


def run_streams(tally: Tally, iterators: Iterable[Iterator]) -> list[threading.Thread]:
    threads = [threading.Thread(target=tally.drain, args=(it,), name=f"bench-stream-{i}")
               for i, it in enumerate(iterators)]
    for thread in threads:
        thread.start()
    return threads


def connector(args: argparse.Namespace, tally: Tally) -> int:
    from zkconsumer import ConsumerConfig, ZookeeperConsumerConnector

    config = ConsumerConfig.from_properties({
        "zookeeper.connect": args.zookeeper, "group.id": args.group, "consumer.id": args.consumer_id,
        "auto.offset.reset": "smallest", **dict(kv.split("=", 1) for kv in args.property)})
    with ZookeeperConsumerConnector(config) as conn:
        streams = conn.create_message_streams({args.topic: args.streams})[args.topic]
        emit(event="ready", t=time.time())
        tally.target = read_target(args)
        exit_when_stdin_closes()
        threads = run_streams(tally, (iter(s) for s in streams))
        tally.done.wait()
    # shutdown() (leaving the with) ended every stream with the shutdown sentinel, as 0.8's does
    for thread in threads:
        thread.join()
    return len(streams)


def fetcher(args: argparse.Namespace, tally: Tally) -> int:
    from fetcher_manager.broker import Broker
    from fetcher_manager.manager import ConsumerFetcherManager
    from fetcher_manager.partition_info import PartitionTopicInfo
    from fetcher_manager.settings import FetchSettings
    from fetcher_manager.stream import ChunkQueue, KafkaStream

    broker_id, host, port = args.broker.split(":")
    broker = Broker(int(broker_id), host, int(port))
    settings = FetchSettings(client_id="bench", consumer_id="bench_fetcher", auto_offset_reset="smallest")
    queues = [ChunkQueue(2, name=f"stream-{i}") for i in range(args.streams)]  # queued.max.message.chunks default
    streams = [KafkaStream(q, consumer_timeout_ms=-1) for q in queues]
    infos = [PartitionTopicInfo(args.topic, p, queues[i % args.streams], -1, -1)
             for i, p in enumerate(args.partitions)]
    manager = ConsumerFetcherManager(settings, lambda: [broker])
    emit(event="ready", t=time.time())
    tally.target = read_target(args)
    exit_when_stdin_closes()
    manager.start_connections(infos)
    try:
        threads = run_streams(tally, (iter(s) for s in streams))
        tally.done.wait()
    finally:
        manager.shutdown()
        for queue in queues:
            queue.put_shutdown_sentinel()
    for thread in threads:
        thread.join()
    return len(streams)


def kafka_python(args: argparse.Namespace, tally: Tally) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, enable_auto_commit=False)
    tps = [TopicPartition(args.topic, p) for p in args.partitions]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    emit(event="ready", t=time.time())
    tally.target = read_target(args)
    exit_when_stdin_closes()
    try:
        # One consumer, one thread: KafkaConsumer is not for sharing between threads.
        tally.drain(consumer, stop=tally.done.is_set)
    finally:
        consumer.close()
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("impl", choices=("connector", "fetcher", "kafka-python"))
    parser.add_argument("--topic", required=True)
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--messages", type=int, default=-1)
    parser.add_argument("--wait-go", action="store_true")
    parser.add_argument("--zookeeper")
    parser.add_argument("--group")
    parser.add_argument("--consumer-id")
    parser.add_argument("--broker", help="ID:HOST:PORT (fetcher)")
    parser.add_argument("--bootstrap", help="HOST:PORT (kafka-python)")
    parser.add_argument("--partitions", type=lambda s: [int(p) for p in s.split(",")], default=[])
    parser.add_argument("--property", action="append", default=[], help="KEY=VALUE, a 0.8 consumer setting")
    args = parser.parse_args(argv)
    if args.messages < 0 and not args.wait_go:
        parser.error("give --messages N or --wait-go")
    tally = Tally()
    run = {"connector": connector, "fetcher": fetcher, "kafka-python": kafka_python}[args.impl]
    streams = run(args, tally)
    emit(**tally.result(streams))
    return 0 if tally.consumed >= tally.target else 4  # more: a message handed out twice, which the bench reports


if __name__ == "__main__":
    sys.exit(main())
