"""The shipped `lesson` scenario's lab runs on given servers, each design run at most once (tests/lesson/conftest.py,
`lesson_runs`), and results directories holding copies of just some designs' runs, for `build_lesson`, which replays
every design of a case directory (zkconsumer/lab/lesson/model.py, `find_runs`)."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterable
from pathlib import Path

from zkconsumer.lab.runs.servers import LabServers
from zkconsumer.lab.runs.session import LabSession
from zkconsumer.lab.runs.summary import RunSummary
from zkconsumer.lab.scenarios.loading import expand_cases, shipped_scenario


class LessonRuns:
    """The lesson's runs of one test session, made on `servers` into `root` as tests ask for them."""

    def __init__(self, servers: LabServers, root: Path) -> None:
        self.servers = servers
        self.root = root
        self.made: dict[str, RunSummary] = {}
        self._sessions = itertools.count()

    def summaries(self, designs: Iterable[str]) -> dict[str, RunSummary]:
        """design -> the summary of its run; the designs not run yet are run now, together in one lab session."""
        wanted = list(designs)
        todo = [d for d in wanted if d not in self.made]
        if todo:
            scenario = shipped_scenario("lesson")
            # A results directory per lab session: one that failed half-way leaves run directories that a later
            # session into the same directory would be refused for (LabSession.refuse_taken_out).
            out = self.root / f"session-{next(self._sessions)}"
            for summary in LabSession(scenario, expand_cases(scenario), todo, out, servers=self.servers).run():
                self.made[summary.design] = summary
        return {d: self.made[d] for d in wanted}

    def view(self, designs: Iterable[str]) -> Path:
        """A results directory with a copy of the run of each of `designs` (run now if not yet), side by side in
        one case directory as one lab session of those designs writes them; made once per set of designs."""
        wanted = list(designs)
        out = self.root / "views" / "+".join(wanted)
        if out.exists():
            return out
        for summary in self.summaries(wanted).values():
            case_dir, run_dir = summary.path.parent, summary.path  # <session>/<case>/<design>
            shutil.copytree(run_dir, out / case_dir.name / run_dir.name)
        return out
