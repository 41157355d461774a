"""Torn trace lines on real files: a writer process killed with SIGKILL in the middle of a line, then a restarted
writer appending to the same file (as a restarted lab member does). The torn line stays a line of its own, counted
as bad by every reader (the file reader, the run's trace reader, the live tail, the lab summary, the lesson), and
the restarted writer's first record is read intact, never glued to it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zkconsumer.event_log import JsonLinesWriter, LineErrors, read_json_lines
from zkconsumer.lab.drivers.interface import TraceTail
from zkconsumer.lab.lesson.replay import load_records
from zkconsumer.lab.runs.summary import summarize
from zkconsumer.lab.trace import RunDirectory, TraceWriter, read_traces

# A member process: writes one whole record through the lab's writer, then half of the next one, and is killed
# with SIGKILL before it can end the line.
KILLED_MID_LINE = """
import os, signal, sys
from pathlib import Path
from zkconsumer.lab.trace import TraceWriter
path = Path(sys.argv[1])
trace = TraceWriter(path, "zk")
trace.write("member_event", member="m1", kind="state", state="owning")
with open(path, "a", encoding="utf-8") as raw:
    raw.write('{"v":1,"design":"zk","type":"member_event","ts":17')
    raw.flush()
os.kill(os.getpid(), signal.SIGKILL)
"""


def killed_mid_line(path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", KILLED_MID_LINE, str(path)], check=False, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert not path.read_bytes().endswith(b"\n")  # the file ends in the torn line


@pytest.mark.slow
def test_a_restarted_writer_never_glues_its_first_record_to_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "m1.jsonl"
    killed_mid_line(path)
    size = path.stat().st_size
    old_tail = TraceTail(path)
    assert [r["state"] for r in old_tail.poll()] == ["owning"]  # the torn line is not a line yet: kept back
    new_tail = TraceTail(path, offset=size)  # a restarted member's tail, started at the end of the file

    restarted = JsonLinesWriter(path, {"v": 1, "design": "zk"})
    restarted.write({"type": "member_event", "ts": time.time(), "member": "m1", "kind": "state", "state": "joining"})
    restarted.close()

    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["state"] == "joining"  # a line of its own
    errors = LineErrors()
    assert [r["state"] for r in read_json_lines(path, errors)] == ["owning", "joining"]
    assert errors.count == 1 and errors.first is not None and errors.first.startswith("m1.jsonl:2: not JSON")
    # The new incarnation's tail starts at the torn line (not in its middle), so it counts it, whole, once.
    assert [r["state"] for r in new_tail.poll()] == ["joining"] and new_tail.errors.count == 1
    # The tail that followed the killed writer sees the line ended, and counts it too: two tails, one bad line each.
    assert [r["state"] for r in old_tail.poll()] == ["joining"] and old_tail.errors.count == 1


def test_a_writer_on_a_file_that_ends_cleanly_adds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "m1.jsonl"
    for state in ("owning", "joining"):
        writer = JsonLinesWriter(path, {"v": 1})
        writer.write({"state": state})
        writer.close()
    assert path.read_text(encoding="utf-8").count("\n") == 2  # no empty line between the two writers
    errors = LineErrors()
    assert [r["state"] for r in read_json_lines(path, errors)] == ["owning", "joining"] and errors.count == 0


@pytest.mark.slow
def test_every_reader_of_a_run_counts_the_torn_line(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path / "run", scenario="torn", case="torn-r0", design="zk",
                              scenario_definition={"group": {"members": 1}})
    trace = run.trace("run", "zk")
    trace.write("phase", phase="settled")
    trace.write("membership", action="join", members=["m1"], step=0)
    member = run.path / "traces" / "m1.jsonl"
    killed_mid_line(member)
    restarted = TraceWriter(member, "zk")  # the restart: the same member's file, appended to
    restarted.write("member_event", member="m1", kind="rebalance_begin")
    restarted.close()
    trace.write("phase", phase="done")
    trace.close()
    run.finish("completed")

    errors = LineErrors()
    records = list(read_traces(run.path, errors))
    assert [r.get("kind") for r in records if r["type"] == "member_event"] == ["state", "rebalance_begin"]
    assert errors.count == 1
    summary = summarize(run.path)
    assert summary.bad_lines == 1 and summary.rebalances == 1  # the restarted writer's record counted
    assert summary.counting_gaps == "1 bad trace line" and summary.completed
    lesson_errors = LineErrors()
    assert len(load_records(run.path, lesson_errors)) == len(records) and lesson_errors.count == 1


def test_records_that_do_not_follow_the_schema_are_counted_not_used(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path / "run", scenario="bad", case="bad-r0", design="zk")
    path = run.path / "traces" / "x.jsonl"
    path.write_text('{"v":1,"design":"zk","type":"phase","ts":1.0,"phase":"settled"}\n'
                    '{"v":1,"design":"zk","type":"stable","ts":2.0}\n'  # no generation_or_rebalance, duration_s
                    '{"v":2,"design":"zk","type":"phase","ts":3.0,"phase":"done"}\n'
                    '[1, 2]\n'
                    '\n', encoding="utf-8")
    errors = LineErrors()
    assert [r["phase"] for r in read_traces(run.path, errors)] == ["settled"]
    assert errors.count == 4
