"""The trace contract (zkconsumer/trace_contract.py) against what the writers write.

Every record of the recorded real runs (the fixed set's runs, the lesson's trace) is checked against the contract:
a writer that emits a field the contract lacks, or a value of another JSON type, fails here, named. The writer's own
check (`lab/trace.py` `validate`, run on every record every test writes through a `TraceWriter`) is shown to refuse
such a record too. Server-free: the archives are read as files.
"""

from __future__ import annotations

import ast
import json
import os
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from rebalance.events import EventKind
from zkconsumer import trace_contract as contract
from zkconsumer.lab import trace
from zkconsumer.trace_contract import RECORDS, FieldType, problems

TESTS = Path(__file__).resolve().parents[1]
FIXED_RUNS = TESTS / "analysis" / "fixed_runs" / "runs.tar.xz"
LESSON_DATA = TESTS / "lesson" / "data"
# Whole lab runs recorded outside the repository (`ZKC_TRACE_DIRS`, ':'-separated results directories), checked
# when named: the suite reads only what the repository holds unless asked for more.
EXTERNAL = [Path(p) for p in os.environ.get("ZKC_TRACE_DIRS", "").split(":") if p]


def _records(lines: list[tuple[str, str]]) -> list[tuple[str, dict]]:
    found = []
    for name, line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn line is the readers' business (docs/traces.md, "Torn and bad lines")
        if isinstance(record, dict):
            found.append((name, record))
    return found


def _fixed_lines() -> list[tuple[str, str]]:
    lines = []
    with tarfile.open(FIXED_RUNS) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.endswith(".jsonl"):
                text = archive.extractfile(member).read().decode("utf-8", "replace")  # type: ignore[union-attr]
                lines.extend((member.name, line) for line in text.splitlines())
    return lines


def _file_lines(root: Path) -> list[tuple[str, str]]:
    return [(str(path), line) for path in sorted(root.glob("**/*.jsonl"))
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]


def _broken(records: list[tuple[str, dict]]) -> dict[str, tuple[int, str]]:
    """Each distinct problem (its text before the value): how many records have it, and the first file."""
    count: Counter[str] = Counter()
    first: dict[str, str] = {}
    for name, record in records:
        for problem in problems(record):
            key = problem.split(":")[0]
            count[key] += 1
            first.setdefault(key, name)
    return {key: (n, first[key]) for key, n in count.items()}


def test_every_record_of_the_recorded_runs_follows_the_contract() -> None:
    records = _records(_fixed_lines() + _file_lines(LESSON_DATA))
    assert len(records) > 10_000
    assert _broken(records) == {}
    # and they cover the contract's main record types and member event kinds
    types = {r["type"] for _, r in records}
    assert {"phase", "membership", "member_event", "generation", "assignment", "consume", "wire", "owners", "mntr",
            "stable", "campaign", "fault", "group_view", "health"} <= types


@pytest.mark.slow
@pytest.mark.parametrize("root", EXTERNAL, ids=str)
def test_every_record_of_a_whole_lab_run_follows_the_contract(root: Path) -> None:
    if not root.is_dir():
        pytest.skip(f"{root}: no recorded runs here")
    records = _records(_file_lines(root))
    assert records
    assert _broken(records) == {}


def test_the_scan_sees_a_field_the_contract_lacks() -> None:
    """The scan above is not blind: a record with one field more, or a value of another type, is named."""
    name, record = next((n, r) for n, r in _records(_fixed_lines()) if r.get("kind") == "attempt_end")
    assert _broken([(name, record)]) == {}
    assert _broken([(name, {**record, "view_id": "abc"})]) == {
        "member_event attempt_end record with undeclared field 'view_id'": (1, name)}
    assert list(_broken([(name, {**record, "attempt": "1"})])) == [
        "member_event attempt_end record's 'attempt' is not int"]
    assert problems({**record, "kind": "new_kind"}) == ["member_event record of unknown kind 'new_kind'"]
    assert problems({**record, "type": "new_type"}) == ["unknown type 'new_type'"]
    assert problems({**record, "member": None}) == ["member_event record without member"]


def test_every_member_event_kind_of_the_product_has_a_payload() -> None:
    assert set(EventKind) <= set(contract.MEMBER_EVENTS)


def test_the_writer_refuses_a_record_the_contract_lacks(tmp_path: Path) -> None:
    writer = trace.TraceWriter(tmp_path / "m.jsonl", "zk")
    writer.write("member_event", member="m1", kind="barrier", seq=0, view="v1", view_members=2, acked=2)
    with pytest.raises(trace.TraceError, match=r"undeclared field .generation. .*trace_contract\.py"):
        writer.write("member_event", member="m1", kind="barrier", seq=1, generation="v1")
    with pytest.raises(trace.TraceError, match="'acked' is not int"):
        writer.write("member_event", member="m1", kind="barrier", seq=2, acked="all")
    writer.close()
    assert len((tmp_path / "m.jsonl").read_text().splitlines()) == 1


def test_the_lab_checks_the_contract_s_required_fields() -> None:
    assert trace.RECORD_TYPES == {name: tuple(t.required) for name, t in RECORDS.items()}
    assert trace.SCHEMA_VERSION == contract.SCHEMA_VERSION
    record = {"v": 1, "type": "consume", "ts": 1.0, "design": "zk", "member": "m1", "topic": "t", "partition": 0,
              "first_offset": 0, "last_offset": 1, "count": 2}
    assert trace.bad_record(record) is None and problems(record) == []
    assert trace.bad_record({**record, "count": None}) == problems({**record, "count": None})[0]


def test_column_types_keep_a_name_s_one_type_or_none_where_kinds_differ() -> None:
    types = contract.column_types()
    assert types["partitions"] is None  # a list of names, a count in `state` events, an object in `group_view`
    assert types["partition"] is FieldType.INT
    assert types["members"] is FieldType.STR_LIST
    assert list(types)[:4] == ["v", "type", "ts", "design"]
    # a kind that gives a known name another type turns the name's column into text, instead of dropping lines
    barrier = {**contract.MEMBER_EVENTS, EventKind.BARRIER: {"generation": FieldType.STR}}
    records = {**RECORDS, "member_event": contract.RecordType(
        "member_event", RECORDS["member_event"].required, RECORDS["member_event"].optional, "kind", barrier)}
    assert contract.column_types(records)["generation"] is None


def test_a_trace_of_another_version_is_said_in_one_line_per_file(tmp_path: Path, caplog) -> None:
    """The lab's reader skips lines of another schema version, counts them, and says so once per file and
    version: where, how many, which version, what to do (`trace_contract.version_note`)."""
    from zkconsumer.event_log import LineErrors

    traces = tmp_path / "run" / "traces"
    traces.mkdir(parents=True)
    good = {"v": 1, "type": "phase", "ts": 1.0, "design": "zk", "phase": "setup"}
    newer = [{**good, "v": 2, "ts": 2.0 + i} for i in range(3)]
    (traces / "run.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [good, *newer, {**good, "v": 0}]))
    (traces / "m1.jsonl").write_text(json.dumps(good) + "\n")
    errors = LineErrors()
    with caplog.at_level("WARNING", logger="zkconsumer.lab.trace"):
        assert list(trace.read_traces(tmp_path / "run", errors)) == [good, good]
    assert errors.count == 4
    path = traces / "run.jsonl"
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: 3 trace lines of schema version 2 not read (this reader reads version 1): read them with a "
        "zkconsumer that knows version 2",
        f"{path}: 1 trace line of schema version 0 not read (this reader reads version 1): read them with the "
        "zkconsumer that wrote them (the run's manifest.json names it in `versions`)"]
    assert trace.version_counts(path) == {2: 3, 0: 1}


ROOT = TESTS.parent


def _calls(package: str, method: str) -> list[tuple[str, int, ast.Call]]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found.extend((str(path.relative_to(ROOT)), node.lineno, node) for node in ast.walk(tree)
                     if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method
                     and node.args)
    return found


def _undeclared(call: ast.Call, declared: dict[str, FieldType]) -> list[str]:
    return [k.arg for k in call.keywords if k.arg is not None and k.arg not in declared]


def test_every_field_a_writer_names_is_declared() -> None:
    """Read in the source, so paths no recorded run took are checked too: every `trace.write("<type>", ...)` in the
    lab, and every `events.emit(EventKind.X, ...)` in the product, names only fields the contract declares for that
    type and kind (fields passed as `**mapping` are the recorded runs' business, above)."""
    wrong = []
    writes = 0
    for where, line, call in _calls("zkconsumer/lab", "write"):
        first = call.args[0]
        if not (isinstance(first, ast.Constant) and first.value in RECORDS):
            continue
        writes += 1
        rtype = RECORDS[first.value]
        kind = next((k.value.value for k in call.keywords if k.arg == rtype.kind_field
                     and isinstance(k.value, ast.Constant)), None)
        declared = rtype.fields(kind) if kind is not None else {
            name: ftype for k in (None, *rtype.kinds) for name, ftype in rtype.fields(k).items()}
        if kind is not None and rtype.kinds and kind not in rtype.kinds:
            wrong.append(f"{where}:{line}: {first.value} of unknown {rtype.kind_field} {kind!r}")
        wrong.extend(f"{where}:{line}: {first.value} {kind or ''} field {name!r}" for name in _undeclared(
            call, {**declared, "ts": FieldType.FLOAT}))
    emits = 0
    for package in ("rebalance", "zkconsumer"):
        for where, line, call in _calls(package, "emit"):
            first = call.args[0]
            if not (isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name)
                    and first.value.id == "EventKind"):
                continue
            emits += 1
            kind = EventKind[first.attr]
            wrong.extend(f"{where}:{line}: member_event {kind} field {name!r}"
                         for name in _undeclared(call, dict(contract.MEMBER_EVENTS[kind])))
    assert writes > 30 and emits > 20
    assert wrong == []
