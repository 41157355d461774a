"""The lab's servers on Apache Kafka: broker settings that reach the broker (and a restart when a case needs other
ones), manifests that record what the runs really ran against (embedded and external servers), and a topic grown
by add_partitions on the broker, owned and consumed on both designs, with the load producer never on the proxy."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from zkconsumer.admin import describe_topic
from zkconsumer.embedded import jvm
from zkconsumer.embedded.process import four_letter_word
from zkconsumer.lab.run import CaseRun
from zkconsumer.lab.scenario import expand_cases, parse_scenario
from zkconsumer.lab.servers import LabServers, broker_settings
from zkconsumer.lab.session import LabSession
from zkconsumer.lab.summary import summarize
from zkconsumer.lab.trace import RunDirectory, read_traces
from zkconsumer.lab.wire.tcp import host_port
from zkconsumer.zookeeper.client import ZkClient

pytestmark = pytest.mark.slow
DELAY = "group.initial.rebalance.delay.ms"

GROW = """
name = "grow"
description = "two members; their topic grows from 2 to 4 partitions under load"
duration = 8.0
seed = 5
settle_timeout = 40.0
[group]
members = 2
topics = [{ name = "grow", partitions = 2 }]
[zk]
"zookeeper.session.timeout.ms" = 4000
"rebalance.backoff.ms" = 200
"auto.offset.reset" = "smallest"
[coordinator]
session_timeout_ms = 2000
heartbeat_interval_ms = 500
metadata_max_age_ms = 1000
[load]
rate = 100.0
[[churn]]
at = 0.5
action = "add_partitions"
topic = "grow"
total = 4
"""

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


def test_add_partitions_grows_the_topic_and_both_designs_consume_the_new_partitions(tmp_path: Path) -> None:
    scenario = parse_scenario(GROW)
    [case] = expand_cases(scenario)
    servers = LabServers.start(tmp_path / "servers", broker_settings=broker_settings(case.scenario))
    try:
        runs = {design: CaseRun(case, design, servers, tmp_path / "out").run() for design in ("zk", "coordinator")}
        admin = KafkaAdminClient(bootstrap_servers=servers.broker, client_id="test-describe")
        try:
            topics = {t["name"]: len(t["partitions"]) for t in admin.describe_topics()}
        finally:
            admin.close()
        with ZkClient(servers.direct_zookeeper, session_timeout_ms=10000) as zk:
            in_zookeeper = {name: len(describe_topic(zk, name)) for name in topics if name.startswith("grow-")}
    finally:
        servers.stop()
    grown = {name: count for name, count in topics.items() if name.startswith("grow-")}
    assert sorted(grown.values()) == [4, 4] and in_zookeeper == grown  # the broker's and the controller's view
    for design, path in runs.items():
        summary = summarize(path)
        assert summary.completed and summary.stable_s, design
        records = list(read_traces(path))
        (topic,) = {r["topic"] for r in records if r["type"] == "membership" and r["action"] == "add_partitions"}
        produced, consumed = defaultdict(set), defaultdict(set)
        for r in records:
            if r["type"] in ("produce", "consume") and r["topic"] == topic:
                into = produced if r["type"] == "produce" else consumed
                into[r["partition"]].update(range(r["first_offset"], r["last_offset"] + 1))
        assert {2, 3} <= set(produced), design  # the load producer found the new partitions
        for partition, offsets in produced.items():
            assert offsets <= consumed[partition], (design, partition)  # every message, old and new partitions
        owned = _owned_at_the_end(records, design)
        assert owned == {f"{topic}/{p}" for p in range(4)}, design
        kafka = [r for r in records if r["type"] == "wire" and r["proto"] == "kafka"]
        assert kafka and {r["link"] for r in kafka} <= {"m0", "m1"}, design  # no lab-load, no admin


def _owned_at_the_end(records: list[dict], design: str) -> set[str]:
    if design == "zk":  # the last snapshot before the members were stopped
        done = next(r["ts"] for r in records if r["type"] == "phase" and r["phase"] == "done")
        snapshots = [r["owners"] for r in sorted(records, key=lambda r: r["ts"]) if r["type"] == "owners"
                     and r["ts"] <= done]
        return set(snapshots[-1])
    latest: dict[str, list[str]] = {}
    for r in sorted(records, key=lambda r: r["ts"]):
        if r["type"] == "generation" and r["kind"] == "assigned":
            latest[r["member"]] = r["partitions"]
    return {p for partitions in latest.values() for p in partitions}
