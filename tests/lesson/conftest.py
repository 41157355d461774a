"""The shipped `lesson` scenario's lab runs, each design run at most once in the test session, on the suite's shared
lab servers (`shared_lab_servers`, tests/conftest.py): test_lesson_page.py replays the zk and coordinator designs
(and the original as a third column), test_lesson_generations.py the coordinator, cooperative and consumer designs;
the one coordinator run serves both.

A design runs when a test first needs it, so a selection of tests (`-k`) runs only the designs it replays, and a
failed run of one design (the original's JVM members, say) fails only the tests that need that design. A module
builds its lesson from `LessonRuns.view` (lesson_runs.py), a results directory holding copies of just its designs'
runs.
"""

from __future__ import annotations

import pytest
from lesson_runs import LessonRuns

from zkconsumer.lab.runs.servers import LabServers


@pytest.fixture(scope="session")
def lesson_runs(shared_lab_servers: LabServers, tmp_path_factory: pytest.TempPathFactory) -> LessonRuns:
    return LessonRuns(shared_lab_servers, tmp_path_factory.mktemp("lesson-runs"))
