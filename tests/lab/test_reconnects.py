"""Connection losses and the requests they re-send, attributed from hand-built trace records (no server): the wire's
reconnections, the members' loss events, the `resent` events and the watches kazoo re-arms, and the join's request
identity that reads "formula + re-sent after N connection losses" (zkconsumer/lab/rules/reconnects.py,
identities.zk_join)."""

from __future__ import annotations

import pytest
from kazoo.exceptions import ConnectionLoss, NoNodeError

from zkconsumer.lab.rules import identities, reconnects
from zkconsumer.lab.rules.join_cost import join_requests
from zkconsumer.zookeeper.client import ZkClient

SESSION = 0x1000_0000_0000_00AB


def _wire(ts: float, kind: str, conn: int, link: str = "m-1", **fields) -> dict:
    return {"type": "wire", "proto": "zk", "ts": ts, "kind": kind, "link": link, "conn": conn, **fields}


def _event(ts: float, kind: str, member: str = "m-1", **fields) -> dict:
    return {"type": "member_event", "ts": ts, "kind": kind, "member": member, **fields}


IDS, TOPIC = "/consumers/g/ids", "/brokers/topics/t"


def _watches(ts: float, conn: int, link: str) -> list[dict]:
    """kazoo's two watch recipes of a member reading their nodes (and setting their watches)."""
    return [_wire(ts, "request", conn, link, op="getChildren", path=IDS, watch=True),
            _wire(ts, "request", conn, link, op="getData", path=TOPIC, watch=True)]


def _first_connection(link: str = "m-1", session: int = SESSION) -> list[dict]:
    return [_wire(0.0, "connect", 1, link, session_id=None, timeout_ms=6000),
            _wire(0.01, "connect_reply", 1, link, session_id=session, timeout_ms=6000),
            _event(0.02, "connection", link, state="connected"), *_watches(0.03, 1, link)]


def _loss(ts: float, conn: int, resent: int, link: str = "m-1", session: int = SESSION) -> list[dict]:
    """One member's connection dropped at `ts` and resumed on connection `conn`, its two watches re-armed, then
    `resent` reads sent again."""
    out = [_event(ts, "connection", link, state="suspended"),
           _wire(ts + 0.1, "connect", conn, link, session_id=session, timeout_ms=6000),
           _wire(ts + 0.11, "connect_reply", conn, link, session_id=session, timeout_ms=6000),
           _event(ts + 0.12, "connection", link, state="connected"), *_watches(ts + 0.12, conn, link)]
    for i in range(resent):
        out += [_event(ts + 0.13, "resent", link, op="get", path=f"/consumers/g/ids/m-{i}", after="ConnectionLoss"),
                _wire(ts + 0.13, "request", conn, link, op="getData", path=f"/consumers/g/ids/m-{i}")]
    return out


def test_no_loss_is_the_plain_formula():
    records = _first_connection() + _first_connection("m-2", SESSION + 1)
    found = reconnects.count(records, 0.0, 10.0)
    assert found == reconnects.Reconnects() and not found.any and found.agree
    check = identities.zk_join(join_requests(3, 72), join_requests(3, 72), found.re_sent, found.losses,
                               found.reconnections)
    assert check.holds and not check.attributed and str(check) == f"ZooKeeper requests {join_requests(3, 72)}"
    assert not identities.zk_join(100, 101).holds and str(identities.zk_join(100, 101)) == "ZooKeeper requests 101≠100"


def test_planted_reconnections_are_attributed_and_the_identity_holds_iff_the_sum_matches():
    records = (_first_connection() + _first_connection("m-2", SESSION + 1) + _loss(1.0, 2, resent=5)
               + _loss(2.0, 3, resent=2) + _loss(1.5, 2, resent=0, link="m-2", session=SESSION + 1))
    found = reconnects.count(records, 0.5, 10.0)
    assert (found.reconnections, found.losses, found.resent, found.rearmed) == (3, 3, 7, 6)
    assert found.re_sent == 13 and found.agree
    formula = join_requests(3, 72)
    check = identities.zk_join(formula, formula + 13, found.re_sent, found.losses, found.reconnections)
    assert check.holds and check.attributed
    assert str(check) == (f"ZooKeeper requests: formula {formula} + re-sent 13 after 3 connection losses = measured "
                          f"{formula + 13}")
    for measured in (formula + 12, formula + 14, formula):  # neither a silent pass nor a silent fail
        wrong = identities.zk_join(formula, measured, found.re_sent, found.losses, found.reconnections)
        assert not wrong.holds
        assert str(wrong) == (f"ZooKeeper requests: formula {formula} + re-sent 13 after 3 connection losses ≠ "
                              f"measured {measured}")


def test_a_watched_read_that_answers_a_notification_is_no_re_arm():
    # notified that /ids changed: its re-read (the formula's) goes out on the replacing connection
    records = [*_first_connection(), _wire(1.0, "event", 1, path=IDS), *_loss(1.05, 2, resent=0)]
    assert reconnects.count(records) == reconnects.Reconnects(1, 1, 0, 1)  # the topic's watch only
    # a notification missed while the connection was down: the recipe's read after it answers it
    missed = [*_first_connection(), _event(1.0, "connection", state="suspended"), _wire(1.01, "event", 1, path=IDS),
              *_loss(1.02, 2, resent=0)[1:]]
    assert reconnects.count(missed).rearmed == 1
    # a watched read on a member's first connection installs its watch: never a re-arm
    assert reconnects.count(_first_connection()).rearmed == 0


def test_only_the_window_counts():
    records = _first_connection() + _loss(1.0, 2, resent=4) + _loss(5.0, 3, resent=1)
    assert reconnects.count(records, 0.0, 3.0) == reconnects.Reconnects(1, 1, 4, 2)
    assert reconnects.count(records, 3.0, 10.0) == reconnects.Reconnects(1, 1, 1, 2)
    assert reconnects.count(records, 10.0, 20.0) == reconnects.Reconnects()


def test_a_session_expiry_is_no_connection_loss():
    records = [
        *_first_connection(),
        _event(1.0, "connection", state="suspended"),
        # kazoo resumes with the old session: the server answers timeout 0 (expired), then a new session connects
        _wire(1.1, "connect", 2, session_id=SESSION, timeout_ms=6000),
        _wire(1.11, "connect_reply", 2, session_id=0, timeout_ms=0),
        _event(1.12, "connection", state="lost"), _event(1.12, "session_expired"),
        _wire(1.2, "connect", 3, session_id=None, timeout_ms=6000),
        _wire(1.21, "connect_reply", 3, session_id=SESSION + 7, timeout_ms=6000),
        _event(1.22, "connection", state="connected"),
        *_watches(1.23, 3, "m-1")]  # a new session's watches: installed again, no re-arm
    assert reconnects.count(records) == reconnects.Reconnects()


def test_wire_and_events_that_disagree_are_reported_not_attributed():
    # a reconnection on the wire with no loss event (a member that writes no connection events, or a lost line)
    records = _first_connection() + [r for r in _loss(1.0, 2, resent=3) if r.get("state") != "suspended"]
    found = reconnects.count(records)
    assert (found.reconnections, found.losses, found.agree) == (1, 0, False)
    assert found.describe() == "0 connection losses, 5 re-sent; the wire saw 1 reconnections: not attributed"
    formula = join_requests(2, 16)
    check = identities.zk_join(formula, formula + 5, found.re_sent, found.losses, found.reconnections)
    assert not check.holds  # the sum matches, but nothing says which member lost its connection
    assert str(check).endswith("(the wire saw 1 reconnections: not attributed)")


def test_session_ids_as_the_spark_reader_gives_them():
    # the Spark job reads session_id as the raw JSON text (a 64-bit id), the summary as an int: the same count
    as_text = [{**r, "session_id": None if r.get("session_id") in (None, 0) else str(r["session_id"])}
               if r["type"] == "wire" else r for r in _first_connection() + _loss(1.0, 2, resent=1)]
    assert reconnects.count(as_text) == reconnects.Reconnects(1, 1, 1, 2)


OWNER, REGISTRATION = "/consumers/g/owners/t/3", "/consumers/g/ids/m-1"


def _recreated(ts: float, conn: int, path: str, follow_ups: int, link: str = "m-1") -> list[dict]:
    """The member sends a create again after a loss; its first send had made the node, so ZooKeeper answers
    NodeExists (-110) and the member checks the node is its own."""
    out = [_event(ts, "resent", link, op="create", path=path, after="ConnectionLoss"),
           _wire(ts, "request", conn, link, op="create", path=path),
           _wire(ts + 0.01, "reply", conn, link, op="create", path=path, err=-110, err_name="NodeExists")]
    return out + [_wire(ts + 0.02, "request", conn, link, op="getData", path=path) for _ in range(follow_ups)]


def test_a_re_sent_create_that_meets_its_own_node_costs_its_checks_and_is_no_conflict():
    records = (_first_connection() + _loss(1.0, 2, resent=0) + _recreated(1.2, 2, OWNER, 1)
               + _recreated(1.3, 2, REGISTRATION, 2))
    found = reconnects.count(records, 0.5, 10.0)
    # the owner node is read once, the registration read and refreshed: 3 follow-ups, besides the 2 creates
    assert (found.resent, found.followed, found.refused_owners) == (2, 3, 1)
    assert found.re_sent == 2 + found.rearmed + 3
    # the same NodeExists without a re-sent create before it: another member's node, a real conflict, no follow-up
    raced = [*_first_connection(), _wire(1.2, "reply", 1, op="create", path=OWNER, err=-110, err_name="NodeExists")]
    assert (reconnects.count(raced).followed, reconnects.count(raced).refused_owners) == (0, 0)
    # another member's re-sent create does not make this member's NodeExists its own
    other = [*_first_connection(), _event(1.1, "resent", "m-2", op="create", path=OWNER, after="ConnectionLoss"),
             _wire(1.2, "reply", 1, op="create", path=OWNER, err=-110)]
    assert reconnects.count(other).refused_owners == 0


def test_a_join_whose_only_owner_conflicts_met_its_own_nodes_keeps_its_identity(tmp_path):
    from zkconsumer.lab.runs.summary import summarize
    from zkconsumer.lab.terminal import identities_cell

    path, formula = _run(tmp_path, losses=1, recreate=True)
    found = summarize(path)
    assert found.owner_conflicts == 1 and found.reconnects.refused_owners == 1
    # 2 re-sent reads, 1 re-armed watch, the re-sent create and its one check: 5
    assert identities_cell(found) == (f"1 hold: ZooKeeper requests: formula {formula} + re-sent 5 after 1 connection "
                                  f"loss = measured {formula + 5}")


class _Pending:
    def __init__(self, outcome):
        self.outcome = outcome

    def get(self, timeout=None):
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


@pytest.fixture
def client(monkeypatch):
    """A ZkClient that is never started: its sends answered by a script, so its re-sends can be watched."""
    zk = ZkClient("127.0.0.1:1", session_timeout_ms=6000, request_timeout_s=2.0, log_id="t")
    zk._connected.set()
    monkeypatch.setattr("zkconsumer.zookeeper.client.time.sleep", lambda s: None)
    return zk


def test_the_client_reports_each_request_it_sends_again(client, monkeypatch):
    resent: list[tuple[str, str, str]] = []
    client.on_resend(lambda op, path, after: resent.append((op, path, after)))
    sent: list[str] = []
    # a pipelined batch of three reads: the connection drops after the first answer, the other two go again
    answers = {"/a": [(b"a", None)], "/b": [ConnectionLoss(), (b"b", None)], "/c": [ConnectionLoss(), NoNodeError()]}

    def send(op, path, data, ephemeral):
        sent.append(path)
        return _Pending(answers[path].pop(0))

    monkeypatch.setattr(client, "_send", send)
    assert client.get_many(["/a", "/b", "/c"]) == [(b"a", None), (b"b", None), None]
    assert sent == ["/a", "/b", "/c", "/b", "/c"]
    assert resent == [("get", "/b", "ConnectionLoss"), ("get", "/c", "ConnectionLoss")]
    # a single call that fails once is sent twice, and reported once; one that succeeds is not reported
    answers["/d"] = [ConnectionLoss(), (b"d", None)]
    answers["/e"] = [(b"e", None)]
    assert client.get("/d") == (b"d", None) and client.get("/e") == (b"e", None)
    assert resent[2:] == [("get", "/d", "ConnectionLoss")]
    assert client.op_counts()["get_data"] == 8  # every send is counted, as the wire sees it


def _run(root, losses: int, extra: int = 0, recreate: bool = False):
    """A hand-built run directory of one join into N = 2 (3 rebalance-only members, 4 partitions): the formula's
    requests, each loss's re-armed watch and two re-sent reads (and with `recreate`, a re-sent owner create that
    met its own node), and `extra` requests nothing explains."""
    from zkconsumer.lab.trace import RunDirectory

    run = RunDirectory.create(root / f"run-{losses}-{extra}-{recreate}", scenario="herd", case="n2-r0", design="zk",
                              run_id=f"r{losses}{extra}{recreate:d}", process_mode="threads",
                              scenario_definition={"group": {"members": 2, "topics": [{"name": "t",
                                                                                        "partitions": 4}]}})
    trace, member = run.trace("run", "zk"), run.trace("m-1", "zk")
    wire = trace.sink("wire", proto="zk")
    trace.write("phase", phase="settled", ts=10.0)
    trace.write("membership", action="join", members=["m-3"], step=0, ts=10.1)
    formula = join_requests(3, 4)
    for i in range(formula + extra):
        wire({"ts": 10.2, "link": "m-3", "conn": 9, "kind": "request", "op": "getData", "path": f"/x/{i}"})
    for k in range(losses):
        ts = 11.0 + k
        member.write("member_event", ts=ts, member="m-1", kind="connection", state="suspended")
        wire({"ts": ts + 0.1, "link": "m-1", "conn": 20 + k, "kind": "connect", "session_id": SESSION})
        wire({"ts": ts + 0.11, "link": "m-1", "conn": 20 + k, "kind": "connect_reply", "session_id": SESSION,
              "timeout_ms": 6000})
        member.write("member_event", ts=ts + 0.12, member="m-1", kind="connection", state="connected")
        wire({"ts": ts + 0.12, "link": "m-1", "conn": 20 + k, "kind": "request", "op": "getChildren",
              "path": "/consumers/g/ids", "watch": True})
        for j in range(2):
            member.write("member_event", ts=ts + 0.13, member="m-1", kind="resent", op="get", path=f"/r/{j}",
                         after="ConnectionLoss")
            wire({"ts": ts + 0.13, "link": "m-1", "conn": 20 + k, "kind": "request", "op": "getData",
                  "path": f"/r/{j}"})
        if recreate:  # a re-sent owner create that meets the node its first send made, and its one check
            owner = "/consumers/g/owners/t/1"
            member.write("member_event", ts=ts + 0.14, member="m-1", kind="resent", op="create", path=owner,
                         after="ConnectionLoss")
            for kind, fields in (("request", {}), ("reply", {"err": -110, "err_name": "NodeExists"}),
                                 ("request", {"op": "getData"})):
                wire({"ts": ts + 0.14, "link": "m-1", "conn": 20 + k, "kind": kind, "op": "create", "path": owner,
                      **fields})
    trace.write("stable", generation_or_rebalance=1, duration_s=5.0, ts=15.0)
    trace.write("phase", phase="done", ts=20.0)
    trace.close()
    member.close()
    run.finish("completed")
    return run.path, formula


def test_the_summary_shows_the_losses_beside_the_formula(tmp_path):
    from zkconsumer.lab.runs.summary import summarize
    from zkconsumer.lab.terminal import identities_cell, losses_cells

    path, formula = _run(tmp_path, losses=0)
    plain = summarize(path)
    assert [str(i) for i in plain.identities] == [f"ZooKeeper requests {formula}"] and plain.identities_hold
    assert losses_cells(plain) == ("0", "0.0") and identities_cell(plain) == "1 hold"

    path, formula = _run(tmp_path, losses=2)
    lost = summarize(path)
    assert (lost.zk_reconnections, lost.connection_losses, lost.resent_requests) == (2, 2, 6)
    assert lost.zk_requests == formula + 6 and lost.identities_hold
    assert losses_cells(lost) == ("2", "6.0")
    assert identities_cell(lost) == (f"1 hold: ZooKeeper requests: formula {formula} + re-sent 6 after 2 connection "
                                 f"losses = measured {formula + 6}")

    path, formula = _run(tmp_path, losses=1, extra=1)  # one request more than the losses explain: it fails, named
    failed = summarize(path)
    assert not failed.identities_hold
    assert identities_cell(failed) == (f"FAIL ZooKeeper requests: formula {formula} + re-sent 3 after 1 connection "
                                       f"loss ≠ measured {formula + 4}")


def test_the_analysis_identity_names_the_losses_and_the_simulation_says_it_does_not_model_them():
    from zkconsumer.lab.analysis.predictions import _requests_why
    from zkconsumer.lab.analysis.predictions import identities as analysis_identities

    formula = join_requests(9, 72)  # one join into N = 8
    run = {"run_id": "r", "case": "n8-r0", "design": "zk", "members": 8, "partitions": 72, "process_mode": "threads",
           "completed": True, "changes": 1, "conflicts": 0, "zk_notifications_per_change": 8.0,
           "zk_requests_per_change": float(formula)}

    def requests_row(**columns):
        rows = analysis_identities([{**run, **columns}])
        return next(r for r in rows if r.metric == "ZooKeeper requests per join")

    plain = requests_row(zk_reconnections=0, connection_losses=0, resent_requests_per_change=0.0)
    assert plain.holds and plain.predicted == formula and plain.why == "= M² + 7·M + 3·P + 3 (M = N + 1)"
    lost = dict(zk_reconnections=2, connection_losses=2, resent_requests_per_change=41.0)
    attributed = requests_row(**lost, zk_requests_per_change=float(formula + 41))
    assert attributed.holds and attributed.predicted == formula + 41
    assert attributed.why == "= M² + 7·M + 3·P + 3 (M = N + 1) + re-sent 41 after 2 connection losses"
    assert not requests_row(**lost).holds  # the losses' re-sent requests are not on the wire: it fails, named
    apart = requests_row(zk_reconnections=3, connection_losses=2, resent_requests_per_change=41.0,
                         zk_requests_per_change=float(formula + 41))
    assert not apart.holds and apart.why.endswith("(the wire saw 3 reconnections: not attributed)")
    note = _requests_why("threads", [{**run, **lost}])
    assert "does not model connection losses" in note and "lost 2 connections and re-sent 41" in note


LOSS_SCENARIO = """
name = "join-with-a-connection-loss"
description = "one join into 2 rebalance-only members; an incumbent's ZooKeeper connection reset mid-rebalance"
designs = ["zk"]
duration = 1.0
seed = 7
settle_timeout = 30.0
[group]
members = 2
process_mode = "threads"
topics = [{ name = "rc", partitions = 16 }]
[zk]
"zookeeper.session.timeout.ms" = 6000
"rebalance.backoff.ms" = 100
"rebalance.max.retries" = 20
"auto.commit.enable" = false
[[network]]
members = "all"
target = "zookeeper"
delay_ms = 100
[[churn]]
at = 0.2
action = "join"
"""


class _LossOnce:
    """Wraps the lab's ZooKeeper proxies' record emission: once the joiner (the group's N + 1st link) has connected
    and an incumbent was notified that /ids changed, that incumbent's next read of a registration is followed at
    once by a reset of its link (its replies are still twice 100 ms away), then the link is restored: kazoo drops
    the connection, resumes the session on a new one and its client sends again what was in flight."""

    def __init__(self, members: int) -> None:
        self.members = members
        self.links: list[str] = []
        self.armed: str | None = None
        self.cut: str | None = None

    def wrap(self, emit):
        import threading

        def wrapped(proxy, record, link):
            emit(proxy, record, link)
            name = getattr(record, "link", None)
            if self.cut is not None or name is None:
                return
            if record.kind == "connect" and name not in self.links:
                self.links.append(name)
            joined = len(self.links) > self.members
            if (joined and self.armed is None and record.kind == "event" and name != self.links[-1]
                    and (record.path or "").endswith("/ids")):
                self.armed = name
            elif (name == self.armed and record.kind == "request" and record.op == "getData"
                  and "/ids/" in (record.path or "")):
                self.cut = name

                def reset() -> None:
                    proxy.cut(name)
                    proxy.restore(name)

                threading.Thread(target=reset, name="test-reset-link", daemon=True).start()
        return wrapped


@pytest.mark.slow
def test_a_real_connection_loss_during_a_join_is_recorded_on_both_sides_and_attributed(tmp_path, monkeypatch, spark,
                                                                                        shared_lab_servers):
    from zkconsumer.lab.rules.join_cost import accounted_requests
    from zkconsumer.lab.runs.session import LabSession
    from zkconsumer.lab.scenarios.loading import expand_cases, parse_scenario
    from zkconsumer.lab.terminal import identities_cell
    from zkconsumer.lab.trace import read_traces
    from zkconsumer.lab.wire.tcp import TcpProxy
    from zkconsumer.lab.wire.zk import ZkProxy

    loss = _LossOnce(members=2)
    monkeypatch.setattr(ZkProxy, "emit", loss.wrap(TcpProxy.emit), raising=False)
    scenario = parse_scenario(LOSS_SCENARIO, "inline")
    [summary] = LabSession(scenario, expand_cases(scenario), ["zk"], tmp_path, servers=shared_lab_servers).run()
    assert summary.completed and loss.cut is not None, loss.__dict__

    records = sorted(read_traces(summary.path), key=lambda r: r["ts"])
    settled = next(r["ts"] for r in records if r["type"] == "phase" and r["phase"] == "settled")
    done = next(r["ts"] for r in records if r["type"] == "phase" and r["phase"] == "done")
    window = [r for r in records if settled <= r["ts"] <= done]
    # the member's side: its connection suspended, then connected in the same session
    states = [(r["member"], r["state"]) for r in window if r["type"] == "member_event" and r["kind"] == "connection"
              and r["member"] != loss.links[-1]]  # the joiner's own first connection aside
    assert states == [(loss.cut, "suspended"), (loss.cut, "connected")], states
    # the wire's side: one ConnectRequest resuming that member's session, accepted
    sessions = {r["member"]: r["session"] for r in records if r["type"] == "member_event" and r["kind"] == "session"}
    resumed = [r for r in window if r["type"] == "wire" and r["proto"] == "zk" and r["kind"] == "connect"
               and r.get("session_id")]
    assert [(r["link"], r["session_id"]) for r in resumed] == [(loss.cut, sessions[loss.cut])]
    assert all("passw" not in key for r in records for key in r)  # the ConnectRequest's password is never written
    found = summary.reconnects
    # kazoo's two recipes read their nodes again on the new connection: the group's ids once (its session listener),
    # the topic once or twice (its session listener, and the NONE event kazoo's loss sends every registered watcher)
    assert (found.reconnections, found.losses) == (1, 1) and 2 <= found.rearmed <= 3, found
    resent = [r for r in window if r["type"] == "member_event" and r["kind"] == "resent"]
    assert resent and {r["member"] for r in resent} == {loss.cut} and found.resent == len(resent)
    assert all(r["after"] == "ConnectionLoss" for r in resent) and {r["op"] for r in resent} == {"get"}

    # the identity: what the members' events account for (a conflict's extra attempts included), plus the re-sent
    events = [r for r in window if r["type"] == "member_event"]
    notified = sum(1 for r in window if r["type"] == "wire" and r["proto"] == "zk" and r["kind"] == "event")
    accounted = accounted_requests(events, members_seen=3, joiners=1, notified=notified)
    check = identities.zk_join(accounted, summary.zk_requests, found.re_sent, found.losses, found.reconnections)
    print(check, "| summary:", identities_cell(summary))
    assert check.holds, str(check)
    if summary.conflicts == 0 and summary.owner_conflicts == 0:  # the summary's own check: the closed form
        assert accounted == join_requests(3, 16)
        assert identities_cell(summary) == (f"1 hold: ZooKeeper requests: formula {join_requests(3, 16)} + re-sent "
                                        f"{found.re_sent} after 1 connection loss = measured {summary.zk_requests}")

    # the Spark job reads every line of the real traces (the loss's events and records included) and counts the same
    from zkconsumer.lab.analysis.job import analyze

    result = analyze([tmp_path], tmp_path / "analysis", spark, predict_to=None)
    assert result.bad_lines == 0
    [run] = [r.asDict() for r in result.read(spark, "runs").collect()]
    assert (run["zk_reconnections"], run["connection_losses"], run["resent_requests"]) == (1, 1, found.re_sent)
    [change] = [r.asDict() for r in result.read(spark, "changes").collect() if r["counted"]]
    assert (change["zk_reconnections"], change["connection_losses"], change["resent_requests"]) == (1, 1, found.re_sent)
    if summary.conflicts == 0 and summary.owner_conflicts == 0:  # the analysis' identity, from the runs row
        from zkconsumer.lab.analysis.predictions import identities as analysis_identities

        [row] = [r for r in analysis_identities([run]) if r.metric == "ZooKeeper requests per join"]
        assert row.holds and row.why.endswith(f"+ re-sent {found.re_sent} after 1 connection loss"), row
        assert row.predicted == join_requests(3, 16) + found.re_sent == row.observed
