"""The live view in a real terminal (tmux): it shows a joining member and its partitions as they change, holds one
ZooKeeper watch per node it shows, makes no writes, and leaves no process, tmux server or session behind.

The ZooKeeper is the suite's, which the brokers use too: their own requests move every server-wide counter (mntr's
watch and connection counts). So the view is checked by what is its own alone: its session's data watches as the
server lists them (`wchc`), and its requests as they crossed a ZooKeeper proxy link of its own (the lab's counting
proxy, docs/wire.md), which no other client uses."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import unique, wait_for

from zkconsumer.embedded.process import four_letter_word
from zkconsumer.lab.wire import RecordCollector, ZkProxy

pytestmark = [pytest.mark.slow,  # tmux, and the view in a process of its own
              pytest.mark.skipif(shutil.which("tmux") is None,
                                 reason="missing tool: tmux (this test drives the view in a real terminal)")]

# Every ZooKeeper request that writes nothing (opcodes as in ZooKeeper's ZooDefs.OpCode): anything else the view sends
# is a write, or one of the session-management calls a read-only view has no use for (addWatch, removeWatches).
READS = frozenset({"exists", "getData", "getACL", "getChildren", "getChildren2", "sync", "check", "multiRead",
                   "checkWatches", "setWatches", "setWatches2", "getEphemerals", "getAllChildrenNumber", "whoAmI",
                   "auth", "sasl", "createSession", "closeSession"})


class Tmux:
    """A tmux server of our own (its own socket), so the test never touches anyone else's sessions."""

    def __init__(self) -> None:
        # tmux socket paths must be short (sun_path is ~100 bytes); pytest's tmp_path can be longer.
        self.dir = Path(tempfile.mkdtemp(prefix="zkw-"))
        self.socket = self.dir / "tmux.sock"

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, timeout=10,
                              check=check)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "view").stdout

    def alive(self) -> bool:
        return self.run("has-session", "-t", "view", check=False).returncode == 0

    def close(self) -> None:
        if self.socket.exists():
            self.run("kill-server", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    session = Tmux()
    yield session
    session.close()


def wait_for_screen(tmux: Tmux, condition: Callable[[str], bool], timeout: float, message: str) -> str:
    """Poll capture-pane (bounded) until `condition(screen)`; on timeout fail showing the last screen."""
    deadline = time.monotonic() + timeout
    while True:
        screen = tmux.screen()
        if condition(screen):
            return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}; screen:\n{screen}")
        time.sleep(0.05)


def data_watches_of(port: int, session: str) -> list[str]:
    """Paths of the data watches `session` holds (`wchc`; ZooKeeper reports data watches only)."""
    paths, current = [], None
    for line in four_letter_word(port, "wchc").splitlines():
        if line.startswith("0x"):
            current = line.strip()
        elif line.startswith("\t") and current == session:
            paths.append(line.strip())
    return paths


def session_connected(port: int, session: str) -> bool:
    """Whether the server has a connection for `session` (`cons` lists each with its `sid`)."""
    return f"sid={session}," in four_letter_word(port, "cons")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def view_proxy(zk_server) -> Iterator[tuple[ZkProxy, RecordCollector]]:
    """A ZooKeeper proxy link for the view alone; its records are the view's requests as the wire carried them."""
    records = RecordCollector()
    with ZkProxy(zk_server.connect_string, sink=records, name=unique("zkw")) as proxy:
        proxy.add_link("view")
        yield proxy, records
    assert not [t.name for t in threading.enumerate() if t.name.startswith(proxy.name)]


def test_live_view_shows_a_joining_member_without_writing(cluster, zk, zk_server, members, tmux, tmp_path,
                                                          view_proxy):
    proxy, wire = view_proxy
    port = zk_server.nodes[0].client_port
    # The broker's tests share ZooKeeper's root (tests/conftest.py); a chroot, if any, prefixes every watched path.
    chroot = "/" + cluster.zookeeper_connect.split("/", 1)[1] if "/" in cluster.zookeeper_connect else ""
    # Names of its own: a run after another (or beside one) finds no topic, group or offset of theirs. Short ones:
    # the members table scrolls sideways past about 84 columns, and a cut OWNS column hides what is checked.
    topic, group = unique("wl"), unique("lv")
    a, b = f"{group}_a", f"{group}_b"
    cluster.create_topic(topic, partitions=4)
    members(group, "a").create_message_streams({topic: 1})
    wait_for(lambda: set(zk.owners(group).values()) == {f"{a}-0"} and len(zk.owners(group)) == 4,
             message=f"{a} owns all four partitions")
    zk.create(f"/consumers/{group}/offsets/{topic}/0", b"0")  # a committed offset: the offsets dir exists

    op_counts = tmp_path / "ops.json"
    command = (f"{sys.executable} -m zkconsumer watch --zookeeper {proxy.connect_string('view', chroot)} "
               f"--group {group} --op-counts {op_counts}")
    # The window is made at this size, not resized to it after the view started: a resize that lands before the
    # view installs its SIGWINCH handler leaves it drawing for 80x24, where the members table has room for one row.
    tmux.run("-f", "/dev/null", "start-server", ";", "set-option", "-g", "default-size", "160x50", ";",
             "new-session", "-d", "-x", "160", "-y", "50", "-s", "view", "-c", str(tmp_path), command)
    assert tmux.run("display-message", "-p", "-t", "view", "#{window_width}x#{window_height}").stdout.strip() \
        == "160x50"
    pane_pid = int(tmux.run("display-message", "-p", "-t", "view", "#{pane_pid}").stdout)
    screen = wait_for_screen(tmux, lambda s: any(line.split()[:3] == [a, "owning", "4"] for line in s.splitlines()),
                             30, f"the view to show {a} owning all four partitions")
    session = re.search(r"session (0x[0-9a-f]+)", screen).group(1)

    # One watch per node shown: data watches on the topic and on each partition's owner and offset node (exists
    # watches where the node is missing), child watches on the group dir, ids, owners and offsets (4). The server
    # lists a session's data watches (`wchc`) but not its child watches: those are the view's watching
    # getChildren requests, by path.
    base = f"{chroot}/consumers/{group}"
    expected_data = sorted([f"{chroot}/brokers/topics/{topic}"] + [f"{base}/{kind}/{topic}/{p}" for kind in
                                                                   ("owners", "offsets") for p in range(4)])
    expected_children = sorted([base, f"{base}/ids", f"{base}/owners", f"{base}/offsets"])
    assert sorted(data_watches_of(port, session)) == expected_data

    def watched(ops: tuple[str, ...]) -> list[str]:
        return sorted({r.path for r in wire.records() if r.kind == "request" and r.op in ops and r.watch})

    assert watched(("exists", "getData")) == expected_data
    assert watched(("getChildren", "getChildren2")) == expected_children
    assert {r.session_id for r in wire.where(kind="connect_reply")} == {int(session, 16)}  # the link is the view's

    joined = time.monotonic()
    members(group, "b").create_message_streams({topic: 1})  # returns once b has claimed its partitions

    def shows_b(s: str) -> bool:
        rows = [line.split() for line in s.splitlines()]
        return ([b, "owning", "2", f"{topic}:1", f"{topic}:2,3"] in rows
                and all([topic, str(p), f"{b}-0"] == r[:3] for r in rows for p in (2, 3) if r[:2] == [topic, str(p)]))

    # How soon is printed, not asserted: a wall-clock bound fails on a busy machine without any defect.
    screen = wait_for_screen(tmux, shows_b, 30.0, f"{b} and its partitions 2 and 3")
    shown_after = time.monotonic() - joined
    assert f"member joined {b}" in screen
    print(f"{b} shown {shown_after:.2f} s after its join returned")

    tmux.run("send-keys", "-t", "view", "q")
    wait_for(lambda: not tmux.alive(), timeout=10, message="the view to quit and its tmux session to end")
    wait_for(lambda: not pid_alive(pane_pid), timeout=10, message="the view's process to exit")
    assert tmux.run("list-sessions", check=False).returncode != 0  # the tmux server exited with its last session

    counts = json.loads(op_counts.read_text())
    assert not {k: v for k, v in counts.items() if k in ("create", "set_data", "delete")}, counts
    assert counts["get_children"] > 0 and counts["get_data"] > 0
    # What the server received from the view, whatever the client counted: reads only, and its session closed.
    requests = [r for r in wire.records() if r.kind == "request"]
    assert not [(r.op, r.path) for r in requests if r.op not in READS], "the view sent a write"
    assert [r.op for r in requests][-1] == "closeSession"
    # Its session is gone: the view's watches and connection are released.
    assert data_watches_of(port, session) == []
    wait_for(lambda: not session_connected(port, session), timeout=10,
             message=f"the server to drop session {session}'s connection")
