"""The analysis driver's class-data archive (zkconsumer/lab/analysis/class_archive.py): keyed by the java and the
Spark jars it was made with, named in the driver's options only when it exists, and mapped by the JVM the
project's sessions start."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from zkconsumer.lab.analysis import class_archive
from zkconsumer.lab.analysis.local_spark import COLLECTOR, LATE_C2, driver_java_options


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A made-up java home and Spark home (a few jars), and a cache of the test's own."""
    java_home, spark_home = tmp_path / "jdk", tmp_path / "spark"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_text("#!/bin/sh\n")
    (java_home / "release").write_text('JAVA_VERSION="17.0.9"\n')
    (spark_home / "jars").mkdir(parents=True)
    for name in ("spark-core_2.13-4.0.0.jar", "spark-sql_2.13-4.0.0.jar"):
        (spark_home / "jars" / name).write_bytes(b"x" * 10)
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    monkeypatch.setenv("SPARK_HOME", str(spark_home))
    monkeypatch.setenv("ZKCONSUMER_JVM_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_the_archive_is_keyed_by_the_java_and_the_spark_jars(install: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = class_archive.archive_path()
    assert first is not None and first.parent == install / "cache" / "spark-cds"
    assert class_archive.archive_path() == first  # the same install: the same file
    (install / "spark" / "jars" / "spark-sql_2.13-4.0.0.jar").write_bytes(b"x" * 11)  # another build of a jar
    second = class_archive.archive_path()
    assert second != first
    (install / "jdk" / "release").write_text('JAVA_VERSION="21.0.1"\n')  # another java
    third = class_archive.archive_path()
    assert third not in (first, second)
    # the same jars in another directory (another venv): the JVM would refuse the archive of the first
    (install / "spark").rename(install / "spark2")
    monkeypatch.setenv("SPARK_HOME", str(install / "spark2"))
    assert class_archive.archive_path() not in (first, second, third)


def test_only_archives_no_driver_maps_again_are_pruned(install: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ours = class_archive.archive_path()
    assert ours is not None
    ours.parent.mkdir(parents=True)
    other_venv = install / "other-spark"
    (other_venv / "jars").mkdir(parents=True)

    def archive(name: str, source: Path | None) -> Path:
        path = ours.with_name(f"{name}{class_archive.SUFFIX}")
        path.write_bytes(b"archive")
        if source is not None:
            path.with_suffix(class_archive.SOURCE).write_text(f"{source}\n")
        return path

    superseded = archive("old-of-ours", install / "spark" / "jars")  # this install before it changed
    gone = archive("removed-venv", install / "nowhere" / "jars")
    unknown = archive("no-source", None)
    alive = archive("other-venv", other_venv / "jars")  # another install that still exists: still mapped there
    ours.write_bytes(b"archive")
    class_archive._prune(ours)
    assert ours.exists() and alive.exists()
    assert not superseded.exists() and not gone.exists() and not unknown.exists()


def test_the_driver_maps_the_archive_only_when_it_exists(install: Path) -> None:
    path = class_archive.archive_path()
    assert path is not None
    assert class_archive.java_options() == ""
    assert driver_java_options() == f"{COLLECTOR} {LATE_C2}"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    assert f"-XX:SharedArchiveFile={path}" in driver_java_options().split()
    # options given: the caller's, not the archive's
    assert driver_java_options("-Xmx1g") == f"{COLLECTOR} {LATE_C2} -Xmx1g"


def test_no_java_no_archive(install: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(install / "nowhere"))
    assert class_archive.archive_path() is None
    assert class_archive.java_options() == ""


@pytest.mark.slow
def test_the_test_runs_spark_jvm_maps_the_archive(spark: SparkSession) -> None:
    """The session every Spark test shares was started by local_session, as the simulation's are: its JVM has the
    archive `make jvm` built mapped into its memory, not only named on its command line."""
    path = class_archive.archive_path()
    if path is None or not path.is_file():
        pytest.skip("missing tool: the analysis driver's class-data archive (make jvm builds it)")
    jvm = spark.sparkContext._gateway.proc.pid
    maps = Path(f"/proc/{jvm}/maps").read_text()
    assert str(path) in maps
