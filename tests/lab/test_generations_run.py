"""The broker-side generations in one lab invocation, against real brokers: the classic eager protocol on Kafka 3.9
in ZooKeeper mode, cooperative-sticky (KIP-429) and the consumer protocol (KIP-848) on the embedded Kafka 4 KRaft
broker the lab starts for them. One join into a settled group of 3, each design on the same schedule:

- every run completes and its protocol identities hold (zkconsumer/lab/rules/identities.py), counted from the wire;
- the eager protocol revokes every incumbent's partitions and hands most of them back; the two newer ones move
  only what balance needs and revoke nothing that comes back (zkconsumer/lab/rules/handover.py);
- the consumer protocol sends no JoinGroup at all, and its incumbents hear of the join in a heartbeat's answer;
- each run's manifest says which broker it ran on, and the KRaft broker's group settings as the broker reports
  them: the scenario's one heartbeat for every design.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from zkconsumer.cli import main as cli_main
from zkconsumer.lab.runs.session import LabSession
from zkconsumer.lab.scenarios.loading import expand_cases, parse_scenario
from zkconsumer.lab.trace import RunDirectory, read_traces

PARTITIONS = 12
INCUMBENTS = 3
HEARTBEAT_MS = 1000
GENERATIONS = f"""
name = "generations"
description = "one member joins a settled group of three"
designs = ["coordinator"]
duration = 6.0
seed = 7

[group]
members = {INCUMBENTS}
process_mode = "threads"
topics = [{{ name = "g", partitions = {PARTITIONS} }}]

[coordinator]
session_timeout_ms = 6000
heartbeat_interval_ms = {HEARTBEAT_MS}

[[churn]]
at = 1.0
action = "join"
"""


@pytest.fixture(scope="module")
def summaries(tmp_path_factory, shared_lab_servers):
    scenario = parse_scenario(GENERATIONS)
    out = tmp_path_factory.mktemp("generations")
    found = LabSession(scenario, expand_cases(scenario), ["coordinator", "cooperative", "consumer"], out,
                       servers=shared_lab_servers).run()
    return {s.design: s for s in found}


@pytest.mark.slow
def test_every_generation_completes_with_its_identities_holding(summaries):
    assert sorted(summaries) == ["consumer", "cooperative", "coordinator"]
    for design, summary in summaries.items():
        assert summary.completed, design
        assert summary.bad_lines == 0 and summary.undecodable == 0, design
        assert summary.identities and summary.identities_hold, (design, [str(i) for i in summary.identities])
    # the rounds each protocol takes for one join: one generation, two, one group epoch
    assert [summaries[d].rebalances for d in ("coordinator", "cooperative", "consumer")] == [1, 2, 1]


@pytest.mark.slow
def test_eager_stops_the_world_and_the_newer_protocols_move_only_what_they_must(summaries):
    least = PARTITIONS // (INCUMBENTS + 1)  # 12 over 4 members: the joiner needs 3
    eager = summaries["coordinator"]
    assert eager.revoked_kept == PARTITIONS - eager.moved > 0  # everything revoked, most of it handed back
    for design in ("cooperative", "consumer"):
        assert summaries[design].moved == least, design
        assert summaries[design].revoked_kept == 0, design


@pytest.mark.slow
def test_the_consumer_protocol_joins_by_heartbeat_alone(summaries):
    consumer = summaries["consumer"]
    assert consumer.kafka_by_api["JoinGroup"] == consumer.kafka_by_api["SyncGroup"] == 0
    assert consumer.epoch_zero == 1
    assert summaries["cooperative"].kafka_by_api["JoinGroup"] == 2 * INCUMBENTS + 3
    records = list(read_traces(consumer.path))
    answers = [r for r in records if r["type"] == "wire" and r.get("api_name") == "ConsumerGroupHeartbeat"
               and r["kind"] == "response" and r.get("assigned") is not None]
    # every incumbent heard of the join in a heartbeat answer carrying its new (smaller) target
    assert {r["link"] for r in answers} >= {f"m{i}" for i in range(INCUMBENTS)}
    assert all(split is not None for split in consumer.stable_split)


@pytest.mark.slow
def test_each_run_records_the_broker_it_ran_on(summaries):
    eager = RunDirectory.load(summaries["coordinator"].path)["servers"]["broker"]
    assert eager["mode"] == "ZooKeeper" and eager["version"].startswith("3.9")
    for design in ("cooperative", "consumer"):
        broker = RunDirectory.load(summaries[design].path)["servers"]["broker"]
        assert broker["mode"] == "KRaft" and broker["version"].startswith("4.")
        # as the broker reports them (DescribeConfigs), not as the lab asked: the scenario's heartbeat
        assert broker["settings"]["group.consumer.heartbeat.interval.ms"] == str(HEARTBEAT_MS)
        assert broker["settings"]["group.consumer.session.timeout.ms"] == "6000"


def test_a_kraft_design_with_external_servers_is_one_line(tmp_path):
    result = CliRunner().invoke(cli_main, ["lab", "run", "herd", "--design", "consumer", "--values", "1",
                                           "--zookeeper", "127.0.0.1:1", "--bootstrap", "127.0.0.1:1",
                                           "--out", str(tmp_path / "out")])
    assert result.exit_code != 0
    assert "KRaft" in result.output and "--bootstrap" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
