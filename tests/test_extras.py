"""A missing extra is one line naming it (zkconsumer/extras.py), from every command that needs one; in-process, with
the extra's modules made to look absent (tests/test_install_without_extras.py does it for real, in a fresh venv)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from zkconsumer import extras
from zkconsumer.cli import main


@pytest.fixture
def without(monkeypatch: pytest.MonkeyPatch):
    """without(extra): every module of `extra` looks uninstalled to zkconsumer.extras."""

    def hide(extra: str) -> None:
        hidden = set(extras.EXTRAS[extra])
        real = extras._installed
        monkeypatch.setattr(extras, "_installed", lambda module: module not in hidden and real(module))

    return hide


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def one_line(result, extra: str, what: str, note: str = "") -> None:
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr == (f"error: {what} needs the '{extra}' extra: pip install 'zkconsumer[{extra}]'"
                             + (f" ({note})" if note else "") + "\n")


def test_require_names_the_extra_and_its_first_missing_module(without) -> None:
    extras.require("lab", "x")  # installed here
    without("lab")
    with pytest.raises(extras.MissingExtraError, match=r"^x needs the 'lab' extra: pip install 'zkconsumer\[lab\]'$") \
            as caught:
        extras.require("lab", "x")
    assert caught.value.module == "pyspark" and extras.missing("lab") == "pyspark"
    assert extras.missing("tls") is None


@pytest.mark.parametrize("args", [("lab",), ("lab", "--help"), ("lab", "run", "herd", "--design", "all"),
                                  ("lab", "list", "-x")])
def test_lab_without_its_extra_is_one_line_whatever_the_arguments(without, args) -> None:
    without("lab")
    one_line(run(*args), "lab", "zkconsumer lab")


def test_help_lists_the_lab_as_needing_its_extra(without) -> None:
    without("lab")
    result = run("--help")
    assert result.exit_code == 0
    assert "(needs the 'lab' extra)" in result.stdout and "consume" in result.stdout


def test_demo_without_the_lab_extra(without) -> None:
    without("lab")
    one_line(run("demo"), "lab", "zkconsumer demo", "`zkconsumer demo --consumer` needs none")


def test_cluster_up_tls_and_kraft_check_before_starting_anything(without, tmp_path) -> None:
    without("tls")
    without("lab")
    one_line(run("cluster", "up", "--tls", "--dir", str(tmp_path / "c")), "tls", "zkconsumer cluster up --tls")
    one_line(run("cluster", "up", "--kraft", "--dir", str(tmp_path / "c")), "lab", "zkconsumer cluster up --kraft")
    assert not (tmp_path / "c").exists()


def test_live_watch_without_its_extra(without) -> None:
    without("watch")
    one_line(run("watch", "--group", "g", "--zookeeper", "127.0.0.1:1"), "watch",
             "the live view of zkconsumer watch", "`zkconsumer watch --once` needs none")


def test_the_demo_help_shows_the_main_jobs_sizes() -> None:
    from zkconsumer.cli_consumer import MAIN_JOB_VALUES
    from zkconsumer.lab.main_job import DEFAULT_VALUES

    assert MAIN_JOB_VALUES == DEFAULT_VALUES
    assert f"[default: ({DEFAULT_VALUES})]" in " ".join(run("demo", "--help").stdout.split())
