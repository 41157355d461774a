"""The original 0.8.2.2 consumer's cost of one join on the wire (the lab's design "original", rebalance-only members
in one JVM, `--members threads`): exactly `original_join_requests` without a conflict, exactly the per-event
accounting with one (docs/join-cost.md). Slow (a sweep of runs, on the suite's shared lab servers): `make interop`."""

from __future__ import annotations

import shutil

import pytest
from helpers import beyond_the_textbook, conflicted

from zkconsumer.lab.rules.join_cost import (
    ORIGINAL_PER_NOTIFICATION,
    join_notifications,
    original_accounted_requests,
    original_attempt_cost,
    original_join_requests,
)
from zkconsumer.lab.runs.session import LabSession
from zkconsumer.lab.scenarios.loading import expand_cases, parse_scenario
from zkconsumer.lab.trace import read_traces

pytestmark = [pytest.mark.interop, pytest.mark.slow]

PARTITIONS = 16
SCENARIO = f"""
name = "join-cost-original"
description = "one join into N rebalance-only originals"
designs = ["original"]
duration = 1.0
seed = 7
settle_timeout = 60.0
[group]
members = 1
process_mode = "threads"
topics = [{{ name = "jco", partitions = {PARTITIONS} }}]
[zk]
"zookeeper.session.timeout.ms" = 6000
"rebalance.backoff.ms" = 100
"rebalance.max.retries" = 20
"auto.commit.enable" = false
[[churn]]
at = 0.2
action = "join"
[sweep]
axis = "members"
values = [1, 2, 4, 8]
"""


def test_the_wire_count_of_one_original_join_is_its_formula(tmp_path, shared_lab_servers):
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            pytest.skip(f"missing tool: {tool} (a JDK 17: apt-get install openjdk-17-jdk-headless)")
    scenario = parse_scenario(SCENARIO, "inline")
    summaries = LabSession(scenario, expand_cases(scenario), ["original"], tmp_path, servers=shared_lab_servers).run()
    assert [s.completed for s in summaries] == [True] * 4
    conflict_free = 0
    for summary in summaries:
        assert (summary.path / "logs" / "host0.log").exists()  # N + 1 members in one JVM
        records = sorted(read_traces(summary.path), key=lambda r: r["ts"])
        settled = next(r["ts"] for r in records if r["type"] == "phase" and r["phase"] == "settled")
        done = next(r["ts"] for r in records if r["type"] == "phase" and r["phase"] == "done")
        window = [r for r in records if settled <= r["ts"] <= done]
        size = summary.members + 1
        events = [r for r in window if r["type"] == "member_event"]
        zk_wire = [r for r in window if r["type"] == "wire" and r["proto"] == "zk"]
        requests = sum(r["kind"] == "request" for r in zk_wire)
        notified = sum(r["kind"] == "event" for r in zk_wire)
        assert notified == join_notifications(size)
        assert requests == original_accounted_requests(events, members_seen=size, joiners=1, notified=notified)
        # the closed form on every case: plus exactly what a conflict added, which is nothing without one
        excess = beyond_the_textbook(events, size, PARTITIONS, notified, original_attempt_cost(size),
                                     ORIGINAL_PER_NOTIFICATION)
        assert requests == original_join_requests(size, PARTITIONS) + excess, (size, excess)
        assert (excess > 0) == conflicted(events), (size, excess)
        conflict_free += not conflicted(events)
    print(f"{conflict_free} of {len(summaries)} joins met no conflict")
