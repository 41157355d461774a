"""The lesson's data: steps, the code that performs each, and the run directories one lesson is built from.

A lesson replays one membership change of one lab case on each design it ran (docs/lesson.md). Every step is one
thing that happened on the wire or in a member, taken from the run's traces (docs/traces.md), with the state
of its design *after* it: the ZooKeeper design's znode tree and members, or the coordinator design's group
state and members. The page only renders these states; all the reasoning about the traces is here in Python.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from zkconsumer.lab.designs import DESIGNS
from zkconsumer.lab.trace import RunDirectory

REPO_ROOT = Path(__file__).resolve().parents[3]


class LessonError(ValueError):
    """The run directory cannot be replayed (missing design, no membership change, ...)."""


@dataclass(frozen=True)
class CodeRef:
    """Where this repo performs a step: a file relative to the repo root, a line, and the qualified name."""

    path: str
    line: int
    name: str

    def href(self, page_dir: Path) -> str:
        """A link from a page written in `page_dir` to the source line (works from a checkout)."""
        return f"{os.path.relpath(REPO_ROOT / self.path, page_dir)}#L{self.line}"


@cache
def code_ref(target: Callable[..., Any] | type) -> CodeRef:
    """The file and first line of a function or class, computed with `inspect` so links follow the source."""
    obj = inspect.unwrap(target)
    source = Path(inspect.getsourcefile(obj) or "").resolve()
    _, line = inspect.getsourcelines(obj)
    try:
        path = source.relative_to(REPO_ROOT).as_posix()
    except ValueError:  # an installed copy outside the checkout: still name the module path
        path = source.as_posix()
    return CodeRef(path, line, obj.__qualname__)


@dataclass
class Step:
    """One step of one design, and that design's state after it."""

    design: str  # a design of zkconsumer/lab/designs.py
    t: float  # seconds since this design's membership change
    kind: str  # e.g. "notify", "reads", "claim", "JoinGroup-request", "state"
    title: str  # what happened, one line
    explain: str  # why it matters, one line
    code: CodeRef | None  # the function of this repo that performs (or models) it
    kafka: str  # the Kafka source it mirrors (ZookeeperConsumerConnector.scala, GroupCoordinator.scala)
    member: str | None = None
    detail: list[str] = field(default_factory=list)  # e.g. the znodes a read step read
    arrow: dict[str, str] | None = None  # {"src", "dst", "label", "tone"}: drawn between member and server
    state: dict[str, Any] = field(default_factory=dict)  # the design's state after this step

    def to_json(self, page_dir: Path) -> dict[str, Any]:
        data = asdict(self)
        data["code"] = None if self.code is None else {**asdict(self.code), "href": self.code.href(page_dir)}
        return data


@dataclass
class DesignReplay:
    """One design's side: its initial state (at the change), its steps, and what the run was."""

    design: str
    run_dir: Path
    change: dict[str, Any]  # the membership record replayed
    initial: dict[str, Any]
    steps: list[Step]
    stable_s: float | None  # the orchestrator's time to stable for this change, if it settled
    bad_lines: int = 0  # trace lines of the run the replay could not read (event_log.LineErrors)


@dataclass
class Lesson:
    scenario: str
    case: str
    change_index: int
    designs: dict[str, DesignReplay]
    timeline: list[dict[str, Any]]  # merged by t: {"design", "index"} per slider position


@dataclass(frozen=True)
class RunPair:
    case_dir: Path
    runs: dict[str, Path]  # design -> run directory
    manifests: dict[str, dict[str, Any]]


def find_runs(path: Path, case: str | None = None) -> RunPair:
    """The run directories of one case: `path` is a `lab run --out` directory, a case directory or a run
    directory. The first case (sorted) with a run of the most designs wins unless `case` names one."""
    path = Path(path)
    by_case: dict[Path, dict[str, Path]] = {}
    for manifest_path in sorted(path.glob("**/manifest.json")):
        run_dir = manifest_path.parent
        manifest = RunDirectory.load(run_dir)
        if case is not None and manifest.get("case") != case:
            continue
        by_case.setdefault(run_dir.parent, {})[manifest["design"]] = run_dir
    if not by_case:
        raise LessonError(f"{path}: no lab run directory (manifest.json) found" + (f" for case {case}" if case else ""))
    # the first case (sorted) with the most designs (up to all five generations of designs.py)
    case_dir = max(by_case, key=lambda c: len(set(by_case[c]) & set(DESIGNS)))
    runs = by_case[case_dir]
    return RunPair(case_dir, runs, {d: RunDirectory.load(p) for d, p in runs.items()})


def short_thread(thread_id: str) -> str:
    """`lab-lesson-202e4f_m0-0` -> `m0-0`: a consumer thread id without its group prefix (0.8.2 builds it as
    `<group>_<consumer.id>-<stream>`, ZookeeperConsumerConnector.consumerIdString)."""
    return thread_id.rsplit("_", 1)[-1]


def member_of_thread(thread_id: str) -> str:
    return short_thread(thread_id).rsplit("-", 1)[0]


def znode(path: str | None) -> str:
    """A wire path from `/consumers/...` or `/brokers/...` on (a member connecting with a chroot, as the lab's
    members did before they moved to the broker's ZooKeeper root, sends its paths with the chroot in front)."""
    if not path:
        return ""
    for root in ("/consumers/", "/brokers/"):
        at = path.find(root)
        if at >= 0:
            return path[at:]
    return path


def n_partitions(n: int) -> str:
    """`1 partition`, `3 partitions`: step titles count partitions."""
    return f"{n} partition" + ("" if n == 1 else "s")


def partition_order(p: str) -> tuple[str, int]:
    """Sort `topic/partition` names by topic, then partition number."""
    topic, _, number = p.rpartition("/")
    return topic, int(number) if number.isdigit() else -1
