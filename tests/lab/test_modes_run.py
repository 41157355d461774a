"""`lab run --mode` and `lab modes`: a zk run per mode, labelled and recorded so no two collide, the mode's
properties really reaching the members (the consensus barrier's znodes are on the wire only in its runs), the
faithful run's records as before modes existed, and the refusals that need no server."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from zkconsumer.cli import main as cli_main
from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble
from zkconsumer.errors import InputError
from zkconsumer.lab.designs import FAITHFUL, design_label
from zkconsumer.lab.modes_cli import parse_modes, parse_values
from zkconsumer.lab.runs.mode_comparison import mode_rows
from zkconsumer.lab.runs.servers import LabServers, SinkRouter
from zkconsumer.lab.runs.session import LabSession
from zkconsumer.lab.runs.summary import RunSummary
from zkconsumer.lab.scenarios.loading import expand_cases, parse_scenario
from zkconsumer.lab.terminal import summary_table
from zkconsumer.lab.trace import RunDirectory, read_traces
from zkconsumer.modes import MODES, mode_properties
from zkconsumer.zookeeper import layout

TINY = """
name = "tiny-modes"
description = "two members, one joins"
designs = ["zk", "coordinator"]
duration = 3.0
seed = 5
settle_timeout = 40.0
[group]
members = 2
topics = [{ name = "tiny", partitions = 4 }]
[zk]
"zookeeper.session.timeout.ms" = 4000
"rebalance.backoff.ms" = 200
[[churn]]
at = 0.3
action = "join"
"""


def barrier_creates(run: Path) -> list[str]:
    """Paths of the creates the members sent under the consensus barrier's znodes (layout.barrier_dir)."""
    marker = layout.barrier_dir("G", "1").split("/G/")[1].split("/")[0]
    return [r["path"] for r in read_traces(run) if r["type"] == "wire" and r.get("proto") == "zk"
            and r.get("kind") == "request" and r.get("op") == "create" and marker in (r.get("path") or "")]


@pytest.mark.slow
def test_each_mode_runs_in_its_own_directory_with_its_properties(tmp_path, shared_lab_servers):
    scenario = parse_scenario(TINY, "inline")
    out = tmp_path / "out"
    session = LabSession(scenario, expand_cases(scenario), ["zk"], out, modes=[FAITHFUL, "all"],
                         servers=shared_lab_servers)
    faithful, every = session.run()
    case = expand_cases(scenario)[0].case_id
    assert faithful.path == out / case / "zk" and every.path == out / case / "zk+all"
    assert (faithful.label, every.label) == ("zk", "zk+all") and every.design == "zk"
    plain, modal = RunDirectory.load(faithful.path), RunDirectory.load(every.path)
    assert plain["completed"] and modal["completed"]
    assert "mode" not in plain and "mode_properties" not in plain  # the faithful manifest as before modes
    assert modal["mode"] == "all" and modal["mode_properties"] == mode_properties("all")
    assert "-zk+all-" in modal["run_id"] and "-zk-" in plain["run_id"]
    # the members of the "all" run had the barrier on: they acknowledged views under its znodes; the faithful
    # members never wrote there
    assert barrier_creates(every.path) and not barrier_creates(faithful.path)
    rows = list(summary_table([faithful, every]).columns[1].cells)
    assert rows == ["zk", "zk+all"]
    # a second session of the same modes into the same --out is refused before any server starts
    with pytest.raises(InputError, match="already holds results"):
        LabSession(scenario, expand_cases(scenario), ["zk"], out, modes=[FAITHFUL, "all"]).run()


def test_a_mode_is_refused_where_no_design_can_run_it(tmp_path):
    result = CliRunner().invoke(cli_main, ["lab", "run", "staggered-join", "--design", "original", "--mode",
                                           "incremental", "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "only the zk design runs the opt-in modes" in result.output
    assert not (tmp_path / "out").exists()
    scenario = parse_scenario(TINY, "inline")
    with pytest.raises(InputError, match="only the zk design"):
        LabSession(scenario, expand_cases(scenario), ["coordinator"], tmp_path / "c", modes=["patient"])
    # faithful is every design's
    LabSession(scenario, expand_cases(scenario), ["coordinator"], tmp_path / "c", modes=[FAITHFUL])


def test_the_runs_of_a_case_are_zk_per_mode_and_the_others_once(tmp_path):
    scenario = parse_scenario(TINY, "inline")
    session = LabSession(scenario, expand_cases(scenario), ["zk", "coordinator"], tmp_path,
                         modes=["incremental", FAITHFUL])
    assert session.runs_of_case() == [("zk", "incremental"), ("zk", FAITHFUL), ("coordinator", FAITHFUL)]
    assert [design_label(d, m) for d, m in session.runs_of_case()] == ["zk+incremental", "zk", "coordinator"]


def test_given_servers_that_do_not_fit_are_refused_before_anything_runs(tmp_path):
    # Servers planned, never started (no Kafka proxy either): each refusal comes before anything would use them.
    ensemble = ZooKeeperEnsemble.plan(tmp_path / "zk", size=3)
    three = LabServers(ensemble.connect_string.split(","), "127.0.0.1:1", None, SinkRouter(), ensemble)
    external = LabServers(["127.0.0.1:1"], "127.0.0.1:1", None, SinkRouter())
    scenario = parse_scenario(TINY, "inline")  # zk_servers = 1
    cases, out = expand_cases(scenario), tmp_path / "out"
    with pytest.raises(InputError, match=r"runs on 1 embedded ZooKeeper server\(s\).* have 3: give servers started "
                                         r"with zk_servers=1, or none"):
        LabSession(scenario, cases, ["zk"], out, servers=three)
    with pytest.raises(InputError, match=r"either running servers \(servers=\) or the servers to start .*not both"):
        LabSession(scenario, cases, ["zk"], out, servers=external, zookeeper="127.0.0.1:1")
    with pytest.raises(InputError, match="not both"):
        LabSession(scenario, cases, ["zk"], out, servers=external, kafka_proxy_port=9092)
    with pytest.raises(InputError, match=r"--design consumer runs on the embedded Apache Kafka 4 broker.*give "
                                         r"embedded servers, or none"):
        LabSession(scenario, cases, ["coordinator", "consumer"], out, servers=external)
    assert not out.exists()
    # what fits is taken: the ensemble's size for a scenario of three servers, external servers for the zk design
    ensemble_scenario = parse_scenario(TINY.replace("seed = 5", "seed = 5\nzk_servers = 3"), "inline")
    assert LabSession(ensemble_scenario, expand_cases(ensemble_scenario), ["zk"], out, servers=three).servers is three
    assert LabSession(scenario, cases, ["zk"], out, servers=external).servers is external


def test_mode_and_values_options():
    assert parse_modes("faithful, all,faithful") == [FAITHFUL, "all"]
    assert parse_modes(",".join(MODES)) == list(MODES)
    for bad in ("", "fast", "faithful,fast"):
        with pytest.raises(InputError, match="not one of"):
            parse_modes(bad)
    assert parse_values(()) == {"herd": [8]}
    assert parse_values(("4,16", "far-members=100")) == {"herd": [4, 16], "far-members": [100]}
    with pytest.raises(InputError, match="integer"):
        parse_values(("herd=a",))


def summary(label: str, requests: int, stable: float, conflicts: int = 0, sweep: dict | None = None) -> RunSummary:
    design, _, mode = label.partition("+")
    return RunSummary(Path(label), design, "c", sweep or {}, True, 8, changes=2, zk_requests=requests,
                      conflicts=conflicts, stable_s=[stable], mode=mode or FAITHFUL)


def test_the_table_means_repeats_and_compares_with_the_faithful_runs_of_the_same_sweep_value():
    rows = mode_rows([("sj", summary("zk", 40, 2.0, conflicts=3)), ("sj", summary("zk", 60, 4.0, conflicts=1)),
                      ("sj", summary("zk+all", 20, 1.5)), ("sj", summary("coordinator", 0, 1.0)),
                      ("herd", summary("zk", 10, 1.0, sweep={"members": 4})),
                      ("herd", summary("zk+patient", 30, 1.0, sweep={"members": 8}))])
    by = {(r.scenario, r.sweep, r.label): r for r in rows}
    faithful = by[("sj", "", "zk")]
    assert faithful.runs == 2 and faithful.zk_requests == 25.0 and faithful.conflicts == 2.0  # per change: 50 / 2
    assert faithful.time_to_stable == 3.0 and faithful.requests_ratio == 1.0
    every = by[("sj", "", "zk+all")]
    assert every.requests_ratio == pytest.approx(0.4) and every.stable_ratio == pytest.approx(0.5)
    coordinator = by[("sj", "", "coordinator")]
    assert coordinator.zk_requests is None and coordinator.requests_ratio is None
    # another sweep value's faithful run is no baseline
    assert by[("herd", "members=8", "zk+patient")].requests_ratio is None
