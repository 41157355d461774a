"""Two things the clean history of test_invariants.py cannot show.

The convergence predicate (prescribed.converged): it decides both when the group has re-converged (invariant 2)
and when invariant 1 starts looking. Every view of the clean history after its heal is already settled, so a
lenient predicate would pass there; here a view that is *not* settled is planted just after the heal, and the
re-convergence time must skip it.

Checker isolation (checkers.check_all), as Jepsen's `check-safe` does it: a checker that raises gives its invariant
the verdict "unknown" with the error, the other invariants are still judged, and `lab chaos-check` exits 2, not 0
(docs/chaos.md, "Invariants").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_invariants import GROUP, SETTLED, TOPIC, clean, judge, reg, view

from zkconsumer.lab.chaos import checkers as c
from zkconsumer.lab.chaos.cli import chaos_check
from zkconsumer.lab.chaos.history import History
from zkconsumer.lab.chaos.table import campaign_table, format_table
from zkconsumer.lab.trace import RunDirectory

A0, A1, B0 = f"{GROUP}_a-0", f"{GROUP}_a-1", f"{GROUP}_b-0"
P0, P1 = f"{TOPIC}/0", f"{TOPIC}/1"


def malformed_registration(ts: float) -> dict[str, Any]:
    """a's registration unreadable (a node that is not a registration): no member can assign from it."""
    planted = view(ts, SETTLED)
    planted["ids"] = {f"{GROUP}_a": None, f"{GROUP}_b": reg(TOPIC)}
    return planted


# Views taken 0.2 s after the heal (3.0) in the clean history, each unsettled in one way. The live members are a
# and b; range over a, b prescribes t/0 -> a-0, t/1 -> b-0 (SETTLED).
UNSETTLED = {
    "owners swapped between the live members": view(3.2, {P0: B0, P1: A0}),
    "a partition without owner": view(3.2, {P0: A0}),
    "an owner of a partition the topic does not have": view(3.2, {**SETTLED, f"{TOPIC}/2": A0}),
    "the right member, another of its threads": view(3.2, {P0: A1, P1: B0}),
    # the owners are what range prescribes for a, b and c (c gets nothing): only the registrations are wrong
    "a dead member still registered": view(3.2, SETTLED, members=("a", "b", "c")),
    # ... for a alone (both partitions): b is alive but not registered
    "a live member not registered": view(3.2, {P0: A0, P1: A0}, members=("a",)),
    "a malformed registration": malformed_registration(3.2),
}


@pytest.mark.parametrize("planted", list(UNSETTLED.values()), ids=list(UNSETTLED))
def test_reconvergence_skips_a_view_that_is_not_settled(planted: dict[str, Any]) -> None:
    results = judge([*clean(), planted])
    # the first settled view after the heal at 3.0 is still the one at 4.5: 1.5 s, not the planted view's 0.2 s
    assert results[2].per_fault[1] == {"reconvergence_s": 1.5}
    assert results[2].violation_count == 0
    # invariant 1 looks from 4.5 on: the views at 4.5 and 9.0 (heal + bound is 8.0); the planted one is not checked
    assert results[1].measurements["views_checked"] == 2


def test_stale_owners_are_looked_for_only_once_the_group_has_reconverged() -> None:
    """A view naming a dead member at 3.4 is allowed: the group has not re-converged (the swapped owners at 3.2
    are not what range prescribes) and heal + bound is 8.0. A predicate that took the 3.2 view as settled would
    start invariant 1 there and charge the 3.4 view to fault 1."""
    records = [*clean(), view(3.2, {P0: B0, P1: A0}), view(3.4, {P0: A0, P1: f"{GROUP}_c-0"})]
    results = judge(records)
    assert results[1].violations == {}
    assert results[1].measurements["views_checked"] == 2  # 4.5 and 9.0
    assert results[2].per_fault[1] == {"reconvergence_s": 1.5}


def crashing(history: History) -> c.CheckResult:
    raise KeyError("first_offset")  # what a record without a field it reads does to a checker


def with_crashing_audit() -> tuple[tuple[int, c.Checker], ...]:
    """The campaign's checkers with invariant 3's replaced by one that raises."""
    return tuple((n, crashing if n == 3 else checker) for n, checker in c.CHECKERS)


DEAD_OWNER = view(8.5, {**SETTLED, P1: f"{GROUP}_c-0"})  # c never lived; after heal + bound: a violation of 1


def test_a_crashing_checker_leaves_its_invariant_unknown_and_the_others_judged() -> None:
    history = History.of_records(Path("h"), [*clean(), DEAD_OWNER])
    results = c.check_all(history, with_crashing_audit())
    assert [r.invariant for r in results] == [1, 2, 3, 4, 5, 6]
    by = {r.invariant: r for r in results}
    audit = by[3]
    assert (audit.verdict, audit.name, audit.error) == ("unknown", "crashing", "KeyError: 'first_offset'")
    assert audit.trace is not None and "raise KeyError" in audit.trace
    assert audit.to_dict()["verdict"] == "unknown" and audit.violation_count == 0
    # the others as test_invariants.py finds them: 1 fails on the dead owner, 2 measures 1.5 s, the rest pass
    assert (by[1].verdict, by[1].violations) == ("fail", {1: 1})
    assert by[2].per_fault[1] == {"reconvergence_s": 1.5}
    assert {n: by[n].verdict for n in (2, 4, 5, 6)} == {2: "pass", 4: "pass", 5: "pass", 6: "pass"}
    # the table: invariant 3 unknown in the fault's row, not a count of 0 (nor its 2 duplicates: never counted)
    [row] = campaign_table(history, results)
    assert (row["kind"], row["violations"], row["duplicates"]) == ("member_kill", {"1": 1, "3": "unknown"}, 0)
    assert "inv1: 1, inv3: unknown" in format_table([row])


def write_campaign(path: Path, records: list[dict[str, Any]]) -> Path:
    run = RunDirectory.create(path, scenario="chaos")
    writer = run.trace("campaign", "zk")
    for record in records:  # shifted: the writer takes a ts of 0 for "now"
        fields = {k: v for k, v in record.items() if k != "type"}
        writer.write(record["type"], **{**fields, "ts": 1000.0 + record["ts"]})
    writer.close()
    return run.path


@pytest.mark.parametrize("records, crash, code, valid, violations, unknown", [
    (clean(), False, 0, True, 0, []),
    (clean(), True, 2, "unknown", 0, [3]),  # nothing violated, but invariant 3 not judged: not "all good"
    ([*clean(), DEAD_OWNER], True, 1, False, 1, [3]),  # a violation wins over an unknown, as in Jepsen
], ids=["clean", "unknown", "violation-and-unknown"])
def test_chaos_check_exits_2_when_an_invariant_is_unknown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, records: list[dict[str, Any]], crash: bool, code: int,
        valid: bool | str, violations: int, unknown: list[int]) -> None:
    run_dir = write_campaign(tmp_path / "run", records)
    if crash:
        monkeypatch.setattr(c, "CHECKERS", with_crashing_audit())
    result = CliRunner().invoke(chaos_check, [str(run_dir)])
    assert result.exit_code == code, result.output
    document = json.loads((run_dir / "chaos.json").read_text())
    assert (document["valid"], document["violations"], document["unknown"]) == (valid, violations, unknown)
    assert [check["verdict"] for check in document["checks"]][2] == ("unknown" if crash else "pass")
    if crash:
        assert "invariant 3 (crashing): UNKNOWN, its checker failed: KeyError: 'first_offset'" in result.output
        assert f"violations: {violations} in the invariants judged; UNKNOWN: invariant 3" in result.output
    else:
        assert result.output.splitlines()[-2] == "violations: 0"
