"""Build a lesson from one lab case: every design's steps (up to five, designs.py), merged on one timeline.

    lesson = build_lesson(Path("results/lesson"))     # a `lab run --out` directory, a case or a run directory
    lesson.designs["zk"].steps[3].title, lesson.designs["coordinator"].steps[-1].state["group"]

Each design's time starts at its own membership change (the designs run one after the other, on the same
schedule), so the slider walks the replays side by side on a common "seconds since the change" axis.
"""

from __future__ import annotations

from pathlib import Path

from zkconsumer.event_log import LineErrors
from zkconsumer.lab.designs import DESIGNS
from zkconsumer.lab.lesson.coop_steps import build_cooperative
from zkconsumer.lab.lesson.coord_steps import build_coordinator
from zkconsumer.lab.lesson.kip848_steps import build_consumer_protocol
from zkconsumer.lab.lesson.model import DesignReplay, Lesson, LessonError, find_runs
from zkconsumer.lab.lesson.original_steps import build_original
from zkconsumer.lab.lesson.replay import change_window, load_records
from zkconsumer.lab.lesson.zk_steps import build_zk

BUILDERS = {"zk": build_zk, "original": build_original, "coordinator": build_coordinator,
            "cooperative": build_cooperative, "consumer": build_consumer_protocol}
# the page's columns, left to right, in generation order: ours, the original, eager, cooperative, consumer protocol.
# Only designs with a builder: consumer-java has none yet (its pane would need the page's texts for it, and steps
# that cite the Java client rather than librdkafka's callbacks), so a case that ran it is replayed without it.
DESIGN_ORDER = tuple(d for d in DESIGNS if d in BUILDERS)


def build_design(run_dir: Path, design: str, step: int | None = None) -> DesignReplay:
    errors = LineErrors()
    records = load_records(run_dir, errors)
    if not records:
        raise LessonError(f"{run_dir}: no trace records")
    window = change_window(records, step)
    initial, steps = BUILDERS[design](records, window)
    return DesignReplay(design, run_dir, window.changes[0], initial, steps, window.stable_s, errors.count)


def build_lesson(path: Path, *, case: str | None = None, step: int | None = None) -> Lesson:
    """`step`: the churn step to replay (docs/scenarios.md numbers them from 0); default the first one."""
    pair = find_runs(path, case)
    designs = {d: build_design(pair.runs[d], d, step) for d in DESIGN_ORDER if d in pair.runs}
    manifest = next(iter(pair.manifests.values()))
    change_step = next(iter(designs.values())).change["step"]
    return Lesson(manifest.get("scenario", "?"), manifest.get("case", "?"), change_step, designs,
                  merge_timeline(designs))


def merge_timeline(designs: dict[str, DesignReplay]) -> list[dict[str, object]]:
    """Every step of every design, ordered by time since its change (ties: in DESIGN_ORDER)."""
    entries = [(s.t, DESIGN_ORDER.index(d), i) for d, replay in designs.items() for i, s in enumerate(replay.steps)]
    return [{"design": DESIGN_ORDER[order], "index": i, "t": t} for t, order, i in sorted(entries)]
