"""The states of one lab run (``case_run.CaseRun``), the transitions between them, and the error a run that cannot
complete raises. The diagram is in ``CaseRun``'s docstring; ``TRANSITIONS`` is the same graph as data. A fault
campaign (chaos/campaign.py) ends in the same terminal states.
"""

from __future__ import annotations

import enum

from rebalance.state_graph import checked_move
from zkconsumer.errors import UserError


class RunState(enum.Enum):
    CREATED = "created"  # the run directory and its manifest exist; nothing is running
    SETUP = "setup"  # proxies routed to the trace, topics created, the load and the mntr samplers started
    STARTING = "starting"  # the design's driver is up; the initial group starts in waves until it is stable
    CHURN = "churn"  # t = 0: the steps are applied at their times, stability tracked after each
    DRAINING = "draining"  # after the run's duration: the members consume the load's last messages
    STOPPING = "stopping"  # members, samplers, proxies and the admin client are being stopped
    # Terminal: the manifest's `status` (trace.RunDirectory.finish).
    COMPLETED = "completed"
    UNSETTLED = "unsettled"  # ran to the end, but the group was not stable again after the last change
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # SIGINT

    @property
    def terminal(self) -> bool:
        return not TRANSITIONS[self]


_ENDINGS = frozenset({RunState.COMPLETED, RunState.UNSETTLED, RunState.FAILED, RunState.INTERRUPTED})
TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.CREATED: frozenset({RunState.SETUP}),
    # Every state with something running may stop early (an error, a member that failed, Ctrl-C).
    RunState.SETUP: frozenset({RunState.STARTING, RunState.STOPPING}),
    RunState.STARTING: frozenset({RunState.CHURN, RunState.STOPPING}),
    RunState.CHURN: frozenset({RunState.DRAINING, RunState.STOPPING}),
    RunState.DRAINING: frozenset({RunState.STOPPING}),
    RunState.STOPPING: _ENDINGS,
    **{end: frozenset() for end in _ENDINGS},
}


class IllegalTransition(RuntimeError):
    """A run was asked to move where its state graph has no edge: a bug in the orchestrator, not in the scenario."""


def check_transition(run_id: str, current: RunState, to: RunState) -> RunState:
    """``to`` if the graph allows it from ``current``, else ``IllegalTransition`` naming both and what is allowed
    (rebalance/state_graph.py)."""
    return checked_move(TRANSITIONS, f"run {run_id}", current, to, IllegalTransition, "it has ended")


class LabRunError(UserError, RuntimeError):
    """A run could not complete (a member failed to start, the group never settled); names the log to read."""
