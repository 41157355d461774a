"""The per-change counts of real lab runs (`lab_counts.json`), so the tests need no lab output on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LAB_COUNTS = Path(__file__).with_name("lab_counts.json")


def lab_runs(design: str) -> dict[int, dict[str, Any]]:
    """The real herd runs of one design, by N (the settled group's size before one member joined)."""
    runs = json.loads(LAB_COUNTS.read_text())["runs"]
    return {run["members"]: run for run in runs if run["design"] == design}
