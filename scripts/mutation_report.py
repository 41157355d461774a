#!/usr/bin/env python3
"""Summarise a mutmut run: mutants per file by outcome, then every surviving mutant as a one-line diff.

Reads mutmut's own data files rather than its console output: `mutants/<source path>.meta` (JSON, one exit code per
mutant; written by `mutmut run`) gives the outcomes, and mutmut's diff of each survivor (the same text as
`mutmut show NAME`) gives the change. Run it from anywhere after `make mutate` (or `mutmut run`):

    scripts/mutation_report.py                  # plain-text table and survivors
    scripts/mutation_report.py --markdown       # Markdown table and survivors (docs/mutation.md)
    scripts/mutation_report.py --json out.json  # also write everything as JSON
    scripts/mutation_report.py --no-survivors   # the table only

Outcomes: killed (a test failed), survived (every test that runs the mutated function passed), no tests (no test of
the selected layer runs the function at all), timeout (the tests ran past mutmut's CPU limit: almost always an
endless loop the mutant introduced, so it counts as detected), other (suspicious, segfault, skipped, not checked).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLASS_SEPARATOR = "\u01c1"  # mutmut's separator in method keys: x<sep>Class<sep>method__mutmut_N
COLUMNS = ("killed", "survived", "no tests", "timeout", "other")

# mutmut 3's exit code -> outcome table (mutmut.stats.status_by_exit_code), used if that import ever moves.
FALLBACK_STATUS_BY_EXIT_CODE: dict[int | None, str] = {
    1: "killed", 3: "killed", 0: "survived", 5: "no tests", 2: "check was interrupted by user", None: "not checked",
    33: "no tests", 34: "skipped", 35: "suspicious", 36: "timeout", 37: "caught by type check",
    -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout", -11: "segfault", -9: "segfault",
}


def status_table() -> dict[int | None, str]:
    try:
        from mutmut.stats import status_by_exit_code
    except Exception:  # mutmut not importable or reorganised: use the copy above
        return FALLBACK_STATUS_BY_EXIT_CODE
    return status_by_exit_code


STATUS_BY_EXIT_CODE = status_table()


def status_of(exit_code: int | None) -> str:
    return STATUS_BY_EXIT_CODE.get(exit_code, "suspicious")  # an unknown code is what mutmut calls suspicious


def column_of(status: str) -> str:
    return status if status in COLUMNS else "other"


@dataclass
class Survivor:
    name: str
    function: str
    line: int | None = None
    diff: str = ""


@dataclass
class FileResult:
    path: str
    counts: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    survivors: list[Survivor] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def tested(self) -> int:
        """Mutants some test ran against: the denominator of the score."""
        return self.total - self.counts["no tests"] - self.statuses["not checked"] - self.statuses["skipped"]

    @property
    def score(self) -> float | None:
        detected = self.counts["killed"] + self.counts["timeout"]
        return detected / self.tested if self.tested else None


def function_of(mutant_name: str) -> str:
    """`pkg.mod.xǁClassǁmethod__mutmut_3` -> `Class.method`; `pkg.mod.x_func__mutmut_3` -> `func`."""
    mangled = mutant_name.partition("__mutmut_")[0]
    _, sep, rest = mangled.partition("." + "x" + CLASS_SEPARATOR)
    if sep:
        class_name, _, method = rest.partition(CLASS_SEPARATOR)
        return f"{class_name}.{method}"
    return mangled.rpartition(".x_")[2]


def one_line(diff: str) -> str:
    """The changed lines of a unified diff, as `- old  ->  + new` (several changed lines joined with ` | `)."""
    removed = [line[1:].strip() for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    if not removed and not added:
        return diff.strip() or "(no diff)"
    return f"- {' | '.join(removed)}  ->  + {' | '.join(added)}"


def diff_for(mutant_name: str, path: str) -> str:
    """mutmut's diff of one mutant: in-process when its API is there (fast), else `mutmut show`."""
    try:
        from mutmut.mutation.diff_apply import get_diff_for_mutant

        return get_diff_for_mutant(mutant_name, path=path)
    except ImportError:
        pass
    except Exception as exc:  # a mutant file that no longer parses, an index out of date...
        return f"(diff unavailable: {exc})"
    candidates = [Path(sys.executable).with_name("mutmut"), Path.cwd() / ".venv" / "bin" / "mutmut"]
    mutmut = next((str(c) for c in candidates if c.exists()), "mutmut")
    try:
        result = subprocess.run([mutmut, "show", mutant_name], capture_output=True, text=True, check=False)
    except OSError as exc:
        return f"(diff unavailable: {exc})"
    if result.returncode != 0:
        return f"(diff unavailable: {result.stderr.strip().splitlines()[-1:] or result.returncode})"
    return "\n".join(line for line in result.stdout.splitlines() if not line.startswith("# "))


def function_ranges(source_path: Path) -> dict[str, tuple[int, int]]:
    """`func` / `Class.method` -> (first line including decorators, last line) in the current source."""
    try:
        tree = ast.parse(source_path.read_text())
    except (OSError, SyntaxError):
        return {}
    ranges: dict[str, tuple[int, int]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                ranges[prefix + node.name] = (first, node.end_lineno or node.lineno)
            elif isinstance(node, ast.ClassDef) and not prefix:
                visit(node.body, node.name + ".")

    visit(tree.body, "")
    return ranges


def first_removed(diff: str) -> tuple[str, int] | None:
    """The first removed line of a unified diff and its line number in the old text (here: the function's source)."""
    old_line = 0
    for line in diff.splitlines():
        if line.startswith("@@"):
            old_line = int(line.split()[1].lstrip("-").split(",")[0])
        elif line.startswith("-") and not line.startswith("---"):
            return line[1:].strip(), old_line
        elif line.startswith(" "):
            old_line += 1
    return None


def locate(diff: str, function: str, lines: list[str], ranges: dict[str, tuple[int, int]]) -> int | None:
    """The source line of the mutation: the line inside its function equal to the first removed line, the one nearest
    to where the diff puts it when the text occurs more than once (None if the source changed since the run)."""
    span = ranges.get(function)
    removed = first_removed(diff)
    if not span or not removed:
        return None
    text, offset = removed
    expected = span[0] + offset - 1
    matches = [n for n in range(span[0], min(span[1], len(lines)) + 1) if lines[n - 1].strip() == text]
    return min(matches, key=lambda n: abs(n - expected)) if matches else None


def collect(root: Path, with_survivors: bool) -> list[FileResult]:
    mutants = root / "mutants"
    results = []
    for meta_path in sorted(mutants.rglob("*.py.meta")):
        source = meta_path.relative_to(mutants).as_posix().removesuffix(".meta")
        try:
            exit_codes = json.loads(meta_path.read_text())["exit_code_by_key"]
        except (OSError, ValueError, KeyError) as exc:
            print(f"warning: skipping unreadable {meta_path}: {exc}", file=sys.stderr)
            continue
        if not exit_codes:
            continue
        result = FileResult(source)
        for name, code in exit_codes.items():
            status = status_of(code)
            result.statuses[status] += 1
            result.counts[column_of(status)] += 1
            if status == "survived":
                result.survivors.append(Survivor(name, function_of(name)))
        if with_survivors and result.survivors:
            source_path = root / source
            lines = source_path.read_text().splitlines() if source_path.exists() else []
            ranges = function_ranges(source_path)
            for survivor in result.survivors:
                survivor.diff = diff_for(survivor.name, source)
                survivor.line = locate(survivor.diff, survivor.function, lines, ranges)
        results.append(result)
    return results


def percent(score: float | None) -> str:
    return "-" if score is None else f"{100 * score:.0f}%"


def table_rows(results: list[FileResult]) -> list[list[str]]:
    total = FileResult("total")
    rows = []
    for result in results:
        total.counts.update(result.counts)
        total.statuses.update(result.statuses)
        rows.append([result.path, str(result.total), *(str(result.counts[c]) for c in COLUMNS), percent(result.score)])
    rows.append(["total", str(total.total), *(str(total.counts[c]) for c in COLUMNS), percent(total.score)])
    return rows


HEADER = ["file", "mutants", *COLUMNS, "score"]


def render_text(results: list[FileResult], with_survivors: bool) -> str:
    rows = [HEADER, *table_rows(results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    out = []
    for index, row in enumerate(rows):
        cells = [row[0].ljust(widths[0]), *(cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))]
        out.append("  ".join(cells))
        if index == 0 or index == len(rows) - 2:
            out.append("  ".join("-" * width for width in widths))
    if with_survivors:
        for result in results:
            if not result.survivors:
                continue
            out += ["", f"== {result.path}: {len(result.survivors)} surviving"]
            for function, survivors in group_by_function(result.survivors).items():
                out.append(f"  {function}")
                for survivor in survivors:
                    number = survivor.name.rpartition("__mutmut_")[2]
                    where = f"line {survivor.line}" if survivor.line else "line ?"
                    out.append(f"    {number:>4}  {where:>9}  {one_line(survivor.diff)}   [{survivor.name}]")
    return "\n".join(out)


def render_markdown(results: list[FileResult], with_survivors: bool) -> str:
    rows = table_rows(results)
    out = [
        "| " + " | ".join(HEADER) + " |",
        "|---|" + "---:|" * (len(HEADER) - 1),
    ]
    for row in rows:
        cells = [f"`{row[0]}`" if row[0] != "total" else "**total**", *row[1:]]
        out.append("| " + " | ".join(cells) + " |")
    if with_survivors:
        for result in results:
            if not result.survivors:
                continue
            out += ["", f"### `{result.path}`: {len(result.survivors)} surviving", ""]
            for function, survivors in group_by_function(result.survivors).items():
                out.append(f"* `{function}`")
                for survivor in survivors:
                    where = f"line {survivor.line}" if survivor.line else "line ?"
                    text = one_line(survivor.diff).replace("`", "'")
                    out.append(f"  * {where}: `{text}` ({survivor.name})")
    return "\n".join(out)


def group_by_function(survivors: list[Survivor]) -> dict[str, list[Survivor]]:
    grouped: dict[str, list[Survivor]] = defaultdict(list)
    for survivor in sorted(survivors, key=lambda s: (s.line or 0, s.function, int(s.name.rpartition("_")[2]))):
        grouped[survivor.function].append(survivor)
    return dict(grouped)


def to_json(results: list[FileResult]) -> dict:
    return {
        "files": [
            {
                "path": r.path, "total": r.total, **{c.replace(" ", "_"): r.counts[c] for c in COLUMNS},
                "statuses": dict(r.statuses), "score": r.score,
                "survivors": [
                    {"name": s.name, "function": s.function, "line": s.line, "change": one_line(s.diff), "diff": s.diff}
                    for s in r.survivors
                ],
            }
            for r in results
        ],
        "total": {"mutants": sum(r.total for r in results)}
        | {c.replace(" ", "_"): sum(r.counts[c] for r in results) for c in COLUMNS},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print Markdown instead of plain text")
    parser.add_argument("--json", metavar="FILE", type=Path, help="also write the whole report as JSON to FILE")
    parser.add_argument("--no-survivors", action="store_true", help="print the table only")
    parser.add_argument("--root", type=Path, default=ROOT, help="project root holding mutants/ (default: this repo)")
    args = parser.parse_args(argv)

    root = args.root.resolve()
    if not (root / "mutants").is_dir():
        print(f"no mutmut data in {root / 'mutants'}: run `make mutate` first", file=sys.stderr)
        return 1
    json_path = args.json.resolve() if args.json else None
    os.chdir(root)  # mutmut's diff reads mutants/<path> relative to the working directory
    want_survivors = not args.no_survivors or json_path is not None
    results = collect(root, want_survivors)
    if not results:
        print("no mutants recorded in mutants/: did `mutmut run` finish?", file=sys.stderr)
        return 1
    render = render_markdown if args.markdown else render_text
    print(render(results, not args.no_survivors))
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(to_json(results), indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
