"""The report's split-brain section: what was measured of members that disagreed, per run and when it happened.

Plain Python over collected rows: the `runs` and `changes` tables, the `contention` table
(per_run.ownership.contention_events) and the overlaps. Two members can disagree about the group in three measured ways:

* **views**: a member's claim met another member's owner node (NodeExists: the owner still acts on its own,
  older or newer, view), or two members claimed one partition in rebalance attempts that overlapped in time.
  The assignment is a deterministic function of the group a member read (the range strategy), so members of
  one view never want the same partition; two concurrent claims mean two snapshots. (Claims one after the
  other are a hand-over: a group that changes several times in one window, as in an expiry storm, is
  rebalanced several times.) ZooKeeper designs, from the owner-node creates on the wire and the members'
  attempt events.
  On the coordinator design one member (the leader) computes the whole assignment, so its members cannot
  disagree that way; what shows there is a member acting on an old generation (ILLEGAL_GENERATION,
  UNKNOWN_MEMBER_ID responses).
* **owner conflicts, failed attempts and backoffs**: the price of disagreeing on a ZooKeeper design. An owner
  node is created as an ephemeral znode, and ZooKeeper refuses a second create of an existing path
  (NodeExists), so at most one member holds a partition's node at any moment: the znode is the lock. The
  loser rolls its attempt back, sleeps `rebalance.backoff.ms` and reads the group again.
* **fetch overlap**: what the lock does not cover. A 0.8 member whose session expired keeps fetching until its
  next rebalance stops its fetchers (ownership.py), while another member claims the freed node: two members
  fetching one partition at once.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from zkconsumer.lab.designs import LABELS, is_zookeeper_design

Row = dict[str, Any]
EVENTS_SHOWN = 30  # per run: the first ones, in time order (the whole list is the `contention` table)
RUNS_SHOWN = 12  # runs with a timeline of their own, the most eventful first
CLAIM = "owner create"  # a contention row that only counts towards `views` (every claim is one)
ATTEMPT_BEGIN, ATTEMPT_END, BACKOFF = "attempt begin", "attempt end", "backoff after "
NOT_SHOWN = (CLAIM, ATTEMPT_BEGIN, ATTEMPT_END)  # many per run: counted, not listed

WHY_NO_OVERLAP = (
    "Owner nodes never overlap: a ZooKeeper-design member claims a partition by creating "
    "<code>/consumers/&lt;group&gt;/owners/&lt;topic&gt;/&lt;partition&gt;</code> as an ephemeral znode, and ZooKeeper "
    "answers a second create of an existing path with NodeExists, so the znode is the lock: one holder at a time, "
    "gone with its holder's session (Kafka 0.8.2's <code>ZkUtils.createEphemeralPathExpectConflict</code>). Two "
    "members that computed their assignment from different views of the group collide there (owner NodeExists), "
    "roll back and back off instead of owning one partition twice. What can still overlap is fetching: a member "
    "whose session expired keeps its fetchers until its next rebalance. On the coordinator design one member "
    "computes the assignment for all of a generation, so members cannot compute different ones; a member can "
    "still act on a generation the coordinator has left (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID).")


@dataclass
class RunContention:
    run: Row
    events: list[tuple[int, float, str, str, str]] = field(default_factory=list)  # change, t, member, what, tp
    claims: list[tuple[int, float, str, str]] = field(default_factory=list)  # change, ts, member, partition
    attempts: dict[str, list[list[float]]] = field(default_factory=lambda: defaultdict(list))  # [begin, end]
    refused: set[str] = field(default_factory=set)  # members whose claim was answered NodeExists
    overlaps_after_expiry: int = 0

    def _attempt(self, member: str, ts: float) -> tuple[float, float]:
        """The member's attempt a claim at `ts` belongs to (the claim's instant if none is known)."""
        for begin, end in reversed(self.attempts.get(member, ())):
            if begin <= ts:
                return begin, max(end, ts)
        return ts, ts

    @property
    def contested(self) -> list[tuple[int, str, list[str]]]:
        """(change, partition, members): two members claimed the partition in attempts that overlapped."""
        by_tp: dict[str, list[tuple[int, str, tuple[float, float]]]] = defaultdict(list)
        for change, ts, member, tp in self.claims:
            by_tp[tp].append((change, member, self._attempt(member, ts)))
        found: dict[tuple[int, str], set[str]] = defaultdict(set)
        for tp, claims in by_tp.items():
            for i, (change, a, (a0, a1)) in enumerate(claims):
                for _, b, (b0, b1) in claims[:i]:
                    if a != b and max(a0, b0) <= min(a1, b1):
                        found[(change, tp)] |= {a, b}
        return sorted((c, tp, sorted(m)) for (c, tp), m in found.items())

    @property
    def disagreeing(self) -> list[str]:
        """Members whose view of the group disagreed with another's: ZooKeeper designs, a claim refused with
        NodeExists or a contested one; the coordinator, a stale-generation answer."""
        if is_zookeeper_design(self.run["design"]):
            members = self.refused | {m for _, _, contested in self.contested for m in contested}
            return sorted(members, key=lambda m: (len(m), m))
        return sorted({e[2] for e in self.events if e[3].endswith(_STALE_SUFFIXES)}, key=lambda m: (len(m), m))


_STALE_SUFFIXES = ("ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID")


def _window(changes: list[Row], ts: float) -> Row | None:
    for i, c in enumerate(changes):
        last = i == len(changes) - 1
        if c["window_start"] <= ts and (ts < c["window_end"] or (last and ts == c["window_end"])):
            return c
    return None


def per_run(runs: list[Row], changes: list[Row], events: list[Row],
            overlaps_after_expiry: dict[str, int] | None = None) -> list[RunContention]:
    """Every run with its events inside its change windows (outside the churn they are the initial group's)."""
    events = sorted(events, key=lambda e: e["ts"])
    windows: dict[str, list[Row]] = defaultdict(list)
    for c in changes:
        windows[c["run_id"]].append(c)
    for rows in windows.values():
        rows.sort(key=lambda c: c["change_index"])
    found = {r["run_id"]: RunContention(r, overlaps_after_expiry=(overlaps_after_expiry or {}).get(r["run_id"], 0))
             for r in runs}
    for e in events:
        run = found.get(e["run_id"])
        change = run and _window(windows[e["run_id"]], e["ts"])
        if change is None:
            continue
        index = change["change_index"]
        what, member = e["what"], e["member"] or ""
        if what in (CLAIM, "owner NodeExists") and e.get("tp"):
            run.claims.append((index, e["ts"], member, e["tp"]))
        if what == "owner NodeExists":
            run.refused.add(member)
        if what == ATTEMPT_BEGIN:
            run.attempts[member].append([e["ts"], math.inf])
        elif (what == ATTEMPT_END or what.startswith(BACKOFF)) and run.attempts.get(member):
            run.attempts[member][-1][1] = min(run.attempts[member][-1][1], e["ts"])
        if what not in NOT_SHOWN:
            run.events.append((index, e["ts"] - change["change_ts"], e["member"] or "", e["what"], e.get("tp") or ""))
    return list(found.values())


def _n(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, float) and not float(value).is_integer() else f"{value:.0f}"


def _esc(value: Any) -> str:
    return html.escape(str(value))


def section(runs: list[Row], changes: list[Row], events: list[Row], overlaps: list[Row],
            overlaps_after_expiry: dict[str, int] | None = None) -> str:
    """The split-brain section's HTML: why owner nodes never overlap, a table of what was measured per run, each
    eventful run's events in time order, and the longest fetch overlaps."""
    contention = per_run(runs, changes, events, overlaps_after_expiry)
    parts = [f"<p class=note>{WHY_NO_OVERLAP}</p>", _counts_table(contention)]
    eventful = sorted((c for c in contention if c.events or c.contested),
                      key=lambda c: (-len(c.events) - len(c.contested), c.run["run_id"]))
    if not eventful:
        parts.append("<p>No owner conflict, failed attempt, expiry, stale generation or contested claim inside "
                     "any run's change windows.</p>")
    for c in eventful[:RUNS_SHOWN]:
        parts.append(_run_timeline(c, changes))
    if len(eventful) > RUNS_SHOWN:
        parts.append(f"<p class=note>{len(eventful) - RUNS_SHOWN} more runs had such events: the report's "
                     "<code>contention</code> table lists them all.</p>")
    parts.append("<h3>Two members fetching one partition at once</h3>")
    parts.append(_overlap_table(overlaps, runs, changes))
    return "\n".join(parts)


COUNTS = [  # (heading, title, value of a RunContention)
    ("attempts", "rebalance attempts (ZooKeeper designs) in the churn window", lambda c: c.run.get("attempts")),
    ("failed attempts (backoffs)", "attempts that failed and slept rebalance.backoff.ms before the next",
     lambda c: c.run.get("failed_attempts")),
    ("owner NodeExists", "owner-node creates ZooKeeper refused: the partition's znode was someone else's",
     lambda c: c.run.get("owner_conflicts")),
    ("views disagreed: members", "ZooKeeper designs: members whose claim met another member's owner node "
     "(NodeExists) or that claimed a partition another member claimed in an attempt overlapping theirs; "
     "coordinator: members answered ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID",
     lambda c: len(c.disagreeing)),
    ("contested partitions", "partitions two members claimed in rebalance attempts that overlapped in time",
     lambda c: len(c.contested) if is_zookeeper_design(c.run["design"]) else None),
    ("rebalance failures", "members that gave up after rebalance.max.retries",
     lambda c: c.run.get("rebalance_failures")),
    ("session expiries", "ZooKeeper sessions members lost", lambda c: c.run.get("session_expiries")),
    ("fetch overlaps", "two members fetching one partition at once", lambda c: c.run.get("overlaps")),
    ("of which after an expiry", "one side had lost its session by then", lambda c: c.overlaps_after_expiry),
    ("overlap s", "their total length", lambda c: c.run.get("overlap_s")),
]


def _counts_table(contention: list[RunContention]) -> str:
    head = "".join(f"<th title='{_esc(title)}'>{_esc(name)}</th>" for name, title, _ in COUNTS)
    rows = []
    for c in sorted(contention, key=lambda c: (c.run.get("scenario") or "", c.run.get("members") or 0,
                                              c.run.get("case") or "", c.run["design"])):
        cells = "".join(f"<td>{_n(value(c))}</td>" for _, _, value in COUNTS)
        rows.append(f"<tr><td>{_esc(c.run.get('case') or c.run['run_id'])}</td>"
                    f"<td>{_esc(LABELS.get(c.run['design'], c.run['design']))}</td><td>{_n(c.run.get('members'))}</td>"
                    f"{cells}</tr>")
    return (f"<table class=split><thead><tr><th>case</th><th>design</th><th>N</th>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table><p class=note>Counted inside each run's change windows, as the "
            f"lab's summary counts them; hover a heading for its meaning. A dash: the design does not have it.</p>")


def _run_timeline(c: RunContention, changes: list[Row]) -> str:
    labels = {ch["change_index"]: f"{ch['change_index']}: {ch['action']} {ch['change_members'] or ''}".strip()
              for ch in changes if ch["run_id"] == c.run["run_id"]}
    rows = "".join(f"<tr><td>{_esc(labels.get(i, i))}</td><td>+{t:.3f}</td><td>{_esc(m)}</td><td>{_esc(w)}</td>"
                   f"<td>{_esc(tp)}</td></tr>" for i, t, m, w, tp in c.events[:EVENTS_SHOWN])
    more = (f"<p class=note>and {len(c.events) - EVENTS_SHOWN} more.</p>" if len(c.events) > EVENTS_SHOWN else "")
    contested = "; ".join(f"{tp} by {', '.join(members)} (change {i})" for i, tp, members in c.contested[:10])
    claims = (f"<p class=note>Claimed by two members in overlapping attempts: {_esc(contested)}"
              f"{' …' if len(c.contested) > 10 else ''}.</p>" if contested else "")
    design = LABELS.get(c.run["design"], c.run["design"])
    return (f"<details open class=contention data-run='{_esc(c.run['run_id'])}'><summary>"
            f"{_esc(c.run.get('case') or c.run['run_id'])}, {_esc(design)}: {len(c.events)} events, "
            f"{len(c.disagreeing)} members with disagreeing views</summary>{claims}"
            f"<table><thead><tr><th>change</th><th>s after it</th><th>member</th><th>what</th><th>partition</th></tr>"
            f"</thead><tbody>{rows}</tbody></table>{more}</details>")


OVERLAP_COLUMNS = ["case", "design", "partition", "member a", "member b", "change", "s after it", "overlap s",
                   "after an expiry"]


def _overlap_table(overlaps: list[Row], runs: list[Row], changes: list[Row]) -> str:
    if not overlaps:
        return ("<p>No fetch overlap: no two members fetched one partition at the same time in any run's change "
                "windows (ownership intervals, docs/analysis.md).</p>")
    case = {r["run_id"]: r.get("case") or r["run_id"] for r in runs}
    at = {(c["run_id"], c["change_index"]): c for c in changes}
    rows = []
    for o in overlaps:
        change = at.get((o["run_id"], o.get("change_index")))
        since = "-" if change is None else f"+{o['start'] - change['change_ts']:.3f}"
        label = "-" if change is None else f"{change['change_index']}: {change['action']} {change['change_members']}"
        expiry = {True: "yes", False: "no"}.get(o.get("after_expiry"), "n/r")
        cells = [case.get(o["run_id"], o["run_id"]), LABELS.get(o["design"], o["design"]), o["tp"], o["member_a"],
                 o["member_b"], label, since, f"{o['overlap_s']:.3f}", expiry]
        rows.append("<tr>" + "".join(f"<td>{_esc(v)}</td>" for v in cells) + "</tr>")
    head = "".join(f"<th>{_esc(c)}</th>" for c in OVERLAP_COLUMNS)
    return (f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table><p class=note>The longest "
            f"overlaps first; n/r: not reported by the design.</p>")
