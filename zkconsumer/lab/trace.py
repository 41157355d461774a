"""Lab traces: one JSON-lines schema for both designs, and the run directory that holds them.

A run directory (one case of a scenario on one design):

    manifest.json          scenario, case, design, seed, versions, servers, host, start/end, completed or not
    scenario.toml          the scenario file as it was run
    traces/*.jsonl         trace records (below); one file per writer (the runner, each member process)
    logs/*.log             people's logs of every process the run started

Every trace record is a JSON object with `v` (SCHEMA_VERSION), `type` (one of RECORD_TYPES), `ts` (wall-clock
seconds, `time.time()`, comparable across the run's processes) and `design` (one of `designs.DESIGNS`); the
other fields depend on the type and are declared with their JSON types in the trace contract
(`zkconsumer/trace_contract.py`, shared with the product; docs/traces.md). Readers must ignore fields they do not
know; a new field does not change the version, a changed meaning does; a writer writes only declared fields.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from zkconsumer.event_log import JsonLinesWriter, LineErrors, read_json_lines
from zkconsumer.lab.designs import DESIGNS
from zkconsumer.trace_contract import RECORDS, SCHEMA_VERSION, problems, version_note

log = logging.getLogger(__name__)

# The record types, their fields and types, and the version are the trace contract's (zkconsumer/trace_contract.py,
# shared with the product); here, what the lab's readers check of each type: its required fields beyond v/type/ts/
# design, in the contract's order (docs/traces.md has the meaning of each).
RECORD_TYPES: dict[str, tuple[str, ...]] = {name: tuple(t.required) for name, t in RECORDS.items()}


class TraceError(ValueError):
    """A trace record that does not follow the schema (names the type and the missing field)."""


def validate(record: Mapping[str, Any]) -> None:
    """A record as a writer is about to write it, against the trace contract: its required fields, its type and
    kind, and every field declared with its type, so that a new field reaches the contract (and the readers made
    from it) with the change that writes it, not when a reader drops its lines."""
    for key in ("v", "type", "ts", "design"):
        if key not in record:
            raise TraceError(f"trace record without {key!r}: {dict(record)!r:.200}")
    if record["type"] not in RECORDS:
        raise TraceError(f"unknown trace record type {record['type']!r}: one of {', '.join(RECORDS)}")
    found = problems(record)
    if found:
        raise TraceError(f"{'; '.join(found)} (declare it in zkconsumer/trace_contract.py): {dict(record)!r:.200}")


class TraceWriter:
    """Writes records of one design to one file: `write("consume", member="m1", ...)`; thread-safe."""

    def __init__(self, path: Path, design: str, **extra: Any) -> None:
        if design not in DESIGNS:
            raise ValueError(f"design must be one of {DESIGNS}, not {design!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.design = design
        self._out = JsonLinesWriter(path, {"v": SCHEMA_VERSION, "design": design, **extra})

    def write(self, type_: str, **fields: Any) -> None:
        record = {"type": type_, "ts": fields.pop("ts", None) or time.time(), **fields}
        if __debug__:
            validate({"v": SCHEMA_VERSION, "design": self.design, **record})
        self._out.write(record)

    def sink(self, type_: str, **extra: Any):
        """A callable for a producer of objects with `to_dict()` (proxy records, member events)."""

        def write(obj: Any) -> None:
            data = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
            ts = data.pop("ts", None) or data.pop("time", None)
            self.write(type_, ts=ts, **extra, **data)

        return write

    def close(self) -> None:
        self._out.close()


def bad_record(record: Mapping[str, Any]) -> str | None:
    """Why a parsed line is not a record of this schema, or None: the checks of the Spark reader
    (analysis/readers.py) but for the field types it also checks."""
    for key in ("v", "type", "ts", "design"):
        if record.get(key) is None:
            return f"no {key!r}"
    if record["v"] != SCHEMA_VERSION:
        return f"schema version {record['v']}"
    required = RECORD_TYPES.get(record["type"])
    if required is None:
        return f"unknown type {record['type']}"
    missing = [f for f in required if record.get(f) is None]
    return f"{record['type']} record without {missing[0]}" if missing else None


def read_traces(run_dir: Path, errors: LineErrors | None = None) -> Iterator[dict[str, Any]]:
    """Every record of a run, file by file (not merged by time: sort by `ts` where order matters). Bad lines
    (torn, not JSON, not a record of this schema) are skipped, and counted in `errors` if given. Lines of another
    schema version are not parsed as this one's: each file's are counted, and said in one warning line per file
    and version (`trace_contract.version_note`)."""
    for path in sorted((run_dir / "traces").glob("*.jsonl")):
        other: Counter[Any] = Counter()
        for number, record in enumerate(read_json_lines(path, errors), 1):
            reason = bad_record(record)
            if reason is None:
                yield record
                continue
            if record.get("v") is not None and record["v"] != SCHEMA_VERSION:
                other[record["v"]] += 1
            if errors is not None:
                errors.add(f"{path.name} (record {number})", reason)
        for version, lines in other.items():
            log.warning("%s", version_note(str(path), version, lines))


def version_counts(path: Path) -> Counter[Any]:
    """How many lines of a trace file are of each schema version but this one (its lines that are not records
    without a version are left out): what a reader that found such lines says of the file (`version_note`)."""
    found: Counter[Any] = Counter()
    for record in read_json_lines(path):
        if record.get("v") is not None and record["v"] != SCHEMA_VERSION:
            found[record["v"]] += 1
    return found


@dataclass
class RunDirectory:
    """One run's directory: created with a manifest marked incomplete, completed (or not) at the end."""

    path: Path
    manifest: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def create(cls, path: Path, **manifest: Any) -> RunDirectory:
        path.mkdir(parents=True, exist_ok=False)
        (path / "traces").mkdir()
        (path / "logs").mkdir()
        run = cls(path)
        run.manifest = {"schema_version": SCHEMA_VERSION, "completed": False, "status": "running",
                        "started": time.time(), "ended": None, "host": host_info(), "versions": versions(),
                        **manifest}
        run.save()
        return run

    def trace(self, name: str, design: str, **extra: Any) -> TraceWriter:
        return TraceWriter(self.path / "traces" / f"{name}.jsonl", design, **extra)

    def log_path(self, name: str) -> Path:
        return self.path / "logs" / f"{name}.log"

    def finish(self, status: str, error: str | None = None, **extra: Any) -> None:
        """`status`: completed | unsettled (the last change never settled) | interrupted | failed; only
        "completed" marks the run complete."""
        with self._lock:
            self.manifest.update(completed=status == "completed", status=status, ended=time.time(), error=error,
                                 **extra)
        self.save()

    def save(self) -> None:
        with self._lock:
            text = json.dumps(self.manifest, indent=2, sort_keys=True, default=str)
        tmp = self.path / "manifest.json.tmp"
        tmp.write_text(text + "\n", encoding="utf-8")
        tmp.replace(self.path / "manifest.json")

    @staticmethod
    def load(path: Path) -> dict[str, Any]:
        return json.loads((path / "manifest.json").read_text(encoding="utf-8"))


def host_info() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "python": sys.version.split()[0],
            "cpus": os.cpu_count(), "user": getpass.getuser()}


def versions() -> dict[str, str | None]:
    """Versions of the client-side components a result depends on. The servers' own are asked of the servers
    the run used (the manifest's `servers`, zkconsumer/lab/runs/server_info.py), never guessed from local files."""
    found: dict[str, str | None] = {}
    for package in ("zkconsumer", "kazoo", "kafka-python", "pyspark", "pydantic"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    found["git"] = _git_revision()
    return found


def _git_revision() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], check=False, capture_output=True, text=True,
                             timeout=5, cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
