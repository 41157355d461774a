"""The churn timeline: who is in the group at each action's time, so that member selections are checked and
resolved into a case's concrete ``Step``s (random picks and spread actions drawn from the case's seed).
"""

from __future__ import annotations

import heapq
import random
from typing import Any

from zkconsumer.lab.scenarios.issues import Issue, plural_members, secs
from zkconsumer.lab.scenarios.model import (
    MEMBER_ACTIONS,
    AddPartitions,
    Delay,
    Join,
    KillZkLeader,
    Restart,
    Scenario,
    Step,
)


def phase_offset(seed: int, index: int, spread: float) -> float:
    """The drawn part of churn action ``index``'s time: uniform on [0, spread), a function of the case's seed and
    the action's place only, so every design of a case gets the same draw, and the draw neither depends on nor
    changes the members that ``random`` selectors pick (those use their own generator)."""
    if spread <= 0:
        return 0.0
    return random.Random(f"phase:{seed}:{index}").random() * spread


class _Timeline:
    """Who is in the group at each action's time, so member selections can be checked and resolved."""

    def __init__(self, s: Scenario, seed: int) -> None:
        self.present = list(range(s.group.members))  # oldest first: a member that (re)starts goes last
        self.next_index = s.group.members
        self.arrivals: list[tuple[float, int, int]] = []  # (time, sequence, member), a heap
        self.sequence = 0
        self.away: dict[int, tuple[float, str]] = {}  # member -> (back at, why it is away)
        self.gone: dict[int, str] = {}
        self.rng = random.Random(seed)
        self.issues: list[Issue] = []

    def advance(self, t: float) -> None:
        while self.arrivals and self.arrivals[0][0] <= t:
            _, _, member = heapq.heappop(self.arrivals)
            self.present.append(member)
            self.away.pop(member, None)

    def arrive(self, member: int, when: float, now: float, why: str) -> None:
        if when <= now:
            self.present.append(member)
        else:
            self.sequence += 1
            heapq.heappush(self.arrivals, (when, self.sequence, member))
            self.away[member] = (when, why)

    def select(self, a: Any, p: str) -> tuple[int, ...]:
        t, sel, n = a.at, a.member, len(self.present)
        if sel.kind in ("index", "all") and a.count is not None:
            self.issues.append(Issue(f"{p}.count", "count goes with member = 'newest', 'oldest' or 'random', "
                                     f"not with {sel.kind} members: remove it"))
        if sel.kind == "index":
            for m in sel.indices:
                if m not in self.present:
                    self.issues.append(Issue(f"{p}.member", self._absent(m, t)))
            return tuple(m for m in sel.indices if m in self.present)
        if sel.kind == "all":
            if not n:
                self.issues.append(Issue(f"{p}.member", f"no member to act on at t={secs(t)} s: the group is "
                                         "empty then"))
            return tuple(self.present)
        count = 1 if a.count is None else a.count
        if count > n:
            where = f"{p}.count" if a.count is not None else f"{p}.member"
            self.issues.append(Issue(where, f"{count} selected at t={secs(t)} s but the group has {plural_members(n)} "
                                     f"then: select at most {n}"))
            count = n
        if count == 0:
            return ()
        if sel.kind == "newest":
            return tuple(self.present[-count:])
        if sel.kind == "oldest":
            return tuple(self.present[:count])
        return tuple(sorted(self.rng.sample(self.present, count)))

    def _absent(self, m: int, t: float) -> str:
        if m in self.away:
            back, why = self.away[m]
            return (f"member {m} is not in the group at t={secs(t)} s ({why}, in at t={secs(back)} s): "
                    "act on it later or pick another member")
        if m in self.gone:
            return f"member {m} does not exist at t={secs(t)} s ({self.gone[m]}): pick another member"
        n = len(self.present)
        if sorted(self.present) == list(range(n)):
            hint = f"use an index below {n}" if n else "add a join before this action"
        else:
            hint = "use one of " + ", ".join(map(str, sorted(self.present)))
        return f"member {m} does not exist at t={secs(t)} s (the group has {plural_members(n)} then): {hint}"


def resolve_steps(s: Scenario, seed: int) -> tuple[list[Step], list[Issue]]:
    """Resolve every churn action to concrete members (random picks use ``seed``) and check the timeline."""
    line = _Timeline(s, seed)
    partitions = {t.name: t.partitions for t in s.group.topics}
    steps = []
    offsets = [phase_offset(seed, i, s.spread_s(a)) for i, a in enumerate(s.churn)]
    for i in sorted(range(len(s.churn)), key=lambda k: s.churn[k].at + offsets[k]):
        a, p = s.churn[i], f"churn[{i}]"
        at = a.at + offsets[i]
        line.advance(at)
        members: tuple[int, ...] = ()
        if isinstance(a, Join):
            members = tuple(range(line.next_index, line.next_index + a.count))
            line.next_index += a.count
            for k, m in enumerate(members):
                line.arrive(m, at + k * a.interval, at, f"started by {p}")
        elif isinstance(a, MEMBER_ACTIONS):
            members = line.select(a, p)
            if a.action in ("leave", "kill"):
                for m in members:
                    line.present.remove(m)
                    line.gone[m] = f"{'left' if a.action == 'leave' else 'killed'} at t={secs(a.at)} s by {p}"
            elif isinstance(a, Restart):
                for m in members:
                    line.present.remove(m)
                    line.arrive(m, at + a.delay, at, f"restarted by {p}")
        elif isinstance(a, AddPartitions):
            current = partitions.get(a.topic)
            if current is None:
                known = ", ".join(sorted(partitions))
                line.issues.append(Issue(f"{p}.topic", f"topic {a.topic!r} is not in group.topics: use one of "
                                         f"{known}"))
            elif a.total <= current:
                line.issues.append(Issue(f"{p}.total", f"total {a.total} does not exceed the {current} partitions "
                                         f"topic {a.topic!r} has at t={secs(a.at)} s: give a larger total"))
            else:
                partitions[a.topic] = a.total
        elif isinstance(a, KillZkLeader) and s.zk_servers < 3:
            line.issues.append(Issue(f"{p}.action", f"kill_zk_leader needs a 3-server ensemble (zk_servers is "
                                     f"{s.zk_servers}): set zk_servers = 3"))
        elif isinstance(a, Delay):
            members = a.members.indices
        steps.append(Step(index=i, at=at, action=a, members=members, offset=offsets[i]))
    return steps, line.issues
