"""`ZkDriver.stable()`, the check behind the headline time to stable, against the real ZooKeeper with real
(rebalance-only) members: it answers False while the group is not what the range assignment prescribes for the live
members, and True once it is. The group is made non-converged in the ways a converging group is: no member yet, an
owner node with another member's thread, an owner node missing, a registration that owns nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ZkProbe, unique, wait_for

from rebalance.subscription import Registration
from zkconsumer.lab.drivers.interface import LabEnvironment
from zkconsumer.lab.drivers.zk import ZkDriver
from zkconsumer.lab.scenarios.loading import expand_cases, parse_scenario
from zkconsumer.lab.trace import RunDirectory, read_traces
from zkconsumer.zookeeper import codecs, layout

pytestmark = pytest.mark.slow

SCENARIO = """
name = "stable-check"
description = "two rebalance-only members of one topic"
designs = ["zk"]
duration = 1.0
[group]
members = 2
process_mode = "threads"
topics = [{ name = "st", partitions = 4 }]
[zk]
"zookeeper.session.timeout.ms" = 6000
"rebalance.backoff.ms" = 200
"rebalance.max.retries" = 3
"""


def rebalances_ended(run: Path, after: float) -> int:
    return sum(1 for r in read_traces(run) if r["type"] == "member_event" and r["kind"] == "rebalance_end"
               and r["ts"] > after)


def test_stable_is_false_until_the_group_has_converged(private_cluster, tmp_path: Path) -> None:
    import time

    scenario = parse_scenario(SCENARIO, "inline")
    [case] = expand_cases(scenario)
    topic = private_cluster.create_topic(partitions=4)
    group = unique("stable")
    run = RunDirectory.create(tmp_path / "run", scenario=scenario.name, case=case.case_id, design="zk")
    connect = private_cluster.zookeeper_connect
    env = LabEnvironment(run, case, group, {topic: 4}, lambda _name: connect, "127.0.0.1:9", connect,
                         run.trace("run", "zk"))
    driver = ZkDriver("threads")
    driver.start(env)
    probe = ZkProbe(connect)
    try:
        assert not driver.stable()  # no live member: nothing has converged
        driver.join("m0")
        driver.join("m1")
        wait_for(driver.stable, timeout=60, message="the two members to converge")
        owners = {p: probe.get(layout.owner_path(group, topic, p)).decode() for p in range(4)}
        assert owners == {0: f"{group}_m0-0", 1: f"{group}_m0-0", 2: f"{group}_m1-0", 3: f"{group}_m1-0"}

        # An owner node naming the wrong member (as while a claim of the new assignment is still to come)
        probe.set(layout.owner_path(group, topic, 0), owners[2].encode())
        assert not driver.stable()
        probe.set(layout.owner_path(group, topic, 0), owners[0].encode())
        assert driver.stable()

        # An owner node missing (as between a release and the new owner's claim); 0.8 members do not watch owners
        probe.delete(layout.owner_path(group, topic, 3))
        assert not driver.stable()
        probe.create(layout.owner_path(group, topic, 3), owners[3].encode())
        assert driver.stable()

        # A registration that owns nothing (a member that registered and has not claimed yet): the live members
        # rebalance around it, claim their part of the new assignment and are all `owning` again, but its part has
        # no owner, and the check says so for as long as it is there
        registered = time.time()
        probe.create(layout.registration_path(group, f"{group}_m9"),
                     codecs.encode_registration(Registration.static({topic: 1})), ephemeral=True)
        wait_for(lambda: rebalances_ended(run.path, registered) >= 2, timeout=60,
                 message="both members to end the rebalance the new registration caused")
        assert not driver.stable()
        probe.delete(layout.registration_path(group, f"{group}_m9"))
        wait_for(driver.stable, timeout=60, message="the group to converge again without the stray registration")
        assert {p: probe.get(layout.owner_path(group, topic, p)).decode() for p in range(4)} == owners
    finally:
        probe.close()
        driver.stop()
        env.trace.close()
