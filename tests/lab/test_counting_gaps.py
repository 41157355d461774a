"""Counting gaps are never silent: a run whose proxy met an undecodable stream and requests sent into a blackhole,
recorded by the real ZooKeeper proxy into a real run directory, is flagged with the reason in the lab summary, the
Spark `runs` table and the report; a run without gaps is not."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from helpers import CALL_TIMEOUT, TEST_CONNECTION_RETRY, unique, wait_for
from kazoo.client import KazooClient, KazooState
from pyspark.sql import functions as F

from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble
from zkconsumer.lab.analysis.readers import load_runs, read_traces
from zkconsumer.lab.analysis.report import counting_gaps_flag
from zkconsumer.lab.rules import gaps
from zkconsumer.lab.runs.summary import summarize
from zkconsumer.lab.terminal import summary_table
from zkconsumer.lab.trace import RunDirectory
from zkconsumer.lab.wire import BLACKHOLE, ZkProxy

sys.path.append(str(Path(__file__).resolve().parents[1] / "analysis"))  # tests/ has no packages: the Spark oracle
import pytest
from spark_oracle.metrics import wire_gap_counts, with_counting_gaps

pytestmark = pytest.mark.slow


def new_run(root: Path, name: str) -> RunDirectory:
    return RunDirectory.create(root / name, scenario="gaps", case=f"{name}-r0", design="zk", run_id=name,
                               scenario_definition={"group": {"members": 1, "topics": []}})


def run_with_gaps(zk_server: ZooKeeperEnsemble, root: Path) -> tuple[Path, int]:
    """A run whose member's link is blackholed while it asks something, and whose proxy is sent a four-letter word
    (not a ZooKeeper session: undecodable). Returns the run and how many of the member's frames the proxy's own
    counters saw dropped on their way to the server."""
    run = new_run(root, "with-gaps")
    trace = run.trace("run", "zk")
    trace.write("phase", phase="settled")
    with ZkProxy(zk_server.connect_string, sink=trace.sink("wire", proto="zk"), name=unique("zkp")) as proxy:
        proxy.add_link("m0")
        states: list[KazooState] = []
        client = KazooClient(hosts=proxy.connect_string("m0"), timeout=6.0,
                             connection_retry=dict(TEST_CONNECTION_RETRY))
        client.add_listener(states.append)
        client.start(timeout=CALL_TIMEOUT)
        try:
            client.exists("/")
            proxy.cut("m0", BLACKHOLE)
            unanswered = client.exists_async("/zookeeper")  # into the blackhole: its reply never comes
            wait_for(lambda: proxy.counters("m0").get("dropped", {}).get("request"), message="a dropped request")
            assert not unanswered.ready()
            proxy.restore("m0")  # the connection lost bytes: reset, and kazoo resumes its session on a new one
            wait_for(lambda: states and states[-1] == KazooState.CONNECTED and unanswered.ready(), timeout=15,
                     message="the session back, the unanswered request failed")
            client.exists("/")
        finally:
            client.stop()
            client.close()
        port = proxy.add_link("raw")
        with socket.create_connection(("127.0.0.1", port), timeout=CALL_TIMEOUT) as sock:
            sock.sendall(b"srvr")
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(100):
                pass
        wait_for(lambda: proxy.counters("raw").get("kinds", {}).get("undecodable"), message="an undecodable record")
        dropped = proxy.counters("m0")["dropped"]
    trace.write("phase", phase="done")
    trace.close()
    run.finish("completed")
    return run.path, sum(dropped.get(kind, 0) for kind in gaps.CLIENT_KINDS)


def test_undecodable_streams_and_requests_into_a_blackhole_flag_the_run(zk_server, spark, tmp_path) -> None:
    flagged, dropped = run_with_gaps(zk_server, tmp_path / "runs")
    clean = new_run(tmp_path / "runs", "clean")
    trace = clean.trace("run", "zk")
    trace.write("phase", phase="settled")
    trace.write("phase", phase="done")
    trace.close()
    clean.finish("completed")

    summary = summarize(flagged)
    assert dropped >= 1 and summary.blackholed == dropped and summary.undecodable == 1 and summary.bad_lines == 0
    reason = f"1 undecodable stream, {dropped} request{'' if dropped == 1 else 's'} into a blackhole"
    assert summary.completed and summary.counting_gaps == reason
    assert summarize(clean.path).counting_gaps is None
    table = summary_table([summary, summarize(clean.path)])  # the done column says why
    assert list(table.columns[-1].cells) == [f"gaps: {reason}", "yes"]

    # The Spark side, on the same files: the job's reader, then the runs table's gap columns (the Spark oracle's).
    traces = read_traces(spark, load_runs([tmp_path / "runs"]))
    per_run = traces.errors.groupBy("run_id").agg(F.sum("bad_lines").alias("bad_lines"))
    runs = {r["run_id"]: r.asDict() for r in with_counting_gaps(per_run, wire_gap_counts(traces.records)).collect()}
    traces.cached.unpersist()
    assert (runs["with-gaps"]["undecodable_streams"], runs["with-gaps"]["blackholed_requests"],
            runs["with-gaps"]["counting_gaps"]) == (1, dropped, reason)
    assert (runs["clean"]["undecodable_streams"], runs["clean"]["counting_gaps"]) == (0, None)
    flag = counting_gaps_flag(list(runs.values()))  # the report's flag, from those rows
    assert "Counting gaps: 1 of 2 runs were not counted in full" in flag and reason in flag and "clean" not in flag
    assert counting_gaps_flag([runs["clean"]]) == ""
