"""Scenario rules beyond one field: checks that relate fields to each other, and the [zk] Kafka keys checked with
``ConsumerConfig``. The churn timeline's checks are in ``scenario_timeline``; how issues read, in
``scenario_issues``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import fields
from typing import Any

from zkconsumer.config import ConfigError, ConsumerConfig
from zkconsumer.lab.designs import is_broker_side
from zkconsumer.lab.scenarios.issues import Issue, render_path, secs
from zkconsumer.lab.scenarios.model import (
    AddPartitions,
    Delay,
    Expire,
    Join,
    Kill,
    Migrate,
    NetworkRule,
    Pause,
    Restart,
    Scenario,
)

# Set per run and per member by the lab; a scenario that sets them would break group isolation.
LAB_OWNED_KEYS = ("group.id", "zookeeper.connect", "consumer.id")
KAFKA_KEYS = tuple(f.name.replace("_", ".") for f in fields(ConsumerConfig) if f.init)
_PLACEHOLDERS = {"group.id": "lab", "zookeeper.connect": "127.0.0.1:2181"}
_CONFIG_KEY = re.compile(r"([a-z.]+)(?:=| is )")


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
        if isinstance(a, Expire) and broker_side(s):
            add(f"{p}.action", "expire ends a ZooKeeper session, which the coordinator design does not have: "
                'set designs = ["zk"] (pause a member past its session timeout to compare both designs)')
        if isinstance(a, Migrate) and broker_side(s):
            add(f"{p}.action", "migrate replaces a ZooKeeper-design member by a coordinator-design one within one "
                'run: it is not a step of the coordinator design\'s own run; set designs = ["zk"]')
        if isinstance(a, Delay):
            issues += _network_issues(p, a, ever)
    # The delivery audit compares what each design's members recorded with what they committed: both must commit
    # on the same period, or the designs' duplicates differ by the setting rather than by the design.
    if s.audits_delivery and c.auto_commit_interval_ms is not None and broker_side(s):
        zk_interval = _zk_commit_interval(s)
        if zk_interval is not None and c.auto_commit_interval_ms != zk_interval:
            add("coordinator.auto_commit_interval_ms", f"{c.auto_commit_interval_ms} differs from zk "
                f"auto.commit.interval.ms ({zk_interval}) in a scenario that audits delivery ([load] rate > 0): "
                "make them equal, or remove it (it then follows the zk setting)")
    # The coordinator design learns of new partitions only from a metadata refresh: one must fit in the run.
    grown = [a.at + s.spread_s(a) for a in s.churn if isinstance(a, AddPartitions)]
    if grown and broker_side(s) and max(grown) + c.metadata_max_age_ms / 1000 > s.duration:
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


def broker_side(s: Scenario) -> bool:
    """Whether the scenario runs a broker-side design (eager, cooperative or consumer protocol)."""
    return any(is_broker_side(d) for d in s.designs)
