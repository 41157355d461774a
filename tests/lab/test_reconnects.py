"""Connection losses and the requests they re-send, attributed from hand-built trace records (no server): the wire's
reconnections, the members' loss events, the `resent` events and kazoo's setWatches, and the join's request identity
that reads "formula + re-sent after N connection losses" (zkconsumer/lab/reconnects.py, identities.zk_join)."""

from __future__ import annotations

import pytest
from kazoo.exceptions import ConnectionLoss, NoNodeError

from zkconsumer.lab import identities, reconnects
from zkconsumer.lab.join_cost import join_requests
from zkconsumer.zookeeper.client import ZkClient

SESSION = 0x1000_0000_0000_00AB


def _wire(ts: float, kind: str, conn: int, link: str = "m-1", **fields) -> dict:
    return {"type": "wire", "proto": "zk", "ts": ts, "kind": kind, "link": link, "conn": conn, **fields}


def _event(ts: float, kind: str, member: str = "m-1", **fields) -> dict:
    return {"type": "member_event", "ts": ts, "kind": kind, "member": member, **fields}


def _first_connection(link: str = "m-1", session: int = SESSION) -> list[dict]:
    return [_wire(0.0, "connect", 1, link, session_id=None, timeout_ms=6000),
            _wire(0.01, "connect_reply", 1, link, session_id=session, timeout_ms=6000),
            _event(0.02, "connection", link, state="connected")]


def _loss(ts: float, conn: int, resent: int, link: str = "m-1", session: int = SESSION) -> list[dict]:
    """One member's connection dropped at `ts` and resumed on connection `conn`, then `resent` reads sent again."""
    out = [_event(ts, "connection", link, state="suspended"),
           _wire(ts + 0.1, "connect", conn, link, session_id=session, timeout_ms=6000),
           _wire(ts + 0.11, "connect_reply", conn, link, session_id=session, timeout_ms=6000),
           _event(ts + 0.12, "connection", link, state="connected"),
           _wire(ts + 0.12, "request", conn, link, op="setWatches", path=None)]
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
    assert (found.reconnections, found.losses, found.resent, found.set_watches) == (3, 3, 7, 3)
    assert found.re_sent == 10 and found.agree
    formula = join_requests(3, 72)
    check = identities.zk_join(formula, formula + 10, found.re_sent, found.losses, found.reconnections)
    assert check.holds and check.attributed
    assert str(check) == (f"ZooKeeper requests: formula {formula} + re-sent 10 after 3 connection losses = measured "
                          f"{formula + 10}")
    for measured in (formula + 9, formula + 11, formula):  # neither a silent pass nor a silent fail
        wrong = identities.zk_join(formula, measured, found.re_sent, found.losses, found.reconnections)
        assert not wrong.holds
        assert str(wrong) == (f"ZooKeeper requests: formula {formula} + re-sent 10 after 3 connection losses ≠ "
                              f"measured {measured}")


def test_only_the_window_counts():
    records = _first_connection() + _loss(1.0, 2, resent=4) + _loss(5.0, 3, resent=1)
    assert reconnects.count(records, 0.0, 3.0) == reconnects.Reconnects(1, 1, 4, 1)
    assert reconnects.count(records, 3.0, 10.0) == reconnects.Reconnects(1, 1, 1, 1)
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
        _wire(1.23, "request", 3, op="setWatches")]
    assert reconnects.count(records) == reconnects.Reconnects()


def test_wire_and_events_that_disagree_are_reported_not_attributed():
    # a reconnection on the wire with no loss event (a member that writes no connection events, or a lost line)
    records = _first_connection() + [r for r in _loss(1.0, 2, resent=3) if r.get("state") != "suspended"]
    found = reconnects.count(records)
    assert (found.reconnections, found.losses, found.agree) == (1, 0, False)
    assert found.describe() == "0 connection losses, 4 re-sent; the wire saw 1 reconnections: not attributed"
    formula = join_requests(2, 16)
    check = identities.zk_join(formula, formula + 4, found.re_sent, found.losses, found.reconnections)
    assert not check.holds  # the sum matches, but nothing says which member lost its connection
    assert str(check).endswith("(the wire saw 1 reconnections: not attributed)")


def test_session_ids_as_the_spark_reader_gives_them():
    # the Spark job reads session_id as the raw JSON text (a 64-bit id), the summary as an int: the same count
    as_text = [{**r, "session_id": None if r.get("session_id") in (None, 0) else str(r["session_id"])}
               if r["type"] == "wire" else r for r in _first_connection() + _loss(1.0, 2, resent=1)]
    assert reconnects.count(as_text) == reconnects.Reconnects(1, 1, 1, 1)


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


def _run(root, losses: int, extra: int = 0):
    """A hand-built run directory of one join into N = 2 (3 rebalance-only members, 4 partitions): the formula's
    requests, each loss's setWatches and two re-sent reads, and `extra` requests nothing explains."""
    from zkconsumer.lab.trace import RunDirectory

    run = RunDirectory.create(root / f"run-{losses}-{extra}", scenario="herd", case="n2-r0", design="zk",
                              run_id=f"r{losses}{extra}", process_mode="threads",
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
        wire({"ts": ts + 0.12, "link": "m-1", "conn": 20 + k, "kind": "request", "op": "setWatches"})
        for j in range(2):
            member.write("member_event", ts=ts + 0.13, member="m-1", kind="resent", op="get", path=f"/r/{j}",
                         after="ConnectionLoss")
            wire({"ts": ts + 0.13, "link": "m-1", "conn": 20 + k, "kind": "request", "op": "getData",
                  "path": f"/r/{j}"})
    trace.write("stable", generation_or_rebalance=1, duration_s=5.0, ts=15.0)
    trace.write("phase", phase="done", ts=20.0)
    trace.close()
    member.close()
    run.finish("completed")
    return run.path, formula


def test_the_summary_shows_the_losses_beside_the_formula(tmp_path):
    from zkconsumer.lab.summary import _identities, _losses, summarize

    path, formula = _run(tmp_path, losses=0)
    plain = summarize(path)
    assert [str(i) for i in plain.identities] == [f"ZooKeeper requests {formula}"] and plain.identities_hold
    assert _losses(plain) == ("0", "0.0") and _identities(plain) == "1 hold"

    path, formula = _run(tmp_path, losses=2)
    lost = summarize(path)
    assert (lost.zk_reconnections, lost.connection_losses, lost.resent_requests) == (2, 2, 6)
    assert lost.zk_requests == formula + 6 and lost.identities_hold
    assert _losses(lost) == ("2", "6.0")
    assert _identities(lost) == (f"1 hold: ZooKeeper requests: formula {formula} + re-sent 6 after 2 connection "
                                 f"losses = measured {formula + 6}")

    path, formula = _run(tmp_path, losses=1, extra=1)  # one request more than the losses explain: it fails, named
    failed = summarize(path)
    assert not failed.identities_hold
    assert _identities(failed) == (f"FAIL ZooKeeper requests: formula {formula} + re-sent 3 after 1 connection loss "
                                   f"≠ measured {formula + 4}")
