"""The campaign's checkers: each invariant judged over a recorded history (history.py), never during the run, so a
history can be judged again and a checker added without running the faults again (docs/chaos.md, "Invariants").

Each checker returns a `CheckResult`: its violations charged to the fault in whose window they happened, the first
one with an excerpt of the history around it, and what it measured. Invariant 5 (two members reading one partition
at once) is measured, never a violation: the 0.8 design allows it around a session expiry. A checker that raises
leaves its invariant unknown, not the whole verdict lost (`check_all`, as Jepsen's `check-safe` does).
"""

from __future__ import annotations

import itertools
import json
import logging
import traceback
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from zkconsumer.lab.chaos.history import History
from zkconsumer.lab.chaos.prescribed import converged, member_of_thread
from zkconsumer.lab.chaos.reading import overlap_windows

log = logging.getLogger(__name__)

# A member process writes `health` every second; a gap longer than this while it runs and is not paused is a hang.
# Six missed records, not three: on two cores beside six JVMs a starved Python process can go three seconds without
# running, and a real hang (a deadlock, a stuck C call) lasts until the campaign ends anyway.
HANG_S = 6.0
THREAD_SLACK = 4  # threads a member may gain over its first healthy count (a fetcher per broker comes and goes)
# Fault kinds whose history may hold a ConsumerRebalanceFailed without breaking invariant 6: none. A campaign built
# to cause one (a budget below what a fault needs) would name its kinds here.
REBALANCE_FAILURE_ALLOWED: frozenset[str] = frozenset()


@dataclass
class CheckResult:
    invariant: int
    name: str
    counts_as_violation: bool = True
    violations: dict[int | None, int] = field(default_factory=dict)  # fault id (None: before any) -> count
    first_violation: list[str] = field(default_factory=list)
    measurements: dict[str, Any] = field(default_factory=dict)
    per_fault: dict[int, dict[str, Any]] = field(default_factory=dict)  # fault id -> what was measured in it
    error: str | None = None  # the checker raised this: nothing above was judged (check_all)
    trace: str | None = None  # ... and where

    @property
    def violation_count(self) -> int:
        return sum(self.violations.values())

    @property
    def verdict(self) -> str:
        """"unknown" when the checker failed, "fail" when an invariant that counts violations has one, else "pass"."""
        if self.error is not None:
            return "unknown"
        return "fail" if self.counts_as_violation and self.violation_count else "pass"

    def violate(self, history: History, ts: float, what: str, types: tuple[str, ...] = ()) -> None:
        fault_id = history.fault_id(ts)
        self.violations[fault_id] = self.violations.get(fault_id, 0) + 1
        if not self.first_violation:
            self.first_violation = [what] + [json.dumps(_brief(r), sort_keys=True)
                                             for r in history.excerpt(ts, types=types)]

    def to_dict(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "name": self.name, "counts_as_violation": self.counts_as_violation,
                "verdict": self.verdict, "error": self.error, "trace": self.trace, "violations": self.violation_count,
                "by_fault": {str(k): v for k, v in self.violations.items()},
                "first_violation": self.first_violation, "measurements": self.measurements,
                "per_fault": {str(k): v for k, v in self.per_fault.items()}}


def _brief(record: dict[str, Any]) -> dict[str, Any]:
    """A record as the excerpt shows it: without the noise, and never a session's password."""
    return {k: ("<redacted>" if k == "password" else v) for k, v in record.items()
            if k not in ("v", "design", "thread_names")}


def _live_at(history: History) -> Callable[[float], list[str]]:
    """The member processes that existed at a time (the orchestrator's `live` records)."""
    changes = [(r["ts"], r["members"]) for r in history.of_type("live")]

    def at(ts: float) -> list[str]:
        members: list[str] = []
        for when, names in changes:
            if when > ts:
                break
            members = names
        return members
    return at


def _reconverged_at(history: History) -> dict[int, float]:
    """Fault id -> the time of the first view after its heal that shows the group re-converged (if one does)."""
    live_at = _live_at(history)
    views = list(history.of_type("group_view"))
    found = {}
    for window in history.faults:
        if window.heal_ts is None:
            continue
        first = next((v for v in views if window.heal_ts <= v["ts"] < window.end_ts
                      and converged(v, history.group, live_at(v["ts"]), history.strategy)), None)
        if first is not None:
            found[window.fault_id] = first["ts"]
    return found


def check_stale_owners(history: History) -> CheckResult:
    """1: once settled (re-converged, or at the latest heal + settle bound) and until the next fault, no owner node
    names a dead member."""
    result = CheckResult(1, "no owner names a dead member once settled")
    live_at = _live_at(history)
    reconverged = _reconverged_at(history)
    seen: set[tuple[int, str, str]] = set()
    checked = 0
    for view in history.of_type("group_view"):
        window = history.window(view["ts"])
        if window is None or window.heal_ts is None:
            continue
        settled = min(reconverged.get(window.fault_id, float("inf")), window.heal_ts + history.settle_bound_s)
        if view["ts"] < settled:
            continue
        checked += 1
        live = set(live_at(view["ts"]))
        for partition, thread in sorted(view["owners"].items()):
            member = member_of_thread(history.group, thread)
            if member is not None and member not in live and (window.fault_id, partition, member) not in seen:
                seen.add((window.fault_id, partition, member))
                result.violate(history, view["ts"], f"owner of {partition} is {thread}, but {member} is not alive",
                               ("group_view", "live", "member_exit", "fault"))
    result.measurements = {"views_checked": checked}
    return result


def check_reconvergence(history: History) -> CheckResult:
    """2: after each heal, the owners become what the strategy prescribes for the live members, within the bound."""
    result = CheckResult(2, "re-converges to the prescribed assignment within the settle bound")
    reconverged = _reconverged_at(history)
    times = []
    for window in history.faults:
        if window.heal_ts is None:
            continue
        at = reconverged.get(window.fault_id)
        if at is None or at - window.heal_ts > history.settle_bound_s:
            late = "never" if at is None else f"after {at - window.heal_ts:.1f} s"
            result.violate(history, window.heal_ts, f"fault {window.fault_id} ({window.kind}): re-converged {late}, "
                           f"bound {history.settle_bound_s:.0f} s", ("fault", "group_view", "member_exit"))
        if at is not None:
            seconds = round(at - window.heal_ts, 3)
            result.per_fault[window.fault_id] = {"reconvergence_s": seconds}
            times.append(seconds)
    result.measurements = {"bound_s": history.settle_bound_s, "max_s": max(times, default=None)}
    return result


def check_offset_audit(history: History) -> CheckResult:
    """3: every produced offset consumed at least once; a member starts reading a partition no earlier than the
    last commit made before it read the offsets, so a duplicate only replays work since a commit. Duplicates are
    counted per fault.

    0.8.2 reads the offsets in its rebalance attempt before it claims the partitions, so a claim that lands just
    after the previous owner's final commit starts from the commit before it: those starts are measured
    (`stale_reads`, and the committed messages they deliver again), not violations. Only a start below what was
    committed before the attempt began breaks the invariant."""
    result = CheckResult(3, "every produced message consumed; duplicates only replay since the last commit")
    consumed: dict[tuple[str, int], set[int]] = defaultdict(set)
    duplicates: dict[int | None, int] = defaultdict(int)
    committed: dict[str, int] = {}
    at_attempt: dict[str, dict[str, int]] = {}  # member -> the commits known when its current attempt began
    stale_reads = replayed_commits = 0
    for r in history.of_type("consume", "member_event"):
        if r["type"] == "consume":
            seen = consumed[(r["topic"], r["partition"])]
            for offset in range(r["first_offset"], r["last_offset"] + 1):
                if offset in seen:
                    duplicates[history.fault_id(r["ts"])] += 1
                seen.add(offset)
        elif r["kind"] == "commit":
            committed[f"{r['topic']}/{r['partition']}"] = r["offset"]
        elif r["kind"] == "attempt_begin":
            at_attempt[r["member"]] = dict(committed)
        elif r["kind"] == "fetchers_started":
            known = at_attempt.get(r["member"], committed)
            for partition, start in (r.get("offsets") or {}).items():
                if start is None:
                    continue
                if partition in known and start < known[partition]:
                    result.violate(history, r["ts"], f"{r['member']} started {partition} at {start}, before the "
                                   f"commit {known[partition]} made before its attempt began",
                                   ("member_event", "fault"))
                elif partition in committed and start < committed[partition]:
                    stale_reads += 1
                    replayed_commits += committed[partition] - start
    gaps = 0
    for r in history.of_type("produce"):
        seen = consumed.get((r["topic"], r["partition"]), set())
        missing = [o for o in range(r["first_offset"], r["last_offset"] + 1) if o not in seen]
        if missing:
            gaps += len(missing)
            result.violate(history, r["ts"], f"{r['topic']}/{r['partition']}: {len(missing)} produced offsets never "
                           f"consumed, first {missing[0]}", ("produce", "consume", "fault"))
    for fault_id, count in duplicates.items():
        if fault_id is not None:
            result.per_fault[fault_id] = {"duplicates": count}
    result.measurements = {"gaps": gaps, "duplicates": sum(duplicates.values()),
                           "consumed_offsets": sum(len(s) for s in consumed.values()),
                           "stale_reads": stale_reads, "committed_messages_delivered_again": replayed_commits}
    return result


def check_commits_monotonic(history: History) -> CheckResult:
    """4: a partition's committed offset never moves backwards, in the znodes and in the members' commits (ordered
    by when each write went out, `sent`: a member paused while its write was answered reports it on waking)."""
    result = CheckResult(4, "committed offsets never move backwards")
    in_znode: dict[str, int] = {}
    unreadable = 0
    for r in history.of_type("group_view"):
        for partition, offset in sorted(r["offsets"].items()):
            if offset is None:
                unreadable += 1
                continue
            if offset < in_znode.get(partition, offset):
                result.violate(history, r["ts"], f"{partition}: the offset node went from {in_znode[partition]} "
                               f"to {offset}", ("group_view", "member_event", "fault"))
            in_znode[partition] = offset
    by_commit: dict[str, int] = {}
    commits = [r for r in history.of_type("member_event") if r["kind"] == "commit"]
    for r in sorted(commits, key=lambda r: r.get("sent", r["ts"])):
        partition = f"{r['topic']}/{r['partition']}"
        if r["offset"] < by_commit.get(partition, r["offset"]):
            result.violate(history, r.get("sent", r["ts"]), f"{r['member']} committed {partition}={r['offset']} "
                           f"after {by_commit[partition]}", ("member_event", "fault"))
        by_commit[partition] = r["offset"]
    result.measurements = {"unreadable_offset_views": unreadable}
    return result


def check_overlaps(history: History) -> CheckResult:
    """5 (measured): windows in which two members read the same partition at once."""
    result = CheckResult(5, "two members reading one partition at once (measured)", counts_as_violation=False)
    windows = overlap_windows(history.of_type("consume"))
    for w in windows:
        fault_id = history.fault_id(w.start_ts)
        if fault_id is not None:
            slot = result.per_fault.setdefault(fault_id, {"overlaps": 0, "overlap_max_s": 0.0})
            slot["overlaps"] += 1
            slot["overlap_max_s"] = max(slot["overlap_max_s"], round(w.seconds, 3))
    result.measurements = {"windows": len(windows), "max_s": max((round(w.seconds, 3) for w in windows), default=0.0),
                           "messages_read_twice_in_them": sum(w.messages for w in windows)}
    return result


def check_member_health(history: History) -> CheckResult:
    """6: no member dies, hangs or leaks threads; no ConsumerRebalanceFailed unless its fault kind allows it."""
    result = CheckResult(6, "no member dies, hangs or leaks threads; no rebalance failure")
    paused = [(w.target, w.start_ts, w.heal_ts or w.end_ts) for w in history.faults if w.kind == "member_pause"]
    health: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in history.of_type("member_exit", "health", "member_event"):
        if r["type"] == "member_exit":
            if not r["expected"] or (r.get("graceful") and r["code"] != 0):
                result.violate(history, r["ts"], f"{r['member']} (pid {r['pid']}) ended with code {r['code']}, "
                               f"signal {r['signal']}", ("member_exit", "fault"))
        elif r["type"] == "health":
            health[r["pid"]].append(r)
        elif r["kind"] == "rebalance_failed":
            window = history.window(r["ts"])
            if window is None or window.kind not in REBALANCE_FAILURE_ALLOWED:
                result.violate(history, r["ts"], f"{r['member']}: ConsumerRebalanceFailed: {r.get('error')}",
                               ("member_event", "fault"))
    growth = 0
    for records in health.values():
        name = records[0]["member"]
        for before, after in itertools.pairwise(records):
            gap = after["ts"] - before["ts"]
            was_paused = any(t == name and s <= after["ts"] and before["ts"] <= e for t, s, e in paused)
            if gap > HANG_S and not was_paused:
                result.violate(history, after["ts"], f"{name} (pid {after['pid']}) wrote no health record for "
                               f"{gap:.1f} s", ("health", "fault"))
        baseline = records[min(len(records) - 1, 5)]["threads"]  # after its start-up threads have all begun
        grown = max(r["threads"] for r in records[-5:]) - baseline
        growth = max(growth, grown)
        if grown > THREAD_SLACK:
            result.violate(history, records[-1]["ts"], f"{name} (pid {records[0]['pid']}) has {grown} more threads "
                           f"than after its start ({baseline})", ("health",))
    result.measurements = {"max_thread_growth": growth}
    return result


Checker = Callable[[History], CheckResult]
CHECKERS: tuple[tuple[int, Checker], ...] = (  # (the invariant, its checker)
    (1, check_stale_owners), (2, check_reconvergence), (3, check_offset_audit), (4, check_commits_monotonic),
    (5, check_overlaps), (6, check_member_health))


def check_all(history: History, checkers: tuple[tuple[int, Checker], ...] | None = None) -> list[CheckResult]:
    """Every checker (CHECKERS unless given) over the history, each on its own, as Jepsen's `check-safe` runs a
    checker: one that raises gives its invariant the verdict "unknown" with the error (an unforeseen record, a bug
    in the checker), and the other invariants are still judged."""
    results = []
    for invariant, checker in CHECKERS if checkers is None else checkers:
        try:
            results.append(checker(history))
        except Exception as exc:
            log.exception("chaos: the checker of invariant %d (%s) failed", invariant, checker.__name__)
            results.append(CheckResult(invariant, checker.__name__, error=f"{type(exc).__name__}: {exc}",
                                       trace=traceback.format_exc()))
    return results
