"""The JVM jars' cache (zkconsumer/embedded/jvm.py): resolved once, verified, reused with no resolver at all, and
every failure one line that says what to install or retry."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from zkconsumer.embedded import jvm

pytestmark = pytest.mark.slow

RESOLVE = [sys.executable, "-m", "zkconsumer.embedded.jvm", jvm.KAFKA_BROKER]


def _path_with(fake_bin: Path | None) -> str:
    """PATH with java but without any mvn, plus `fake_bin` first."""
    java_dir = str(Path(shutil.which("java")).resolve().parent)
    keep = [d for d in os.environ["PATH"].split(os.pathsep) if d and not (Path(d) / "mvn").exists()]
    return os.pathsep.join(([str(fake_bin)] if fake_bin else []) + keep + [java_dir])


def _fake_mvn(tmp_path: Path, script: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mvn").write_text("#!/bin/sh\n" + script)
    (bin_dir / "mvn").chmod(0o755)
    return bin_dir


def _resolve(tmp_path: Path, fake_bin: Path | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": _path_with(fake_bin), "ZKCONSUMER_JVM_CACHE": str(tmp_path / "cache")}
    return subprocess.run(RESOLVE, capture_output=True, text=True, timeout=60, env=env, check=False)


def test_missing_maven_is_one_line_naming_the_install(tmp_path: Path):
    result = _resolve(tmp_path, None)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "apt-get install maven" in result.stderr, result.stderr


def test_failed_download_is_one_line_naming_the_log_and_leaves_no_entry(tmp_path: Path):
    fake = _fake_mvn(tmp_path, 'echo "[ERROR] Failed to execute goal: Could not transfer artifact x:y:1"\nexit 1\n')
    result = _resolve(tmp_path, fake)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Could not transfer artifact" in result.stderr and "retry" in result.stderr
    assert ".resolve.log" in result.stderr
    assert not [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]  # no half entry to be trusted later


def test_a_resolved_entry_is_reused_without_maven_and_a_tampered_jar_is_not(tmp_path: Path, monkeypatch):
    real = jvm.classpath(jvm.KAFKA_BROKER)  # resolved by `make test` before the suite runs
    cache = tmp_path / "cache"
    shutil.copytree(real.directory, cache / real.directory.name)
    monkeypatch.setenv("ZKCONSUMER_JVM_CACHE", str(cache))
    # A resolver that would fail if called: the verified entry must be used as it is (offline reuse).
    monkeypatch.setenv("PATH", _path_with(_fake_mvn(tmp_path, "echo '[ERROR] called' ; exit 1\n")))
    reused = jvm.classpath(jvm.KAFKA_BROKER)
    assert reused.directory == cache / real.directory.name
    assert [j.name for j in reused.jars] == [j.name for j in real.jars]
    assert reused.version_of("kafka_2.13") == real.version_of("kafka_2.13") is not None

    with open(reused.jars[0], "ab") as jar:  # one byte changed: the entry no longer verifies
        jar.write(b"\0")
    with pytest.raises(jvm.EmbeddedError, match=r"\[ERROR\] called"):
        jvm.classpath(jvm.KAFKA_BROKER)
