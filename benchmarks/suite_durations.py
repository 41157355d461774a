"""Where the suite's time goes, per test file: the table docs/testing.md keeps, from the JUnit XML that `make test`
writes (.zkconsumer/test-report.xml; pytest's `--junitxml`, whose per-test time is setup, call and teardown
together, so a module fixture's start counts for the first test that uses it).

    .venv/bin/python benchmarks/suite_durations.py .zkconsumer/test-report.xml [--top 25]

Prints a Markdown table: file, tests, skipped, seconds, share of the whole, and the slowest test of the file.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path


@dataclass
class FileTime:
    path: str
    tests: int = 0
    skipped: int = 0
    seconds: float = 0.0
    slowest: tuple[float, str] = (0.0, "")


def _path(classname: str) -> str:
    """`tests.lab.test_lab_run` or `tests.lab.test_lab_run.TestX` -> tests/lab/test_lab_run.py."""
    parts = classname.split(".")
    while parts and not parts[-1].startswith("test"):
        parts.pop()
    return "/".join(parts) + ".py" if parts else classname


def per_file(report: Path) -> tuple[list[FileTime], float, int, float]:
    """The files by test time, the test time, the number of tests and the run's wall time (its testsuite's)."""
    root = ET.parse(report).getroot()
    wall = sum(float(suite.get("time") or 0.0) for suite in root.iter("testsuite"))
    files: dict[str, FileTime] = defaultdict(lambda: FileTime(""))
    total, count = 0.0, 0
    for case in root.iter("testcase"):
        path = _path(case.get("classname") or "")
        seconds = float(case.get("time") or 0.0)
        entry = files[path]
        entry.path = path
        entry.tests += 1
        entry.seconds += seconds
        entry.skipped += case.find("skipped") is not None
        if seconds > entry.slowest[0]:
            entry.slowest = (seconds, case.get("name") or "")
        total += seconds
        count += 1
    return sorted(files.values(), key=lambda f: -f.seconds), total, count, wall


def table(rows: list[FileTime], total: float, count: int, top: int, wall: float) -> str:
    # With `make test`'s workers the test time is summed over them, so it exceeds the wall time.
    lines = [f"{count} tests, {total:,.0f} s of test time (setup, call and teardown, summed over the workers), "
             f"{wall:,.1f} s of wall time", "",
             "| file | tests | skipped | seconds | share | slowest test (s) |", "|---|---|---|---|---|---|"]
    for row in rows[:top]:
        lines.append(f"| `{row.path}` | {row.tests} | {row.skipped} | {row.seconds:,.1f} | "
                     f"{100 * row.seconds / total if total else 0:.1f} % | `{row.slowest[1]}` ({row.slowest[0]:.1f}) |")
    rest = rows[top:]
    if rest:
        seconds = sum(r.seconds for r in rest)
        lines.append(f"| {len(rest)} other files | {sum(r.tests for r in rest)} | {sum(r.skipped for r in rest)} | "
                     f"{seconds:,.1f} | {100 * seconds / total if total else 0:.1f} % | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="pytest's JUnit XML (make test writes .zkconsumer/test-report.xml)")
    parser.add_argument("--top", type=int, default=25, help="files listed before the rest is summed (default 25)")
    args = parser.parse_args(argv)
    if not args.report.is_file():
        parser.error(f"{args.report}: no such file; `make test` writes .zkconsumer/test-report.xml")
    if args.top < 1:
        parser.error(f"--top must be at least 1, not {args.top}")
    try:
        rows, total, count, wall = per_file(args.report)
    except ET.ParseError as exc:
        parser.error(f"{args.report} is not JUnit XML ({exc}): give the file pytest --junitxml wrote")
    print(table(rows, total, count, args.top, wall))
    return 0


if __name__ == "__main__":
    sys.exit(main())
