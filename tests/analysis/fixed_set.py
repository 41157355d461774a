"""A fixed set of real lab runs and every table the analysis job makes of them, kept as the job's answers.

The runs (fixed_runs/runs.tar.xz: manifests and traces only) are real: a herd join at N = 4 on every design
(zk, original, coordinator, cooperative, consumer), a short migrate run, runs in the opt-in modes and a fault
campaign's history. `expected.json.xz` holds every table the job wrote for them. Tables are compared row by
row (`normalise` puts the rows in one order, `differences` compares them): doubles equal to 13 significant digits,
since a sum of doubles may differ in its last bits when its terms are added in another order, while a timestamp
(about 1.8e9 s) must still agree to a fraction of a millisecond.

A change to how the job computes (not what) must leave these answers as they are (test_fixed_set.py). A change
to what it computes rewrites them on purpose:

    .venv/bin/python tests/analysis/fixed_set.py --write
"""

from __future__ import annotations

import argparse
import json
import lzma
import math
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ARCHIVE = HERE / "fixed_runs" / "runs.tar.xz"
EXPECTED = HERE / "fixed_runs" / "expected.json.xz"
PREDICT_TO = 64  # the simulation's sweep end for these runs: small, the predictions' tables are compared all the same


def volatile(table: str, column: str) -> bool:
    """What the simulation measures of itself as it runs (its wall time and memory per design): not an answer."""
    return table == "predictions" and (column.endswith("_wall_s") or column == "peak_rss_mb")


def extract(into: Path) -> Path:
    with tarfile.open(ARCHIVE) as archive:
        archive.extractall(into, filter="data")
    return into / "runs"


REL_TOL, ABS_TOL = 1e-13, 1e-9


def _value(v: Any) -> Any:
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if isinstance(v, dict):
        return {k: _value(x) for k, x in sorted(v.items())}
    if isinstance(v, list | tuple):
        return [_value(x) for x in v]
    if hasattr(v, "asDict"):
        return _value(v.asDict(recursive=True))
    return v


def _rounded(v: Any, digits: int) -> Any:
    if isinstance(v, float):
        return float(f"{v:.{digits}g}")
    if isinstance(v, dict):
        return {k: _rounded(x, digits) for k, x in v.items()}
    if isinstance(v, list):
        return [_rounded(x, digits) for x in v]
    return v


def _order(row: dict[str, Any]) -> tuple[str, str]:
    """Rows sort by their values to 9 significant digits, then to 13: two runs of the job put equal rows in one
    order although their sums may differ in the last bits."""
    return (json.dumps(_rounded(row, 9), sort_keys=True, default=str),
            json.dumps(_rounded(row, 13), sort_keys=True, default=str))


def normalise(table: str, rows: list[dict[str, Any]], runs_root: Path) -> list[dict[str, Any]]:
    """Rows comparable across runs of the job: the extraction directory taken out of paths, volatile columns
    left out, and the rows in one order."""
    root = str(runs_root)
    out = []
    for row in rows:
        clean = {}
        for key, value in row.items():
            if volatile(table, key):
                continue
            clean[key] = _value(value.replace(root, "<runs>") if isinstance(value, str) else value)
        out.append(clean)
    return sorted(out, key=_order)


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def differences(want: list[dict[str, Any]], found: list[dict[str, Any]], limit: int = 5) -> list[str]:
    """What differs between two normalised tables (empty: the same), at most `limit` rows described."""
    if len(want) != len(found):
        return [f"{len(want)} rows expected, {len(found)} found"]
    out = []
    for i, (a, b) in enumerate(zip(want, found, strict=True)):
        if not _close(a, b):
            keys = sorted(set(a) | set(b))
            out.append(f"row {i}: " + ", ".join(f"{k}: {a.get(k)!r} != {b.get(k)!r}" for k in keys
                                                 if not _close(a.get(k), b.get(k))))
            if len(out) >= limit:
                break
    return out


def tables(result, spark, runs_root: Path) -> dict[str, list[dict[str, Any]]]:
    return {name: normalise(name, [r.asDict(recursive=True) for r in spark.read.parquet(str(path)).collect()],
                            runs_root)
            for name, path in sorted(result.tables.items())}


def run_job(spark, work: Path) -> tuple[Any, Path]:
    """The job over the fixed set, extracted under `work`: (its result, the runs' directory)."""
    from zkconsumer.lab.analysis.job import analyze

    runs = extract(work)
    return analyze([runs], work / "report", spark, predict_to=PREDICT_TO), runs


def analyse(spark, work: Path) -> tuple[dict[str, list[dict[str, Any]]], Any]:
    result, runs = run_job(spark, work)
    return tables(result, spark, runs), result


def expected() -> dict[str, list[dict[str, Any]]]:
    return json.loads(lzma.decompress(EXPECTED.read_bytes()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite expected.json.xz from this checkout's job")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parents[1]))
    from zkconsumer.lab.analysis.job import session

    spark = session()
    with tempfile.TemporaryDirectory(prefix="fixed-set-") as tmp:
        found, _ = analyse(spark, Path(tmp))
    text = json.dumps(found, sort_keys=True, default=str)
    if args.write:
        EXPECTED.write_bytes(lzma.compress(text.encode()))
        print(f"wrote {EXPECTED}: {len(found)} tables, {sum(map(len, found.values()))} rows")
        return 0
    want = expected()
    differ = {name: differences(want[name], found[name]) if name in want and name in found
              else ["a table of one side only"] for name in sorted(set(want) | set(found))}
    differ = {name: lines for name, lines in differ.items() if lines}
    for name, lines in differ.items():
        print(f"{name}:", *lines, sep="\n  ")
    print("same tables" if not differ else f"tables that differ: {', '.join(differ)}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
