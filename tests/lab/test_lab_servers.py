"""The lab's servers on Apache Kafka: broker settings that reach the broker (and a restart when a case needs other
ones), and manifests that record what the runs really ran against (embedded and external servers). A topic grown
by add_partitions (the broker's and the controller's views agree, owned and consumed on both designs, the load
producer never on the proxy) is checked on the shipped add-partitions run (test_shipped_scenarios.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from zkconsumer.embedded import jvm
from zkconsumer.embedded.process import four_letter_word
from zkconsumer.lab.runs.servers import LabServers, broker_settings
from zkconsumer.lab.runs.session import LabSession
from zkconsumer.lab.scenarios.loading import expand_cases, parse_scenario
from zkconsumer.lab.trace import RunDirectory
from zkconsumer.lab.wire.tcp import host_port

pytestmark = pytest.mark.slow
DELAY = "group.initial.rebalance.delay.ms"


DELAYED = """
name = "delayed"
description = "two members start 0.3 s apart into an empty group, with and without the initial delay"
designs = ["coordinator"]
duration = 6.0
settle_timeout = 40.0
[group]
members = 0
topics = [{ name = "delayed", partitions = 4 }]
[coordinator]
session_timeout_ms = 2000
heartbeat_interval_ms = 500
[[churn]]
at = 0.2
action = "join"
count = 2
interval = 0.3
[sweep]
axis = "initial_rebalance_delay_ms"
values = [3000, 0]
"""


def broker_config(bootstrap: str, key: str) -> str:
    """The value of `key` the broker itself reports (DescribeConfigs), not what the lab wrote to its file."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="test-describe-configs")
    try:
        found = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all")
    finally:
        admin.close()
    (configs,) = found["broker"].values()
    return configs[key]["value"]


def test_broker_settings_reach_the_broker_and_a_change_restarts_it_and_embedded_servers_are_recorded(
        tmp_path: Path) -> None:
    first = expand_cases(parse_scenario(DELAYED))[0]  # initial_rebalance_delay_ms = 3000
    servers = LabServers.start(tmp_path, broker_settings=broker_settings(first.scenario))
    try:
        assert broker_config(servers.broker, DELAY) == "3000"
        before = [lst.port for lst in servers.kafka.listeners]
        servers.configure_broker({DELAY: "0"})
        assert broker_config(servers.broker, DELAY) == "0"
        assert [lst.port for lst in servers.kafka.listeners] == before  # the proxy still points at MEMBERS
        assert servers.describe()["broker"]["settings"][DELAY] == "0"
        pid = servers.kafka.process.pid
        servers.configure_broker({DELAY: "0"})  # already so: no restart
        assert servers.kafka.process.pid == pid
        # what an embedded run records of the servers it ran against
        described = servers.describe()
        srvr = four_letter_word(host_port(servers.zookeeper[0])[1], "srvr")
    finally:
        servers.stop()
    zookeeper, broker = described["zookeeper"], described["broker"]
    assert zookeeper["embedded"] is True and zookeeper["servers"][0]["mode"] == "standalone"
    assert zookeeper["version"] and f"Zookeeper version: {zookeeper['version']}-" in srvr
    assert (broker["embedded"], broker["kind"], broker["mode"]) == (True, "Apache Kafka", "ZooKeeper")
    assert broker["version"] == jvm.classpath(jvm.KAFKA_BROKER).version_of("kafka_2.13") is not None
    assert broker["cluster_id"] and broker["controller_id"] == 1
    assert broker["api_versions"]["JoinGroup"][1] >= 5 and broker["settings"][DELAY] == "0"


def test_the_initial_rebalance_delay_holds_the_first_join_and_gathers_the_group(tmp_path: Path) -> None:
    scenario = parse_scenario(DELAYED)
    delayed, immediate = LabSession(scenario, expand_cases(scenario), ["coordinator"], tmp_path / "out").run()
    for summary, value in ((delayed, "3000"), (immediate, "0")):
        assert summary.completed
        assert RunDirectory.load(summary.path)["servers"]["broker"]["settings"][DELAY] == value
    # Kafka holds the empty group's first join 3 s (InitialDelayedJoin), and the second member, arriving
    # meanwhile, joins the same generation.
    assert delayed.first_owned_s is not None and delayed.first_owned_s >= 3.0
    assert delayed.rebalances == 1
    assert immediate.first_owned_s is not None and immediate.first_owned_s < delayed.first_owned_s


def test_an_external_run_records_what_the_external_servers_tell(tmp_path: Path, proxied_kafka) -> None:
    scenario = parse_scenario(DELAYED.replace("values = [3000, 0]", "values = [3000]"))
    session = LabSession(scenario, expand_cases(scenario), ["coordinator"], tmp_path / "out",
                         zookeeper=proxied_kafka.zookeeper,
                         bootstrap=f"127.0.0.1:{proxied_kafka.members_upstream[1]}",
                         kafka_proxy_port=proxied_kafka.proxy_port)
    [summary] = session.run()
    assert summary.completed and summary.rebalances >= 1
    manifest = RunDirectory.load(summary.path)
    zookeeper, broker = manifest["servers"]["zookeeper"], manifest["servers"]["broker"]
    assert zookeeper["embedded"] is False and zookeeper["version"]
    assert (broker["embedded"], broker["kind"], broker["version"]) == (False, None, None)  # nothing made up
    assert broker["address"] == proxied_kafka.direct  # found in its registration: not the proxied listener
    assert broker["cluster_id"] and "JoinGroup" in broker["api_versions"]
    assert broker["settings_applied"] is False and broker["settings_wanted"] == {DELAY: "3000"}
    # the external broker was left as it was, and the manifest says what it really ran with
    assert broker_config(proxied_kafka.direct, DELAY) == "0" == broker["settings"][DELAY]
