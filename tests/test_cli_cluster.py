"""`zkconsumer cluster|topic|zk` as a user runs them: separate processes, real servers, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import wait_for

from zkconsumer.embedded.process import ProcessRecord, is_running

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "zkconsumer"]


def run(*args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, env=env, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"{args} exited {result.returncode}: {result.stderr}")
    return result


def our_processes(state: dict) -> list[ProcessRecord]:
    records = [ProcessRecord.from_dict(n["process"]) for n in state["ensemble"]["nodes"]]
    return records + [ProcessRecord.from_dict(b["process"]) for b in state["brokers"] if b.get("process")]


def test_three_server_three_broker_cluster_status_topics_replication_tree_and_down(tmp_path: Path):
    """One multi-JVM cluster (3 ZooKeeper servers, 3 brokers) for both: the ensemble's modes, the brokers'
    registrations and their one controller, topics created by name (and refused again), replicated over the three
    brokers with leadership spread, the tree Kafka wrote, and `down` stopping every process."""
    base = tmp_path / "cluster"
    up = run("cluster", "up", "--zk-servers", "3", "--brokers", "3", "--dir", str(base))
    assert "zookeeper.connect=127.0.0.1:" in up.stdout and "bootstrap.servers=127.0.0.1:" in up.stdout
    state = json.loads((base / "state.json").read_text())
    records = our_processes(state)
    assert len(records) == 6
    env = {**os.environ, "ZKCONSUMER_CLUSTER_DIR": str(base)}
    try:
        status = run("cluster", "status", "--dir", str(base)).stdout
        modes = [line.rsplit(" ", 1)[1] for line in status.splitlines() if line.startswith("zookeeper server")]
        assert sorted(modes) == ["follower", "follower", "leader"], status
        # Each broker registered itself; exactly one of them is the controller.
        lines = [line for line in status.splitlines() if line.startswith("kafka broker")]
        assert [line.split()[2] for line in lines] == ["1", "2", "3"] and all(" up" in line for line in lines)
        assert sum(line.endswith(" up controller") for line in lines) == 1, status

        zk = state["zookeeper.connect"]
        assert "created topic clicks" in run("topic", "create", "clicks", "--partitions", "3", "--zookeeper", zk).stdout
        again = run("topic", "create", "clicks", "--partitions", "3", "--zookeeper", zk, check=False)
        assert again.returncode == 1 and "already exists" in again.stderr and again.stderr.count("\n") == 1
        assert "topics: clicks" in run("cluster", "status", "--dir", str(base)).stdout

        run("topic", "create", "r3", "--partitions", "3", "--replication-factor", "3", env=env)
        rows = [line.split("\t") for line in run("topic", "describe", "r3", env=env).stdout.splitlines()[1:]]
        assert all(sorted(row[4][10:].split(",")) == ["1", "2", "3"] for row in rows), rows
        assert len({row[3] for row in rows}) == 3, rows  # leadership spread over the three brokers

        tree = run("zk", "tree", "/brokers", "--zookeeper", zk).stdout
        # Written by Kafka itself: the registrations (ephemeral) and, by its controller, the partition states.
        assert all(f"/brokers/ids/{i} [ephemeral owner=0x" in tree for i in (1, 2, 3)), tree
        [clicks] = [line for line in tree.splitlines()
                    if line.startswith("/brokers/topics/clicks/partitions/2/state = ")]
        assert any(f'"leader":{i},' in clicks for i in (1, 2, 3)), clicks
    finally:
        down = run("cluster", "down", "--dir", str(base), check=False)
    assert down.returncode == 0, down.stderr
    assert not any(is_running(r) for r in records)
    assert _processes_mentioning(str(base)) == []
    again = run("cluster", "down", "--dir", str(base), check=False)
    assert again.returncode == 1 and again.stderr.count("\n") == 1 and "no cluster" in again.stderr


def test_topics_as_kafka_tools_treat_them_and_restart_keeps_both_halves(tmp_path: Path):
    """alter/list/describe, produce to a missing topic fails in one line, and the cluster's data survives
    `down` + `up` on both sides (ZooKeeper's offsets and the broker's log) until `down --purge`."""
    base = tmp_path / "c"
    run("cluster", "up", "--dir", str(base))
    env = {**os.environ, "ZKCONSUMER_CLUSTER_DIR": str(base)}
    try:
        run("topic", "create", "t", "--partitions", "2", env=env)
        assert "now has 5 partitions" in run("topic", "alter", "t", "--partitions", "5", env=env).stdout
        shrink = run("topic", "alter", "t", "--partitions", "3", env=env, check=False)
        assert shrink.returncode == 1 and "must be more" in shrink.stderr
        described = run("topic", "describe", "t", env=env).stdout.splitlines()
        assert described[0].split("\t")[:2] == ["Topic: t", "PartitionCount: 5"]
        assert [line.split("\t")[3] for line in described[1:]] == ["Leader: 1"] * 5
        assert "t" in run("topic", "list", env=env).stdout.split()

        missing = run("produce", "--topic", "nope", "--num-messages", "3", env=env, check=False)
        assert missing.returncode == 1 and missing.stderr.strip().count("\n") == 0, missing.stderr
        assert "topic 'nope' does not exist" in missing.stderr

        run("produce", "--topic", "t", "--num-messages", "50", env=env)
        run("consume", "--group", "g", "--topic", "t", "--from-beginning", "--max-messages", "50", env=env)
        before = run("groups", "describe", "--group", "g", env=env).stdout
        run("cluster", "down", "--dir", str(base))
        run("cluster", "up", "--dir", str(base))
        after = run("groups", "describe", "--group", "g", env=env).stdout
        rows = [line.split()[:6] for line in after.splitlines()[1:]]
        assert [r[:6] for r in (line.split() for line in before.splitlines()[1:])] == rows
        assert sum(int(r[4]) for r in rows) == 50 and all(r[5] == "0" for r in rows), after  # logSize, Lag

        run("cluster", "down", "--purge", "--dir", str(base))
        run("cluster", "up", "--dir", str(base))
        assert "t" not in run("topic", "list", env=env).stdout.split()
    finally:
        run("cluster", "down", "--dir", str(base), check=False)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["cluster", "up", "--bogus"], "No such option"),
        (["cluster", "up", "--zk-servers", "0"], "--zk-servers"),
        (["topic", "create", "t"], "--partitions"),
        (["zk", "tree", "nopath", "--zookeeper", "127.0.0.1:1"], "must start with '/'"),
    ],
)
def test_usage_errors_are_one_line(args: list[str], expected: str):
    result = run(*args, check=False)
    assert result.returncode == 2
    assert expected in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_occupied_port_is_refused_without_leaving_processes(tmp_path: Path, zk_server):
    taken = zk_server.nodes[0].client_port
    result = run("cluster", "up", "--zk-port", str(taken), "--dir", str(tmp_path / "c"), check=False)
    assert result.returncode == 1
    assert f"port {taken}" in result.stderr and "--zk-port" in result.stderr
    assert not (tmp_path / "c" / "state.json").exists()


def test_old_java_is_refused(tmp_path: Path):
    fake = tmp_path / "jdk" / "bin"
    fake.mkdir(parents=True)
    (fake / "java").write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    (fake / "java").chmod(0o755)
    env = {**os.environ, "JAVA_HOME": str(fake.parent)}
    result = run("cluster", "up", "--dir", str(tmp_path / "c"), check=False, env=env)
    assert result.returncode == 1 and "Java 11" in result.stderr and result.stderr.count("\n") == 1


def test_zookeeper_that_never_gets_ready_names_its_log(tmp_path: Path, monkeypatch):
    # A ZooKeeper without snappy-java answers ruok but never serves: `srvr` readiness must catch it.
    from zkconsumer.embedded import zookeeper as zkmod
    from zkconsumer.embedded.process import EmbeddedError

    real_jars = zkmod.pyspark_jar_dir()
    crippled = tmp_path / "jars"
    crippled.mkdir()
    for jar in real_jars.glob("*.jar"):
        if not jar.name.startswith("snappy-java"):
            (crippled / jar.name).symlink_to(jar)
    (crippled / "snappy-java-0.0.0.jar").write_bytes(b"not a jar")
    monkeypatch.setattr(zkmod, "pyspark_jar_dir", lambda: crippled)
    ensemble = zkmod.ZooKeeperEnsemble.plan(tmp_path / "zk", 1)
    with pytest.raises(EmbeddedError, match=r"zookeeper\.log"):
        ensemble.start(timeout=8)
    assert not is_running(ensemble.nodes[0].process)


def test_cluster_down_after_crash_reports_nothing_running(tmp_path: Path):
    base = tmp_path / "c"
    run("cluster", "up", "--no-broker", "--dir", str(base))
    state = json.loads((base / "state.json").read_text())
    record = our_processes(state)[0]
    os.kill(record.pid, 9)
    wait_for(lambda: not is_running(record), message="zookeeper to die")
    result = run("cluster", "down", "--dir", str(base))
    assert "nothing" in result.stdout


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if text in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def test_a_killed_cluster_up_leaves_nothing_behind(tmp_path: Path):
    """SIGKILL runs no cleanup in `cluster up` itself; its lifeline stops the servers it had started."""
    base = tmp_path / "killed"
    up = subprocess.Popen([*CLI, "cluster", "up", "--dir", str(base)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    try:
        # Killed while the broker starts: ZooKeeper is up and the broker's JVM exists.
        wait_for(lambda: any(p != up.pid for p in _processes_mentioning(str(base / "kafka1"))), timeout=60,
                 message="the broker's JVM to start")
        up.kill()
    finally:
        up.wait(timeout=30)
    wait_for(lambda: _processes_mentioning(str(base)) == [], timeout=30,
             message="every server of the killed `cluster up` to be stopped")
