"""Member selectors of a lab scenario: which members an action or a network rule applies to, as written in TOML
(an index, a list, an ``"a-b"`` range or a keyword) and as the pydantic field types that parse and print them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import PlainSerializer, PlainValidator

SELECTOR_KEYWORDS = ("newest", "oldest", "random", "all")
_RANGE = re.compile(r"\s*([0-9]+)\s*-\s*([0-9]+)\s*")
_SELECTOR_FORMS = "a member index (3), a list ([0, 2]), a range ('0-3'), 'newest', 'oldest', 'random' or 'all'"


@dataclass(frozen=True)
class Selector:
    """Which members an action or network rule applies to.

    ``index`` carries explicit member indices (from an int, a list or an ``"a-b"`` range); the other kinds are
    resolved against the group as it is when the action runs (``all`` in a network rule also covers members
    that join later).
    """

    kind: Literal["index", "newest", "oldest", "random", "all"]
    indices: tuple[int, ...] = ()

    def to_toml(self) -> int | list[int] | str:
        if self.kind != "index":
            return self.kind
        return self.indices[0] if len(self.indices) == 1 else list(self.indices)

    def __str__(self) -> str:
        return self.kind if self.kind != "index" else ", ".join(map(str, self.indices))


def parse_selector(value: Any) -> Selector:
    if isinstance(value, Selector):
        return value
    if isinstance(value, bool):  # bool is an int in Python; `member = true` is a mistake, not member 1
        raise ValueError(f"expected {_SELECTOR_FORMS}, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"member indices start at 0, got {value}")
        return Selector("index", (value,))
    if isinstance(value, list):
        if not value or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
            raise ValueError(f"a member list needs one or more indices >= 0, got {value!r}")
        if len(set(value)) != len(value):
            raise ValueError(f"member list {value!r} names a member twice: list each once")
        return Selector("index", tuple(value))
    if isinstance(value, str):
        if value in SELECTOR_KEYWORDS:
            return Selector(value)  # type: ignore[arg-type]
        found = _RANGE.fullmatch(value)
        if found:
            low, high = int(found[1]), int(found[2])
            if low > high:
                raise ValueError(f"range {value!r} is empty: write it low-high, e.g. '{high}-{low}'")
            return Selector("index", tuple(range(low, high + 1)))
    raise ValueError(f"expected {_SELECTOR_FORMS}, got {value!r}")


def _network_selector(value: Any) -> Selector:
    selector = parse_selector(value)
    if selector.kind not in ("index", "all"):
        raise ValueError(f"network rules take member indices, a range like '0-3' or 'all', not {selector.kind!r}")
    return selector


_toml_form = PlainSerializer(lambda s: s.to_toml())
MemberSelector = Annotated[Selector, PlainValidator(parse_selector), _toml_form]
NetworkSelector = Annotated[Selector, PlainValidator(_network_selector), _toml_form]
