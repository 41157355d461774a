"""`zkconsumer produce|consume|groups|zk tree` against the harness's real servers, as separate processes."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import unique, wait_for

from zkconsumer import ConsumerConfig, ZookeeperConsumerConnector

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "zkconsumer"]


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, input=stdin, check=False)
    assert result.returncode == 0, f"{args}: {result.stderr}"
    return result


def test_produce_then_consume_then_describe_and_tree(cluster, zk):
    topic = cluster.create_topic(partitions=3)
    zkc = cluster.zookeeper_connect
    run("produce", "--zookeeper", zkc, "--topic", topic, "--num-messages", "300")
    run("produce", "--bootstrap", cluster.bootstrap_servers, "--topic", topic, stdin="k1\thello\nplain line\n")
    group = unique("cli")
    consumed = run("consume", "--zookeeper", zkc, "--group", group, "--topic", topic, "--from-beginning",
                   "--format", "full", "--timeout-ms", "3000")
    lines = consumed.stdout.splitlines()
    assert len(lines) == 302
    assert {tuple(line.split("\t")[3:]) for line in lines} >= {("k1", "hello"), ("null", "plain line")}
    assert "Processed a total of 302 messages" in consumed.stderr

    # A live member, so describe shows owners next to the offsets the console consumer committed.
    config = ConsumerConfig.from_properties({"group.id": group, "zookeeper.connect": zkc, "consumer.id": "live",
                                             "auto.commit.enable": "false"})
    with ZookeeperConsumerConnector(config) as member:
        member.create_message_streams({topic: 1})
        wait_for(lambda: len(zk.owners(group)) == 3, message="owned")
        assert group in run("groups", "list", "--zookeeper", zkc).stdout.split()
        table = run("groups", "describe", "--zookeeper", zkc, "--group", group).stdout.splitlines()
        assert table[0].split() == ["Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner"]
        rows = [line.split() for line in table[1:]]
        assert len(rows) == 3
        assert sum(int(r[3]) for r in rows) == 302 and sum(int(r[4]) for r in rows) == 302
        assert all(r[5] == "0" and r[6] == f"{group}_live-0" for r in rows)
        tree = run("zk", "tree", f"/consumers/{group}", "--zookeeper", zkc).stdout
        assert f"/consumers/{group}/ids/{group}_live [ephemeral owner=0x" in tree
        assert f"/consumers/{group}/owners/{topic}/0 [ephemeral owner=0x" in tree
        assert f"/consumers/{group}/offsets/{topic}/0 = " in tree


def test_describe_without_broker_shows_unknown(zk_connect, zk):
    zk.create("/consumers/g/offsets/t/0", b"5")
    zk.create("/brokers/topics/t", b'{"version":1,"partitions":{"0":[1]}}')
    table = run("groups", "describe", "--zookeeper", zk_connect, "--group", "g").stdout.splitlines()
    assert table[1].split() == ["g", "t", "0", "5", "unknown", "unknown", "none"]


def test_describe_of_missing_group_is_one_line_error(zk_connect):
    result = subprocess.run([*CLI, "groups", "describe", "--zookeeper", zk_connect, "--group", "nope"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1 and "group 'nope' does not exist" in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_consumer_config_file_is_completed_by_the_command_line(cluster, tmp_path):
    """kafka-console-consumer takes --consumer.config for tuning keys while --group and --zookeeper come from the
    command line: a file without group.id or zookeeper.connect must not be rejected."""
    topic = cluster.create_topic(partitions=2)
    run("produce", "--zookeeper", cluster.zookeeper_connect, "--topic", topic, "--num-messages", "20")
    props = tmp_path / "consumer.properties"
    props.write_text("auto.offset.reset=smallest\nconsumer.timeout.ms=3000\n")
    consumed = run("consume", "--zookeeper", cluster.zookeeper_connect, "--group", unique("cfg"), "--topic", topic,
                   "--consumer-config", str(props))
    assert len(consumed.stdout.splitlines()) == 20  # smallest and the timeout came from the file
    # and a file that names zookeeper.connect is used when --zookeeper is not given
    props.write_text(f"zookeeper.connect={cluster.zookeeper_connect}\nauto.offset.reset=smallest\n"
                     "consumer.timeout.ms=3000\n")
    again = run("consume", "--group", unique("cfg"), "--topic", topic, "--consumer-config", str(props))
    assert len(again.stdout.splitlines()) == 20
