"""Errors a user can act on, as a user meets them: one line naming the thing and the fix, a non-zero exit, no
client library's retry chatter, and a consumer that survives its ZooKeeper going away quietly and exits at once."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import unique, wait_for
from kafka import KafkaProducer

from zkconsumer.embedded.process import free_port, kill_process
from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.client import ZkClient

CLI = [sys.executable, "-m", "zkconsumer"]
REQUEST_TIMEOUT_S = 12  # how long a ZooKeeper call waits for a connection (zkconsumer/zookeeper/client.py)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.slow
def test_unreachable_broker_is_one_line():
    result = run("produce", "--bootstrap", f"127.0.0.1:{free_port()}", "--topic", "t", "--num-messages", "1")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "no broker reachable" in result.stderr, result.stderr


@pytest.mark.slow
def test_unreachable_zookeeper_is_only_the_final_line():
    result = run("zk", "tree", "/", "--zookeeper", f"127.0.0.1:{free_port()}")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "could not connect to ZooKeeper" in result.stderr, result.stderr


@pytest.mark.slow
def test_null_keys_print_as_null(cluster):
    topic = cluster.create_topic(partitions=1)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    producer.send(topic, key=None, value=b"v0").get(timeout=10)
    producer.send(topic, key=b"k1", value=b"v1").get(timeout=10)
    producer.close()
    result = run("consume", "--zookeeper", cluster.zookeeper_connect, "--group", unique("g"), "--topic", topic,
                 "--from-beginning", "--max-messages", "2", "--format", "full")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"{topic}\t0\t0\tnull\tv0", f"{topic}\t0\t1\tk1\tv1"]


@pytest.mark.slow
def test_a_consumer_whose_zookeeper_disappears_logs_each_change_once_and_exits_on_sigterm(cluster, tmp_path: Path):
    """The consumer's own ZooKeeper (so it can be killed), holding the session broker's registration and a real
    topic; auto-commit every second keeps calling ZooKeeper while it is gone."""
    topic = cluster.create_topic(partitions=2)
    own = ZooKeeperEnsemble.plan(tmp_path / "zk", 1)
    own.start()
    consumer = None
    try:
        with ZkClient(own.connect_string, log_id="setup") as zk:
            zk.ensure_path(layout.BROKER_IDS)
            zk.create(layout.broker_path(cluster.broker.id), codecs.encode_broker(cluster.broker))
            zk.ensure_path(layout.BROKER_TOPICS)
            zk.create(layout.topic_path(topic), codecs.encode_topic({0: [cluster.broker.id], 1: [cluster.broker.id]}))
        err = tmp_path / "stderr.txt"
        with open(err, "w") as stderr:
            consumer = subprocess.Popen(
                [*CLI, "consume", "--zookeeper", own.connect_string, "--group", "g", "--topic", topic,
                 "--from-beginning", "--consumer-property", "auto.commit.interval.ms=1000"],
                stdout=subprocess.DEVNULL, stderr=stderr)
        with ZkClient(own.connect_string, log_id="probe") as zk:
            wait_for(lambda: len(zk.get_children(f"/consumers/g/owners/{topic}") or []) == 2, timeout=30,
                     message="the consumer to own both partitions")
        kill_process(own.nodes[0].process)
        wait_for(lambda: "connection to ZooKeeper lost" in err.read_text(), timeout=20, message="the lost line")
        # An observation window longer than a ZooKeeper request's timeout: whatever retried on a timer would have
        # logged by now. No sleep stands in for a condition here: the test is that nothing happens.
        try:
            consumer.wait(timeout=REQUEST_TIMEOUT_S + 2)
        except subprocess.TimeoutExpired:
            pass
        assert consumer.poll() is None, "the consumer died without its ZooKeeper"
        consumer.send_signal(signal.SIGTERM)
        consumer.wait(timeout=REQUEST_TIMEOUT_S - 2)  # it does not wait out a request timeout to commit
        lines = err.read_text().splitlines()
        assert "Traceback" not in err.read_text()
        # One line per state change, and no line repeated on a timer: besides the loss and the skipped final
        # commit, a component that found ZooKeeper gone (the leader finder, a watch) may say so once.
        messages = [line.split(" ", 2)[-1] for line in lines[:-1]]
        assert sum("connection to ZooKeeper lost" in m for m in messages) == 1, lines
        assert sum("ZooKeeper unreachable at shutdown; not committed" in m for m in messages) == 1, lines
        assert len(messages) == len(set(messages)) <= 5, lines
        assert lines[-1].startswith("Processed a total of")
    finally:
        if consumer is not None and consumer.poll() is None:
            consumer.kill()
            consumer.wait()
        own.stop()


def test_misspelt_property_warns_with_the_likely_key(caplog):
    from zkconsumer import ConsumerConfig

    ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "127.0.0.1:2181",
                                    "auto.comit.enable": "true"})
    assert "auto.comit.enable is not valid" in caplog.text and "did you mean auto.commit.enable?" in caplog.text


@pytest.mark.slow
def test_lab_run_into_taken_results_refuses_before_any_server_starts(tmp_path: Path):
    from zkconsumer.lab.runs.session import select_cases
    from zkconsumer.lab.scenarios.loading import find_scenario

    [case] = select_cases(find_scenario("lesson"), None, None)
    (tmp_path / case.case_id / "zk").mkdir(parents=True)
    result = run("lab", "run", "lesson", "--design", "zk", "--out", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"already holds results ({case.case_id}/zk)" in result.stderr and "another --out" in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == [case.case_id], "no server directory may have been made"


@pytest.mark.slow
def test_lab_analyze_does_not_overwrite_a_report_unless_forced(tmp_path: Path):
    out = tmp_path / "report"
    out.mkdir()
    (out / "report.html").write_text("an earlier report")
    result = run("lab", "analyze", str(tmp_path), "--out", str(out))
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "already holds a report (report.html)" in result.stderr and "--force" in result.stderr
    assert (out / "report.html").read_text() == "an earlier report"
    # Forced, it gets past that check to the next one: there are no runs in tmp_path to analyse (one line too).
    forced = run("lab", "analyze", str(tmp_path / "report"), "--out", str(out), "--force")
    assert forced.returncode == 1 and "no run directory" in forced.stderr and forced.stderr.count("\n") == 1, \
        forced.stderr
