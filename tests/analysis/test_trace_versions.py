"""A trace of another schema version is not parsed as this one: the analysis counts its lines bad (trace_errors)
and says so in one line per file and version, in its log and its report's notes: the file, how many lines, the
version, what to do (`trace_contract.version_note`)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from fixed_set import extract
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from zkconsumer.lab.analysis.readers import load_run, version_notes
from zkconsumer.trace_contract import version_note


def _rewrite(path: Path, version: int) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("".join(json.dumps({**json.loads(line), "v": version}) + "\n" for line in lines),
                    encoding="utf-8")
    return len(lines)


def test_version_notes_count_the_lines_of_each_version(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "traces").mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps({"run_id": "r1", "design": "zk"}))
    good = {"v": 1, "type": "phase", "ts": 1.0, "design": "zk", "phase": "setup"}
    (run_dir / "traces" / "m1.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in [{**good, "v": 2}, good, {**good, "v": 2}]) + "{torn")
    run = load_run(run_dir)
    path = run_dir / "traces" / "m1.jsonl"
    assert version_notes([run], [("r1", "m1.jsonl", "schema version 2")]) == [version_note(str(path), 2, 2)]
    # a file whose bad lines are of this version (torn, garbled, ...) is no version's business
    assert version_notes([run], [("r1", "m1.jsonl", "not JSON (torn or garbled line)")]) == []


@pytest.mark.slow
def test_the_analysis_says_which_file_is_of_another_version(spark: SparkSession, tmp_path: Path, caplog) -> None:
    from zkconsumer.lab.analysis.job import analyze

    run = (extract(tmp_path) / "herd" / "herd-members=4-r0" / "zk").resolve()
    member = run / "traces" / "m2.jsonl"
    lines = _rewrite(member, 2)
    with caplog.at_level(logging.WARNING, logger="zkconsumer.lab.analysis.job"):
        result = analyze([run], tmp_path / "out", spark, predict_to=None)
    note = version_note(str(member), 2, lines)
    assert note.startswith(f"{member}: {lines} trace lines of schema version 2 not read (this reader reads version 1)")
    assert [r.getMessage() for r in caplog.records if "schema version" in r.getMessage()] == [note]
    assert note in result.notes
    assert result.bad_lines == lines
    row = result.read(spark, "trace_errors").filter(F.col("file") == "m2.jsonl").first()
    assert (row["bad_lines"], row["first_bad_line"], row["first_bad_reason"]) == (lines, 1, "schema version 2")
