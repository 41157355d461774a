"""Change windows from phase and membership records (plain Python, no Spark)."""

from __future__ import annotations

from zkconsumer.lab.analysis.windows import run_windows


def marks(*records: tuple) -> list[dict]:
    """(ts, type, what, members): what is the phase, the action, or for `stable` (change number, duration)."""
    out = []
    for ts, type_, what, members in records:
        number, duration = what if type_ == "stable" else (None, None)
        out.append({"ts": ts, "type": type_, "phase": what if type_ == "phase" else None, "design": "zk",
                    "action": what if type_ == "membership" else None, "members": members, "step": len(out),
                    "generation_or_rebalance": number, "duration_s": duration})
    return out


def test_windows_follow_the_orchestrators_change_numbers() -> None:
    bounds, changes, windows = run_windows("r", 40.0, marks(
        (10.0, "phase", "settled", None), (12.0, "membership", "join", ["m2", "m3"]),
        (15.0, "membership", "delay", ["m0"]),  # not a change
        (14.0, "stable", (2, 2.0), None), (18.0, "membership", "resume", ["m1"]),
        (18.5, "stable", (3, 0.5), None), (30.0, "phase", "done", None)))
    # churn window, changes as the summary counts them (a resume is not one), membership records, stable max/median/n
    assert bounds == ("r", 10.0, 30.0, 40.0, 2, 2, 2.0, 1.25, 2)
    # (index, number, action, weight, counted, change_ts, window_start, window_end, stable_s): a stable record
    # names its change by the orchestrator's number, which counts both members of the join
    assert [(c[2], c[3], c[4], c[7], c[8], c[9], c[10], c[11], c[12]) for c in changes] == [
        (1, 2, "join", 2, 2, 12.0, 12.0, 18.0, 2.0), (2, 3, "resume", 1, 0, 18.0, 18.0, 30.0, 0.5)]
    assert [w[1:] for w in windows] == [(0, 10.0, 12.0, False), (1, 12.0, 18.0, False), (2, 18.0, 30.0, True)]


def test_a_leave_starts_at_the_leavers_last_stop() -> None:
    records = marks((10.0, "phase", "settled", None), (12.0, "membership", "join", ["m2"]),
                    (20.0, "membership", "leave", ["m2"]), (25.0, "phase", "done", None))
    stopped = run_windows("r", 26.0, records, {"m2": [(12.5, 1), (19.8, 0)]})[2]
    assert [w[1:4] for w in stopped] == [(0, 10.0, 12.0), (1, 12.0, 19.8), (2, 19.8, 25.0)]
    # a leaver whose last event is a start (it never stopped, e.g. it owned nothing to stop) keeps the record's time
    started = run_windows("r", 26.0, records, {"m2": [(12.5, 1)]})[2]
    assert [w[1:4] for w in started] == [(0, 10.0, 12.0), (1, 12.0, 20.0), (2, 20.0, 25.0)]


def test_a_run_that_never_settled_has_no_quiet_window_and_ends_at_its_last_record() -> None:
    bounds, changes, windows = run_windows("r", 33.0, marks((12.0, "membership", "kill", ["m1"])))
    assert bounds == ("r", None, 33.0, 33.0, 0, 0, None, None, 0)  # no churn window: nothing counted per run
    assert [w[1:] for w in windows] == [(1, 12.0, 33.0, True)]
    assert changes[0][8] == 1  # but the kill is a change of its own
