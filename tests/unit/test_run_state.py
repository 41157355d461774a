"""A lab run's state graph (zkconsumer/lab/runs/state.py): the moves CaseRun makes are allowed, every other move is
refused naming both states, every state a run can be in can still stop, and it ends in a manifest status."""

from __future__ import annotations

import itertools

import pytest

from zkconsumer.lab.runs.case_run import CaseRun
from zkconsumer.lab.runs.state import TRANSITIONS, IllegalTransition, RunState, check_transition

S = RunState
THROUGH = [S.CREATED, S.SETUP, S.STARTING, S.CHURN, S.DRAINING, S.STOPPING]
EARLY_STOPS = [S.SETUP, S.STARTING, S.CHURN]
ENDINGS = {S.COMPLETED, S.UNSETTLED, S.FAILED, S.INTERRUPTED}


def walk(path: list[RunState]) -> RunState:
    state = path[0]
    for to in path[1:]:
        state = check_transition("r1", state, to)
    return state


@pytest.mark.parametrize("end", sorted(ENDINGS, key=lambda s: s.name))
def test_a_run_through_every_phase_may_end_any_way(end: RunState) -> None:
    assert walk([*THROUGH, end]) is end


@pytest.mark.parametrize("stopped_in", EARLY_STOPS)
def test_a_run_may_stop_early_from_any_phase_with_something_running(stopped_in: RunState) -> None:
    path = [*THROUGH[: THROUGH.index(stopped_in) + 1], S.STOPPING, S.FAILED]
    assert walk(path) is S.FAILED


def test_exactly_the_moves_the_run_makes_are_allowed() -> None:
    allowed = {(a, b) for a, b in itertools.pairwise(THROUGH)}
    allowed |= {(s, S.STOPPING) for s in EARLY_STOPS}
    allowed |= {(S.STOPPING, end) for end in ENDINGS}
    assert {(a, b) for a, targets in TRANSITIONS.items() for b in targets} == allowed
    for a, b in itertools.product(S, S):
        if (a, b) not in allowed:
            with pytest.raises(IllegalTransition, match=rf"run r1: cannot go from {a.name} to {b.name}"):
                check_transition("r1", a, b)


@pytest.mark.parametrize(("current", "to", "says"), [
    (S.CREATED, S.CHURN, "from CREATED it may go to SETUP"),  # skipping the setup
    (S.CHURN, S.COMPLETED, "from CHURN it may go to DRAINING, STOPPING"),  # ending without stopping anything
    (S.COMPLETED, S.SETUP, "from COMPLETED it may go to nothing: it has ended"),  # run() a second time
])
def test_a_refusal_says_what_was_allowed(current: RunState, to: RunState, says: str) -> None:
    with pytest.raises(IllegalTransition) as refused:
        check_transition("r1", current, to)
    assert says in str(refused.value)


def test_endings_are_the_manifest_statuses_and_only_they_are_terminal() -> None:
    assert {s for s in S if s.terminal} == ENDINGS
    # trace.RunDirectory.finish documents these statuses; the analysis reads them
    assert {s.value for s in ENDINGS} == {"completed", "unsettled", "interrupted", "failed"}


def test_the_class_docstring_draws_every_state() -> None:
    assert CaseRun.__doc__ is not None
    assert [s.name for s in S if s.name not in CaseRun.__doc__] == []
