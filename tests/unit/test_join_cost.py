"""The join-cost formula (docs/join-cost.md) against the members' own operation counters, over the in-memory
ZooKeeper; tests/lab/test_join_cost_wire.py checks the same against the wire of a real server."""

from __future__ import annotations

import pytest
from helpers import beyond_the_textbook, conflicted, wait_for

from zkconsumer.lab.rules.join_cost import accounted_requests, attempt_cost, join_notifications, join_requests


def requests(counts: dict[str, int]) -> int:
    return sum(v for k, v in counts.items() if ":" not in k)  # watch:* and state:* are not requests


def notifications(counts: dict[str, int]) -> int:
    return sum(v for k, v in counts.items() if k.startswith("watch:"))


@pytest.mark.parametrize("existing", [1, 2, 4, 8])
def test_one_join_costs_exactly_what_the_formula_says(memory_group, existing):
    partitions = 16
    topic = memory_group.topic("t", partitions)
    members = []
    for i in range(existing):
        members.append(memory_group.member("g", f"c{i}"))
        members[-1].create_message_streams({topic: 1})
        wait_for(lambda: memory_group.settled("g"), timeout=10, message="initial group settled")
    events: list[dict] = []
    for member in members:
        member.add_event_listener(lambda e: events.append(e.to_dict()))
    before = sum(requests(m.zk.op_counts()) for m in members)
    notified_before = sum(notifications(m.zk.op_counts()) for m in members)
    joiner = memory_group.member("g", f"c{existing}")
    joiner.add_event_listener(lambda e: events.append(e.to_dict()))
    joiner.create_message_streams({topic: 1})
    group = [*members, joiner]
    wait_for(lambda: memory_group.settled("g") and all(m.state == "owning" for m in group)
             and all(m.zk.wait_idle(1) for m in group), timeout=10, message="settled after the join")
    spent = sum(requests(m.zk.op_counts()) for m in group) - before
    notified = sum(notifications(m.zk.op_counts()) for m in group) - notified_before
    size = existing + 1
    assert notified == join_notifications(size)
    assert spent == accounted_requests(events, members_seen=size, joiners=1, notified=notified)
    # the closed form in every case: plus exactly what a conflict added, which is nothing without one
    excess = beyond_the_textbook(events, size, partitions, notified, attempt_cost(size))
    assert spent == join_requests(size, partitions) + excess, excess
    assert (excess > 0) == conflicted(events), excess


def test_closed_form_values():
    assert join_requests(2, 16) == 69  # M² + 7M + 3P + 3 with one broker
    assert join_requests(9, 72) == 81 + 63 + 216 + 3
