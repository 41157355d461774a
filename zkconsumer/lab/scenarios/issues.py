"""How a scenario's problems are reported: an ``Issue`` per problem (field path + what to do), all of a file's
raised together as one ``ScenarioError``, and pydantic's validation errors translated into issues.
"""

from __future__ import annotations

import difflib
import re
import types
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from zkconsumer.errors import UserError
from zkconsumer.lab.scenarios.model import ACTIONS, Scenario

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
