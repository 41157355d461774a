"""A state machine's one rule: a move is allowed only along an edge of its graph.

Both state machines of the project keep their graph as data, a mapping from each state to the states it may go to:
a member's (`rebalance/events.py`, `MemberState`) and a lab run's (`zkconsumer/lab/runs/state.py`, `RunState`). A
move the graph lacks is a bug in the code that asked for it, and the error names the subject, both states and what
was allowed instead.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar

S = TypeVar("S", bound=enum.Enum)


def checked_move(graph: Mapping[S, frozenset[S]], subject: str, current: S, to: S, error: type[Exception],
                 final: str) -> S:
    """`to` if `graph` has the edge `current` → `to`; else `error` saying "`subject`: cannot go from CURRENT to TO
    (from CURRENT it may go to ...)", with `final` (e.g. "it is closed") where `current` has no edge at all."""
    allowed = graph[current]
    if to not in allowed:
        names = ", ".join(sorted(s.name for s in allowed)) or f"nothing: {final}"
        raise error(f"{subject}: cannot go from {current.name} to {to.name} (from {current.name} it may go to {names})")
    return to
