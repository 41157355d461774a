"""Every churn action of the lab run under test on the real servers, each with its effect seen in the run's traces:
expire, restart, kill, pause/resume, delay and add_partitions on the ZooKeeper design; restart, kill, pause/resume,
delay and add_partitions on the coordinator design; the ZooKeeper ensemble leader's kill (a 3-server ensemble). Join
and leave run in test_lab_run.py.

Several actions share one small run per design, spaced so that each has settled before the next begins (a change
takes over the stability clock from the one before it). The runs share the suite's servers (`lab_servers`,
tests/lab/conftest.py), so no server starts per run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zkconsumer.lab.drivers import zk as zk_driver
from zkconsumer.lab.runs.case_run import CaseRun
from zkconsumer.lab.runs.servers import LabServers
from zkconsumer.lab.runs.summary import summarize
from zkconsumer.lab.scenarios.loading import expand_cases, parse_scenario
from zkconsumer.lab.trace import RunDirectory, read_traces

pytestmark = pytest.mark.slow
real_expire = zk_driver.expire_session
SESSION_MS = 2000
DELAY_MS = 40

ZK_ACTIONS = f"""
name = "actions-zk"
description = "expire, restart after kill -9, kill, a delay, pause past the session timeout, then the topic grows"
designs = ["zk"]
duration = 17.0
seed = 17
settle_timeout = 30.0
[group]
members = 3
topics = [{{ name = "acts", partitions = 4 }}]
[zk]
# 3 s: a member process starting under load has failed its first connect inside a 2 s session timeout
"zookeeper.session.timeout.ms" = {SESSION_MS + 1000}
"rebalance.backoff.ms" = 200
"rebalance.max.retries" = 20
[[churn]]
at = 0.2
action = "expire"
member = 0
[[churn]]
at = 0.8
action = "restart"
member = 2
stop = "kill"
delay = 0.2
[[churn]]
at = 5.5
action = "kill"
member = 1
[[churn]]
at = 9.8
action = "delay"
members = "all"
target = "zookeeper"
delay_ms = {DELAY_MS}
[[churn]]
at = 10.0
action = "pause"
member = 2
seconds = 5.0
[[churn]]
at = 16.2
action = "add_partitions"
topic = "acts"
total = 6
"""

COORDINATOR_ACTIONS = f"""
name = "actions-coordinator"
description = "restart after kill -9, kill, a delay, pause past the session timeout, then the topic grows"
designs = ["coordinator"]
duration = 12.5
seed = 18
settle_timeout = 30.0
[group]
members = 3
topics = [{{ name = "acts", partitions = 4 }}]
[coordinator]
session_timeout_ms = {SESSION_MS}
heartbeat_interval_ms = 400
metadata_max_age_ms = 500
[[churn]]
at = 0.2
action = "restart"
member = 2
stop = "kill"
delay = 0.2
[[churn]]
at = 3.5
action = "kill"
member = 1
[[churn]]
at = 6.8
action = "delay"
members = "all"
target = "broker"
delay_ms = {DELAY_MS}
[[churn]]
at = 7.0
action = "pause"
member = 0
seconds = 3.5
[[churn]]
at = 11.5
action = "add_partitions"
topic = "acts"
total = 6
"""


class Trace:
    """One run's records by time, with the lookups the assertions need."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records = sorted(read_traces(path), key=lambda r: (r["ts"], r.get("seq", 0)))

    def change(self, action: str, member: str | None = None, **extra: Any) -> dict[str, Any]:
        """The (first) membership record of `action` (on `member`)."""
        return next(r for r in self.records if r["type"] == "membership" and r["action"] == action
                    and (member is None or member in r["members"])
                    and all(r.get(k) == v for k, v in extra.items()))

    def events(self, member: str, kind: str, after: float = 0.0, before: float = float("inf")) -> list[dict]:
        return [r for r in self.records if r["type"] == "member_event" and r["member"] == member
                and r["kind"] == kind and after < r["ts"] < before]

    def of_member(self, member: str, after: float, before: float) -> list[dict]:
        return [r for r in self.records if r.get("member") == member and r["type"] != "membership"
                and after < r["ts"] < before]

    def owners(self, after: float = 0.0, before: float = float("inf")) -> list[dict[str, str]]:
        """ZooKeeper design: owner snapshots, {"t/p": owning member}."""
        return [{tp: owner_member(owner) for tp, owner in r["owners"].items()} for r in self.records
                if r["type"] == "owners" and after < r["ts"] < before]

    def assigned(self, after: float = 0.0, before: float = float("inf")) -> dict[int, dict[str, list[str]]]:
        """Coordinator design: generation -> member -> partitions assigned in it."""
        found: dict[int, dict[str, list[str]]] = {}
        for r in self.records:
            if r["type"] == "generation" and r["kind"] == "assigned" and after < r["ts"] < before:
                found.setdefault(r["generation"], {})[r["member"]] = r["partitions"]
        return found

    def replies(self, proto: str, after: float) -> list[dict]:
        kind = "reply" if proto == "zk" else "response"
        return [r for r in self.records if r["type"] == "wire" and r["proto"] == proto and r["kind"] == kind
                and r["ts"] > after and r.get("latency_ms") is not None and r.get("link", "").startswith("m")]

    @property
    def done(self) -> float:
        return next(r["ts"] for r in self.records if r["type"] == "phase" and r["phase"] == "done")


def owner_member(thread_id: str) -> str:
    """The member of an owner node's thread id, `<group>_<consumer.id>-<stream>` (consumer ids are `m<i>`)."""
    return thread_id.rsplit("-", 1)[0].rsplit("_", 1)[-1]


def claimed_owners(records: list[dict[str, Any]], until: float) -> dict[str, str]:
    """ZooKeeper design: who owns each partition at `until`, from the members' own claim, release and rollback
    events (an owner snapshot is up to 0.5 s old, and the run ends soon after the group settles). A dead session's
    nodes go with it, but the group settles only once others have claimed them."""
    owners: dict[str, str] = {}
    for r in records:
        if r["type"] != "member_event" or r["ts"] > until or r["kind"] not in ("claim", "release", "rollback"):
            continue
        tp = f"{r['topic']}/{r['partition']}"
        if r["kind"] == "claim" and r["ok"]:
            owners[tp] = r["member"]
        elif r["kind"] in ("release", "rollback") and owners.get(tp) == r["member"]:
            del owners[tp]
    return owners


def run_case(text: str, design: str, servers: LabServers, out: Path) -> Trace:
    scenario = parse_scenario(text, "inline")
    [case] = expand_cases(scenario)
    path = CaseRun(case, design, servers, out).run()
    manifest = RunDirectory.load(path)
    assert manifest["completed"], manifest.get("error")
    return Trace(path)


def partitions(topic_records: list[dict], count: int) -> set[str]:
    (topic,) = {r["topic"] for r in topic_records}
    return {f"{topic}/{p}" for p in range(count)}


def test_zookeeper_design_expire_restart_kill_pause_delay_and_add_partitions(lab_servers, tmp_path,
                                                                          monkeypatch) -> None:
    used: list[tuple[int, bytes]] = []

    def expire_session(connect: str, session: int, password: bytes) -> None:
        used.append((session, password))
        real_expire(connect, session, password)

    monkeypatch.setattr(zk_driver, "expire_session", expire_session)
    trace = run_case(ZK_ACTIONS, "zk", lab_servers, tmp_path / "out")
    grown = partitions([trace.change("add_partitions")], 6)

    # expire: a real server-side expiry of m0's session, with the credentials m0 sent the driver over its control
    # channel; none of them is in any file of the run (traces, logs, manifest); m0 sees the expiry, registers again
    # on a new session and rebalances
    [(session, password)] = used
    assert session in [r["session"] for r in trace.events("m0", "session")] and len(password) == 16
    assert not [r for r in trace.records if "password" in r]
    files = [path for path in trace.path.rglob("*") if path.is_file()]
    assert len(files) > 5 and not [path for path in files if password.hex() in path.read_text(errors="replace")]
    expired = trace.change("expire", "m0")["ts"]
    [lost] = trace.events("m0", "session_expired", after=expired)[:1] or [None]
    assert lost is not None, "m0 never saw its session expire"
    renewed = trace.events("m0", "registered", after=lost["ts"])
    assert renewed and trace.events("m0", "rebalance_begin", after=lost["ts"])

    # restart after kill -9 (the restart trap): m2 comes back with the same id on a new session, while its old
    # session's registration lives on until the server expires it; then it registers and claims again
    stopped = trace.change("kill", "m2", step=1)["ts"]
    rejoined = trace.change("join", "m2", restart=True)["ts"]
    sessions = [r["session"] for r in trace.events("m2", "session", before=trace.change("pause", "m2")["ts"])]
    assert len(sessions) == 2 and sessions[0] != sessions[1] and stopped < rejoined
    assert trace.events("m2", "registered", after=rejoined)
    assert [e for e in trace.events("m2", "claim", after=rejoined) if e["ok"]]

    # kill: m1 writes nothing more; its session expires on the server, which tells the others (a watch
    # notification on their links), and they take its partitions
    killed = trace.change("kill", "m1", step=2)["ts"]
    held = [tp for tp, owner in [s for s in trace.owners(before=killed) if "m1" in s.values()][-1].items()
            if owner == "m1"]
    assert not trace.of_member("m1", after=killed + 0.2, before=trace.done)
    notified = [r for r in trace.records if r["type"] == "wire" and r["proto"] == "zk" and r["kind"] == "event"
                and r["ts"] > killed and r["link"] in ("m0", "m2")]
    assert notified, "nobody was notified of the killed member's expired session"
    paused = trace.change("pause", "m2")["ts"]
    after_kill = claimed_owners(trace.records, paused)
    assert after_kill.keys() == partitions([trace.change("add_partitions")], 4)
    assert "m1" not in after_kill.values() and set(held) <= after_kill.keys()  # its partitions re-owned

    # pause past the session timeout: m2 is silent while stopped; the server expires its session meanwhile, which
    # tells m0 (a notification on its link) and sets off its rebalance, both before m2 is resumed; once resumed, m2
    # learns of the expiry and registers again
    resumed = trace.change("resume", "m2")["ts"]
    assert not trace.of_member("m2", after=paused + 0.5, before=resumed)
    told = [r for r in trace.records if r["type"] == "wire" and r["proto"] == "zk" and r["kind"] == "event"
            and r["link"] == "m0" and paused < r["ts"] < resumed]
    assert told and trace.events("m0", "rebalance_begin", after=told[0]["ts"], before=resumed)
    assert trace.events("m2", "session_expired", after=resumed)
    assert trace.events("m2", "registered", after=resumed)

    # delay: every ZooKeeper reply after it took at least the delay to come back
    delayed = trace.change("delay")["ts"]
    replies = trace.replies("zk", after=delayed + 0.5)
    assert replies and min(r["latency_ms"] for r in replies) >= DELAY_MS

    # add_partitions: the grown topic's new partitions are owned, by the two live members as the range assignor says
    final = claimed_owners(trace.records, trace.done)
    assert final.keys() == grown and set(final.values()) == {"m0", "m2"}
    assert summarize(trace.path).completed


def test_coordinator_design_restart_kill_pause_delay_and_add_partitions(lab_servers, tmp_path) -> None:
    trace = run_case(COORDINATOR_ACTIONS, "coordinator", lab_servers, tmp_path / "out")
    four = partitions([trace.change("add_partitions")], 4)

    # restart after kill -9: m2 comes back as a new member (a new incarnation) and is assigned again
    rejoined = trace.change("join", "m2", restart=True)["ts"]
    incarnations = {r.get("incarnation") for r in trace.records if r.get("member") == "m2"
                    and r["type"] == "generation"}
    assert len(incarnations) == 2
    killed = trace.change("kill", "m1")["ts"]
    restarted = trace.assigned(after=rejoined, before=killed)
    assert restarted and "m2" in restarted[max(restarted)]

    # kill: m1 is evicted when its session times out; a later generation gives all four partitions to m0 and m2
    paused = trace.change("pause", "m0")["ts"]
    after_kill = trace.assigned(after=killed, before=paused)
    assert after_kill, "no generation after the kill"
    last = after_kill[max(after_kill)]
    assert set(last) == {"m0", "m2"} and {p for ps in last.values() for p in ps} == four
    assert not trace.of_member("m1", after=killed + 0.2, before=trace.done)

    # pause past the session timeout: m0 is silent while stopped and evicted (m2 alone gets everything), then
    # resumed, it rejoins and is assigned again
    resumed = trace.change("resume", "m0")["ts"]
    assert not trace.of_member("m0", after=paused + 0.5, before=resumed)
    while_paused = trace.assigned(after=paused, before=resumed)
    assert any(set(g) == {"m2"} and set(g["m2"]) == four for g in while_paused.values())
    assert any("m0" in g for g in trace.assigned(after=resumed).values())

    # delay: every response to a member after it took at least the delay
    delayed = trace.change("delay")["ts"]
    responses = trace.replies("kafka", after=delayed + 0.5)
    assert responses and min(r["latency_ms"] for r in responses) >= DELAY_MS

    # add_partitions: the group leader sees the new partitions at its next metadata refresh and rebalances
    grown = partitions([trace.change("add_partitions")], 6)
    generations = trace.assigned(after=trace.change("add_partitions")["ts"], before=trace.done)
    assert generations and {p for ps in generations[max(generations)].values() for p in ps} == grown
    assert summarize(trace.path).completed


ZK_LEADER = """
name = "zk-leader"
description = "the ZooKeeper ensemble's leader is killed under a settled group of two"
designs = ["zk"]
# the run ends `duration` after t = 0 (a server kill is no membership change the lab waits to settle): long enough
# for the ensemble to elect a new leader and the members to reconnect
duration = 8.0
seed = 19
settle_timeout = 40.0
zk_servers = 3
[group]
members = 2
process_mode = "threads"
topics = [{ name = "lead", partitions = 2 }]
[zk]
"zookeeper.session.timeout.ms" = 10000
"rebalance.backoff.ms" = 200
[[churn]]
at = 0.2
action = "kill_zk_leader"
"""


@pytest.mark.ensemble
def test_a_killed_zookeeper_leader_disconnects_the_members_and_they_recover(tmp_path) -> None:
    from zkconsumer.lab.runs.session import LabSession

    scenario = parse_scenario(ZK_LEADER, "inline")
    [summary] = LabSession(scenario, expand_cases(scenario), ["zk"], tmp_path / "out").run()
    assert summary.completed
    trace = Trace(summary.path)
    killed = trace.change("kill_zk_leader")
    assert killed["server"] in (1, 2, 3)
    for member in ("m0", "m1"):
        states = [e["state"] for e in trace.events(member, "connection", after=killed["ts"])]
        # the disconnect, then the recovery: on the same session (no expiry, no new registration)
        assert "suspended" in states and "connected" in states[states.index("suspended"):], (member, states)
        assert not trace.events(member, "session_expired", after=killed["ts"])
    resumed = [r for r in trace.records if r["type"] == "wire" and r["proto"] == "zk" and r["kind"] == "connect"
               and r["ts"] > killed["ts"] and r.get("session_id")]
    assert {r["link"] for r in resumed} == {"m0", "m1"}  # each member reconnected naming its session
