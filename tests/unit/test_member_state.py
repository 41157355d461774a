"""The member state (rebalance/events.py): its transitions are data, every edge is checked, and the listener alone
writes it, under its rebalance lock. Every unit test also checks its own transitions against the table
(conftest.py's `member_transitions`), so the rest of the unit suite is this file's evidence that the table holds
what the listener really does."""

from __future__ import annotations

import ast
import itertools
import threading
from pathlib import Path

import pytest
from helpers import wait_for

from rebalance.events import TRANSITIONS, EventKind, IllegalTransition, MemberState, check_transition

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("rebalance", "zkconsumer", "fetcher_manager")


def test_the_table_has_an_entry_for_every_state_and_names_only_states():
    assert set(TRANSITIONS) == set(MemberState)
    assert all(isinstance(to, MemberState) for targets in TRANSITIONS.values() for to in targets)


def test_every_state_is_reachable_from_created_and_every_state_can_close():
    seen, frontier = {MemberState.CREATED}, [MemberState.CREATED]
    while frontier:
        for to in TRANSITIONS[frontier.pop()] - seen:
            seen.add(to)
            frontier.append(to)
    assert seen == set(MemberState)
    assert [s for s in MemberState if s.terminal] == [MemberState.CLOSED]
    assert all(MemberState.CLOSED in TRANSITIONS[s] for s in MemberState if not s.terminal)


def test_the_docstring_draws_every_state():
    doc = MemberState.__doc__ or ""
    assert all(state.name in doc for state in MemberState)


def test_an_illegal_transition_raises_naming_both_states_and_what_is_allowed():
    with pytest.raises(IllegalTransition, match=r"g_m: cannot go from CREATED to OWNING \(from CREATED it may go to "
                                                r"CLOSED, REBALANCING, REGISTERING\)"):
        check_transition("g_m", MemberState.CREATED, MemberState.OWNING)
    with pytest.raises(IllegalTransition, match="from CLOSED it may go to nothing: it is closed"):
        check_transition("g_m", MemberState.CLOSED, MemberState.REGISTERING)
    assert check_transition("g_m", MemberState.OWNING, MemberState.REBALANCING) == MemberState.REBALANCING


def test_a_closed_member_refuses_to_register_again_and_emits_nothing(memory_group):
    member = memory_group.member("g", "m")
    member.shutdown()  # before any streams: CREATED -> CLOSED
    states: list[dict] = []
    member.add_event_listener(lambda e: states.append(dict(e.data)) if e.kind == EventKind.STATE else None)
    with pytest.raises(IllegalTransition, match="cannot go from CLOSED to REGISTERING"):
        member.listener.mark_registering()
    assert member.state == MemberState.CLOSED and states == []


def test_the_state_is_read_only_from_outside_the_listener(memory_group):
    member = memory_group.member("g", "m")
    with pytest.raises(AttributeError):
        member.listener.state = MemberState.OWNING  # type: ignore[misc]
    assert member.state == MemberState.CREATED


def _writes_of_the_member_state(tree: ast.AST) -> list[tuple[int, str]]:
    """Lines that assign a `.state`/`._state` of a listener or call a listener's `_transition` or `set_state`."""
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AugAssign | ast.AnnAssign) else []
        for target in targets:
            if isinstance(target, ast.Attribute) and target.attr in ("state", "_state") and "listener" in ast.unparse(
                    target.value):
                found.append((node.lineno, ast.unparse(target)))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "_transition", "set_state") and "listener" in ast.unparse(node.func.value):
            found.append((node.lineno, ast.unparse(node.func)))
    return found


@pytest.mark.static
def test_only_the_listener_writes_the_member_state():
    """The connector (or anything else) asks the listener (`mark_registering`, `mark_closed`); within the listener,
    `_state` is set in `__init__` and in `_transition` alone."""
    outside = {}
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            found = _writes_of_the_member_state(ast.parse(path.read_text(), str(path)))
            if found:
                outside[str(path.relative_to(ROOT))] = found
    assert outside == {}
    listener = ast.parse((ROOT / "rebalance" / "listener.py").read_text())
    writers = {function.name for function in ast.walk(listener) if isinstance(function, ast.FunctionDef)
               for node in ast.walk(function) if isinstance(node, ast.Assign)
               for target in node.targets if isinstance(target, ast.Attribute) and target.attr in ("state", "_state")}
    assert writers == {"__init__", "_transition"}


def test_every_transition_is_made_under_the_rebalance_lock(memory_group):
    """Each STATE event (emitted inside `_transition`) finds `rebalance_lock` held: another thread cannot take it."""
    memory_group.topic("t", 2)
    member = memory_group.member("g", "m")
    held: list[tuple[str, bool]] = []

    def probe(event) -> None:
        if event.kind != EventKind.STATE:
            return
        got: list[bool] = []

        def try_lock() -> None:
            lock = member.listener.rebalance_lock
            got.append(lock.acquire(blocking=False))
            if got[0]:
                lock.release()

        other = threading.Thread(target=try_lock)
        other.start()
        other.join()
        held.append((event.data["state"], not got[0]))

    member.add_event_listener(probe)
    member.create_message_streams({"t": 1})
    member.listener.trigger("test")
    wait_for(lambda: [s for s, _ in held].count("owning") == 2, timeout=10, message="the second rebalance")
    member.shutdown()
    assert [s for s, _ in held] == ["registering", "rebalancing", "owning", "rebalancing", "owning", "closed"]
    assert all(locked for _, locked in held), held


def _assert_a_legal_path(states: list[dict]) -> None:
    """Each STATE event an edge of the table, each starting where the one before ended: from CREATED to CLOSED."""
    assert states[0]["previous"] == MemberState.CREATED and states[-1]["state"] == MemberState.CLOSED
    for before, event in itertools.pairwise(states):
        assert event["previous"] == before["state"], states
    assert all(MemberState(e["state"]) in TRANSITIONS[MemberState(e["previous"])] for e in states), states


class Blocking:
    """A user rebalance listener that, once armed, holds the rebalance inside its release step until the member is
    told to stop (shutdown's first step), so the shutdown surely comes while the rebalance runs."""

    def __init__(self, member) -> None:
        self.member = member
        self.armed = False
        self.inside = threading.Event()

    def before_releasing_partitions(self, partition_ownership) -> None:
        if self.armed:
            self.inside.set()
            wait_for(lambda: self.member.listener.shutting_down, timeout=10, message="shutdown began")

    def before_starting_fetchers(self, consumer_id, global_partition_assignment) -> None:
        pass


def test_shutdown_during_a_rebalance_on_the_watcher_leaves_a_legal_sequence(memory_group):
    memory_group.topic("t", 2)
    member = memory_group.member("g", "m")
    blocking = Blocking(member)
    member.set_rebalance_listener(blocking)
    states: list[dict] = []
    member.add_event_listener(lambda e: states.append(dict(e.data)) if e.kind == EventKind.STATE else None)
    member.create_message_streams({"t": 1})
    assert member.state == MemberState.OWNING
    blocking.armed = True
    member.listener.trigger("test")
    assert blocking.inside.wait(10), "the watcher's rebalance never reached its release step"
    member.shutdown()  # on this thread, while the watcher is inside the rebalance
    assert member.state == MemberState.CLOSED
    _assert_a_legal_path(states)
    assert [e["state"] for e in states] == ["registering", "rebalancing", "owning", "rebalancing", "closed"]


def test_shutdown_from_another_thread_during_the_first_rebalance_leaves_a_legal_sequence(memory_group):
    memory_group.topic("t", 2)
    member = memory_group.member("g", "m")
    blocking = Blocking(member)
    blocking.armed = True  # the first rebalance, on the caller's thread
    member.set_rebalance_listener(blocking)
    states: list[dict] = []
    member.add_event_listener(lambda e: states.append(dict(e.data)) if e.kind == EventKind.STATE else None)
    stopper = threading.Thread(target=lambda: blocking.inside.wait(10) and member.shutdown())
    stopper.start()
    member.create_message_streams({"t": 1})  # its rebalance stops quietly: the member is shutting down
    stopper.join(10)
    assert not stopper.is_alive() and member.state == MemberState.CLOSED
    _assert_a_legal_path(states)
    assert [e["state"] for e in states] == ["registering", "rebalancing", "closed"]
