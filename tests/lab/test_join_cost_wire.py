"""One join on the real ZooKeeper, counted by the proxy: the wire equals the formula of docs/join-cost.md
(exactly, with conflicts accounted from the members' events) and equals the members' own counters.

The closed form is checked on every case, conflicts or not: a join that met a conflict costs the closed form plus
exactly what the conflict added (the attempts, claims, releases and rollbacks beyond the textbook case), and that
excess is zero exactly when there was no conflict."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers import beyond_the_textbook, conflicted

from zkconsumer.lab.rules.join_cost import accounted_requests, attempt_cost, join_notifications, join_requests
from zkconsumer.lab.runs.session import LabSession
from zkconsumer.lab.scenarios.loading import expand_cases, parse_scenario
from zkconsumer.lab.trace import read_traces

PARTITIONS = 16
SCENARIO = f"""
name = "join-cost"
description = "one join into N rebalance-only members"
designs = ["zk"]
duration = 1.0
seed = 7
settle_timeout = 30.0
[group]
members = 1
process_mode = "threads"
topics = [{{ name = "jc", partitions = {PARTITIONS} }}]
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


@pytest.mark.slow
def test_the_wire_count_of_one_join_is_the_formula_and_the_counters(tmp_path, shared_lab_servers):
    scenario = parse_scenario(SCENARIO, "inline")
    summaries = LabSession(scenario, expand_cases(scenario), ["zk"], tmp_path, servers=shared_lab_servers).run()
    assert [s.completed for s in summaries] == [True] * 4
    conflict_free = 0
    for summary in summaries:
        records = sorted(read_traces(summary.path), key=lambda r: r["ts"])
        settled = next(r["ts"] for r in records if r["type"] == "phase" and r["phase"] == "settled")
        done = next(r["ts"] for r in records if r["type"] == "phase" and r["phase"] == "done")
        window = [r for r in records if settled <= r["ts"] <= done]
        size = summary.members + 1
        events = [r for r in window if r["type"] == "member_event"]
        zk_wire = [r for r in window if r["type"] == "wire" and r["proto"] == "zk"]
        requests = [r for r in zk_wire if r["kind"] == "request"]
        notified = sum(r["kind"] == "event" for r in zk_wire)
        assert notified == join_notifications(size)
        # The lab's members connect to ZooKeeper's root, where the broker registers: no chroot checks.
        assert len(requests) == accounted_requests(events, members_seen=size, joiners=1, notified=notified)
        excess = beyond_the_textbook(events, size, PARTITIONS, notified, attempt_cost(size))
        assert len(requests) == join_requests(size, PARTITIONS) + excess, (size, excess)
        assert (excess > 0) == conflicted(events), (size, excess)
        conflict_free += not conflicted(events)

        # Over the whole run: the wire equals the members' own counters, but for what kazoo sends by itself
        # (closeSession at the end, and a watch recipe's re-read that a member leaving at the same moment set off
        # after this member's closeSession: the server never answers it, and our counters count a recipe's read
        # when it returns).
        zk_requests = [r for r in records if r["type"] == "wire" and r["proto"] == "zk" and r["kind"] == "request"]
        # After by xid, not by time: the proxy stamps frames read in one chunk with the same time.
        closed_at = {r["conn"]: r["xid"] for r in zk_requests if r["op"] == "closeSession"}
        after_close = [r for r in zk_requests if r["conn"] in closed_at and r["xid"] > closed_at[r["conn"]]]
        assert all(r["op"] in ("getChildren", "getData", "exists") for r in after_close), after_close
        wire_all = Counter(r["op"] for r in zk_requests)
        own = sum(v for r in records if r["type"] == "member_event" and r["kind"] == "op_counts"
                  for k, v in r["counts"].items() if ":" not in k)
        assert sum(wire_all.values()) - wire_all["closeSession"] - len(after_close) == own
    print(f"{conflict_free} of {len(summaries)} joins met no conflict")
