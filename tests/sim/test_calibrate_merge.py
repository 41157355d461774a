"""Refitting one wire family's latency tables (zkconsumer/lab/sim/calibrate.py `merge_tables`, `fit --only`): the
other family's tables, samples, source and runs are kept, and a file from before `runs_by_family` was named so
(`runs_by_design`) is read and written anew. Server-free."""

from __future__ import annotations

from zkconsumer.lab.sim.calibrate import merge_tables


def _fit(family: str, run: str, median: float) -> dict:
    other = "kafka" if family == "zk" else "zk"
    return {"source": f"fit of {run}", "runs": [run], "samples": {family: {"op": 10}, other: {}},
            family: {"op": [median]}, other: {}}


def test_refitting_one_family_keeps_the_others_tables_and_runs() -> None:
    old = {"source": "old", "runs": ["a", "b"], "samples": {"zk": {"getData": 5}, "kafka": {"Heartbeat": 7}},
           "zk": {"getData": [1.0]}, "kafka": {"Heartbeat": [2.0]},
           "runs_by_design": {"zk": ["a"], "kafka": ["b"]}}
    merged = merge_tables(old, _fit("kafka", "c", 3.0), "kafka")
    assert merged["zk"] == {"getData": [1.0]} and merged["kafka"] == {"op": [3.0]}
    assert merged["samples"] == {"zk": {"getData": 5}, "kafka": {"op": 10}}
    assert merged["runs_by_family"] == {"zk": ["a"], "kafka": ["c"]} and "runs_by_design" not in merged
    assert merged["runs"] == ["a", "c"]
    assert merged["source"] == "kafka: fit of c; zk: old"
    again = merge_tables(merged, _fit("zk", "d", 4.0), "zk")
    assert again["runs_by_family"] == {"kafka": ["c"], "zk": ["d"]} and again["kafka"] == {"op": [3.0]}
