"""The driver of the original consumer itself: a clean shutdown on SIGTERM, no orphan when the process that
started it dies, events that say what it owns and consumed, and one clear line when javac is missing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import unique, wait_for
from interop_support import original_properties, produce

from zkconsumer.interop import original
from zkconsumer.zookeeper import layout

pytestmark = pytest.mark.interop

# A parent that starts a driver, prints the JVM's pid, and waits to be killed.
_PARENT = """
import sys, time
from pathlib import Path
from zkconsumer.interop.original import OriginalMember
props = dict(arg.split("=", 1) for arg in sys.argv[3:])
member = OriginalMember(props, workdir=Path(sys.argv[1]), topics={sys.argv[2]: 1}).start()
print(member.pid, flush=True)
time.sleep(600)
"""


def gone(pid: int) -> bool:
    """Exited (a zombie counts: it runs nothing and holds no session)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_sigterm_shuts_the_connector_down_cleanly(cluster, originals, zk):
    topic = cluster.create_topic(partitions=2)
    group = unique("driver")
    produce(cluster.bootstrap_servers, topic, range(2), 3)
    member = originals(group, "c1", topics={topic: 2})
    assert member.consumer_id == f"{group}_c1"
    wait_for(lambda: member.owned() == {(topic, 0): f"{group}_c1-0", (topic, 1): f"{group}_c1-1"}, 20,
             message="owned event")
    wait_for(lambda: len(member.messages) == 6, 20, message="six messages")
    assert sorted((m.partition, m.offset) for m in member.messages) == [(p, o) for p in range(2) for o in range(3)]
    # One partition per thread, so per stream: which stream gets which is the connector's business.
    by_stream = {s: {m.partition for m in member.messages if m.stream == s} for s in (f"{topic}-0", f"{topic}-1")}
    assert sorted(map(sorted, by_stream.values())) == [[0], [1]], by_stream
    assert all(m.key_size == len(b"k0") and m.value_size == len(b"m-0-0") for m in member.messages)

    assert member.stop() == 128 + signal.SIGTERM
    assert [e["event"] for e in member.events if e["event"] in ("stream_end", "shutdown")] == [
        "stream_end", "stream_end", "shutdown"]  # connector.shutdown() ended every stream, then the hook returned
    # connector.shutdown() closed the session: its nodes went with it, not a session timeout later.
    assert not zk.exists(layout.registration_path(group, member.consumer_id))
    assert zk.owners(group) == {}


def test_driver_exits_when_the_process_that_started_it_dies(cluster, zk, tmp_path: Path):
    topic = cluster.create_topic(partitions=1)
    group = unique("orphan")
    props = original_properties(cluster.zookeeper_connect, group, "c1")
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(tmp_path), topic, *(f"{k}={v}" for k, v in
                                                                                      props.items())],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    pid = None
    try:
        pid = int(parent.stdout.readline())
        assert zk.exists(layout.registration_path(group, f"{group}_c1"))
        parent.kill()  # kill -9: nothing of the parent's runs, only its end of the stdin pipe closes
        parent.wait(timeout=10)
        wait_for(lambda: gone(pid), 30, message="the driver to exit after its parent")
        # It ran its shutdown hook (connector.shutdown()): the registration went at once, not after a timeout.
        assert not zk.exists(layout.registration_path(group, f"{group}_c1"))
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)
        parent.stdout.close()
        if pid is not None and not gone(pid) and original.DRIVER_MAIN.encode() in Path(
                f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGKILL)  # only if the test failed: never leave the JVM behind


def test_missing_javac_is_one_line_naming_what_to_install(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))  # a JDK home without bin/javac
    with pytest.raises(original.InteropError) as failure:
        original.javac_executable()
    message = str(failure.value)
    assert "\n" not in message and "javac not found" in message and "openjdk-17-jdk-headless" in message


def test_a_connector_that_cannot_start_is_reported_and_the_driver_exits(cluster, originals):
    with pytest.raises(original.InteropError, match=r"auto\.offset\.reset|bogus") as failure:
        originals(unique("bad"), "c1", topics={"t": 1}, auto_offset_reset="bogus")  # ConsumerConfig refuses it
    assert "connect" in str(failure.value)
