"""Scenario checks beyond one field: cross-field rules, the churn timeline, and readable pydantic errors.

Every problem is an ``Issue`` (field path + message saying what to do); a file's issues are all collected
and raised together as one ``ScenarioError``.
"""

from __future__ import annotations

import difflib
import heapq
import random
import re
import types
from dataclasses import dataclass, fields
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from zkconsumer.config import ConfigError, ConsumerConfig
from zkconsumer.errors import UserError
from zkconsumer.lab.scenario_model import (
    ACTIONS,
    MEMBER_ACTIONS,
    AddPartitions,
    Delay,
    Expire,
    Join,
    Kill,
    KillZkLeader,
    NetworkRule,
    Pause,
    Restart,
    Scenario,
    Step,
)

# Set per run and per member by the lab; a scenario that sets them would break group isolation.
LAB_OWNED_KEYS = ("group.id", "zookeeper.connect", "consumer.id")
KAFKA_KEYS = tuple(f.name.replace("_", ".") for f in fields(ConsumerConfig) if f.init)
_PLACEHOLDERS = {"group.id": "lab", "zookeeper.connect": "127.0.0.1:2181"}
_CONFIG_KEY = re.compile(r"([a-z.]+)(?:=| is )")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Issue:
    path: str  # e.g. "churn[2].member"; empty for file-level problems
    message: str

    def line(self, file: str) -> str:
        return f"{file}: {self.path}: {self.message}" if self.path else f"{file}: {self.message}"


class ScenarioError(UserError, ValueError):
    """A scenario file is unreadable or invalid; one line per problem, each naming file and field path."""

    def __init__(self, file: str, issues: list[Issue]) -> None:
        self.file = file
        self.issues = list(issues)
        super().__init__("\n".join(self.lines))

    @property
    def lines(self) -> list[str]:
        return [issue.line(self.file) for issue in self.issues]


def secs(t: float) -> str:
    return f"{t:.1f}" if round(t, 1) == t else f"{t:g}"


def plural_members(n: int) -> str:
    return f"{n} member" if n == 1 else f"{n} members"


def render_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = part if _BARE_KEY.fullmatch(part) else f'"{part}"'
            out += f".{name}" if out else name
    return out


# --- pydantic errors -> issues --------------------------------------------------------------------------

def translate(error: ValidationError) -> list[Issue]:
    issues = []
    for err in error.errors():
        loc = tuple(err["loc"])
        # A discriminated union puts the tag in the location (churn, 2, "kill", "member"): users never wrote it.
        if len(loc) > 2 and loc[0] == "churn" and loc[2] in ACTIONS:
            loc = loc[:2] + loc[3:]
        kind = err["type"]
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            loc = (*loc, "action")
            actions = ", ".join(ACTIONS)
            message = (f"unknown action {err['ctx']['tag']!r}: use one of {actions}" if kind == "union_tag_invalid"
                       else f"required: set action to one of {actions}")
        else:
            message = _message(err, tuple(err["loc"]))
        issues.append(Issue(render_path(loc), message))
    return issues


def _message(err: Any, raw_loc: tuple[int | str, ...]) -> str:
    kind, value = err["type"], err["input"]
    if kind == "extra_forbidden":
        known = _known_keys(raw_loc)
        close = difflib.get_close_matches(str(raw_loc[-1]), known, n=1)
        if close:
            return f"unknown key: did you mean {close[0]!r}?"
        return "unknown key: remove it" + (f" (known keys here: {', '.join(known)})" if known else "")
    if kind == "missing":
        return "required: add it"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a table, got {value!r}"
    if kind == "list_type":
        return f"must be an array ([...]), got {value!r}"
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    text = str(err["msg"]).replace("Input should be", "must be").replace("List should have", "must have")
    return f"{text[:1].lower()}{text[1:]}, got {value!r}"


def _strip(tp: Any) -> Any:
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
        elif get_origin(tp) in (Union, types.UnionType):
            options = [a for a in get_args(tp) if a is not type(None)]
            if len(options) != 1:
                return tp
            tp = options[0]
        else:
            return tp


def _known_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the model at ``loc``'s parent accepts (for "did you mean")."""
    tp: Any = Scenario
    for part in loc[:-1]:
        tp = _strip(tp)
        if isinstance(part, int):
            tp = get_args(tp)[0] if get_origin(tp) is list else None
        elif isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(part)
            tp = field.annotation if field else None
        else:
            tp = ACTIONS.get(part)
        if tp is None:
            return []
    tp = _strip(tp)
    return list(tp.model_fields) if isinstance(tp, type) and issubclass(tp, BaseModel) else []


# --- cross-field rules ----------------------------------------------------------------------------------

def static_issues(s: Scenario) -> list[Issue]:
    """Rules that need several fields but not the timeline."""
    issues: list[Issue] = []

    def add(path: str, message: str) -> None:
        issues.append(Issue(path, message))

    for i, design in enumerate(s.designs):
        if design in s.designs[:i]:
            add(f"designs[{i}]", f"{design!r} is listed twice: list each design once")
    names = [t.name for t in s.group.topics]
    for i, name in enumerate(names):
        if name in names[:i]:
            add(f"group.topics[{i}].name", f"topic {name!r} is listed twice: give each topic one entry")
    if s.group.members == 0 and not any(isinstance(a, Join) and a.count > 0 for a in s.churn):
        add("group.members", "the group never has a member: set group.members or add a join action")
    issues += zk_issues(s.zk)
    c = s.coordinator
    if c.heartbeat_interval_ms >= c.session_timeout_ms:
        add("coordinator.heartbeat_interval_ms", f"{c.heartbeat_interval_ms} must be below session_timeout_ms "
            f"({c.session_timeout_ms}): a third of it is usual")
    ever = s.group.members + sum(a.count for a in s.churn if isinstance(a, Join))
    for i, rule in enumerate(s.network):
        issues += _network_issues(f"network[{i}]", rule, ever)
    for i, a in enumerate(s.churn):
        p = f"churn[{i}]"
        if a.at > s.duration:
            add(f"{p}.at", f"t={secs(a.at)} s is after the end of the run (duration = {secs(s.duration)} s): "
                "move it earlier or raise duration")
        elif i and a.at < s.churn[i - 1].at:
            add(f"{p}.at", f"t={secs(a.at)} s is before churn[{i - 1}].at (t={secs(s.churn[i - 1].at)} s): "
                "list actions in time order")
        spread = s.spread_s(a)
        end = _ends_at(a)
        if end is not None and a.at <= s.duration < end[1] + spread:
            add(f"{p}.{end[0]}", f"the {a.action} ends at t={secs(end[1] + spread)} s"
                f"{' (with its spread)' if spread else ''}, after the end of the run (duration = "
                f"{secs(s.duration)} s): shorten it or raise duration")
        elif spread and end is None and a.at <= s.duration < a.at + spread:
            add(f"{p}.spread", f"the {a.action} may run as late as t={secs(a.at + spread)} s, after the end of "
                f"the run (duration = {secs(s.duration)} s): move it earlier or raise duration")
        later = s.churn[i + 1].at if i + 1 < len(s.churn) else None
        if spread and later is not None and a.at <= later < a.at + spread:
            add(f"{p}.spread", f"the {a.action} may run as late as t={secs(a.at + spread)} s, after churn[{i + 1}] "
                f"(t={secs(later)} s): a drawn time must keep the actions in order, so move churn[{i + 1}] later")
        if s.group.process_mode == "threads" and _signals_a_process(a):
            add(f"{p}.action", f"{a.action} signals the member's own process: set group.process_mode = "
                '"processes"')
        if isinstance(a, Expire) and "coordinator" in s.designs:
            add(f"{p}.action", "expire ends a ZooKeeper session, which the coordinator design does not have: "
                'set designs = ["zk"] (pause a member past its session timeout to compare both designs)')
        if isinstance(a, Delay):
            issues += _network_issues(p, a, ever)
    # The delivery audit compares what each design's members recorded with what they committed: both must commit
    # on the same period, or the designs' duplicates differ by the setting rather than by the design.
    if s.audits_delivery and c.auto_commit_interval_ms is not None and "coordinator" in s.designs:
        zk_interval = _zk_commit_interval(s)
        if zk_interval is not None and c.auto_commit_interval_ms != zk_interval:
            add("coordinator.auto_commit_interval_ms", f"{c.auto_commit_interval_ms} differs from zk "
                f"auto.commit.interval.ms ({zk_interval}) in a scenario that audits delivery ([load] rate > 0): "
                "make them equal, or remove it (it then follows the zk setting)")
    # The coordinator design learns of new partitions only from a metadata refresh: one must fit in the run.
    grown = [a.at + s.spread_s(a) for a in s.churn if isinstance(a, AddPartitions)]
    if grown and "coordinator" in s.designs and max(grown) + c.metadata_max_age_ms / 1000 > s.duration:
        add("coordinator.metadata_max_age_ms", f"{c.metadata_max_age_ms} ms: the coordinator design's members may "
            f"not refresh metadata between the add_partitions at t={secs(max(grown))} s and the end of the run "
            f"(duration = {secs(s.duration)} s), so they might never own the new partitions: lower it")
    return issues


def _zk_commit_interval(s: Scenario) -> int | None:
    """[zk] auto.commit.interval.ms with Kafka's default; None while [zk] itself is invalid (reported there)."""
    try:
        return s.zk_config("lab", "127.0.0.1:2181").auto_commit_interval_ms
    except ConfigError:
        return None


def phase_offset(seed: int, index: int, spread: float) -> float:
    """The drawn part of churn action ``index``'s time: uniform on [0, spread), a function of the case's seed and
    the action's place only, so every design of a case gets the same draw, and the draw neither depends on nor
    changes the members that ``random`` selectors pick (those use their own generator)."""
    if spread <= 0:
        return 0.0
    return random.Random(f"phase:{seed}:{index}").random() * spread


def _network_issues(path: str, rule: NetworkRule | Delay, ever: int) -> list[Issue]:
    """A [[network]] rule or a delay action; ``ever`` is how many members the run ever has."""
    issues = []
    if rule.jitter_ms > rule.delay_ms:
        issues.append(Issue(f"{path}.jitter_ms", f"{rule.jitter_ms} ms exceeds delay_ms ({rule.delay_ms} ms): "
                            "a delay cannot go below 0, lower the jitter"))
    missing = [m for m in rule.members.indices if m >= ever]
    if missing:
        issues.append(Issue(f"{path}.members", f"member {missing[0]} never exists (the group has at most {ever} "
                            f"members): use indices below {ever}"))
    return issues


def sweep_issues(s: Scenario) -> list[Issue]:
    """A sweep axis that would replace nothing (checked on the scenario, not on its cases)."""
    if s.sweep and s.sweep.axis in ("delay_ms", "jitter_ms") and not s.network:
        return [Issue("sweep.axis", f"{s.sweep.axis} sweeps the [[network]] rules but there are none: add one")]
    if s.sweep and s.sweep.axis == "joiners" and not any(isinstance(a, Join) for a in s.churn):
        return [Issue("sweep.axis", "joiners sweeps the count of join actions but there are none: add one")]
    return []


def _signals_a_process(a: object) -> bool:
    return isinstance(a, Kill | Pause) or (isinstance(a, Restart) and a.stop == "kill")


def _ends_at(a: object) -> tuple[str, float] | None:
    if isinstance(a, Pause):
        return "seconds", a.at + a.seconds
    if isinstance(a, Restart):
        return "delay", a.at + a.delay
    if isinstance(a, Join) and a.count > 1:
        return "interval", a.at + (a.count - 1) * a.interval
    return None


def zk_issues(settings: dict[str, Any]) -> list[Issue]:
    """Check [zk] (flattened Kafka keys) with ``ConsumerConfig``: unknown keys, bad values, lab-owned keys."""
    issues = []
    checked: dict[str, Any] = {}
    for key, value in settings.items():
        path = render_path(("zk", key))
        if key in LAB_OWNED_KEYS:
            issues.append(Issue(path, "set by the lab for each run and member: remove it"))
        elif key not in KAFKA_KEYS:
            close = difflib.get_close_matches(key, KAFKA_KEYS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "remove it"
            issues.append(Issue(path, f"not a Kafka 0.8.2 consumer setting: {hint}"))
        else:
            problem = _config_problem({key: value})
            if problem:
                issues.append(Issue(path, problem))
            else:
                checked[key] = value
    if len(checked) == len(settings):  # rules between keys, e.g. fetch.wait.max.ms <= socket.timeout.ms
        problem = _config_problem(checked)
        if problem:
            found = _CONFIG_KEY.match(problem)
            key = found[1] if found and found[1] in settings else None
            issues.append(Issue(render_path(("zk", key)) if key else "zk", problem))
    return issues


def _config_problem(props: dict[str, Any]) -> str | None:
    try:
        ConsumerConfig.from_properties({**props, **_PLACEHOLDERS})
    except ConfigError as exc:
        return str(exc)
    return None


# --- the churn timeline ---------------------------------------------------------------------------------

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
