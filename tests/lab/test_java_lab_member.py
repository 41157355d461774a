"""The consumer-java design (zkconsumer/lab/members/java.py): Kafka's own Java consumer with `group.protocol =
consumer` as lab members, against the embedded Kafka 4 KRaft broker, beside the consumer design's librdkafka
members on the same schedule: one join into a settled group of 3, members as processes.

- both runs complete and the consumer protocol's identities hold on each (zkconsumer/lab/rules/identities.py);
- both clients move only what balance needs and revoke nothing that comes back (zkconsumer/lab/rules/handover.py);
- the Java members' generation records carry their member epochs (`member_epoch`), which librdkafka's cannot, and
  leave `generation` null as librdkafka's do: a member epoch is not the group's generation;
- no JVM outlives the run: each member's wrapper logs its JVM's pid, and none of them is running afterwards.

Without a JDK the design is one line naming the fix, and `--design all` leaves it out.
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import pytest
from test_lab_run import our_processes

from zkconsumer.errors import InputError
from zkconsumer.lab.designs import missing_client, select_designs
from zkconsumer.lab.runs.session import LabSession
from zkconsumer.lab.scenarios.loading import expand_cases, parse_scenario
from zkconsumer.lab.trace import read_traces

log = logging.getLogger(__name__)
PARTITIONS = 12
INCUMBENTS = 3
JOIN = f"""
name = "java-join"
description = "one member joins a settled group of three, on each client of the consumer protocol"
designs = ["coordinator"]
duration = 4.0
seed = 11
settle_timeout = 60.0

[group]
members = {INCUMBENTS}
process_mode = "processes"
topics = [{{ name = "jj", partitions = {PARTITIONS} }}]

[coordinator]
session_timeout_ms = 6000
heartbeat_interval_ms = 1000

[[churn]]
at = 1.0
action = "join"
"""
DESIGNS = ["consumer", "consumer-java"]
# The first test waits for a whole lab session: servers, then eight member processes, four of them JVMs.
RUN_TIMEOUT_S = 600
JVM_PID = re.compile(r"JVM pid (\d+) started")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, shared_lab_servers):
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            pytest.skip(f"missing tool: {tool} (a JDK 17: apt-get install openjdk-17-jdk-headless)")
    pytest.importorskip("confluent_kafka")
    scenario = parse_scenario(JOIN, "inline")
    out = tmp_path_factory.mktemp("java-lab")
    found = LabSession(scenario, expand_cases(scenario), DESIGNS, out, servers=shared_lab_servers).run()
    summaries = {s.design: s for s in found}
    for design, summary in summaries.items():
        log.info("%s: time to stable %s s", design, summary.stable_s)
    return out, summaries


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S)
def test_both_clients_complete_with_the_protocol_identities_holding(runs):
    _, summaries = runs
    assert sorted(summaries) == DESIGNS
    for design, summary in summaries.items():
        assert summary.completed, design
        assert summary.bad_lines == 0 and summary.undecodable == 0, design
        assert summary.identities and summary.identities_hold, (design, [str(i) for i in summary.identities])
        assert len(summary.stable_s) == 1, design


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S)
def test_both_clients_move_only_what_balance_needs(runs):
    _, summaries = runs
    least = PARTITIONS // (INCUMBENTS + 1)
    for design in DESIGNS:
        assert summaries[design].moved == least, design
        assert summaries[design].revoked_kept == 0, design


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S)
def test_java_members_record_their_member_epochs(runs):
    _, summaries = runs
    records = [r for r in read_traces(summaries["consumer-java"].path) if r["type"] == "generation"]
    assert {r["design"] for r in records} == {"consumer-java"}
    assigned = [r for r in records if r["kind"] == "assigned"]
    # every member, the joiner included, was assigned something under a positive member epoch
    assert {r["member"] for r in assigned if r["partitions"]} == {f"m{i}" for i in range(INCUMBENTS + 1)}
    assert all(isinstance(r["member_epoch"], int) and r["member_epoch"] > 0 for r in records), records
    assert all(r["generation"] is None for r in records)
    # librdkafka's members cannot tell theirs
    librdkafka = [r for r in read_traces(summaries["consumer"].path) if r["type"] == "generation"]
    assert librdkafka and not any("member_epoch" in r for r in librdkafka)


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S)
def test_no_jvm_outlives_the_run(runs):
    out, summaries = runs
    logs = sorted((summaries["consumer-java"].path / "logs").glob("m*.log"))
    pids = [int(m) for path in logs for m in JVM_PID.findall(path.read_text(errors="replace"))]
    assert len(pids) == INCUMBENTS + 1, logs
    for pid in pids:
        # A pid the system has given to another process since would not name this run's directory.
        cmdline = Path(f"/proc/{pid}/cmdline")
        assert not cmdline.exists() or str(out).encode() not in cmdline.read_bytes(), pid
    assert our_processes(str(out)) == []


def test_without_a_jdk_the_design_is_one_line_naming_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))  # the lab looks there first
    reason = missing_client("consumer-java")
    assert reason is not None and "javac not found" in reason and "install" in reason and "\n" not in reason
    with pytest.raises(InputError, match=r"--design consumer-java: .*javac not found"):
        select_designs(["zk", "coordinator"], "consumer-java")
    assert "consumer-java" not in select_designs(["zk", "coordinator"], "all")
