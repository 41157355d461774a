"""Reading run directories: manifests into a runs table, trace lines into records plus a per-file error count.

Trace lines are read as text and parsed with `from_json` under the explicit schema, so a bad line is seen, not
lost: a torn last line (a killed writer), a line that is not JSON, a field of the wrong type, a missing required
field, an unknown type or another schema version (which is also said in one line per file: `version_notes`).
Every such line is counted per file with the number and text of the first one (`trace_errors`); only good lines
go on to the metrics.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from zkconsumer.lab.analysis.schemas import (
    BASE_FIELDS,
    CORRUPT,
    MANIFEST_SCHEMA,
    PARSE_SCHEMA,
    RECORD_FIELDS,
    TRACE_ERROR_SCHEMA,
    TRACE_SCHEMA,
)
from zkconsumer.lab.analysis.sql_text import literal, quoted
from zkconsumer.lab.designs import is_zookeeper_design
from zkconsumer.lab.runs.server_info import servers_line
from zkconsumer.lab.trace import RECORD_TYPES, SCHEMA_VERSION, version_counts
from zkconsumer.trace_contract import version_note

log = logging.getLogger(__name__)

BAD_TEXT_CHARS = 300  # enough of a bad line to recognise it; a torn line can be long


@dataclass(frozen=True)
class RunInfo:
    """What the job needs from one run's manifest.json."""

    run_id: str
    path: Path
    scenario: str | None
    case: str | None
    design: str | None
    process_mode: str | None
    repeat: int | None
    sweep_axis: str | None
    sweep_value: float | None
    members: int | None
    partitions: int | None
    session_timeout_ms: int | None
    servers: str | None  # what the run ran against, from the manifest's `servers` (servers_line)
    completed: bool
    status: str | None
    started: float | None
    ended: float | None

    def row(self) -> tuple[Any, ...]:
        return (self.run_id, str(self.path), self.scenario, self.case, self.design, self.process_mode, self.repeat,
                self.sweep_axis, self.sweep_value, self.members, self.partitions, self.session_timeout_ms,
                self.servers, self.completed, self.status, self.started, self.ended)


@dataclass
class Traces:
    records: DataFrame  # good lines: run_id, file and the fields the metrics read (RECORD_FIELDS)
    errors: DataFrame  # one row per trace file (TRACE_ERROR_SCHEMA)
    lines: int
    bad_lines: int
    cached: DataFrame | None = None  # what `records` reads from: unpersist it when done
    error_rows: list[tuple] = field(default_factory=list)  # `errors`, as the driver made them

    def of(self, run_ids: set[str]) -> tuple[int, int]:
        """(lines, bad lines) of these runs' trace files."""
        mine = [e for e in self.error_rows if e[0] in run_ids]
        return sum(e[2] for e in mine), sum(e[3] for e in mine)


def find_run_dirs(paths: list[Path]) -> list[Path]:
    """Each path is a run directory (it has manifest.json) or a tree of them (a `lab run --out` directory)."""
    found: list[Path] = []
    for path in paths:
        if (path / "manifest.json").is_file():
            found.append(path)
        else:
            found.extend(sorted(p.parent for p in path.glob("**/manifest.json")))
    unique = list(dict.fromkeys(p.resolve() for p in found))
    return unique


def load_run(path: Path) -> RunInfo:
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    definition = manifest.get("scenario_definition") or {}
    group = definition.get("group") or {}
    sweep = manifest.get("sweep") or {}
    axis, value = next(iter(sweep.items()), (None, None))
    design = manifest.get("design")
    if design is not None and is_zookeeper_design(design):  # the scenario's [zk] settings apply to both
        timeout = (definition.get("zk") or {}).get("zookeeper.session.timeout.ms")
    else:
        timeout = (definition.get("coordinator") or {}).get("session_timeout_ms")
    members = group.get("members")
    if axis == "members" and isinstance(value, int | float):
        members = int(value)
    return RunInfo(
        run_id=manifest.get("run_id") or f"{manifest.get('case', path.parent.name)}-{design}",
        path=path, scenario=manifest.get("scenario"), case=manifest.get("case"), design=design,
        process_mode=manifest.get("process_mode") or group.get("process_mode"), repeat=manifest.get("repeat"),
        sweep_axis=axis, sweep_value=float(value) if isinstance(value, int | float) else None,
        members=members, partitions=sum(int(t.get("partitions", 0)) for t in group.get("topics", [])) or None,
        session_timeout_ms=int(timeout) if timeout is not None else None, servers=servers_line(manifest),
        completed=bool(manifest.get("completed")), status=manifest.get("status"),
        started=manifest.get("started"), ended=manifest.get("ended"))


def load_runs(paths: list[Path]) -> list[RunInfo]:
    runs: list[RunInfo] = []
    seen: set[str] = set()
    for path in find_run_dirs(paths):
        try:
            run = load_run(path)
        except (OSError, ValueError) as exc:
            log.warning("skipping %s: unreadable manifest (%s)", path, exc)
            continue
        if run.run_id in seen:  # the same run copied elsewhere: keep both, told apart by their path
            run = RunInfo(**{**run.__dict__, "run_id": f"{run.run_id}@{path}"})
        seen.add(run.run_id)
        runs.append(run)
    return runs


def version_notes(runs: list[RunInfo], files: list[tuple[str, str, str | None]]) -> list[str]:
    """One line per trace file (and version) whose lines are of another schema version, which the reader counted
    bad instead of parsing them as its own (`_bad_reason`): `files` are (run_id, file, first bad reason) of the
    files with bad lines, and a file whose first bad line is of another version has its lines counted by version
    (on the driver: such files are rare, and the note must say how many lines it did not read)."""
    paths = {run.run_id: run.path for run in runs}
    notes = []
    for run_id, name, reason in files:
        if run_id not in paths or not (reason or "").startswith("schema version "):
            continue
        path = paths[run_id] / "traces" / name
        for version, lines in sorted(version_counts(path).items(), key=str):
            notes.append(version_note(str(path), version, lines))
    return notes


def runs_frame(spark: SparkSession, runs: list[RunInfo]) -> DataFrame:
    return spark.createDataFrame([r.row() for r in runs], MANIFEST_SCHEMA)


def _field(field: str) -> str:
    """A field of the parsed struct `r` in Spark SQL."""
    return f"r.{quoted(field)}"


def _type_is(type_: str) -> str:
    return f"{_field('type')} = {literal(type_)}"


# The checks are written as Spark SQL and handed over as one expression each (F.expr): built with the Column API,
# their hundred-odd branches are as many round trips to the JVM through py4j, about a second of the job's start.

def _bad_reason() -> Column:
    """Why a line (`value`, parsed as `r`) is bad, or null: the first failing check, from the coarsest to the
    per-type required fields."""
    return F.expr(_bad_reason_sql())


def _bad_reason_sql() -> str:
    branches = [("trim(value) = ''", literal("empty line")),
                (f"r IS NULL OR ({_field('v')} IS NULL AND {_field('type')} IS NULL AND {_field(CORRUPT)} IS NOT NULL)",
                 literal("not JSON (torn or garbled line)")),
                (f"{_field(CORRUPT)} IS NOT NULL", literal("a field has the wrong type"))]
    branches += [(f"{_field(name)} IS NULL", literal(f"no {name!r}")) for name in BASE_FIELDS]
    branches += [(f"{_field('v')} != {SCHEMA_VERSION}",
                  f"concat('schema version ', CAST({_field('v')} AS STRING))"),
                 (f"NOT {_field('type')} IN ({', '.join(map(literal, RECORD_TYPES))})",
                  f"concat('unknown type ', {_field('type')})")]
    branches += [(f"{_type_is(type_)} AND {_field(name)} IS NULL", literal(f"{type_} record without {name}"))
                 for type_, fields in RECORD_TYPES.items() for name in fields]
    return "CASE " + " ".join(f"WHEN {when} THEN {then}" for when, then in branches) + " END"


def _is_bad() -> Column:
    """The same verdict as `_bad_reason`, as one small boolean expression: it runs on every line, where the
    descriptive CASE (one branch per required field) is too large to be compiled and runs interpreted. The
    reason is worked out afterwards for the bad lines only."""
    checks = ["trim(value) = ''", "r IS NULL", f"{_field(CORRUPT)} IS NOT NULL",
              *[f"{_field(name)} IS NULL" for name in BASE_FIELDS],
              f"{_field('v')} != {SCHEMA_VERSION}",
              f"NOT {_field('type')} IN ({', '.join(map(literal, RECORD_TYPES))})"]
    checks += [f"({_type_is(type_)} AND ({' OR '.join(f'{_field(name)} IS NULL' for name in fields) or 'false'}))"
               for type_, fields in RECORD_TYPES.items()]
    return F.expr(f"coalesce({' OR '.join(f'({check})' for check in checks)}, true)")


def _parse(value: Column) -> Column:
    return F.from_json(value, PARSE_SCHEMA, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT})


def line_reasons(spark: SparkSession, lines: list[str]) -> list[str | None]:
    """What the reader makes of each line: why it is bad, or None for a good one."""
    df = spark.createDataFrame([(i, line) for i, line in enumerate(lines)], "i int, value string")
    rows = (df.withColumn("r", _parse(F.col("value"))).select("i", _bad_reason().alias("reason")).orderBy("i")
            .collect())
    return [r["reason"] for r in rows]


@contextmanager
def _reading(spark: SparkSession, total_bytes: int) -> Iterator[None]:
    """The settings the text scan is planned with, set until the parsed lines are cached (the scan is planned
    then, not when the reader is made), and put back after.

    * Input partitions of about a quarter of the data per core: Spark's default (total / cores, up to 128 MiB)
      makes as many partitions as cores, and one slow partition then holds the whole parse back; small files
      packed by their size, so that this is also about the number of partitions every scan of the cache has.
    * The run directories listed by the driver, whatever their number: past
      spark.sql.sources.parallelPartitionDiscovery.threshold paths Spark lists them in a job of its own, a task
      per path, which on one machine costs more than the listing."""
    cores = max(1, spark.sparkContext.defaultParallelism)
    wanted = {"spark.sql.files.maxPartitionBytes": str(max(1 << 20, total_bytes // (4 * cores))),
              # A file's cost when files are packed into partitions is its size plus this (4 MiB by default): with
              # hundreds of small trace files that packed a few files per partition, a hundred partitions and as
              # many tasks for every later scan of the cache. Local files cost little to open.
              "spark.sql.files.openCostInBytes": str(64 << 10),
              "spark.sql.sources.parallelPartitionDiscovery.threshold": str(1 << 20)}
    previous = {key: spark.conf.get(key) for key in wanted}
    for key, value in wanted.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            spark.conf.set(key, value)


def trace_files(runs: list[RunInfo]) -> dict[str, tuple[str, str]]:
    """Every trace file of the runs: its resolved local path -> (run_id, file name)."""
    return {str(p.resolve()): (run.run_id, p.name) for run in runs
            for p in sorted((run.path / "traces").glob("*.jsonl"))}


def local_path(uri: str) -> str:
    """The resolved local path of a file URI as Spark gives it (`_metadata.file_path`)."""
    return str(Path(unquote(urlparse(uri).path)).resolve())


@contextmanager
def reading(spark: SparkSession, runs: list[RunInfo]) -> Iterator[None]:
    """The settings a scan of these runs' trace lines is planned with (`_reading`): plan and run the query inside."""
    with _reading(spark, sum(Path(f).stat().st_size for f in trace_files(runs))):
        yield


def parsed_lines(spark: SparkSession, runs: list[RunInfo], fields: tuple[str, ...]) -> DataFrame:
    """Every line of the runs' trace files, parsed once and checked: file_uri, _pid (its input partition), _mid
    (its row id), bad, reason and text (of a bad line: why, and its first BAD_TEXT_CHARS characters), and `fields`
    (null on a bad line's row where it did not parse). Plan it inside `reading`.

    Spark is given the runs' trace directories (with a file-name filter), not every file by name: a list of
    files is a path per file to list and check. The row id is taken at the scan, before any filter or join:
    within one input partition it numbers the lines consecutively, which is what turns it into a line number
    (`_file_mapping`). Every field comes from one parse per line (the struct is not inlined into each use:
    from_json is not a cheap expression)."""
    directories = sorted({str(Path(f).parent) for f in trace_files(runs)})
    text = spark.read.option("pathGlobFilter", "*.jsonl").text(directories)
    return (text.select(F.col("_metadata.file_path").alias("file_uri"), "value",
                        F.monotonically_increasing_id().alias("_mid"), F.spark_partition_id().alias("_pid"))
            .withColumn("r", _parse(F.col("value")))
            .withColumn("bad", _is_bad())
            # in SQL, as the checks: a column per field through the Column API is a py4j round trip each
            .selectExpr("file_uri", "_pid", "_mid", "bad",
                        # the descriptive check runs on the bad lines only (`_is_bad` says why)
                        f"CASE WHEN bad THEN {_bad_reason_sql()} END AS reason",
                        f"CASE WHEN bad THEN substring(value, 1, {BAD_TEXT_CHARS}) END AS text",
                        *[f"{_field(field)} AS {quoted(field)}" for field in fields]))


def read_traces(spark: SparkSession, runs: list[RunInfo]) -> Traces:
    """Every line parsed once (`parsed_lines`), checked, and its fields cached column by column; the per-file
    counts, the line numbers of bad lines and the run of each file then come from the cache. (The runs' own
    analysis reads its lines in one pass with no cache, metrics.py; the fault campaign's tables read these.)"""
    files = trace_files(runs)
    columns = [T.StructField("run_id", T.StringType()), T.StructField("file", T.StringType()),
               *[f for f in TRACE_SCHEMA.fields if f.name in RECORD_FIELDS]]
    if not files:
        return Traces(spark.createDataFrame([], T.StructType(columns)),
                      spark.createDataFrame([], TRACE_ERROR_SCHEMA), 0, 0)
    with reading(spark, runs):
        parsed = parsed_lines(spark, runs, RECORD_FIELDS).cache()
        # one row per trace file and input partition (a file spans more than one only when it is large)
        stats = parsed.groupBy("file_uri", "_pid").agg(F.count(F.lit(1)).alias("n"), F.min("_mid").alias("first"),
                                                        F.count("text").alias("bad")).collect()
    mapping, offsets, lines = _file_mapping(stats, files)
    mapping_df = F.broadcast(spark.createDataFrame(mapping, "file_uri string, run_id string, file string"))
    errors = []
    bad: dict[str, Any] = {}
    if any(row["bad"] for row in stats):  # the reasons, for the (few) bad lines only: one row per file
        offsets_df = spark.createDataFrame(offsets, "file_uri string, _pid int, base long, first long")
        bad = {r["file_uri"]: r for r in parsed.filter(F.col("bad"))
               .join(F.broadcast(offsets_df), ["file_uri", "_pid"])
               .select("file_uri", (F.col("base") + F.col("_mid") - F.col("first") + 1).alias("line"), "reason",
                       "text")
               .groupBy("file_uri").agg(F.count(F.lit(1)).alias("bad"),
                                        F.min(F.struct("line", "reason", "text")).alias("first")).collect()}
    for uri, run_id, name in mapping:
        found = bad.get(uri)
        first = found["first"] if found else None
        errors.append((run_id, name, lines[uri], found["bad"] if found else 0, first["line"] if first else None,
                       first["reason"] if first else None, first["text"] if first else None))
    records = (parsed.filter(~F.col("bad")).join(mapping_df, "file_uri")
               .select("run_id", "file", *RECORD_FIELDS))
    return Traces(records, spark.createDataFrame(errors, TRACE_ERROR_SCHEMA), sum(lines.values()),
                  sum(e[3] for e in errors), parsed, errors)


def _file_mapping(stats: list[Any], files: dict[str, tuple[str, str]]):
    """Spark's file URIs -> (run_id, file name); per (file, input partition), the number of lines before it; and
    each file's line count.

    Spark splits a large file into input partitions in offset order and numbers partitions in that order, so a
    file's lines are its partitions' rows taken by partition index."""
    mapping: list[tuple[str, str, str]] = []
    offsets: list[tuple[str, int, int, int]] = []
    lines: dict[str, int] = {}
    by_file: dict[str, list[Any]] = defaultdict(list)
    for row in stats:
        by_file[row["file_uri"]].append(row)
    for uri, rows in sorted(by_file.items()):
        local = local_path(uri)
        run_id, name = files.get(local, (None, Path(local).name))
        if run_id is None:
            log.warning("trace file %s matches no run directory", uri)
            continue
        mapping.append((uri, run_id, name))
        base = 0
        for row in sorted(rows, key=lambda x: x["_pid"]):
            offsets.append((uri, row["_pid"], base, row["first"]))
            base += row["n"]
        lines[uri] = base
    return mapping, offsets, lines
