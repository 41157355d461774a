"""`GroupWatcher` in-process against a real ZooKeeper: a rebalance written step by step as Scala 0.8.2 members
write it, checked in the notifications, the inferred states, the watches held and the requests sent."""

from __future__ import annotations

import threading

import pytest
from helpers import wait_for

from zkconsumer.watch.live import GroupWatcher
from zkconsumer.zookeeper.client import ZkClient

pytestmark = pytest.mark.slow

REGISTRATION = b'{"version":1,"subscription":{"clicks":1},"pattern":"static","timestamp":"1700000000000"}'


def test_rebalance_with_a_conflict_rollback(zk_connect, zk):
    g = "/consumers/scala"
    zk.create("/brokers/topics/clicks", b'{"version":1,"partitions":{"0":[1],"1":[1]}}')
    zk.create(f"{g}/ids/scala_m1", REGISTRATION, ephemeral=True)
    zk.create(f"{g}/owners/clicks/0", b"scala_m1-0", ephemeral=True)
    zk.create(f"{g}/owners/clicks/1", b"scala_m1-0", ephemeral=True)
    client = ZkClient(zk_connect, log_id="watch-test").start()
    watcher = GroupWatcher(client, "scala", lag_interval_s=0).start()
    try:
        assert watcher.wait_idle()
        log: list[str] = []

        def step(expected: str) -> None:
            """Wait for a log line containing `expected` (each step must be seen before the next one is written,
            or the watcher would see them collapsed)."""
            def logged() -> bool:
                log.extend(n.text for n in watcher.take_notifications())
                return any(expected in text for text in log)

            wait_for(logged, timeout=5, message=expected)

        step("watching group scala: 1 members")
        assert [m.state_label for m in watcher.view().members] == ["owning 2"]

        zk.create(f"{g}/ids/scala_m2", REGISTRATION, ephemeral=True)   # a join triggers a rebalance
        step("member joined scala_m2")
        zk.delete(f"{g}/owners/clicks/0")                                # m1 releases everything
        zk.delete(f"{g}/owners/clicks/1")
        step("release clicks/1 by scala_m1-0")
        zk.create(f"{g}/owners/clicks/1", b"scala_m2-0", ephemeral=True)  # m2 claims its partition ...
        step("moved clicks/1 scala_m1-0 -> scala_m2-0")
        zk.delete(f"{g}/owners/clicks/1")                                # ... and rolls it back (a conflict)
        step("rollback clicks/1 by scala_m2-0")
        states = {m.consumer_id: m.state_label for m in watcher.view().members}
        assert states == {"scala_m1": "rebalancing (attempt 1)", "scala_m2": "rebalancing (attempt 2)"}

        zk.create(f"{g}/owners/clicks/0", b"scala_m1-0", ephemeral=True)
        zk.create(f"{g}/owners/clicks/1", b"scala_m2-0", ephemeral=True)
        step("claim clicks/0 by scala_m1-0")
        wait_for(lambda: [m.state_label for m in watcher.view().members] == ["owning 1", "owning 1"],
                 timeout=5, message="both members owning")
        assert set(watcher.recent_changes(10)) >= {("clicks", 0), ("clicks", 1), "scala_m2"}

        watched = watcher.watched_paths()
        assert watched == {
            g: "children", f"{g}/ids": "children", f"{g}/owners": "children",
            "/brokers/topics/clicks": "data",
            f"{g}/owners/clicks/0": "data", f"{g}/owners/clicks/1": "data",
            f"{g}/offsets/clicks/0": "data", f"{g}/offsets/clicks/1": "data",
        }
    finally:
        watcher.stop()
        client.close()
    assert not [t.name for t in threading.enumerate() if t.name.startswith("zkconsumer-watch")]
    counts = client.op_counts()
    assert not {kind: n for kind, n in counts.items() if kind in ("create", "set_data", "delete")}, counts
