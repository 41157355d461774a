"""Lab scenario files: the shipped ones, the schema and every validation rule, and `lab list|validate`.

Pure tests: no servers. Messages are asserted with their exact field path because the path is what tells
a user where to look.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from zkconsumer.lab.cli import lab
from zkconsumer.lab.scenarios.loading import (
    SWEEP_AXES,
    Scenario,
    ScenarioError,
    Selector,
    case_seed,
    expand_cases,
    find_scenario,
    load_scenario,
    parse_scenario,
    shipped_names,
    shipped_scenario,
    shipped_scenarios,
    validate_scenario,
)

SHIPPED = {"herd", "simultaneous-start", "staggered-join", "rolling-restart", "crash", "expiry-storm",
           "restart-trap", "add-partitions", "far-members", "lesson", "rolling-start", "migrate",
           "add-partitions-at-scale"}

TOP = """
name = "t"
description = "a test scenario"
duration = 10.0
"""
GROUP = """
[group]
members = 8
topics = [{ name = "clicks", partitions = 16 }]
"""


def text(body: str = "", top: str = "") -> str:
    """A valid minimal scenario; ``top`` adds top-level keys (they must precede every table), ``body`` tables."""
    return TOP + top + GROUP + body


def load(body: str = "", top: str = "") -> Scenario:
    return parse_scenario(text(body, top), "x.toml")


def errors(body: str = "", top: str = "", whole: str | None = None) -> list[str]:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(whole if whole is not None else text(body, top), "x.toml")
    return caught.value.lines


def churn(*actions: str) -> str:
    return "".join(f"\n[[churn]]\n{a}\n" for a in actions)


# --- shipped scenarios ----------------------------------------------------------------------------------

def test_every_shipped_scenario_loads_and_expands():
    assert set(shipped_names()) == SHIPPED
    assert [s.name for s in shipped_scenarios()] == shipped_names(), "file name and name must match"
    for s in shipped_scenarios():
        cases = expand_cases(s)
        assert len(cases) == s.case_count and s.estimated_runs == len(cases) * len(s.designs)
        assert len({c.case_id for c in cases}) == len(cases), s.name
        assert all(c.case_id.startswith(s.name + "-") for c in cases)
        assert len({c.seed for c in cases}) == len(cases), f"{s.name}: two cases share a seed"
        assert all(c.scenario.sweep is None and c.steps is not None for c in cases)
        assert s.settle_timeout > 0 and s.duration <= 60, f"{s.name}: one case must stay well under a minute"
        assert s.summary and "\n" not in s.summary


def test_herd_sweeps_the_group_size_and_everyone_can_own_a_partition():
    herd = shipped_scenario("herd")
    cases = expand_cases(herd)
    assert herd.sweep is not None and herd.sweep.axis == "members"
    sizes = [1, 2, 4, 8, 16, 32, 64]
    assert [c.scenario.group.members for c in cases] == [n for n in sizes for _ in range(herd.repeats)]
    assert cases[0].case_id == "herd-members=1-r0" and cases[1].case_id == "herd-members=1-r1"
    biggest = cases[-1]
    assert biggest.steps[0].kind == "join" and biggest.steps[0].members == (64,)
    assert biggest.scenario.group.topics[0].partitions >= 65


def test_far_members_sweep_sets_the_delay_of_every_network_rule():
    cases = expand_cases(shipped_scenario("far-members"))
    delays = {c.sweep_value: {r.delay_ms for r in c.scenario.network} for c in cases}
    assert delays == {0: {0}, 50: {50}, 100: {100}, 200: {200}}
    assert {r.target for r in cases[0].scenario.network} == {"zookeeper", "broker"}
    assert cases[0].scenario.network[0].members.indices == (4, 5, 6, 7)


def test_simultaneous_start_sweeps_the_joiners_and_the_restart_trap_restarts_inside_the_session():
    # The trap only exists if the restart comes back before the old ZooKeeper session has expired.
    cases = expand_cases(shipped_scenario("simultaneous-start"))
    assert [c.steps[0].members for c in cases[:: cases[0].scenario.repeats]] == [
        tuple(range(3)), tuple(range(8)), tuple(range(16))]
    trap = shipped_scenario("restart-trap")
    step = expand_cases(trap)[0].steps[0]
    assert step.kind == "restart" and step.action.stop == "kill"
    assert step.action.delay * 1000 < trap.zk_config("g", "127.0.0.1:2181").zookeeper_session_timeout_ms


def test_zk_config_and_find_scenario(tmp_path: Path):
    config = shipped_scenario("crash").zk_config("lab-g", "127.0.0.1:2181/x", consumer_id="m3")
    assert (config.group_id, config.consumer_id, config.zookeeper_session_timeout_ms) == ("lab-g", "m3", 6000)
    assert config.rebalance_backoff_ms == 500 and config.auto_offset_reset == "smallest"
    assert find_scenario("lesson").name == "lesson"
    path = tmp_path / "mine.toml"
    path.write_text(text(), encoding="utf-8")
    assert find_scenario(path).name == "t"
    with pytest.raises(ScenarioError, match="no such file and no shipped scenario"):
        find_scenario("no-such-scenario")


# --- cases, seeds, sweeps -------------------------------------------------------------------------------

def test_case_seeds_are_stable_and_derived_from_the_scenario_seed():
    # Fixed value: changing the derivation would silently change every recorded run's random choices.
    assert case_seed(1, "crash-r0") == case_seed(1, "crash-r0") == 1929806605
    assert case_seed(1, "crash-r0") != case_seed(2, "crash-r0") != case_seed(2, "crash-r1")
    s = load(top="repeats = 3\nseed = 7\n")
    assert [c.case_id for c in expand_cases(s)] == ["t-r0", "t-r1", "t-r2"]
    assert [c.seed for c in expand_cases(s)] == [case_seed(7, f"t-r{r}") for r in range(3)]


def test_random_picks_follow_the_case_seed():
    s = load(churn('at = 1.0\naction = "kill"\nmember = "random"\ncount = 3'), top="repeats = 20\n")
    first, again = expand_cases(s), expand_cases(s)
    assert [c.steps[0].members for c in first] == [c.steps[0].members for c in again]
    assert len({c.steps[0].members for c in first}) > 1, "20 repeats should not all kill the same members"
    assert all(len(c.steps[0].members) == 3 and set(c.steps[0].members) <= set(range(8)) for c in first)


def test_newest_oldest_and_all_follow_joins_and_restarts():
    s = load(churn('at = 1.0\naction = "restart"\nmember = 0',
                   'at = 2.0\naction = "join"\ncount = 2',
                   'at = 3.0\naction = "pause"\nmember = "oldest"\ncount = 2\nseconds = 1',
                   'at = 4.0\naction = "leave"\nmember = "newest"\ncount = 3',
                   'at = 5.0\naction = "expire"\nmember = "all"'), top='designs = ["zk"]\n')
    steps = expand_cases(s)[0].steps
    assert steps[1].members == (8, 9)
    assert steps[2].members == (1, 2)  # member 0 restarted at t=1: it is no longer the oldest
    assert steps[3].members == (0, 8, 9)
    assert steps[4].members == (1, 2, 3, 4, 5, 6, 7)


@pytest.mark.parametrize(("axis", "check"), [
    ("partitions", lambda s: [t.partitions for t in s.group.topics] == [40, 40]),
    ("session_timeout_ms", lambda s: s.zk["zookeeper.session.timeout.ms"] == 40
     and s.coordinator.session_timeout_ms == 40),
    ("rebalance_backoff_ms", lambda s: s.zk["rebalance.backoff.ms"] == 40),
    ("rate", lambda s: s.load.rate == 40.0),
    ("streams", lambda s: s.group.streams == 40),
])
def test_each_sweep_axis_replaces_its_field(axis: str, check):
    body = (GROUP.replace('partitions = 16 }', 'partitions = 16 }, { name = "views", partitions = 4 }')
            + "\n[coordinator]\nheartbeat_interval_ms = 10\n" + f'\n[sweep]\naxis = "{axis}"\nvalues = [40]\n')
    cases = expand_cases(parse_scenario(TOP + body, "x.toml"))
    assert len(cases) == 1 and cases[0].sweep_axis == axis and cases[0].sweep_value == 40
    assert check(cases[0].scenario)


def test_every_sweep_axis_is_applicable():
    base = text('\n[[network]]\ntarget = "broker"\ndelay_ms = 5\n' + churn('at = 1.0\naction = "join"'))
    values = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000}
    for axis in SWEEP_AXES:
        s = parse_scenario(base + f'\n[sweep]\naxis = "{axis}"\nvalues = [{values.get(axis, 5)}]\n', "x.toml")
        assert expand_cases(s)[0].sweep_axis == axis


# --- validation rules: each reports its exact field path ------------------------------------------------

def test_member_index_must_exist_at_that_time():
    lines = errors(churn('at = 1.0\naction = "join"\ncount = 0', 'at = 2.0\naction = "pause"\nmember = 1\nseconds = 1',
                         'at = 3.0\naction = "kill"\nmember = 9'))
    assert lines == ["x.toml: churn[2].member: member 9 does not exist at t=3.0 s (the group has 8 members "
                     "then): use an index below 8"]


def test_a_joined_member_exists_and_a_killed_one_does_not():
    load(churn('at = 1.0\naction = "join"\ncount = 2', 'at = 2.0\naction = "kill"\nmember = 9'))
    lines = errors(churn('at = 1.0\naction = "kill"\nmember = [2, 3]', 'at = 2.0\naction = "leave"\nmember = 3'))
    assert lines == ["x.toml: churn[1].member: member 3 does not exist at t=2.0 s (killed at t=1.0 s by "
                     "churn[0]): pick another member"]


def test_a_member_is_away_while_it_restarts_or_before_its_staggered_join():
    lines = errors(churn('at = 1.0\naction = "restart"\nmember = 2\ndelay = 2.0',
                         'at = 2.0\naction = "join"\ncount = 3\ninterval = 0.5',
                         'at = 2.6\naction = "kill"\nmember = [2, 10]', 'at = 3.0\naction = "kill"\nmember = 2'))
    assert lines == [
        "x.toml: churn[2].member: member 2 is not in the group at t=2.6 s (restarted by churn[0], in at t=3.0 s): "
        "act on it later or pick another member",
        "x.toml: churn[2].member: member 10 is not in the group at t=2.6 s (started by churn[1], in at t=3.0 s): "
        "act on it later or pick another member",
    ]


def test_selected_count_cannot_exceed_the_group_and_goes_only_with_keywords():
    lines = errors(churn('at = 1.0\naction = "pause"\nmember = "oldest"\ncount = 9\nseconds = 1',
                         'at = 2.0\naction = "kill"\nmember = 1\ncount = 1'))
    assert lines == ["x.toml: churn[0].count: 9 selected at t=1.0 s but the group has 8 members then: select at "
                     "most 8",
                     "x.toml: churn[1].count: count goes with member = 'newest', 'oldest' or 'random', not with "
                     "index members: remove it"]


def test_kill_zk_leader_needs_an_ensemble():
    action = churn('at = 1.0\naction = "kill_zk_leader"')
    assert errors(action) == ["x.toml: churn[0].action: kill_zk_leader needs a 3-server ensemble (zk_servers "
                              "is 1): set zk_servers = 3"]
    assert expand_cases(load(action, top="zk_servers = 3\n"))[0].steps[0].kind == "kill_zk_leader"


def test_add_partitions_must_grow_a_known_topic():
    refresh = "\n[coordinator]\nmetadata_max_age_ms = 1000\n"
    lines = errors(refresh + churn('at = 1.0\naction = "add_partitions"\ntopic = "clicks"\ntotal = 24',
                                   'at = 2.0\naction = "add_partitions"\ntopic = "clicks"\ntotal = 20',
                                   'at = 3.0\naction = "add_partitions"\ntopic = "views"\ntotal = 20'))
    assert lines == ["x.toml: churn[1].total: total 20 does not exceed the 24 partitions topic 'clicks' has at "
                     "t=2.0 s: give a larger total",
                     "x.toml: churn[2].topic: topic 'views' is not in group.topics: use one of clicks"]


def test_the_coordinator_design_must_refresh_metadata_after_partitions_are_added():
    grow = churn('at = 2.0\naction = "add_partitions"\ntopic = "clicks"\ntotal = 24',
                 'at = 6.0\naction = "add_partitions"\ntopic = "clicks"\ntotal = 32')
    assert errors(grow) == [
        "x.toml: coordinator.metadata_max_age_ms: 300000 ms: the coordinator design's members may not refresh "
        "metadata between the add_partitions at t=6.0 s and the end of the run (duration = 10.0 s), so they might "
        "never own the new partitions: lower it"]
    assert load("\n[coordinator]\nmetadata_max_age_ms = 4000\n" + grow).coordinator.metadata_max_age_ms == 4000
    assert load(grow, top='designs = ["zk"]\n').churn[1].total == 32  # the watch needs no refresh


def test_the_broker_initial_rebalance_delay_is_a_coordinator_setting_and_a_sweep_axis():
    assert load().coordinator.initial_rebalance_delay_ms == 0  # what the herd comparison uses
    rolling = shipped_scenario("rolling-start")
    assert rolling.designs == ["coordinator"] and rolling.group.members == 0
    cases = expand_cases(rolling)
    assert [c.scenario.coordinator.initial_rebalance_delay_ms for c in cases] == [0] * rolling.repeats + [
        3000] * rolling.repeats  # one value after the other: the lab restarts its broker once
    join = cases[0].steps[0]
    assert join.kind == "join" and join.action.interval > 0 and len(join.members) > 1
    assert errors(body="\n[coordinator]\ninitial_rebalance_delay_ms = -1\n") == [
        "x.toml: coordinator.initial_rebalance_delay_ms: must be greater than or equal to 0, got -1"]


def test_times_must_fit_the_run_and_be_in_order():
    lines = errors(churn('at = 4.0\naction = "pause"\nmember = 1\nseconds = 7', 'at = 3.0\naction = "join"',
                         'at = 11.0\naction = "join"', 'at = -1.0\naction = "join"'))
    assert lines == ["x.toml: churn[3].at: must be greater than or equal to 0, got -1.0"]
    lines = errors(churn('at = 4.0\naction = "pause"\nmember = 1\nseconds = 7', 'at = 3.0\naction = "join"',
                         'at = 11.0\naction = "join"'))
    assert lines == [
        "x.toml: churn[0].seconds: the pause ends at t=11.0 s, after the end of the run (duration = 10.0 s): "
        "shorten it or raise duration",
        "x.toml: churn[1].at: t=3.0 s is before churn[0].at (t=4.0 s): list actions in time order",
        "x.toml: churn[2].at: t=11.0 s is after the end of the run (duration = 10.0 s): move it earlier or raise "
        "duration",
    ]


def test_ranges_and_types():
    lines = errors(whole=TOP.replace("10.0", '"10"') + GROUP.replace("members = 8", "members = -1")
                   + churn('at = 1.0\naction = "pause"\nseconds = 0'))
    assert lines == ["x.toml: duration: must be a valid number, got '10'",
                     "x.toml: group.members: must be greater than or equal to 0, got -1",
                     "x.toml: churn[0].seconds: must be greater than 0, got 0"]


def test_unknown_keys_and_actions_are_errors_with_hints():
    lines = errors(whole=TOP + "durration = 5\n" + GROUP + "\n[load]\nrat = 5\n"
                   + churn('at = 1.0\naction = "kil"', 'at = 1.0\naction = "join"\nmember = 3', 'at = 2.0'))
    assert lines == ["x.toml: load.rat: unknown key: did you mean 'rate'?",
                     "x.toml: churn[0].action: unknown action 'kil': use one of join, leave, kill, pause, expire, "
                     "restart, add_partitions, kill_zk_leader, delay, migrate",
                     "x.toml: churn[1].member: unknown key: remove it (known keys here: at, spread, action, count, "
                     "interval)",
                     "x.toml: churn[2].action: required: set action to one of join, leave, kill, pause, expire, "
                     "restart, add_partitions, kill_zk_leader, delay, migrate",
                     "x.toml: durration: unknown key: did you mean 'duration'?"]


def test_zk_settings_are_checked_as_kafka_consumer_properties():
    lines = errors('\n[zk]\n"rebalance.backoff.ms" = "soon"\n"rebalance.backof.ms" = 3\n"group.id" = "g"\n'
                   'zookeeper.session.timeout.ms = 0\n')
    assert lines == [
        "x.toml: zk.\"rebalance.backoff.ms\": rebalance.backoff.ms='soon' is invalid: expected an integer such as "
        "rebalance.backoff.ms=1000",
        "x.toml: zk.\"rebalance.backof.ms\": not a Kafka 0.8.2 consumer setting: did you mean 'rebalance.backoff.ms'?",
        "x.toml: zk.\"group.id\": set by the lab for each run and member: remove it",
        "x.toml: zk.\"zookeeper.session.timeout.ms\": zookeeper.session.timeout.ms=0 is invalid: must be >= 1",
    ]
    # Unquoted dotted keys make nested tables in TOML; both spellings mean the same setting.
    s = load('\n[zk]\nzookeeper.session.timeout.ms = 4000\n"rebalance.backoff.ms" = 300\n')
    assert s.zk == {"zookeeper.session.timeout.ms": 4000, "rebalance.backoff.ms": 300}


def test_zk_settings_are_reported_alongside_structural_errors():
    lines = errors(top="repeats = 0\n", body='\n[zk]\n"rebalance.max.retries" = 0\n')
    assert lines == ["x.toml: repeats: must be greater than or equal to 1, got 0",
                     "x.toml: zk.\"rebalance.max.retries\": rebalance.max.retries=0 is invalid: must be >= 1"]


def test_coordinator_network_designs_and_topics_cross_checks():
    lines = errors(top='designs = ["zk", "zk"]\n',
                   body='\n[coordinator]\nsession_timeout_ms = 3000\nheartbeat_interval_ms = 3000\n'
                        '\n[[network]]\nmembers = "6-9"\ntarget = "zookeeper"\ndelay_ms = 10\njitter_ms = 20\n')
    assert lines == [
        "x.toml: designs[1]: 'zk' is listed twice: list each design once",
        "x.toml: coordinator.heartbeat_interval_ms: 3000 must be below session_timeout_ms (3000): a third of it is "
        "usual",
        "x.toml: network[0].jitter_ms: 20 ms exceeds delay_ms (10 ms): a delay cannot go below 0, lower the jitter",
        "x.toml: network[0].members: member 8 never exists (the group has at most 8 members): use indices below 8",
    ]
    lines = errors(whole=TOP + GROUP.replace('16 }]', '16 }, { name = "clicks", partitions = 2 }]'))
    assert lines == ["x.toml: group.topics[1].name: topic 'clicks' is listed twice: give each topic one entry"]


def test_expire_needs_the_zookeeper_design_only():
    action = churn('at = 1.0\naction = "expire"\nmember = 2')
    assert errors(action) == ['x.toml: churn[0].action: expire ends a ZooKeeper session, which the coordinator '
                              'design does not have: set designs = ["zk"] (pause a member past its session timeout '
                              'to compare both designs)']
    assert expand_cases(load(action, top='designs = ["zk"]\n'))[0].steps[0].members == (2,)


def test_delay_actions_and_signals_are_checked():
    body = churn('at = 1.0\naction = "delay"\ntarget = "broker"\nmembers = [2, 8]\ndelay_ms = 5\njitter_ms = 9',
                 'at = 2.0\naction = "pause"\nmember = 1\nseconds = 1')
    threads = text(body).replace("partitions = 16 }]", 'partitions = 16 }]\nprocess_mode = "threads"')
    assert errors(whole=threads) == [
        "x.toml: churn[0].jitter_ms: 9 ms exceeds delay_ms (5 ms): a delay cannot go below 0, lower the jitter",
        "x.toml: churn[0].members: member 8 never exists (the group has at most 8 members): use indices below 8",
        'x.toml: churn[1].action: pause signals the member\'s own process: set group.process_mode = "processes"',
    ]


def test_the_documented_example_is_valid():
    doc = (Path(__file__).parents[2] / "docs" / "scenarios.md").read_text(encoding="utf-8")
    example = doc.rsplit("```toml\n", 1)[1].split("```", 1)[0]
    s = parse_scenario(example, "docs/scenarios.md")
    assert (s.case_count, s.estimated_runs) == (9, 18)


def test_empty_group_is_an_error_unless_members_join():
    assert errors(whole=TOP + GROUP.replace("members = 8", "members = 0")) == [
        "x.toml: group.members: the group never has a member: set group.members or add a join action"]
    empty = TOP + GROUP.replace("members = 8", "members = 0")
    s = parse_scenario(empty + churn('at = 0.0\naction = "join"\ncount = 4'), "x.toml")
    assert expand_cases(s)[0].steps[0].members == (0, 1, 2, 3)


@pytest.mark.parametrize(("value", "expected"), [
    ("3", Selector("index", (3,))), ("[0, 2]", Selector("index", (0, 2))), ('"1-3"', Selector("index", (1, 2, 3))),
    ('"newest"', Selector("newest")), ('"random"', Selector("random")), ('"all"', Selector("all")),
])
def test_member_selector_forms(value: str, expected: Selector):
    s = load(churn(f'at = 1.0\naction = "pause"\nseconds = 1\nmember = {value}'))
    assert s.churn[0].member == expected


@pytest.mark.parametrize(("value", "message"), [
    ("true", "expected a member index (3), a list ([0, 2]), a range ('0-3'), 'newest', 'oldest', 'random' or "
             "'all', got True"),
    ("[1, 1]", "member list [1, 1] names a member twice: list each once"),
    ('"3-1"', "range '3-1' is empty: write it low-high, e.g. '1-3'"),
    ("-2", "member indices start at 0, got -2"),
])
def test_bad_member_selectors(value: str, message: str):
    assert errors(churn(f'at = 1.0\naction = "kill"\nmember = {value}')) == [f"x.toml: churn[0].member: {message}"]


def test_network_rules_take_no_keyword_picks():
    assert errors('\n[[network]]\nmembers = "newest"\ntarget = "broker"\ndelay_ms = 5\n') == [
        "x.toml: network[0].members: network rules take member indices, a range like '0-3' or 'all', not 'newest'"]


def test_sweep_axis_values_and_per_case_problems():
    assert errors('\n[sweep]\naxis = "member"\nvalues = [1, 1]\n') == [
        "x.toml: sweep.axis: unknown sweep axis 'member': use one of " + ", ".join(SWEEP_AXES),
        "x.toml: sweep.values: 1 listed more than once: list each value once"]
    assert errors('\n[sweep]\naxis = "delay_ms"\nvalues = [1]\n') == [
        "x.toml: sweep.axis: delay_ms sweeps the [[network]] rules but there are none: add one"]
    sweep = '\n[sweep]\naxis = "members"\nvalues = [8, 2, -1]\n'
    lines = errors(churn('at = 1.0\naction = "kill"\nmember = 5') + sweep)
    assert lines == [
        "x.toml: sweep.values[2]: members = -1 is invalid here: group.members: must be greater than or equal to 0, "
        "got -1",
        "x.toml: churn[0].member: member 5 does not exist at t=1.0 s (the group has 2 members then): use an index "
        "below 2 (with members = 2)",
    ]


def test_toml_syntax_errors_name_line_and_column(tmp_path: Path):
    assert errors(whole='name = "t"\nduration = = 3\n') == [
        "x.toml: line 2, column 12: invalid TOML (Invalid value): fix the syntax"]
    with pytest.raises(ScenarioError) as caught:
        load_scenario(tmp_path / "missing.toml")
    assert caught.value.lines == [f"{tmp_path / 'missing.toml'}: cannot be read (No such file or directory): "
                                  "check the path"]


def test_scenarios_built_in_code_are_checked_the_same_way():
    s = Scenario.model_validate(tomllib.loads(text(churn('at = 1.0\naction = "kill"\nmember = 12'))))
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(s)
    assert caught.value.lines[0].startswith("<scenario>: churn[0].member: member 12 does not exist")
    with pytest.raises(ScenarioError, match="member 12 does not exist"):
        expand_cases(s)


# --- CLI ------------------------------------------------------------------------------------------------

def test_lab_list_shows_every_shipped_scenario():
    result = CliRunner().invoke(lab, ["list"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["Name", "Description", "Designs", "Sweep", "Runs"]
    rows = {line.split()[0]: line for line in lines[1:-1]}
    assert set(rows) == SHIPPED
    assert "members: 1, 2, 4, 8, 16, 32, 64" in rows["herd"] and rows["herd"].rstrip().endswith(" 42")
    assert "zk, coordinator" in rows["crash"] and rows["crash"].rstrip().endswith(" 6")
    total = sum(s.estimated_runs for s in shipped_scenarios())
    assert lines[-1] == f"13 scenarios, {total} runs (cases x repeats x designs)"


def test_lab_validate_ok_and_bad_files(tmp_path: Path):
    good, bad = tmp_path / "good.toml", tmp_path / "bad.toml"
    good.write_text(text(), encoding="utf-8")
    bad.write_text(text(churn('at = 3.0\naction = "kill"\nmember = 9')), encoding="utf-8")
    ok = CliRunner().invoke(lab, ["validate", str(good)])
    assert (ok.exit_code, ok.stdout, ok.stderr) == (0, f"{good}: ok (t: 1 cases x 2 designs = 2 runs)\n", "")
    failed = CliRunner().invoke(lab, ["validate", str(good), str(bad)])
    assert failed.exit_code == 1
    assert failed.stdout == f"{good}: ok (t: 1 cases x 2 designs = 2 runs)\n"
    assert failed.stderr == (f"error: {bad}: churn[0].member: member 9 does not exist at t=3.0 s (the group has 8 "
                             "members then): use an index below 8\n")


def test_lab_validate_usage_errors_exit_2_in_one_line(tmp_path: Path):
    from zkconsumer.cli import OneLineErrors

    @click.group(cls=OneLineErrors)
    def top() -> None:
        pass

    top.add_command(lab)
    for args in (["lab", "validate"], ["lab", "validate", str(tmp_path / "nope.toml")]):
        result = CliRunner().invoke(top, args)
        assert result.exit_code == 2, result.output
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")


def test_lab_list_dir_reports_bad_files(tmp_path: Path):
    (tmp_path / "a.toml").write_text(text(), encoding="utf-8")
    (tmp_path / "b.toml").write_text("name = = 1", encoding="utf-8")
    result = CliRunner().invoke(lab, ["list", "--dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "t " in result.stdout and result.stdout.splitlines()[-1].startswith("1 scenarios")
    assert result.stderr.startswith(f"error: {tmp_path / 'b.toml'}: line 1, column 8: invalid TOML")


# --- the churn's phase against the members' timers (spread) and the delivery audit's commit interval ---------

# The spread each shipped scenario draws its changes' phase over: one heartbeat (2 s) where the coordinator's
# incumbents must hear of a change; the leader's metadata refresh period for add_partitions; one commit interval for
# the ZooKeeper-only expiry (the delivery audit); none for joins into an empty group (nobody to hear of them).
PHASE_SPREAD = {"herd": 2.0, "staggered-join": 2.0, "lesson": 2.0, "far-members": 2.0, "crash": 2.0,
                "restart-trap": 2.0, "rolling-restart": 2.0, "add-partitions": 3.0, "expiry-storm": 1.0,
                "simultaneous-start": 0.0, "rolling-start": 0.0, "migrate": 2.0, "add-partitions-at-scale": 3.0}


def test_a_spread_draws_the_time_from_the_case_seed_over_the_whole_interval():
    join = churn('at = 1.0\naction = "join"\nspread = "heartbeat"')
    s = load(join, top="repeats = 100\nseed = 11\n")
    cases = [c for seed in (11, 12, 13, 14) for c in expand_cases(load(join, top=f"repeats = 100\nseed = {seed}\n"))]
    offsets = [c.steps[0].offset for c in cases]
    assert [c.steps[0].offset for c in expand_cases(s)] == offsets[:100], "the draw must be a function of the seed"
    assert all(c.steps[0].at == 1.0 + c.steps[0].offset for c in cases)
    heartbeat = s.coordinator.heartbeat_interval_ms / 1000
    assert all(0 <= o < heartbeat for o in offsets)
    # uniform over the whole interval: every tenth of it is hit, none far more often than the others
    tenths = [sum(1 for o in offsets if k * heartbeat / 10 <= o < (k + 1) * heartbeat / 10) for k in range(10)]
    assert min(tenths) >= 20 and max(tenths) <= 65, tenths
    assert offsets[:100] != offsets[100:200], "another scenario seed draws other phases"


def test_every_design_of_a_case_runs_the_same_drawn_time():
    body = churn('at = 1.0\naction = "join"\nspread = 1.5', 'at = 4.0\naction = "leave"\nspread = "heartbeat"')
    one = expand_cases(load(body, top='designs = ["zk"]\nrepeats = 5\n'))
    both = expand_cases(load(body, top='designs = ["coordinator", "zk"]\nrepeats = 5\n'))
    assert [[(st.at, st.offset) for st in c.steps] for c in one] == [[(st.at, st.offset) for st in c.steps]
                                                                      for c in both]
    assert len({c.steps[0].at for c in both}) == 5 and all(1.0 <= c.steps[0].at < 2.5 for c in both)


def test_a_spread_leaves_random_member_picks_as_they_were():
    kill = 'at = 2.0\naction = "kill"\nmember = "random"\ncount = 2'
    fixed = load(churn('at = 1.0\naction = "join"', kill), top='designs = ["zk"]\nrepeats = 10\n')
    spread = load(churn('at = 1.0\naction = "join"\nspread = 0.5', kill), top='designs = ["zk"]\nrepeats = 10\n')
    assert [c.steps[1].members for c in expand_cases(fixed)] == [c.steps[1].members for c in expand_cases(spread)]


def test_a_spread_of_zero_keeps_the_fixed_time():
    assert [st.at for st in expand_cases(load(churn('at = 1.25\naction = "join"')))[0].steps] == [1.25]
    assert expand_cases(load(churn('at = 1.25\naction = "join"\nspread = 0')))[0].steps[0].offset == 0.0


def test_a_heartbeat_spread_follows_a_heartbeat_sweep():
    s = load(churn('at = 1.0\naction = "join"\nspread = "heartbeat"')
             + '\n[sweep]\naxis = "heartbeat_interval_ms"\nvalues = [500, 3000]\n', top="repeats = 30\n")
    by_value: dict[int, list[float]] = {}
    for c in expand_cases(s):
        by_value.setdefault(c.sweep_value, []).append(c.steps[0].offset)
    assert max(by_value[500]) < 0.5 and max(by_value[3000]) > 1.5


def test_a_spread_must_keep_the_actions_in_order_and_inside_the_run():
    assert errors(churn('at = 1.0\naction = "join"\nspread = 2.0', 'at = 2.5\naction = "leave"')) == [
        "x.toml: churn[0].spread: the join may run as late as t=3.0 s, after churn[1] (t=2.5 s): a drawn time "
        "must keep the actions in order, so move churn[1] later"]
    assert errors(churn('at = 9.0\naction = "join"\nspread = "heartbeat"')) == [
        "x.toml: churn[0].spread: the join may run as late as t=11.0 s, after the end of the run (duration = "
        "10.0 s): move it earlier or raise duration"]
    assert errors(churn('at = 1.0\naction = "join"\ncount = 3\ninterval = 4.0\nspread = 2.0')) == [
        "x.toml: churn[0].interval: the join ends at t=11.0 s (with its spread), after the end of the run "
        "(duration = 10.0 s): shorten it or raise duration"]
    assert errors(churn('at = 1.0\naction = "join"\nspread = -1.0')) == [
        'x.toml: churn[0].spread: spread must be >= 0 seconds or "heartbeat", got -1.0']
    # A misspelt "heartbeat": each branch of the setting's type says why it does not fit, the second naming the word.
    assert errors(churn('at = 1.0\naction = "join"\nspread = "beat"')) == [
        "x.toml: churn[0].spread.float: must be a valid number, got 'beat'",
        "x.toml: churn[0].spread.\"literal['heartbeat']\": must be 'heartbeat', got 'beat'"]


def test_shipped_scenarios_draw_the_phase_of_every_change_incumbents_must_hear_of():
    assert set(PHASE_SPREAD) == SHIPPED
    for s in shipped_scenarios():
        assert {s.spread_s(a) for a in s.churn} == {PHASE_SPREAD[s.name]}, s.name
        if PHASE_SPREAD[s.name] and s.repeats > 1:
            cases = expand_cases(s)
            assert len({c.steps[0].offset for c in cases}) == len(cases), s.name


def test_the_coordinator_commits_on_the_zookeeper_designs_interval():
    audit = '\n[load]\nrate = 50.0\n'
    s = load(audit)
    assert s.coordinator_commit_interval_ms == 60000  # Kafka 0.8's default, not kafka-python's 5000
    s = parse_scenario(text(audit).replace("[group]", '[zk]\n"auto.commit.interval.ms" = 1500\n\n[group]'), "x.toml")
    assert s.coordinator.auto_commit_interval_ms is None and s.coordinator_commit_interval_ms == 1500
    off = parse_scenario(text().replace("[group]", '[zk]\n"auto.commit.enable" = false\n\n[group]'), "x.toml")
    assert off.coordinator_auto_commit is False
    for name in ("crash", "expiry-storm", "rolling-restart"):
        shipped = shipped_scenario(name)
        assert shipped.audits_delivery
        assert shipped.coordinator_commit_interval_ms == shipped.zk_config("g", "h:1").auto_commit_interval_ms


def test_a_different_coordinator_commit_interval_is_refused_where_delivery_is_audited():
    zk = '[zk]\n"auto.commit.interval.ms" = 1000\n\n[group]'
    body = "\n[coordinator]\nauto_commit_interval_ms = 5000\n"
    audited = text(body + "\n[load]\nrate = 50.0\n").replace("[group]", zk)
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(audited, "x.toml")
    assert caught.value.lines == [
        "x.toml: coordinator.auto_commit_interval_ms: 5000 differs from zk auto.commit.interval.ms (1000) in a "
        "scenario that audits delivery ([load] rate > 0): make them equal, or remove it (it then follows the zk "
        "setting)"]
    # without a load nothing is audited, so the coordinator may commit on its own period
    assert parse_scenario(text(body).replace("[group]", zk), "x.toml").coordinator_commit_interval_ms == 5000
    equal = audited.replace("auto_commit_interval_ms = 5000", "auto_commit_interval_ms = 1000")
    assert parse_scenario(equal, "x.toml").coordinator_commit_interval_ms == 1000
