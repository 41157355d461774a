"""`lab run --settings shipped` (zkconsumer/lab/rules/shipped.py): each broker-side design at its own defaults, the
schedule unchanged; `same` and the ZooKeeper designs untouched."""

from __future__ import annotations

from kafka import KafkaConsumer

from zkconsumer.lab.rules.shipped import case_for
from zkconsumer.lab.runs.servers import broker_settings, kraft_settings
from zkconsumer.lab.scenarios.loading import expand_cases, find_scenario


def test_each_design_gets_its_own_defaults_and_the_same_schedule():
    case = expand_cases(find_scenario("herd"))[0]
    assert case_for(case, "coordinator", "same") is case
    assert case_for(case, "zk", "shipped") is case and case_for(case, "original", "shipped") is case
    eager = case_for(case, "coordinator", "shipped")
    assert eager.scenario.coordinator.session_timeout_ms == KafkaConsumer.DEFAULT_CONFIG["session_timeout_ms"]
    assert eager.scenario.coordinator.heartbeat_interval_ms == KafkaConsumer.DEFAULT_CONFIG["heartbeat_interval_ms"]
    assert broker_settings(eager.scenario)["group.initial.rebalance.delay.ms"] == "3000"
    kip848 = case_for(case, "consumer", "shipped")
    broker = kraft_settings(kip848.scenario)
    assert broker["group.consumer.heartbeat.interval.ms"] == "5000"
    assert broker["group.consumer.session.timeout.ms"] == "45000"
    # the broker accepts what it is given: each value within its own bound
    assert int(broker["group.consumer.min.heartbeat.interval.ms"]) <= 5000
    assert int(broker["group.consumer.min.session.timeout.ms"]) <= 45000
    assert case_for(case, "cooperative", "shipped").scenario.coordinator.session_timeout_ms == 45000
    for shipped in (eager, kip848):
        assert shipped.steps == case.steps and shipped.seed == case.seed  # same changes at the same moments
        assert shipped.scenario.settle_timeout >= 2 * shipped.scenario.coordinator.session_timeout_ms / 1000
    assert case.scenario.coordinator.heartbeat_interval_ms != 5000  # the case itself is not changed
