"""The ZooKeeper counting proxy against the real server: handshake, pings, watch notifications, errors, big and
pipelined frames, delay and cuts, undecodable streams, clean stop; and the mntr sampler."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from helpers import CALL_TIMEOUT, TEST_CONNECTION_RETRY, ZkProbe, unique, wait_for
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError

from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble
from zkconsumer.lab.wire import BLACKHOLE, RESET, MntrSampler, RecordCollector, ZkProxy, ZkRecord, mntr


@pytest.fixture
def proxy(zk_server: ZooKeeperEnsemble) -> Iterator[ZkProxy]:
    with ZkProxy(zk_server.connect_string, sink=RecordCollector(), name=unique("zkp")) as zk_proxy:
        yield zk_proxy
    assert not [t.name for t in threading.enumerate() if t.name.startswith(zk_proxy.name)]


@pytest.fixture
def chroot(zk_connect: str) -> str:
    return "/" + zk_connect.split("/", 1)[1]


class Member:
    """A kazoo client going through one proxy link, with its connection states recorded."""

    def __init__(self, proxy: ZkProxy, link: str, chroot: str, timeout: float) -> None:
        proxy.add_link(link)
        self.states: list[KazooState] = []
        self.client = KazooClient(hosts=proxy.connect_string(link, chroot), timeout=timeout,
                                  connection_retry=dict(TEST_CONNECTION_RETRY))
        self.client.add_listener(self.states.append)
        self.client.start(timeout=CALL_TIMEOUT)

    @property
    def session_id(self) -> int:
        return self.client.client_id[0]

    def close(self) -> None:
        self.client.stop()
        self.client.close()


@pytest.fixture
def member(proxy: ZkProxy, chroot: str) -> Iterator[Callable[..., Member]]:
    started: list[Member] = []

    def start(link: str = "m1", timeout: float = 10.0) -> Member:
        started.append(Member(proxy, link, chroot, timeout))
        return started[-1]

    yield start
    for m in started:
        m.close()


def find(proxy: ZkProxy, **fields: object) -> list[ZkRecord]:
    return proxy.sink.where(**fields)


@pytest.mark.slow
def test_handshake_records_the_session_the_client_got(proxy: ZkProxy, member) -> None:
    m = member("m1", timeout=10.0)
    (reply,) = wait_for(lambda: find(proxy, kind="connect_reply"), message="connect_reply record")
    (connect,) = find(proxy, kind="connect")
    assert reply.session_id == m.session_id and reply.link == "m1"
    assert connect.session_id is None and connect.timeout_ms == 10000 and reply.timeout_ms == 10000
    m.client.exists_async("/").get(timeout=CALL_TIMEOUT)
    requests = wait_for(lambda: find(proxy, kind="request", op="exists"), message="exists request")
    assert all(r.session_id == m.session_id and r.conn == connect.conn for r in requests)


@pytest.mark.slow
def test_pings_are_recorded_with_their_replies(proxy: ZkProxy, member) -> None:
    member("m1", timeout=4.0)  # the server's minimum (2 x tickTime): kazoo pings about every 1.3 s when idle
    wait_for(lambda: find(proxy, kind="ping_reply"), timeout=6.0, message="a ping reply")
    (ping, *_) = find(proxy, kind="ping")
    (pong, *_) = find(proxy, kind="ping_reply")
    assert (ping.xid, ping.op, pong.xid, pong.op) == (-2, "ping", -2, "ping")
    assert pong.latency_ms is not None and pong.latency_ms >= 0
    assert proxy.counters("m1")["requests"]["ping"] >= 1


@pytest.mark.slow
def test_watch_notification_from_a_change_made_elsewhere(proxy: ZkProxy, member, zk: ZkProbe, chroot: str) -> None:
    zk.create("/w", b"1")
    m = member("m1")
    fired = threading.Event()
    m.client.get("/w", watch=lambda event: fired.set())
    zk.set("/w", b"2")  # the probe connects directly, not through the proxy
    wait_for(fired.is_set, message="the watch to fire")
    (event,) = wait_for(lambda: find(proxy, kind="event"), message="event record")
    assert (event.event_type, event.path, event.event_state) == ("NodeDataChanged", f"{chroot}/w", "SyncConnected")
    (get,) = find(proxy, kind="request", op="getData")
    assert get.watch is True and get.path == f"{chroot}/w"
    assert proxy.counters("m1")["events"] == {"NodeDataChanged": 1}


@pytest.mark.slow
def test_missing_node_gives_a_no_node_reply(proxy: ZkProxy, member, chroot: str) -> None:
    m = member("m1")
    with pytest.raises(NoNodeError):
        m.client.get_async("/missing").get(timeout=CALL_TIMEOUT)
    (reply,) = wait_for(lambda: find(proxy, kind="reply", op="getData"), message="getData reply")
    assert (reply.err, reply.err_name, reply.path) == (-101, "NoNode", f"{chroot}/missing")
    assert proxy.counters("m1")["errors"] == {-101: 1}


@pytest.mark.slow
def test_big_reply_and_pipelined_requests_decode_with_their_xids(proxy: ZkProxy, member, zk: ZkProbe,
                                                                chroot: str) -> None:
    zk.create("/big", b"x" * 900_000)
    for i in range(0, 100, 2):
        zk.create(f"/n{i}", b"")
    m = member("m1")
    assert len(m.client.get_async("/big").get(timeout=CALL_TIMEOUT)[0]) == 900_000
    (big,) = wait_for(lambda: find(proxy, kind="reply", path=f"{chroot}/big"), message="the big reply")
    assert big.size > 900_000 and big.err == 0 and big.op == "getData"

    futures = [m.client.exists_async(f"/n{i % 100}") for i in range(300)]
    for future in futures:
        future.get(timeout=CALL_TIMEOUT)
    def pipelined() -> list[ZkRecord]:
        return [r for r in find(proxy, kind="reply", op="exists") if r.path.startswith(f"{chroot}/n")]

    wait_for(lambda: len(pipelined()) >= 300, message="300 exists replies")
    replies = pipelined()
    assert len(replies) == 300
    requests = {r.xid: r for r in find(proxy, kind="request", op="exists")}
    for r in replies:
        assert r.path == requests[r.xid].path
        expect_missing = int(r.path.rsplit("/n", 1)[1]) % 2 == 1
        assert r.err == (-101 if expect_missing else 0)
    assert not find(proxy, kind="undecodable")


@pytest.mark.slow
def test_delay_applies_to_requests_on_that_link(proxy: ZkProxy, member) -> None:
    m = member("m1")
    other = member("m2")
    proxy.delay("m1", 200)
    # kazoo checks its chroot with an exists at start; the probe is the reply after those.
    before = len(find(proxy, kind="reply", op="exists"))
    started = time.monotonic()
    m.client.exists_async("/").get(timeout=CALL_TIMEOUT)
    assert time.monotonic() - started >= 0.4  # 200 ms each way
    other.client.exists_async("/").get(timeout=CALL_TIMEOUT)
    new = wait_for(lambda: find(proxy, kind="reply", op="exists")[before:] if
                   len(find(proxy, kind="reply", op="exists")) >= before + 2 else None, message="two replies")
    latency = {r.link: r.latency_ms for r in new}
    assert latency["m1"] >= 400
    assert latency["m2"] < 400


@pytest.mark.slow
@pytest.mark.parametrize("mode", [RESET, BLACKHOLE])
def test_cut_suspends_and_restore_resumes_the_same_session(proxy: ZkProxy, member, mode: str) -> None:
    # 6 s session: kazoo notices a silent link after 2/3 of it, leaving 2 s to resume before the server expires it.
    m = member("m1", timeout=6.0)
    session = m.session_id
    proxy.cut("m1", mode)
    wait_for(lambda: KazooState.SUSPENDED in m.states, timeout=10.0, message="SUSPENDED")
    if mode == RESET:
        wait_for(lambda: proxy.counters("m1")["connections"].get("refused"), message="a refused reconnect")
    else:
        assert any(r.dropped for r in find(proxy, link="m1"))
    proxy.restore("m1")
    wait_for(lambda: m.states[-1] == KazooState.CONNECTED, timeout=10.0, message="CONNECTED again")
    assert m.session_id == session
    m.client.exists_async("/").get(timeout=CALL_TIMEOUT)
    resumed = [r for r in find(proxy, kind="connect") if r.session_id == session]
    assert resumed, "the reconnect names the old session in its ConnectRequest"
    assert find(proxy, kind="connect_reply")[-1].session_id == session


@pytest.mark.slow
def test_undecodable_bytes_are_still_forwarded(proxy: ZkProxy) -> None:
    port = proxy.add_link("raw")
    with socket.create_connection(("127.0.0.1", port), timeout=CALL_TIMEOUT) as sock:
        sock.sendall(b"srvr")  # a four-letter word, not a jute frame
        sock.shutdown(socket.SHUT_WR)  # like `nc -q`: the proxy must pass the half-close on and keep the answer
        answer = b""
        while chunk := sock.recv(100):
            answer += chunk
    assert b"Mode: standalone" in answer
    (record,) = wait_for(lambda: find(proxy, kind="undecodable"), message="undecodable record")
    assert record.link == "raw" and "c2s" in record.detail


@pytest.mark.slow
def test_stop_closes_the_port_and_joins_every_thread(zk_server: ZooKeeperEnsemble, chroot: str) -> None:
    name = unique("zkstop")
    proxy = ZkProxy(zk_server.connect_string, name=name).start()
    port = proxy.add_link("m1")
    client = KazooClient(hosts=proxy.connect_string("m1", chroot), timeout=10.0,
                         connection_retry={"max_tries": 0})
    client.start(timeout=CALL_TIMEOUT)
    try:
        assert any(t.name.startswith(name) for t in threading.enumerate())
        proxy.stop()  # with the client still connected
        assert not [t.name for t in threading.enumerate() if t.name.startswith(name)]
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    finally:
        client.stop()
        client.close()
        proxy.stop()


@pytest.mark.slow
def test_mntr_once_and_sampled(zk_server: ZooKeeperEnsemble) -> None:
    port = zk_server.nodes[0].client_port
    sample = mntr("127.0.0.1", port)
    assert sample["zk_server_state"] == "standalone"
    assert isinstance(sample["zk_packets_received"], int) and isinstance(sample["ts"], float)
    samples: list[dict] = []
    with MntrSampler("127.0.0.1", port, samples.append, interval_s=0.05, name=unique("mntr")) as sampler:
        wait_for(lambda: len(samples) >= 3, message="three mntr samples")
    assert not [t for t in threading.enumerate() if t.name.startswith(sampler.name)]
    assert samples[0]["ts"] < samples[-1]["ts"] and sampler.errors == 0


@pytest.mark.slow
def test_the_proxy_counts_what_the_server_counts(tmp_path) -> None:
    """The proxy's frames against ZooKeeper's own `mntr` packet counters, exactly, on a server nobody else uses:
    every request, ping and the handshake it saw reach the server, every reply, notification and handshake
    reply it saw leave it. The four-letter words are packets too; their cost is measured, not assumed."""
    ensemble = ZooKeeperEnsemble.plan(tmp_path / "zk", size=1)
    ensemble.start()
    try:
        port = ensemble.nodes[0].client_port
        # What one mntr costs in the counters, measured twice: the same both times, or it is no constant to subtract
        first, second, before = (mntr("127.0.0.1", port) for _ in range(3))
        per_mntr = (second["zk_packets_received"] - first["zk_packets_received"],
                    second["zk_packets_sent"] - first["zk_packets_sent"])
        again = (before["zk_packets_received"] - second["zk_packets_received"],
                 before["zk_packets_sent"] - second["zk_packets_sent"])
        assert per_mntr == again and per_mntr[0] >= 1, f"mntr's own packets: {per_mntr} then {again}"
        with ZkProxy(ensemble.connect_string, sink=RecordCollector(), name=unique("zkp")) as proxy:
            proxy.add_link("m1")
            client = KazooClient(hosts=proxy.connect_string("m1", ""), timeout=10.0,
                                 connection_retry=dict(TEST_CONNECTION_RETRY))
            client.start(timeout=CALL_TIMEOUT)
            notified = threading.Event()
            client.ensure_path("/counted")
            client.get_children("/counted", watch=lambda event: notified.set())
            for _ in range(25):
                client.create("/counted/n", b"x", sequence=True)
            assert notified.wait(CALL_TIMEOUT)
            with pytest.raises(NoNodeError):
                client.get("/counted/missing")
            client.stop()
            client.close()
            wait_for(lambda: proxy.sink.where(kind="reply", op="closeSession"), message="the close reply")
            after = mntr("127.0.0.1", port)
            kinds = [r.kind for r in proxy.sink.records()]
        sent_by_client = sum(kinds.count(k) for k in ("connect", "request", "ping"))
        sent_by_server = sum(kinds.count(k) for k in ("connect_reply", "reply", "event", "ping_reply"))
        assert kinds.count("event") == 1 and kinds.count("undecodable") == 0
        assert after["zk_packets_received"] - before["zk_packets_received"] - per_mntr[0] == sent_by_client
        assert after["zk_packets_sent"] - before["zk_packets_sent"] - per_mntr[1] == sent_by_server
    finally:
        ensemble.stop()
