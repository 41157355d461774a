"""The tier rule of tests/conftest.py (docs/testing.md, "Tiers"): a test that uses a fixture starting a server, directly
or through another fixture, must say so with its marker, or collection fails naming it and the fix; one asking for
such a fixture by name at run time fails when it does. Each case is a tiny suite run in this process (pytester)
with the suite's conftest as its plugin; the expensive fixture names are defined again in the tiny suite as
stand-ins, so no server ever starts."""

from __future__ import annotations

from pathlib import Path

import pytest

SUITE_CONFTEST = Path(__file__).with_name("conftest.py")

STAND_INS = """
import pytest

@pytest.fixture
def zk_server():
    return "a stand-in"

@pytest.fixture
def ensemble():
    return "a stand-in"

@pytest.fixture
def view(zk_server):
    return zk_server
"""


@pytest.fixture
def tiny(pytester: pytest.Pytester, request: pytest.FixtureRequest):
    """Runs a tiny suite of one test file under the suite's conftest."""
    suite = request.config.pluginmanager.get_plugin(str(SUITE_CONFTEST))
    assert suite is not None and hasattr(suite, "EXPENSIVE_FIXTURES")
    pytester.makeini('[pytest]\nmarkers =\n    slow: s\n    ensemble: e\n    interop: i\n')
    pytester.makeconftest(STAND_INS)

    def run(test_source: str, *args: str) -> pytest.RunResult:
        pytester.makepyfile(test_tiny=f"import pytest\n\n{test_source}")
        return pytester.runpytest(*args, plugins=[suite])

    return run


def test_an_unmarked_test_using_a_server_fixture_fails_collection_naming_it_and_the_fix(tiny) -> None:
    result = tiny("def test_reads(zk_server):\n    assert zk_server\n")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*tests that start a server or process without the marker saying so*",
                                 "*test_tiny.py::test_reads: uses zk_server; add pytest.mark.slow"])
    result.stdout.no_fnmatch_line("*passed*")


def test_the_fixture_may_come_through_another_and_the_run_may_select_other_tests(tiny) -> None:
    # -m "not slow" would deselect a marked test: the unmarked one must be caught before that
    result = tiny("def test_reads(view):\n    assert view\n", "-m", "not slow")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_tiny.py::test_reads: uses zk_server; add pytest.mark.slow"])


def test_with_its_marker_the_test_is_collected_and_runs(tiny) -> None:
    result = tiny("@pytest.mark.slow\ndef test_reads(view):\n    assert view == 'a stand-in'\n")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1)


def test_a_module_marker_does(tiny) -> None:
    result = tiny("pytestmark = pytest.mark.slow\n\ndef test_reads(zk_server):\n    assert zk_server\n")
    result.assert_outcomes(passed=1)


def test_the_server_free_tier_leaves_the_marked_test_out(tiny) -> None:
    result = tiny("@pytest.mark.slow\ndef test_reads(zk_server):\n    assert zk_server\n\ndef test_free():\n    pass\n",
                  "-m", "not slow and not ensemble and not interop")
    result.assert_outcomes(passed=1, deselected=1)


def test_the_ensemble_needs_both_markers(tiny) -> None:
    result = tiny("@pytest.mark.slow\ndef test_three(ensemble):\n    assert ensemble\n")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_tiny.py::test_three: uses ensemble; add pytest.mark.ensemble"])
    both = tiny("@pytest.mark.slow\n@pytest.mark.ensemble\ndef test_three(ensemble):\n    assert ensemble\n")
    both.assert_outcomes(passed=1)


def test_an_interop_test_counts_as_slow(tiny) -> None:
    tiny("@pytest.mark.interop\ndef test_original(zk_server):\n    assert zk_server\n").assert_outcomes(passed=1)


def test_a_server_fixture_asked_for_by_name_fails_its_unmarked_test_before_it_starts(tiny) -> None:
    result = tiny("def test_later(request):\n    request.getfixturevalue('zk_server')\n\n"
                  "@pytest.mark.slow\ndef test_marked(request):\n    request.getfixturevalue('zk_server')\n")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_tiny.py::test_later starts zk_server (asked for by name) without the marker "
                                 "saying so*: add pytest.mark.slow"])
