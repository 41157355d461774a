"""The embedded Apache Kafka 4.x broker in KRaft mode (zkconsumer/embedded/kraft.py): a real broker serving a KIP-848
consumer group, a restart that keeps its data, a bad group setting refused in one line, and `cluster up --kraft`."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from helpers import unique, wait_for

from zkconsumer.embedded import jvm
from zkconsumer.embedded.kraft import BASE_SETTINGS, KRaftBroker
from zkconsumer.embedded.lifeline import Lifeline
from zkconsumer.embedded.process import EmbeddedError, ProcessRecord, is_running

CLI = [sys.executable, "-m", "zkconsumer"]
COMPOSE = Path(__file__).resolve().parent.parent / "docker-compose.yml"
# Settings that say where a node is and how its quorum is found, rather than how it behaves.
LOCATION = {"listeners", "advertised.listeners", "log.dirs", "controller.quorum.bootstrap.servers",
            "controller.quorum.voters"}


@dataclass
class Node:
    """The module's KRaft node. A test that restarts it puts the new broker here, so that teardown stops that one."""

    base_dir: Path
    broker: KRaftBroker


def start(broker: KRaftBroker, lifeline: Lifeline) -> KRaftBroker:
    broker.start()
    assert broker.process is not None
    lifeline.watch(broker.process)
    broker.wait_ready()
    return broker


@pytest.fixture(scope="module")
def kraft(tmp_path_factory: pytest.TempPathFactory, session_lifeline: Lifeline) -> Iterator[Node]:
    base = tmp_path_factory.mktemp("kraft")
    node = Node(base, KRaftBroker.plan(base, 1))
    first = node.broker
    try:
        start(first, session_lifeline)
        yield node
    finally:
        node.broker.stop()
        first.stop()


def create_topic(bootstrap: str, partitions: int) -> str:
    topic = unique("kraft")
    # Held in a name: an unreferenced client is destroyed at once, failing its own pending request.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    return topic


def produce(bootstrap: str, topic: str, count: int) -> set[str]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = {f"m{i}" for i in range(count)}
    for value in sorted(values):
        producer.produce(topic, value=value.encode(), key=value.encode())
    assert producer.flush(30) == 0, "messages left unsent"
    return values


@pytest.mark.slow
def test_a_consumer_protocol_group_of_two_splits_the_partitions_and_reads_each_message_once(kraft: Node):
    broker = kraft.broker
    assert broker.version == "4.4.0"
    partitions = 6
    topic = create_topic(broker.bootstrap, partitions)
    group = unique("g")
    consumers = [Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": f"c{i}",
                           "group.protocol": "consumer", "auto.offset.reset": "earliest"}) for i in (1, 2)]
    received: dict[int, list[tuple[int, str]]] = {0: [], 1: []}

    def poll_both() -> None:
        for index, consumer in enumerate(consumers):
            for message in consumer.consume(500, timeout=0.1):
                assert message.error() is None, message.error()
                received[index].append((message.partition(), message.value().decode()))

    def owned(index: int) -> set[int]:
        return {tp.partition for tp in consumers[index].assignment() if tp.topic == topic}

    def all_read(count: int) -> bool:
        poll_both()
        return len(received[0]) + len(received[1]) >= count

    def split() -> bool:
        poll_both()
        first, second = owned(0), owned(1)
        return bool(first) and bool(second) and not first & second and first | second == set(range(partitions))

    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        # The group settles on the empty topic first: messages read before a partition moves could be read again by
        # its next owner (nothing was committed), which would be the protocol working, not a duplicate to catch.
        wait_for(split, timeout=60, message="the broker to split the partitions between the two members")
        sent = produce(broker.bootstrap, topic, 600)
        wait_for(lambda: all_read(len(sent)), timeout=60, message="every message to be consumed")
        for _ in range(10):  # a duplicate would arrive behind the last message
            poll_both()

        assert split(), (owned(0), owned(1))
        counts = Counter(value for messages in received.values() for _, value in messages)
        assert set(counts) == sent and set(counts.values()) == {1}
        for index, messages in received.items():
            assert messages, f"member {index + 1} read nothing"
            assert {partition for partition, _ in messages} <= owned(index)
    finally:
        for consumer in consumers:
            consumer.close()


@pytest.mark.slow
def test_a_restart_keeps_topics_and_messages(kraft: Node, session_lifeline: Lifeline):
    before = kraft.broker
    topic = create_topic(before.bootstrap, 3)
    produce(before.bootstrap, topic, 10)
    record = before.process
    assert record is not None

    assert before.stop()
    assert not is_running(record), f"pid {record.pid} still runs"

    kraft.broker = KRaftBroker.plan(kraft.base_dir, 1)
    assert kraft.broker.formatted and kraft.broker.cluster_id == before.cluster_id
    start(kraft.broker, session_lifeline)
    assert kraft.broker.process is not None and kraft.broker.process.pid != record.pid
    metadata = AdminClient({"bootstrap.servers": kraft.broker.bootstrap}).list_topics(timeout=10)
    assert len(metadata.topics[topic].partitions) == 3
    reader = Consumer({"bootstrap.servers": kraft.broker.bootstrap, "group.id": unique("w")})
    try:
        ends = [reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(3)]
    finally:
        reader.close()
    assert sum(high - low for low, high in ends) == 10


@pytest.mark.slow
@pytest.mark.parametrize("formatted", [False, True], ids=["fresh storage", "formatted storage"])
def test_a_heartbeat_under_its_minimum_is_refused_naming_the_setting(tmp_path: Path, session_lifeline: Lifeline,
                                                                     formatted: bool):
    """Fresh storage: the format step already parses the settings and refuses them. Formatted storage (a restart
    with the bad setting): the broker itself exits at start, and `wait_ready` reports why from its log."""
    if formatted:
        start(KRaftBroker.plan(tmp_path, 1), session_lifeline).stop()
    broker = KRaftBroker.plan(tmp_path, 1, settings={"group.consumer.heartbeat.interval.ms": "100"})
    try:
        with pytest.raises(EmbeddedError) as failure:
            broker.start()
            if broker.process is not None:
                session_lifeline.watch(broker.process)
            broker.wait_ready(timeout=60)
    finally:
        broker.stop()
    message = str(failure.value)
    assert "\n" not in message
    assert "group.consumer.heartbeat.interval.ms must be greater than or equal to " \
           "group.consumer.min.heartbeat.interval.ms" in message, message
    assert str(broker.log_path) in message
    assert (broker.process is not None) == formatted
    assert broker.process is None or not is_running(broker.process)


def run(*args: str) -> str:
    result = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, f"{args} exited {result.returncode}: {result.stderr}"
    return result.stdout


def state_records(base: Path) -> list[ProcessRecord]:
    state = json.loads((base / "state.json").read_text())
    nodes = [n["process"] for n in state["ensemble"]["nodes"]]
    return [ProcessRecord.from_dict(p) for p in nodes + [b["process"] for b in state["brokers"] + state["kraft"]]]


@pytest.mark.slow
def test_cluster_up_kraft_status_restart_and_purge(tmp_path: Path):
    base = tmp_path / "cluster"
    up = run("cluster", "up", "--kraft", "--dir", str(base))
    records = state_records(base)
    try:
        kraft_line = next(line for line in up.splitlines() if line.startswith("kraft bootstrap.servers="))
        bootstrap = kraft_line.split("=", 1)[1]
        # Beside, not instead: ZooKeeper and the 3.9 broker run too.
        assert "zookeeper.connect=127.0.0.1:" in up and "\nbootstrap.servers=127.0.0.1:" in up
        state = json.loads((base / "state.json").read_text())
        assert [(k["node_id"], k["controller"], k["version"]) for k in state["kraft"]] == [(1, True, "4.4.0")]
        assert state["kraft.bootstrap.servers"] == bootstrap and len(records) == 3

        status = run("cluster", "status", "--dir", str(base))
        assert f"kraft broker 1 {bootstrap} up (mode KRaft, Kafka 4.4.0, broker+controller)" in status, status
        assert "kafka broker 1 " in status and " up controller" in status, status
        topic = create_topic(bootstrap, 2)

        down = run("cluster", "down", "--dir", str(base))
        assert "kraft-1 (pid" in down, down
        assert not any(is_running(r) for r in records)

        again = run("cluster", "up", "--kraft", "--dir", str(base))
        records = state_records(base)
        bootstrap = next(line for line in again.splitlines() if line.startswith("kraft ")).split("=", 1)[1]
        assert topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    finally:
        purged = subprocess.run([*CLI, "cluster", "down", "--purge", "--dir", str(base)], capture_output=True,
                                text=True, timeout=180, check=False)
    assert purged.returncode == 0, purged.stderr
    assert not any(is_running(r) for r in records)
    assert not (base / "kraft1").exists()


def image_setting(variable: str) -> str:
    """The property the apache/kafka image writes for a KAFKA_* variable: `___` is '-', `__` is '_', `_` is '.'."""
    words = variable.removeprefix("KAFKA_").lower().split("___")
    return "-".join("_".join(part.replace("_", ".") for part in word.split("__")) for word in words)


def test_the_compose_kraft_service_is_the_embedded_node():
    service = yaml.safe_load(COMPOSE.read_text())["services"]["kafka-kraft"]
    version = ET.parse(jvm.POM).getroot().find("m:properties/m:kafka4.version",
                                               {"m": "http://maven.apache.org/POM/4.0.0"})
    assert version is not None and service["image"] == f"apache/kafka:{version.text}"
    env = {k: str(v) for k, v in service["environment"].items()}
    settings = {image_setting(k): v for k, v in env.items() if k.startswith("KAFKA_") and k != "KAFKA_HEAP_OPTS"}
    embedded = KRaftBroker.plan(Path("/nonexistent"), 1).properties()
    assert {k: settings.get(k) for k in BASE_SETTINGS} == BASE_SETTINGS
    assert {k: v for k, v in settings.items() if k not in LOCATION} == \
           {k: v for k, v in embedded.items() if k not in LOCATION}
    assert settings["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9094"
    assert service["ports"] == ["127.0.0.1:9094:9094"]
