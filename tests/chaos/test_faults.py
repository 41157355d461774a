"""The campaign's generator: a plan is a function of the seed alone, meets every kind when it can, and holds each
fault as docs/chaos.md says relative to the session timeout."""

from __future__ import annotations

import pytest

from zkconsumer.lab.chaos import faults as f

SESSION_S = 6.0


def test_one_seed_gives_one_plan_and_another_seed_another() -> None:
    plan = f.plan_faults(40, seed=7, session_timeout_s=SESSION_S)
    assert plan == f.plan_faults(40, seed=7, session_timeout_s=SESSION_S)
    assert plan != f.plan_faults(40, seed=8, session_timeout_s=SESSION_S)
    assert [s.fault_id for s in plan] == list(range(1, 41))


def test_every_kind_comes_once_before_any_repeats() -> None:
    plan = f.plan_faults(len(f.FAULT_KINDS) + 5, seed=1, session_timeout_s=SESSION_S)
    first = [s.kind for s in plan[:len(f.FAULT_KINDS)]]
    assert sorted(first) == sorted(f.FAULT_KINDS)
    few = f.plan_faults(3, seed=1, session_timeout_s=SESSION_S)
    assert len({s.kind for s in few}) == 3


def test_holds_follow_the_session_timeout() -> None:
    plan = f.plan_faults(300, seed=3, session_timeout_s=SESSION_S)
    by_kind: dict[str, list[f.FaultSpec]] = {}
    for spec in plan:
        by_kind.setdefault(spec.kind, []).append(spec)
    assert all(s.hold_s > SESSION_S for s in by_kind[f.MEMBER_PAUSE])  # beyond it: the long GC pause
    cuts = [s.hold_s for s in by_kind[f.MEMBER_ZK_CUT]]
    assert min(cuts) < SESSION_S < max(cuts)  # both sides of the session timeout are met
    assert all(s.hold_s == f.ENSEMBLE_STOP_S for s in by_kind[f.ZK_ENSEMBLE_STOP])
    assert all(200 <= s.params["delay_ms"] <= 2000 for s in by_kind[f.MEMBER_ZK_DELAY])
    assert all(s.hold_s == 0 for s in by_kind[f.SESSION_EXPIRY])


def test_kinds_can_be_narrowed_and_an_unknown_one_is_named() -> None:
    kinds = f.parse_kinds("member_kill, broker_kill")
    assert {s.kind for s in f.plan_faults(20, 1, SESSION_S, kinds)} == {f.MEMBER_KILL, f.BROKER_KILL}
    assert f.parse_kinds(None) == f.FAULT_KINDS
    with pytest.raises(ValueError, match=r"member_kil.*choose from"):
        f.parse_kinds("member_kil")
    with pytest.raises(ValueError, match="must not be negative"):
        f.plan_faults(-1, 1, SESSION_S)
