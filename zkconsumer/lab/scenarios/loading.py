"""Lab scenarios: load and validate TOML files, expand a sweep into cases, find the shipped scenarios.

A scenario is valid only if every case it expands to is: rules are checked on each sweep value (and, when
members are picked at random, on each repeat's seed), and a problem that only some cases have says which.
The schema is documented in docs/scenarios.md.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from zkconsumer.lab.designs import DESIGNS
from zkconsumer.lab.scenarios.issues import Issue, ScenarioError, render_path, translate
from zkconsumer.lab.scenarios.model import (
    ACTIONS,
    MEMBER_ACTIONS,
    SWEEP_AXES,
    Case,
    Scenario,
    Step,
    flatten,
)
from zkconsumer.lab.scenarios.rules import static_issues, sweep_issues, zk_issues
from zkconsumer.lab.scenarios.selectors import Selector
from zkconsumer.lab.scenarios.timeline import resolve_steps

__all__ = [
    "ACTIONS", "DESIGNS", "SWEEP_AXES", "Case", "Issue", "Scenario", "ScenarioError", "Selector", "Step",
    "case_seed", "expand_cases", "find_scenario", "load_scenario", "parse_scenario", "render_path", "shipped_names",
    "shipped_scenario", "shipped_scenarios", "validate_scenario",
]

_TOML_WHERE = re.compile(r"^(.*?)\s*\(at (?:line (\d+), column (\d+)|end of document)\)$")
_SHIPPED_LABEL = "zkconsumer/lab/scenarios/{}.toml"


def load_scenario(source: str | os.PathLike[str]) -> Scenario:
    """Read, parse and fully validate one scenario file; raises ``ScenarioError`` listing every problem."""
    file = os.fspath(source)
    try:
        text = Path(file).read_bytes().decode("utf-8")
    except OSError as exc:
        raise ScenarioError(file, [Issue("", f"cannot be read ({exc.strerror or exc}): check the path")]) from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(file, [Issue("", f"is not UTF-8 text (byte {exc.start}): save it as UTF-8")]) from None
    return parse_scenario(text, file)


def parse_scenario(text: str, file: str = "<string>") -> Scenario:
    """Parse and fully validate scenario TOML; ``file`` only labels the errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_WHERE.match(str(exc))
        what = found[1] if found else str(exc)
        where = f"line {found[2]}, column {found[3]}: " if found and found[2] else "at the end: " if found else ""
        raise ScenarioError(file, [Issue("", f"{where}invalid TOML ({what}): fix the syntax")]) from None
    return validate_scenario(data, file)


def validate_scenario(data: dict[str, Any] | Scenario, file: str = "<scenario>") -> Scenario:
    """Validate a parsed TOML table (or a ``Scenario`` built in code) against every rule, on every case."""
    if isinstance(data, Scenario):
        scenario = data
    else:
        try:
            scenario = Scenario.model_validate(data)
        except ValidationError as exc:
            issues = translate(exc)
            # The Kafka keys need no valid whole to be checked: report them with the structural errors.
            zk = data.get("zk") if isinstance(data, dict) else None
            if isinstance(zk, dict):
                issues += zk_issues(flatten(zk))
            raise ScenarioError(file, issues) from None
    issues = _all_issues(scenario)
    if issues:
        raise ScenarioError(file, issues)
    return scenario


def case_seed(scenario_seed: int, case_id: str) -> int:
    """A stable 31-bit seed per case: the same on every machine and Python version (unlike ``hash``)."""
    digest = hashlib.sha256(f"{scenario_seed}:{case_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def expand_cases(scenario: Scenario) -> list[Case]:
    """One ``Case`` per sweep value and repeat, sweep values in file order, then repeats.

    Raises ``ScenarioError`` for a scenario that breaks a rule (possible when it was built in code).
    """
    issues = _all_issues(scenario)
    if issues:
        raise ScenarioError(f"scenario {scenario.name}", issues)
    cases: list[Case] = []
    for _, value, applied in _variants(scenario):
        assert isinstance(applied, Scenario)  # a value that breaks the model is among the issues above
        for repeat, case_id in enumerate(_case_ids(scenario, value)):
            seed = case_seed(scenario.seed, case_id)
            steps, _ = resolve_steps(applied, seed)
            cases.append(Case(case_id=case_id, scenario=applied, repeat=repeat, seed=seed,
                              sweep_axis=scenario.sweep.axis if scenario.sweep else None, sweep_value=value,
                              steps=tuple(steps)))
    return cases


# --- shipped scenarios ------------------------------------------------------------------------------------

def _shipped_dir() -> Any:
    return resources.files("zkconsumer.lab.scenarios")


def shipped_names() -> list[str]:
    """Names of the scenarios shipped inside the package, sorted."""
    return sorted(p.name.removesuffix(".toml") for p in _shipped_dir().iterdir() if p.name.endswith(".toml"))


def shipped_scenario(name: str) -> Scenario:
    """A shipped scenario by name; its errors are labelled with its path in the package."""
    if name not in shipped_names():
        known = ", ".join(shipped_names())
        raise ScenarioError(name, [Issue("", f"no shipped scenario of that name: use one of {known}")])
    text = (_shipped_dir() / f"{name}.toml").read_text(encoding="utf-8")
    return parse_scenario(text, _SHIPPED_LABEL.format(name))


def shipped_scenarios() -> list[Scenario]:
    return [shipped_scenario(name) for name in shipped_names()]


def find_scenario(ref: str | os.PathLike[str]) -> Scenario:
    """A scenario file path, or the name of a shipped scenario (``herd``)."""
    text = os.fspath(ref)
    if Path(text).exists() or text.endswith(".toml") or os.sep in text:
        return load_scenario(text)
    if text in shipped_names():
        return shipped_scenario(text)
    raise ScenarioError(text, [Issue("", "no such file and no shipped scenario of that name: "
                                     "see `zkconsumer lab list` for the shipped ones")])


# --- sweep expansion and per-case checking ----------------------------------------------------------------

def _case_ids(s: Scenario, value: int | None) -> list[str]:
    middle = f"-{s.sweep.axis}={value}" if s.sweep and value is not None else ""
    return [f"{s.name}{middle}-r{r}" for r in range(s.repeats)]


def _variants(s: Scenario) -> list[tuple[int, int | None, Scenario | list[Issue]]]:
    """(value index, value, the scenario with it applied, or the issues that value causes)."""
    if s.sweep is None:
        return [(0, None, s)]
    out: list[tuple[int, int | None, Scenario | list[Issue]]] = []
    for i, value in enumerate(s.sweep.values):
        data = s.model_dump()
        data["sweep"] = None
        _apply(data, s.sweep.axis, value)
        try:
            out.append((i, value, Scenario.model_validate(data)))
        except ValidationError as exc:
            out.append((i, value, [Issue(f"sweep.values[{i}]", f"{s.sweep.axis} = {value} is invalid here: "
                                         f"{issue.path}: {issue.message}") for issue in translate(exc)]))
    return out


def _apply(data: dict[str, Any], axis: str, value: int) -> None:
    """Put one sweep value where ``SWEEP_AXES`` says it goes."""
    if axis in ("members", "streams"):
        data["group"][axis] = value
    elif axis == "joiners":
        for action in data["churn"]:
            if action["action"] == "join":
                action["count"] = value
    elif axis == "partitions":
        for topic in data["group"]["topics"]:
            topic["partitions"] = value
    elif axis in ("delay_ms", "jitter_ms"):
        for rule in data["network"]:
            rule[axis] = value
    elif axis in ("rate", "keys", "message_size"):
        data["load"][axis] = float(value) if axis == "rate" else value
    elif axis == "session_timeout_ms":
        data["zk"]["zookeeper.session.timeout.ms"] = value
        data["coordinator"]["session_timeout_ms"] = value
    elif axis in ("heartbeat_interval_ms", "initial_rebalance_delay_ms"):
        data["coordinator"][axis] = value
    elif axis in ("rebalance_backoff_ms", "rebalance_max_retries"):
        data["zk"][axis.replace("_", ".")] = value
    else:  # SWEEP_AXES and this function must list the same axes
        raise AssertionError(f"sweep axis {axis!r} has no applier")


def _all_issues(s: Scenario) -> list[Issue]:
    everywhere = sweep_issues(s)
    where: dict[Issue, list[str]] = {}  # issue -> the case ids that have it
    all_ids: list[str] = []
    uses_random = any(isinstance(a, MEMBER_ACTIONS) and a.member.kind == "random" for a in s.churn)
    for _, value, applied in _variants(s):
        ids = _case_ids(s, value)
        all_ids += ids
        if isinstance(applied, list):
            everywhere += applied  # already names the sweep value
            continue
        for issue in static_issues(applied):
            where.setdefault(issue, []).extend(ids)
        # Without random picks every repeat resolves the same way: check the first only.
        for case_id in ids if uses_random else ids[:1]:
            for issue in dict.fromkeys(resolve_steps(applied, case_seed(s.seed, case_id))[1]):
                where.setdefault(issue, []).extend(ids if not uses_random else [case_id])
    for issue, ids in where.items():
        everywhere.append(issue if len(set(ids)) == len(all_ids) else
                          Issue(issue.path, issue.message + _only_in(s, set(ids))))
    return everywhere


def _only_in(s: Scenario, ids: set[str]) -> str:
    """" (with members = 1, 2)" or " (in case crash-r1)": which cases have a problem that others lack."""
    parts = []
    rest = set(ids)
    if s.sweep:
        whole = [v for v in s.sweep.values if set(_case_ids(s, v)) <= ids]
        if whole:
            parts.append(f"with {s.sweep.axis} = {', '.join(map(str, whole))}")
            for v in whole:
                rest -= set(_case_ids(s, v))
    if rest:
        shown = sorted(rest)
        parts.append("in case " + ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else ""))
    return f" ({'; '.join(parts)})"

