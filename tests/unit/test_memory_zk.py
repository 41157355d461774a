"""The in-memory ZooKeeper: tree, sessions, watches, faults and counting, without Java (runs in about a second).

The same sequences against a real server are in tests/test_memory_zk_contract.py.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)

from zkconsumer.zookeeper.client import WatchHandle, ZkClient, ZkClosedError, ZkUnavailableError
from zkconsumer.zookeeper.memory import MemoryStat, MemoryZkClient, MemoryZooKeeper, WatchEvent

MakeClient = Callable[..., MemoryZkClient]


@pytest.fixture
def server() -> MemoryZooKeeper:
    return MemoryZooKeeper(name="unit")


@pytest.fixture
def clients(server: MemoryZooKeeper) -> Iterator[MakeClient]:
    made: list[MemoryZkClient] = []

    def make(log_id: str = "zk", **kwargs: object) -> MemoryZkClient:
        client = MemoryZkClient(server, log_id=log_id, **kwargs).start()  # type: ignore[arg-type]
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def without_states(counts: dict[str, int]) -> dict[str, int]:
    return {kind: n for kind, n in counts.items() if not kind.startswith("state:")}


# --- the tree --------------------------------------------------------------------------------------


def test_create_makes_null_parents_counting_each_create(server: MemoryZooKeeper, clients: MakeClient) -> None:
    zk = clients()
    zk.create("/a/b/c", b"x")
    assert server.dump() == {"/a": (None, 0), "/a/b": (None, 0), "/a/b/c": (b"x", 0)}
    # try /a/b/c, try /a/b, create /a, create /a/b, create /a/b/c: ZkClient's order of attempts
    assert zk.op_counts() == {"state:connected": 1, "create": 5}
    data, stat = zk.get("/a")  # type: ignore[misc]
    assert data is None
    assert isinstance(stat, MemoryStat)
    assert (stat.dataLength, stat.numChildren, stat.version, stat.ephemeralOwner) == (0, 1, 0, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stat.version = 3  # type: ignore[misc]
    assert zk.get("/missing") is None
    assert zk.get_children("/missing") is None
    assert zk.get_children("/a") == ["b"]
    assert zk.exists("/a/b") and not zk.exists("/a/x")
    with pytest.raises(NodeExistsError):
        zk.create("/a/b/c", b"y")
    with pytest.raises(NoNodeError):
        zk.create("/p/q", b"", makepath=False)


def test_ensure_path_on_an_existing_node_is_one_create(clients: MakeClient) -> None:
    zk = clients()
    zk.create("/a/b")
    before = zk.op_counts()["create"]
    zk.ensure_path("/a/b")
    assert zk.op_counts()["create"] == before + 1


def test_set_creates_missing_nodes_and_bumps_versions(server: MemoryZooKeeper, clients: MakeClient) -> None:
    zk = clients()
    zk.set("/o/g/t/0", b"5")  # set: NoNode; create tries 4 levels down to /o, then makes /o, /o/g, /o/g/t, the node
    assert zk.op_counts() == {"state:connected": 1, "set_data": 1, "create": 7}
    assert server.dump()["/o/g/t/0"] == (b"5", 0)
    _, first = zk.get("/o/g/t/0")  # type: ignore[misc]
    zk.set("/o/g/t/0", b"6")
    data, second = zk.get("/o/g/t/0")  # type: ignore[misc]
    assert data == b"6"
    assert (second.version, second.czxid) == (first.version + 1, first.czxid)
    assert second.mzxid > first.mzxid and second.dataLength == 1


def test_child_changes_bump_the_parent_cversion(clients: MakeClient) -> None:
    zk = clients()
    zk.create("/p")
    _, start = zk.get("/p")  # type: ignore[misc]
    zk.create("/p/a")
    zk.create("/p/b")
    zk.delete("/p/a")
    _, end = zk.get("/p")  # type: ignore[misc]
    assert (end.cversion, end.numChildren, end.version) == (start.cversion + 3, 1, 0)
    assert end.pzxid > start.pzxid and end.mzxid == start.mzxid


def test_delete_rules(server: MemoryZooKeeper, clients: MakeClient) -> None:
    zk = clients()
    zk.create("/d/x/y", b"1")
    with pytest.raises(NotEmptyError):
        zk.delete("/d")
    assert zk.delete("/d", recursive=True) is True
    assert zk.delete("/d") is False
    assert server.dump() == {}
    sid = zk.session_id
    assert sid is not None
    with pytest.raises(BadArgumentsError):
        server.delete(sid, "/")
    server.create(sid, "/v", b"0")
    with pytest.raises(BadVersionError):
        server.set_data(sid, "/v", b"1", version=7)
    with pytest.raises(BadVersionError):
        server.delete(sid, "/v", version=7)
    server.delete(sid, "/v", version=0)


def test_ephemerals_cannot_have_children(clients: MakeClient) -> None:
    zk = clients()
    zk.create("/e", b"1", ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        zk.create("/e/child", b"")


def test_paths_and_values_are_checked_like_kazoo(server: MemoryZooKeeper, clients: MakeClient) -> None:
    zk = clients()
    zk.create("a", b"1")  # kazoo makes it absolute
    assert zk.get("/a/") == zk.get("//a")  # and drops trailing and double slashes
    with pytest.raises(ValueError, match="relative"):
        zk.create("/a/../b", b"")
    with pytest.raises(TypeError):
        zk.create("/s", "text")  # type: ignore[arg-type]
    # The client counts attempts; the server never saw the refused ones.
    assert zk.op_counts()["create"] == 3
    assert server.op_counts(zk.session_id)["create"] == 1


def test_root_holds_zookeepers_own_nodes_which_dump_leaves_out(server: MemoryZooKeeper, clients: MakeClient) -> None:
    zk = clients()
    assert zk.get_children("/") == ["zookeeper"]
    assert sorted(zk.get_children("/zookeeper") or []) == ["config", "quota"]
    assert server.dump() == {}


# --- watches on the server -------------------------------------------------------------------------


def watcher_session(server: MemoryZooKeeper) -> tuple[int, list[WatchEvent]]:
    """A bare session whose notifications are delivered right after the request that caused them."""
    session_id, _ = server.open_session()
    return session_id, []


def test_data_watch_fires_once_per_change_and_must_be_rearmed(server: MemoryZooKeeper) -> None:
    writer, _ = server.open_session()
    sid, seen = watcher_session(server)
    server.create(writer, "/n", b"1")
    server.get_data(sid, "/n", seen.append)
    server.set_data(writer, "/n", b"2")
    server.set_data(writer, "/n", b"3")  # not re-armed: no second notification
    assert seen == [WatchEvent("CHANGED", "/n")]
    server.get_data(sid, "/n", seen.append)
    server.delete(writer, "/n")
    assert seen[-1] == WatchEvent("DELETED", "/n")
    assert server.op_counts(sid)["watch:data"] == 2


def test_exists_watch_sees_creation_and_get_on_a_missing_node_sets_none(server: MemoryZooKeeper) -> None:
    writer, _ = server.open_session()
    sid, seen = watcher_session(server)
    with pytest.raises(NoNodeError):
        server.get_data(sid, "/n", seen.append)
    with pytest.raises(NoNodeError):
        server.get_children(sid, "/n", seen.append)
    assert server.exists(sid, "/n", seen.append) is None
    server.create(writer, "/n", b"")
    assert seen == [WatchEvent("CREATED", "/n")]


def test_child_watch_fires_for_child_create_and_delete_not_for_child_data(server: MemoryZooKeeper) -> None:
    writer, _ = server.open_session()
    sid, seen = watcher_session(server)
    server.create(writer, "/p", None)
    server.get_children(sid, "/p", seen.append)
    server.create(writer, "/p/a", b"")
    server.get_children(sid, "/p", seen.append)
    server.set_data(writer, "/p/a", b"changed")
    server.set_data(writer, "/p", b"parent data")
    assert seen == [WatchEvent("CHILD", "/p")]
    server.delete(writer, "/p/a")
    assert seen == [WatchEvent("CHILD", "/p")] * 2


def test_child_watch_fires_when_the_watched_node_is_deleted(server: MemoryZooKeeper) -> None:
    writer, _ = server.open_session()
    sid, seen = watcher_session(server)
    server.create(writer, "/p", None)
    server.get_children(sid, "/p", seen.append)
    server.delete(writer, "/p")
    assert seen == [WatchEvent("DELETED", "/p")]
    assert server.op_counts(sid)["watch:children"] == 1


def test_a_deleted_node_watched_both_ways_is_one_notification_for_both_watchers(server: MemoryZooKeeper) -> None:
    writer, _ = server.open_session()
    sid, _ = server.open_session()
    data_seen: list[WatchEvent] = []
    child_seen: list[WatchEvent] = []
    server.create(writer, "/p", None)
    server.get_data(sid, "/p", data_seen.append)
    server.get_children(sid, "/p", child_seen.append)
    server.delete(writer, "/p")
    assert data_seen == child_seen == [WatchEvent("DELETED", "/p")]
    assert server.op_counts(sid) == {"get_data": 1, "get_children": 1, "watch:data": 1}


def test_notifications_arrive_in_transaction_order(server: MemoryZooKeeper) -> None:
    writer, _ = server.open_session()
    sid, seen = watcher_session(server)
    server.create(writer, "/p", None)
    server.exists(sid, "/p/a", seen.append)
    server.get_children(sid, "/p", seen.append)
    server.create(writer, "/p/a", b"")
    assert seen == [WatchEvent("CREATED", "/p/a"), WatchEvent("CHILD", "/p")]


# --- sessions and ephemerals -----------------------------------------------------------------------


def test_session_ids_are_unique_64_bit_with_the_server_id_on_top() -> None:
    server = MemoryZooKeeper(server_id=3, clock_ms=lambda: 1_700_000_000_000)
    ids = [server.open_session()[0] for _ in range(100)]
    assert len(set(ids)) == 100
    assert all(0 < i < 2**63 and i >> 56 == 3 for i in ids)
    assert ids == sorted(ids)


def test_expiry_deletes_ephemerals_and_notifies_only_other_sessions(server: MemoryZooKeeper) -> None:
    owner, _ = server.open_session()
    other, other_seen = watcher_session(server)
    own_seen: list[WatchEvent] = []
    server.create(owner, "/p", None)
    server.create(owner, "/p/e", b"1", ephemeral=True)
    server.get_data(owner, "/p/e", own_seen.append)
    server.get_data(other, "/p/e", other_seen.append)
    server.get_children(other, "/p", other_seen.append)
    assert server.expire_session(owner) is True
    assert server.dump() == {"/p": (None, 0)}
    assert other_seen == [WatchEvent("DELETED", "/p/e"), WatchEvent("CHILD", "/p")]
    assert own_seen == []
    with pytest.raises(SessionExpiredError):
        server.get_data(owner, "/p")
    assert server.expire_session(owner) is False


def test_ephemeral_owner(clients: MakeClient) -> None:
    zk = clients()
    zk.create("/e", b"1", ephemeral=True)
    zk.create("/p", b"1")
    assert zk.ephemeral_owner("/e") == zk.session_id
    assert zk.ephemeral_owner("/p") == 0
    assert zk.ephemeral_owner("/missing") is None


def test_create_ephemeral_expect_conflict(server: MemoryZooKeeper, clients: MakeClient) -> None:
    a, b = clients("a"), clients("b")
    assert a.create_ephemeral_expect_conflict("/o/t/0", b"a-0") == (True, b"a-0")
    assert a.create_ephemeral_expect_conflict("/o/t/0", b"a-0") == (True, b"a-0")  # ours from before
    assert a.create_ephemeral_expect_conflict("/o/t/0", b"a-1") == (False, b"a-0")  # ours, other data
    assert b.create_ephemeral_expect_conflict("/o/t/0", b"a-0") == (False, b"a-0")  # same data, other session
    a.close()
    assert b.create_ephemeral_expect_conflict("/o/t/0", b"b-0") == (True, b"b-0")
    assert server.dump()["/o/t/0"] == (b"b-0", b.session_id)


# --- client lifecycle and faults -------------------------------------------------------------------


# A call that fails "at once" is one that does not wait for its request timeout: with a timeout of an hour, the
# condition waits below are bounded far below it (and far above any scheduling delay), not timed.
NEVER_S = 3600.0
WELL_BEFORE_S = 20.0


def test_a_closed_client_fails_every_call_at_once(clients: MakeClient) -> None:
    zk = clients(request_timeout_s=NEVER_S)
    zk.close()
    calls: list[Callable[[], object]] = [
        lambda: zk.get("/a"), lambda: zk.get_children("/a"), lambda: zk.exists("/a"), lambda: zk.create("/a"),
        lambda: zk.ensure_path("/a"), lambda: zk.set("/a", b""), lambda: zk.delete("/a", recursive=True),
        lambda: zk.ephemeral_owner("/a"), lambda: zk.create_ephemeral_expect_conflict("/a", b""),
        lambda: zk.watch_children("/a", print), zk.start,
    ]

    def every_call() -> list[object]:
        raised = []
        for call in calls:
            try:
                call()
            except ZkClosedError as exc:
                raised.append(exc)
        return raised

    done, outcome = run_in_thread(every_call)
    assert done.wait(WELL_BEFORE_S), "a call on a closed client waited for its request timeout"
    assert len(outcome[0]) == len(calls)  # type: ignore[arg-type]
    assert not zk.connected and zk.closed and zk.session_credentials is None


def test_a_suspended_call_is_bounded_by_the_request_timeout(clients: MakeClient) -> None:
    zk = clients(request_timeout_s=0.2)
    zk.suspend()
    started = time.monotonic()
    done, outcome = run_in_thread(lambda: zk.get("/a"))
    assert done.wait(WELL_BEFORE_S), "a suspended call outlived its request timeout"
    assert time.monotonic() - started >= 0.2  # it waited for the connection as long as the timeout allows
    assert isinstance(outcome[0], ZkUnavailableError) and not isinstance(outcome[0], ZkClosedError)
    assert "get_data" not in zk.op_counts()  # never sent


def run_in_thread(call: Callable[[], object]) -> tuple[threading.Event, list[object]]:
    done, outcome = threading.Event(), []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:
            outcome.append(exc)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done, outcome


def test_a_suspended_call_completes_after_resume_and_close_fails_it_fast(clients: MakeClient) -> None:
    zk = clients(request_timeout_s=NEVER_S)
    zk.create("/a", b"1")
    zk.suspend()
    done, outcome = run_in_thread(lambda: zk.get("/a"))
    assert not done.wait(0.1)  # still waiting for the connection
    zk.resume()
    assert done.wait(WELL_BEFORE_S)
    assert outcome[0][0] == b"1"  # type: ignore[index]
    zk.suspend()
    done, outcome = run_in_thread(lambda: zk.get("/a"))
    assert not done.wait(0.1)
    zk.close()
    assert done.wait(WELL_BEFORE_S), "close left a waiting call to its request timeout"
    assert isinstance(outcome[0], ZkClosedError)


def test_suspend_and_resume_keep_the_session_and_its_ephemerals(server: MemoryZooKeeper, clients: MakeClient) -> None:
    zk = clients()
    states: list[str] = []
    zk.on_state_change(states.append)
    zk.create("/e", b"1", ephemeral=True)
    session = zk.session_id
    zk.suspend()
    assert not zk.connected and zk.session_credentials is None
    assert server.dump()["/e"] == (b"1", session)
    zk.resume()
    assert zk.wait_idle()
    assert states == ["suspended", "connected"]
    assert zk.session_id == session and zk.connected
    assert zk.op_counts()["state:suspended"] == 1 and zk.op_counts()["state:connected"] == 2


def test_watches_re_read_after_resume_and_call_back_only_on_change(clients: MakeClient) -> None:
    zk, other = clients("zk"), clients("other")
    children: list[list[str]] = []
    data: list[bytes | None] = []
    zk.watch_children("/g", children.append)
    zk.watch_data("/d", data.append)
    zk.suspend()
    zk.resume()
    assert zk.wait_idle() and zk.wait_idle()
    assert (children, data) == ([[]], [None])  # nothing changed: no callback
    zk.suspend()
    other.create("/g/x")
    other.create("/d", b"new")
    assert zk.wait_idle() and (children, data) == ([[]], [None])  # no notification while disconnected
    zk.resume()
    assert zk.wait_idle() and zk.wait_idle()
    assert (children, data) == ([[], ["x"]], [None, b"new"])
    counts = zk.op_counts()
    assert (counts["watch:children"], counts["get_children"], counts["watch:data"], counts["get_data"]) == (1, 2, 1, 2)


def test_expiry_of_a_connected_client_gives_a_new_session_and_re_armed_watches(
    server: MemoryZooKeeper, clients: MakeClient,
) -> None:
    zk, other = clients("zk"), clients("other")
    states: list[str] = []
    renewed: list[int | None] = []
    zk.on_state_change(states.append)
    zk.on_new_session(lambda: renewed.append(zk.session_id))
    zk.create("/ids/me", b"reg", ephemeral=True)
    children: list[list[str]] = []
    mine: list[bytes | None] = []
    zk.watch_children("/g", children.append)
    zk.watch_data("/ids/me", mine.append)
    old = zk.session_id
    assert server.expire_session(old)  # type: ignore[arg-type]
    assert zk.wait_idle() and zk.wait_idle()
    assert states == ["suspended", "lost", "connected"]
    assert renewed == [zk.session_id] and zk.session_id != old
    assert server.dump().get("/ids/me") is None
    assert mine == [b"reg", None]  # the recipe re-read on the new session
    other.create("/g/x")
    assert zk.wait_idle()
    assert children == [[], ["x"]]


def test_expiry_while_suspended_is_learned_on_resume(server: MemoryZooKeeper, clients: MakeClient) -> None:
    zk = clients()
    states: list[str] = []
    renewed: list[int] = []
    zk.on_state_change(states.append)
    zk.on_new_session(lambda: renewed.append(1))
    zk.create("/e", b"1", ephemeral=True)
    old = zk.session_id
    zk.suspend()
    server.expire_session(old)  # type: ignore[arg-type]
    assert zk.wait_idle()
    assert states == ["suspended"] and zk.session_id == old
    zk.resume()
    assert zk.wait_idle()
    assert states == ["suspended", "lost", "connected"] and renewed == [1]
    assert zk.session_id != old and server.dump() == {}


def test_closing_while_suspended_leaves_the_session_until_the_server_expires_it(
    server: MemoryZooKeeper, clients: MakeClient,
) -> None:
    zk = clients()
    zk.create("/e", b"1", ephemeral=True)
    session = zk.session_id
    zk.suspend()
    zk.close()
    assert server.dump() == {"/e": (b"1", session)}
    assert [s.session_id for s in server.sessions()] == [session]
    server.expire_session(session)  # type: ignore[arg-type]
    assert server.dump() == {}


def test_close_ends_the_session_and_reports_lost(server: MemoryZooKeeper, clients: MakeClient) -> None:
    zk, other = clients("zk"), clients("other")
    states: list[str] = []
    zk.on_state_change(states.append)
    zk.create("/e", b"1", ephemeral=True)
    gone: list[bytes | None] = []
    other.watch_data("/e", gone.append)
    zk.close()
    zk.close()  # idempotent
    assert states == ["lost"]
    assert zk.op_counts()["state:lost"] == 1
    assert other.wait_idle() and gone == [b"1", None]
    assert [s.session_id for s in server.sessions()] == [other.session_id]


# --- recipes and counting --------------------------------------------------------------------------


def test_watch_children_counts_like_zkclient(clients: MakeClient) -> None:
    zk, other = clients("zk"), clients("other")
    seen: list[list[str]] = []
    handle = zk.watch_children("/g", seen.append)
    assert isinstance(handle, WatchHandle)
    assert seen == [[]]
    assert zk.op_counts() == {"state:connected": 1, "create": 1, "get_children": 1}
    other.create("/g/a", b"")
    other.set("/g/a", b"data")  # a child's data is not a child change
    assert zk.wait_idle()
    assert seen == [[], ["a"]]
    assert zk.op_counts() == {"state:connected": 1, "create": 1, "get_children": 2, "watch:children": 1}
    quiet: list[list[str]] = []
    zk.watch_children("/g", quiet.append, initial=False)
    assert quiet == [] and zk.op_counts()["get_children"] == 3  # the first read is counted, not reported
    other.delete("/g/a")
    assert zk.wait_idle()
    assert quiet == [[]] and seen[-1] == []


def test_watch_data_sees_create_change_and_delete(clients: MakeClient) -> None:
    zk, other = clients("zk"), clients("other")
    seen: list[bytes | None] = []
    zk.watch_data("/n", seen.append)
    for step in (lambda: other.create("/n", b"1"), lambda: other.set("/n", b"2"), lambda: other.delete("/n")):
        step()
        assert zk.wait_idle()
    assert seen == [None, b"1", b"2", None]
    assert zk.op_counts() == {"state:connected": 1, "get_data": 4, "watch:data": 3}
    quiet: list[bytes | None] = []
    zk.watch_data("/n", quiet.append, initial=False)
    other.create("/n", b"3")
    assert zk.wait_idle() and quiet == [b"3"]


def test_a_stopped_watch_ends_at_the_next_notification(clients: MakeClient) -> None:
    zk, other = clients("zk"), clients("other")
    seen: list[list[str]] = []
    handle = zk.watch_children("/g", seen.append)
    handle.stop()
    other.create("/g/a")
    other.create("/g/b")
    assert zk.wait_idle()
    assert seen == [[]]
    assert "watch:children" not in zk.op_counts()


def test_a_children_watch_ends_when_its_node_is_deleted(clients: MakeClient) -> None:
    zk, other = clients("zk"), clients("other")
    seen: list[list[str]] = []
    zk.watch_children("/g", seen.append)
    other.delete("/g")
    assert zk.wait_idle()  # else the re-read may already see /g again (and call back): coalescing
    other.create("/g/a")
    assert zk.wait_idle()
    assert seen == [[]]  # kazoo's ChildrenWatch stops for good on NoNode


def test_changes_before_the_re_read_coalesce_like_one_shot_watches(server: MemoryZooKeeper) -> None:
    queued: list[Callable[[], None]] = []
    zk = MemoryZkClient(server, log_id="sim", dispatch=queued.append).start()
    other = MemoryZkClient(server, log_id="other", dispatch=lambda fn: fn()).start()
    seen: list[bytes | None] = []
    zk.watch_data("/n", seen.append)
    other.create("/n", b"1")  # notification queued, not yet handled
    other.set("/n", b"2")  # the watch is spent: no second notification
    while queued:
        queued.pop(0)()
    assert seen == [None, b"2"]
    assert server.op_counts(zk.session_id)["watch:data"] == 1
    zk.close()
    other.close()


def test_callbacks_run_in_order_on_the_named_event_thread(server: MemoryZooKeeper) -> None:
    with MemoryZkClient(server, log_id="m1") as zk, MemoryZkClient(server, log_id="w") as writer:
        threads: list[str] = []
        seen: list[list[str]] = []

        def on_children(children: list[str]) -> None:
            threads.append(threading.current_thread().name)
            seen.append(children)

        zk.watch_children("/g", on_children, initial=False)
        for name in "abc":
            writer.create(f"/g/{name}")
            assert zk.wait_idle()
        assert threads == ["memzk-m1-events"] * 3
        assert seen == [["a"], ["a", "b"], ["a", "b", "c"]]
    assert not [t for t in threading.enumerate() if t.name in ("memzk-m1-events", "memzk-w-events")]


def test_synchronous_dispatch_delivers_before_the_call_returns_without_a_thread(server: MemoryZooKeeper) -> None:
    inline = lambda fn: fn()  # noqa: E731
    zk = MemoryZkClient(server, log_id="sync", dispatch=inline).start()
    seen: list[list[str]] = []

    def grow(children: list[str]) -> None:
        seen.append(children)
        if len(children) < 3:  # a callback that writes to what it watches: handled after it, not inside it
            zk.create(f"/g/{len(children)}")

    zk.watch_children("/g", grow)
    assert seen == [[], ["0"], ["0", "1"], ["0", "1", "2"]]
    assert not [t for t in threading.enumerate() if t.name == "memzk-sync-events"]
    zk.close()


def test_client_counts_equal_the_servers_count_of_its_session(server: MemoryZooKeeper, clients: MakeClient) -> None:
    zk, other = clients("zk"), clients("other")
    other.create("/d", b"0")
    zk.watch_children("/g", lambda _: None)
    zk.watch_data("/d", lambda _: None)
    zk.create("/x/y", b"1")
    zk.set("/x/y", b"2")
    zk.set("/x/z", b"3")
    zk.ensure_path("/x")
    zk.create_ephemeral_expect_conflict("/e", b"1")
    zk.create_ephemeral_expect_conflict("/e", b"1")
    zk.delete("/x", recursive=True)
    zk.delete("/missing")
    zk.exists("/d")
    other.create("/g/a")
    other.set("/d", b"1")
    assert zk.wait_idle()
    assert without_states(zk.op_counts()) == server.op_counts(zk.session_id)


def test_the_server_also_counts_the_recipe_reads_that_make_no_callback(
    server: MemoryZooKeeper, clients: MakeClient,
) -> None:
    zk = clients()
    zk.watch_data("/missing", lambda _: None)  # kazoo's DataWatch: get, NoNode, then exists with a watch
    zk.watch_children("/g", lambda _: None)
    zk.suspend()
    zk.resume()  # each recipe re-reads; nothing changed, so no callback and no client count
    assert zk.wait_idle() and zk.wait_idle()
    client, seen_by_server = without_states(zk.op_counts()), server.op_counts(zk.session_id)
    assert client == {"get_data": 1, "create": 1, "get_children": 1}
    # DataWatch: 2 reads on reconnect (the NONE reset and the CONNECTED listener), each get + exists.
    assert seen_by_server == {"get_data": 3, "exists": 3, "create": 1, "get_children": 2}


@pytest.mark.static
def test_the_public_surface_matches_zkclient() -> None:
    def surface(cls: type) -> dict[str, str]:
        names = [n for n in dir(cls) if not n.startswith("_") or n in ("__enter__", "__exit__")]
        result = {}
        for name in names:
            member = inspect.getattr_static(cls, name)
            if isinstance(member, property):
                result[name] = "property"
            elif callable(member):
                result[name] = str(inspect.signature(member)).replace("MemoryZkClient", "ZkClient")
        return result

    memory, real = surface(MemoryZkClient), surface(ZkClient)
    assert {name: memory.get(name) for name in real} == real
    assert set(memory) - set(real) == {"resume", "suspend", "wait_idle"}
    for attribute in ("connect", "log_id", "session_timeout_ms", "connection_timeout_s", "request_timeout_s", "counts"):
        assert hasattr(MemoryZkClient(MemoryZooKeeper()), attribute)
