"""The lag monitor of the 0.8 era against the embedded cluster: Kafka 0.8.2.2's own `kafka.tools.ConsumerOffsetChecker`
(resolved from the pom's `kafka-0.8.2` profile) and `zkconsumer groups describe` must report the same per-partition
Offset, logSize, Lag and Owner for a group this project's connector consumed from, and both must equal what the test
produced and committed.

What the 0.8.2.2 tool does (its ConsumerOffsetChecker.scala): partitions and leaders from ZooKeeper, the group's
offsets through an OffsetFetch v1 to the coordinator (found with a GroupCoordinator v0 request); a group that
committed to ZooKeeper has none there, so it reads `/consumers/<group>/offsets/...` itself. logSize is an OffsetRequest
v0 (ListOffsets v0, latest) to the leader at the `host`/`port` of its `/brokers/ids` registration. So this test also
proves that a Kafka 3.9 broker answers a 0.8.2.2 client's requests, with a ZooKeeper 3.4.6 client against the 3.9.5
server, on Java 17. The records are produced in batches of several records each: a log end taken from the base offset
of the last batch instead of its end would show up as a wrong logSize.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import unique
from kafka import KafkaProducer

from fetcher_manager.kafka_wire import KafkaWire
from fetcher_manager.records import iter_message_batches, scan_record_set
from fetcher_manager.topic_partition import TopicPartition
from zkconsumer.embedded import jvm
from zkconsumer.embedded.process import java_executable
from zkconsumer.zookeeper import layout

pytestmark = pytest.mark.slow

PER_PARTITION = 60
# Messages each partition's stream consumes before the commit: a little, most, and all (lag 0).
TAKE = {0: 1, 1: 37, 2: PER_PARTITION}
TOOL_TIMEOUT_S = 120  # the JVM starts in about 4 s here; this only bounds a hung tool
COLUMNS = ["Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner"]
# The tool logs through log4j 1; without a config it prints "no appenders" warnings instead of real ones.
_LOG4J = "log4j.rootLogger=WARN, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\n" \
         "log4j.appender.stderr.Target=System.err\nlog4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n" \
         "log4j.appender.stderr.layout.ConversionPattern=%p %m (%c)%n\n"


def produce_in_batches(bootstrap: str, topic: str) -> None:
    """Two rounds, each flushed: every partition's log is two batches of many records. The linger outlasts a
    round, so only the flush sends a batch."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5000, batch_size=1 << 16)
    try:
        for rounds in (range(PER_PARTITION // 2), range(PER_PARTITION // 2, PER_PARTITION)):
            for i in rounds:
                for partition in TAKE:
                    producer.send(topic, value=b"m-%d-%d" % (partition, i), partition=partition)
            producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)


def batch_sizes(cluster, topic: str, partition: int) -> list[int]:
    """Records per batch in the partition's log, read back with one Fetch from offset 0."""
    wire = KafkaWire("test-lag-monitor", 10_000)
    try:
        tp = TopicPartition(topic, partition)
        fetched = wire.fetch(cluster.broker, {tp: 0}, max_wait_ms=100, min_bytes=1,
                             partition_max_bytes=1 << 20).partitions[tp]
        assert fetched.error_code == 0, fetched
        valid = scan_record_set(fetched.records, 0).valid_bytes
        return [len(batch) for batch in iter_message_batches(fetched.records, valid, topic, partition)]
    finally:
        wire.close()


def consume_and_commit(connector, topic: str) -> dict[int, str]:
    """Take TAKE[p] messages from the stream that holds partition p, commit, and return the owners."""
    streams = connector.create_message_streams({topic: len(TAKE)})[topic]
    # One stream per partition (range assignment of 3 partitions to 3 threads of one member): a stream's
    # first message says which partition it holds.
    consumed: dict[int, list[int]] = {}
    for stream in streams:
        it = iter(stream)
        first = next(it)
        offsets = [first.offset]
        while len(offsets) < TAKE[first.partition]:
            message = next(it)
            assert message.partition == first.partition, "a stream received two partitions"
            offsets.append(message.offset)
        consumed[first.partition] = offsets
    assert consumed == {p: list(range(n)) for p, n in TAKE.items()}
    assert connector.commit_offsets() == len(TAKE)
    return {p: owner for (t, p), owner in connector.owned_partitions().items() if t == topic}


def table_rows(output: str) -> list[list[str]]:
    """The rows under the `Group Topic Pid Offset logSize Lag Owner` header, split on whitespace."""
    lines = [line.split() for line in output.splitlines() if line.strip()]
    assert COLUMNS in lines, output
    header = lines.index(COLUMNS)
    return [fields for fields in lines[header + 1:] if len(fields) == len(COLUMNS)]


def run_offset_checker(tmp_path: Path, zookeeper: str, group: str, topic: str) -> list[list[str]]:
    classpath = jvm.classpath(jvm.KAFKA_082)
    assert classpath.version_of("kafka_2.11") == "0.8.2.2"
    log4j = tmp_path / "log4j.properties"
    log4j.write_text(_LOG4J)
    argv = [java_executable(), "-Xmx128m", f"-Dlog4j.configuration=file:{log4j}", "-cp", str(classpath),
            "kafka.tools.ConsumerOffsetChecker", "--zookeeper", zookeeper, "--group", group, "--topic", topic]
    # On a timeout, the tool's threads are dumped (jstack) before it is killed, so a hang says where it was.
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        stdout, stderr = proc.communicate(timeout=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        jstack = shutil.which("jstack")
        dump = subprocess.run([jstack, str(proc.pid)], capture_output=True, text=True, timeout=30,
                              check=False).stdout if jstack else "(no jstack)"
        proc.kill()
        stdout, stderr = proc.communicate()
        raise AssertionError(f"ConsumerOffsetChecker hung; stderr: {stderr[-2000:]}\nthreads:\n{dump}") from None
    done = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    assert done.returncode == 0, done.stderr
    assert "Exception" not in done.stdout + done.stderr, done.stdout + done.stderr
    return table_rows(done.stdout)


def run_groups_describe(zookeeper: str, group: str) -> list[list[str]]:
    done = subprocess.run([sys.executable, "-m", "zkconsumer", "groups", "describe", "--group", group,
                           "--zookeeper", zookeeper], capture_output=True, text=True, timeout=120, check=False,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return table_rows(done.stdout)


def test_consumer_offset_checker_of_0_8_2_2_agrees_with_groups_describe(cluster, members, tmp_path: Path):
    topic = cluster.create_topic(partitions=len(TAKE))
    group = unique("lag")
    produce_in_batches(cluster.bootstrap_servers, topic)
    for partition in TAKE:
        sizes = batch_sizes(cluster, topic, partition)
        assert sum(sizes) == PER_PARTITION and len(sizes) >= 2 and sizes[-1] > 1, sizes

    connector = members(group, "c1", consumer_timeout_ms=20_000)
    owners = consume_and_commit(connector, topic)
    assert sorted(owners) == sorted(TAKE)
    # commit_offsets() has written to ZooKeeper when it returns: that is where the 0.8 tool reads offsets.
    committed = {p: cluster.zk.get(layout.offset_path(group, topic, p)) for p in TAKE}
    assert {p: found and found[0] for p, found in committed.items()} == {p: b"%d" % n for p, n in TAKE.items()}

    expected = [[group, topic, str(p), str(n), str(PER_PARTITION), str(PER_PARTITION - n), owners[p]]
                for p, n in sorted(TAKE.items())]
    theirs = run_offset_checker(tmp_path, cluster.zookeeper_connect, group, topic)
    ours = run_groups_describe(cluster.zookeeper_connect, group)
    print("ConsumerOffsetChecker 0.8.2.2:", *theirs, "zkconsumer groups describe:", *ours, sep="\n")
    assert theirs == expected
    assert ours == expected
