"""Every page the repository points at exists, and no two pages differ only by case (a reader on a case-insensitive
file system would get one of them)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# a page named as docs/<name>.md anywhere, and a Markdown link to <name>.md (with or without #part) inside a page
NAMED = re.compile(r"\bdocs/([A-Za-z0-9_.\-/]+?\.md)\b")
LINKED = re.compile(r"\]\((?!https?://)([A-Za-z0-9_.\-/]+?\.md)(?:#[^)]*)?\)")


def _sources() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "Makefile", *DOCS.glob("*.md")]
    for package in ("zkconsumer", "rebalance", "fetcher_manager", "benchmarks", "tests"):
        found += (ROOT / package).rglob("*.py")
    return [p for p in found if p.is_file()]


def test_every_page_named_exists() -> None:
    missing = []
    for source in _sources():
        text = source.read_text(encoding="utf-8", errors="replace")
        for name in NAMED.findall(text):
            if not (DOCS / name).is_file():
                missing.append(f"{source.relative_to(ROOT)}: docs/{name}")
        if source.suffix == ".md":
            base = source.parent
            for name in LINKED.findall(text):
                if not (base / name).is_file():
                    missing.append(f"{source.relative_to(ROOT)}: ({name})")
    assert missing == []


def test_no_two_pages_differ_only_by_case() -> None:
    names = [p.name.lower() for p in DOCS.glob("*.md")]
    assert len(names) == len(set(names))
