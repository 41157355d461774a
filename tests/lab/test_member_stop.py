"""A kafka-python lab member asked to stop always closes its consumer and leaves the group (LeaveGroup), however
the request meets it: mid-poll while it consumes, or mid-rebalance while its poll waits for a join; and a stop
signal never deadlocks the member process's main thread (member_process.StopRequest)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import unique, wait_for
from kafka.admin import KafkaAdminClient, NewTopic

from zkconsumer.lab.coordinator import CoordinatorDriver
from zkconsumer.lab.driver import LabEnvironment
from zkconsumer.lab.scenario import expand_cases, parse_scenario
from zkconsumer.lab.trace import RunDirectory, read_traces
from zkconsumer.lab.wire import KafkaProxy

PARTITIONS = 6
CYCLES = 24
STOP_BOUND_S = 15.0  # well inside the driver's kill (settle bound + close budget + 10 s)
SCENARIO = """
name = "member-stop"
description = "members started and stopped, over and over"
designs = ["coordinator"]
duration = 1.0
[group]
members = 3
topics = [{{ name = "{topic}", partitions = {partitions} }}]
[coordinator]
session_timeout_ms = 6000
heartbeat_interval_ms = 500
"""


def requests(proxy: KafkaProxy, member: str, api: str) -> int:
    return proxy.counters(member).get("requests", {}).get(api, 0)


def stable_with(driver: CoordinatorDriver, names: list[str]) -> bool:
    return driver.live_members() == sorted(names) and driver.assignment() is not None


def stop_cycle(cycle: int, run: RunDirectory, env: LabEnvironment, proxy: KafkaProxy) -> float:
    """Three members, stopped together (as a run ends: CoordinatorDriver.stop) mid-poll; returns the stop's time."""
    driver = CoordinatorDriver("processes")
    driver.start(env)
    names = [f"c{cycle}a", f"c{cycle}b", f"c{cycle}c"]
    try:
        for name in names[:2]:
            driver.join(name)
        wait_for(lambda: stable_with(driver, names[:2]), timeout=30, message=f"cycle {cycle}: two stable")
        driver.join(names[2])
        if cycle % 2:
            # Mid-rebalance: the joiner has its member id and waits in its second JoinGroup (KIP-394), the
            # incumbents are rejoining; every poll is inside a join.
            wait_for(lambda: requests(proxy, names[2], "JoinGroup") >= 2, timeout=30,
                     message=f"cycle {cycle}: the joiner's second JoinGroup")
        else:
            # Mid-poll while stable: every member's long poll is fetching.
            wait_for(lambda: stable_with(driver, names), timeout=30, message=f"cycle {cycle}: three stable")
    finally:
        stopped_at = time.monotonic()
        driver.stop()
    took = time.monotonic() - stopped_at
    assert driver.stats()["exit_codes"] == {name: [0] for name in names}, f"cycle {cycle}"
    closed = {r["member"]: r for r in read_traces(run.path) if r["type"] == "member_event" and r["kind"] == "closed"}
    assert sorted(closed) == names, f"cycle {cycle}: closed {sorted(closed)}"
    for name, record in closed.items():
        # a member with an id and not unjoined: kafka-python's close sends LeaveGroup, and the proxy saw it
        assert record["member_id"] and record["group_state"] != "<unjoined>", (cycle, record)
        assert requests(proxy, name, "LeaveGroup") == 1, f"cycle {cycle}: {name}"
    return took


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_members_stopped_mid_poll_always_close_and_leave(tmp_path: Path, proxy: KafkaProxy, proxied_kafka) -> None:
    topic = unique("stop")
    admin = KafkaAdminClient(bootstrap_servers=proxied_kafka.direct, client_id="admin")
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    [case] = expand_cases(parse_scenario(SCENARIO.format(topic=topic, partitions=PARTITIONS), "inline"))
    began = time.monotonic()
    for cycle in range(CYCLES):
        run = RunDirectory.create(tmp_path / f"cycle{cycle}")
        env = LabEnvironment(run=run, case=case, group=unique("group"), topics={topic: PARTITIONS},
                             zookeeper_connect=lambda _name: "unused", bootstrap=proxy.bootstrap,
                             direct_zookeeper="unused", trace=run.trace("run", "coordinator"))
        took = stop_cycle(cycle, run, env, proxy)
        assert took < STOP_BOUND_S, f"cycle {cycle}: the stop took {took:.1f} s"
    assert time.monotonic() - began < 360


CHILD = """
import os, signal, sys
from zkconsumer.lab.member_process import StopRequest

def step():
    return 1

stopping = StopRequest()
stopping.install()
# The main thread inside Event.wait() on the request, or inside a first SIGTERM's handler when a second one lands:
# the event's lock is held when Python runs the next handler, at the next function call.
with stopping._event._cond:
    os.kill(os.getpid(), signal.SIGTERM)
    step()
sys.exit(0 if stopping.wait(1.0) else 3)
"""


@pytest.mark.slow  # a child Python
def test_a_stop_signal_while_the_main_thread_holds_the_stop_lock_does_not_deadlock() -> None:
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(CHILD)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        output, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()  # by its pid: a handler that waits for the lock its own thread holds never returns
        proc.communicate()
        pytest.fail("the member's SIGTERM handler deadlocked on the stop request's lock")
    assert proc.returncode == 0, output.decode(errors="replace")
