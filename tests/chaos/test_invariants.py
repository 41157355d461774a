"""The campaign's checkers over small histories written by hand: each finds exactly the violation planted in it,
charges it to the right fault with an excerpt, and finds nothing in the clean history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zkconsumer.lab.chaos import checkers as c
from zkconsumer.lab.chaos.history import History
from zkconsumer.lab.chaos.table import campaign_table, format_table
from zkconsumer.lab.trace import RunDirectory

GROUP, TOPIC = "chaos", "t"
SETTINGS = {"group": GROUP, "topic": TOPIC, "partitions": 2, "settle_bound_s": 5.0,
            "properties": {"partition.assignment.strategy": "range"}}


def reg(*topics: str) -> dict[str, Any]:
    return {"version": 1, "subscription": {t: 1 for t in topics}, "pattern": "static", "timestamp": "1"}


def view(ts: float, owners: dict[str, str], offsets: dict[str, int | None] | None = None,
         members: tuple[str, ...] = ("a", "b")) -> dict[str, Any]:
    return {"type": "group_view", "ts": ts, "ids": {f"{GROUP}_{m}": reg(TOPIC) for m in members},
            "owners": owners, "offsets": offsets or {}, "partitions": {TOPIC: 2}}


SETTLED = {f"{TOPIC}/0": f"{GROUP}_a-0", f"{TOPIC}/1": f"{GROUP}_b-0"}  # range over a, b: one partition each


def clean() -> list[dict[str, Any]]:
    """Two members, one kill of b healed by its restart; b's partition replayed from its last commit."""
    r: list[dict[str, Any]] = [
        {"type": "campaign", "ts": 0.0, "phase": "start", "settings": SETTINGS},
        {"type": "live", "ts": 0.1, "members": ["a", "b"]},
        view(1.0, SETTLED, {f"{TOPIC}/0": 0, f"{TOPIC}/1": 0}),
        {"type": "produce", "ts": 1.5, "topic": TOPIC, "partition": 1, "first_offset": 0, "last_offset": 3,
         "count": 4},
        {"type": "consume", "ts": 1.6, "member": "b", "topic": TOPIC, "partition": 1, "first_offset": 0,
         "last_offset": 3, "count": 4},
        {"type": "member_event", "ts": 1.7, "member": "b", "kind": "commit", "topic": TOPIC, "partition": 1,
         "offset": 2},
        {"type": "fault", "ts": 2.0, "fault_id": 1, "kind": "member_kill", "phase": "start", "target": "b",
         "params": {}},
        {"type": "member_exit", "ts": 2.0, "member": "b", "pid": 7, "code": -9, "signal": 9, "expected": True},
        {"type": "live", "ts": 2.01, "members": ["a"]},
        {"type": "fault", "ts": 3.0, "fault_id": 1, "kind": "member_kill", "phase": "heal", "target": "b",
         "params": {}},
        {"type": "live", "ts": 3.0, "members": ["a", "b"]},
        {"type": "member_event", "ts": 3.5, "member": "b", "kind": "fetchers_started",
         "offsets": {f"{TOPIC}/1": 2}},
        {"type": "consume", "ts": 3.6, "member": "b", "topic": TOPIC, "partition": 1, "first_offset": 2,
         "last_offset": 3, "count": 2},  # the replay since the commit at 2: two duplicates, legitimately
        view(4.5, SETTLED, {f"{TOPIC}/0": 0, f"{TOPIC}/1": 4}),
        view(9.0, SETTLED, {f"{TOPIC}/0": 0, f"{TOPIC}/1": 4}),
        {"type": "campaign", "ts": 10.0, "phase": "end", "settings": SETTINGS},
    ]
    for t in range(0, 11):
        r.append({"type": "health", "ts": float(t), "member": "a", "threads": 10, "pid": 5})
    return r


def judge(records: list[dict[str, Any]]) -> dict[int, c.CheckResult]:
    return {r.invariant: r for r in c.check_all(History.of_records(Path("h"), records))}


def test_the_clean_history_breaks_nothing_and_is_measured() -> None:
    results = judge(clean())
    assert {n: r.violation_count for n, r in results.items()} == {n: 0 for n in range(1, 7)}
    assert results[2].per_fault[1] == {"reconvergence_s": 1.5}  # heal at 3.0, settled view at 4.5
    assert results[3].per_fault[1] == {"duplicates": 2}
    assert results[3].measurements["gaps"] == 0


def test_a_dead_owner_after_the_bound_is_charged_to_its_fault() -> None:
    records = [*clean(), view(8.5, {**SETTLED, f"{TOPIC}/1": f"{GROUP}_c-0"})]  # c never lived
    result = judge(records)[1]
    assert result.violations == {1: 1}
    assert "c is not alive" in result.first_violation[0]
    early = [*clean(), view(3.2, {**SETTLED, f"{TOPIC}/1": f"{GROUP}_c-0"})]  # before heal + bound: allowed
    assert judge(early)[1].violation_count == 0


def test_no_reconvergence_within_the_bound() -> None:
    records = [r for r in clean() if not (r["type"] == "group_view" and r["ts"] > 2)]
    records.append(view(9.5, SETTLED))  # settled, but 6.5 s after the heal: over the 5 s bound
    result = judge(records)[2]
    assert result.violations == {1: 1} and "after 6.5 s" in result.first_violation[0]


def test_a_gap_and_a_start_before_the_last_commit() -> None:
    records = [*clean(), {"type": "produce", "ts": 5.0, "topic": TOPIC, "partition": 0, "first_offset": 0,
                          "last_offset": 1, "count": 2}]
    result = judge(records)[3]
    assert result.violations == {1: 1} and result.measurements["gaps"] == 2
    records = clean()
    records[11] = {**records[11], "offsets": {f"{TOPIC}/1": 1}}  # restarted below its commit at 2
    result = judge(records)[3]
    assert result.violations == {1: 1} and "before the commit 2 made before" in result.first_violation[0]


def test_offsets_read_before_the_previous_owners_last_commit_are_measured_not_violations() -> None:
    """0.8.2 reads the offsets before it claims: a commit that lands in between is delivered again."""
    records = clean()
    records += [{"type": "member_event", "ts": 3.3, "member": "b", "kind": "attempt_begin", "rebalance": 1,
                 "attempt": 0},
                {"type": "member_event", "ts": 3.4, "member": "a", "kind": "commit", "topic": TOPIC, "partition": 1,
                 "offset": 3}]  # after b read 2, before b's fetchers start at 2
    result = judge(records)[3]
    assert result.violation_count == 0
    assert (result.measurements["stale_reads"], result.measurements["committed_messages_delivered_again"]) == (1, 1)


def test_an_offset_moving_back_in_the_znode_or_in_the_commits() -> None:
    records = [*clean(), view(9.5, SETTLED, {f"{TOPIC}/0": 0, f"{TOPIC}/1": 3}),
                         {"type": "member_event", "ts": 9.6, "member": "a", "kind": "commit", "topic": TOPIC,
                          "partition": 1, "offset": 1}]
    result = judge(records)[4]
    assert result.violations == {1: 2}
    assert "went from 4 to 3" in result.first_violation[0]
    assert any('"offset": 3' in line or "t/1" in line for line in result.first_violation[1:])


def test_two_members_reading_one_partition_at_once_is_measured_not_a_violation() -> None:
    records = [*clean(),
        {"type": "consume", "ts": 3.4, "member": "a", "topic": TOPIC, "partition": 1, "first_offset": 2,
         "last_offset": 2, "count": 1},
        {"type": "consume", "ts": 3.8, "member": "a", "topic": TOPIC, "partition": 1, "first_offset": 3,
         "last_offset": 3, "count": 1}]
    result = judge(records)[5]
    assert not result.counts_as_violation and result.violation_count == 0
    assert result.measurements["windows"] == 1
    assert result.per_fault[1]["overlaps"] == 1 and result.per_fault[1]["overlap_max_s"] == pytest.approx(0.2)


@pytest.mark.parametrize("planted, why", [
    ({"type": "member_exit", "ts": 6.0, "member": "a", "pid": 5, "code": 1, "signal": 0, "expected": False},
     "ended with code 1"),
    ({"type": "member_exit", "ts": 6.0, "member": "a", "pid": 5, "code": -6, "signal": 6, "expected": True,
      "graceful": True}, "signal 6"),
    ({"type": "member_event", "ts": 6.0, "member": "a", "kind": "rebalance_failed", "error": "4 retries"},
     "ConsumerRebalanceFailed"),
])
def test_a_member_that_dies_or_gives_up(planted: dict[str, Any], why: str) -> None:
    result = judge([*clean(), planted])[6]
    assert result.violations == {1: 1} and why in result.first_violation[0]


def test_a_hung_member_and_a_leaking_one() -> None:
    records = [r for r in clean() if not (r["type"] == "health" and 3 < r["ts"] < 10)]  # silent 3 s..10 s
    result = judge(records)[6]
    assert result.violations == {1: 1} and "no health record for 7.0 s" in result.first_violation[0]
    starved = [r for r in clean() if not (r["type"] == "health" and 3 < r["ts"] < 7)]  # 4 s: a starved process
    assert judge(starved)[6].violation_count == 0
    leaking = [*clean(), {"type": "health", "ts": 10.5, "member": "a", "threads": 20, "pid": 5}]
    assert "more threads" in judge(leaking)[6].first_violation[0]


def test_a_pause_is_not_a_hang() -> None:
    records = [r for r in clean() if not (r["type"] == "health" and 4 < r["ts"] < 9)]
    records += [{"type": "fault", "ts": 4.0, "fault_id": 2, "kind": "member_pause", "phase": "start", "target": "a",
                 "params": {}},
                {"type": "fault", "ts": 8.9, "fault_id": 2, "kind": "member_pause", "phase": "heal", "target": "a",
                 "params": {}}]
    assert judge(records)[6].violation_count == 0


def test_the_table_and_a_history_judged_again_from_its_files(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path / "run", scenario="chaos")
    writer = run.trace("campaign", "zk")
    for record in clean():  # shifted: the writer takes a ts of 0 for "now"
        fields = {k: v for k, v in record.items() if k != "type"}
        writer.write(record["type"], **{**fields, "ts": 1000.0 + record["ts"]})
    writer.close()
    history = History.load(run.path)
    results = c.check_all(history)
    rows = campaign_table(history, results)
    assert rows == [{"kind": "member_kill", "count": 1, "duplicates": 2, "overlaps": 0, "overlap_max_s": 0.0,
                     "violations": {}, "reconv_median_s": 1.5, "reconv_max_s": 1.5}]
    text = format_table(rows)
    assert text.splitlines()[0].split()[:3] == ["kind", "count", "reconv_median_s"]
    assert "member_kill" in text
    json.dumps([r.to_dict() for r in results])  # chaos.json can hold them


def test_a_directory_that_is_no_campaign_is_named(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path / "run", scenario="herd")
    run.trace("x", "zk").close()
    with pytest.raises(ValueError, match="not a fault campaign"):
        History.load(run.path)


def test_a_commit_reported_on_waking_is_ordered_by_when_it_went_out() -> None:
    """A member paused between sending a commit and reading its answer reports it on waking, after the new owner's
    commit: ordered by `sent`, it came first and moved nothing back."""
    records = [*clean(),
               {"type": "member_event", "ts": 9.0, "member": "a", "kind": "commit", "topic": TOPIC, "partition": 1,
                "offset": 5, "sent": 8.9},
               {"type": "member_event", "ts": 9.5, "member": "b", "kind": "commit", "topic": TOPIC, "partition": 1,
                "offset": 4, "sent": 5.0}]
    assert judge(records)[4].violation_count == 0
    records[-1] = {**records[-1], "sent": 9.4}  # sent after a's commit of 5: it did move the offset back
    assert judge(records)[4].violations == {1: 1}
