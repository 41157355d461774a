"""`zkconsumer watch --once` against real servers: a group of three real members, a group written znode by znode
as Scala 0.8.2 consumers write it, and the one-line errors."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from helpers import wait_for
from kafka import KafkaProducer

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "zkconsumer"]
# A topic name of its own: the Kafka broker is shared by the whole test session.
TOPIC = "watch-once-events"


def watch_once(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([*CLI, "watch", "--once", *args], capture_output=True, text=True, timeout=60, check=False)
    if ok:
        assert result.returncode == 0, result.stderr
    return result


def test_three_members_with_offsets_and_lag(cluster, zk, members):
    cluster.create_topic(TOPIC, partitions=6)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5)
    for partition in range(6):
        for i in range(5):
            producer.send(TOPIC, value=f"m{i}".encode(), partition=partition)
    producer.flush()
    producer.close()
    group = "orders"
    # Range assignment over threads a-0, b-0, b-1, c-0 (6 partitions / 4 threads: the first two get two).
    members(group, "a").create_message_streams({TOPIC: 1})
    members(group, "b").create_message_streams({TOPIC: 2})
    members(group, "c").create_message_streams({TOPIC: 1})
    expected_owners = {(TOPIC, 0): "orders_a-0", (TOPIC, 1): "orders_a-0", (TOPIC, 2): "orders_b-0",
                       (TOPIC, 3): "orders_b-0", (TOPIC, 4): "orders_b-1", (TOPIC, 5): "orders_c-0"}
    wait_for(lambda: zk.owners(group) == expected_owners, message="the range assignment")
    for partition in (0, 1, 2):  # committed offsets, as commitOffsets writes them
        zk.create(f"/consumers/{group}/offsets/{TOPIC}/{partition}", str(partition + 2).encode())

    started = time.monotonic()
    out = watch_once("--zookeeper", cluster.zookeeper_connect, "--group", group).stdout
    took = time.monotonic() - started
    assert out == f"""\
group orders
members 3  partitions 6  owned 6  lag 6

MEMBER    STATE     SUBSCRIPTION         OWNS
orders_a  owning 2  {TOPIC}:1  {TOPIC}:0,1
orders_b  owning 3  {TOPIC}:2  {TOPIC}:2,3,4
orders_c  owning 1  {TOPIC}:1  {TOPIC}:5

TOPIC              PARTITION  OWNER       OFFSET  LOG-END  LAG
{TOPIC}  0          orders_a-0  2       5        3
{TOPIC}  1          orders_a-0  3       5        2
{TOPIC}  2          orders_b-0  4       5        1
{TOPIC}  3          orders_b-0  -       5        -
{TOPIC}  4          orders_b-1  -       5        -
{TOPIC}  5          orders_c-0  -       5        -
"""
    assert "\x1b[" not in out  # not a terminal: no colours
    assert took < 20


def test_scala_written_group_states_without_broker(zk_connect, zk):
    """Znodes exactly as a Scala 0.8.2 group leaves them mid-rebalance; no broker registered, so lag is "-"."""
    group = "scala"
    zk.create("/brokers/topics/clicks", b'{"version":1,"partitions":{"0":[1],"1":[1],"2":[1],"3":[1]}}')
    zk.create(f"/consumers/{group}/ids/scala_host1-1700000000000-1a2b3c4d",
              b'{"version":1,"subscription":{"clicks":2},"pattern":"static","timestamp":"1700000000000"}',
              ephemeral=True)
    zk.create(f"/consumers/{group}/owners/clicks/0", b"scala_host1-1700000000000-1a2b3c4d-0", ephemeral=True)
    zk.create(f"/consumers/{group}/owners/clicks/1", b"scala_host1-1700000000000-1a2b3c4d-1", ephemeral=True)
    zk.create(f"/consumers/{group}/offsets/clicks/0", b"17")
    zk.create(f"/consumers/{group}/offsets/clicks/3", b"not-a-number")
    time.sleep(0.05)  # the next registration is newer than every claim (ZooKeeper ctime has ms resolution)
    zk.create(f"/consumers/{group}/ids/scala_host2-1700000000500-5e6f7a8b",
              b'{"version":1,"subscription":{"clicks":2},"pattern":"static","timestamp":"1700000000500"}',
              ephemeral=True)
    zk.create(f"/consumers/{group}/ids/scala_broken", b"{not json", ephemeral=True)

    fresh = watch_once("--zookeeper", zk_connect, "--group", group).stdout
    assert fresh == """\
group scala
members 3  partitions 4  owned 2  lag -  (no broker reachable: log end and lag shown as -)

MEMBER                              STATE                            SUBSCRIPTION  OWNS
scala_broken                        failed: unreadable registration  ?             -
scala_host1-1700000000000-1a2b3c4d  rebalancing                      clicks:2      clicks:0,1
scala_host2-1700000000500-5e6f7a8b  registering                      clicks:2      -

TOPIC   PARTITION  OWNER                                 OFFSET  LOG-END  LAG
clicks  0          scala_host1-1700000000000-1a2b3c4d-0  17      -        -
clicks  1          scala_host1-1700000000000-1a2b3c4d-1  -       -        -
clicks  2          -                                     -       -        -
clicks  3          -                                     ?       -        -
"""
    # Nothing changes for longer than --failed-after: the member that owns nothing has given up.
    time.sleep(0.3)
    stale = watch_once("--zookeeper", zk_connect, "--group", group, "--failed-after", "0.2").stdout.splitlines()
    assert stale[5].split(None, 1)[1].startswith("owning 2")
    assert stale[6].split(None, 1)[1].startswith("failed: no claim since it registered")


def test_missing_group_and_unreachable_zookeeper_are_one_line_errors(zk_connect):
    missing = watch_once("--zookeeper", zk_connect, "--group", "nope", ok=False)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        f"error: group 'nope' does not exist in ZooKeeper at {zk_connect}: check --group "
        "(see `zkconsumer groups list`) and --zookeeper"]
    down = watch_once("--zookeeper", "127.0.0.1:1", "--group", "g", ok=False)
    assert down.returncode == 1
    assert down.stderr.strip().splitlines() == [
        "error: could not connect to ZooKeeper at 127.0.0.1:1 within 5.0 s: check zookeeper.connect and that the "
        "server is up"]
