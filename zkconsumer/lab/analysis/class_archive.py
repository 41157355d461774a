"""The class-data archive of the analysis driver's JVM: Spark's classes as they were loaded by a training run, mapped
from one file when a later driver starts instead of being found, read, parsed and verified jar by jar again.

    absent ──build (class_training.py in a child process, -XX:ArchiveClassesAtExit)──▶ TMP ──rename──▶ ready
      ▲                                                                                                       │
      └──────────────────── another java or other Spark jars: a new key, so a new file ◀───────────────────────┘

A driver of the lab's analysis is short-lived and CPU-bound on two cores: of `make demo`'s analysis the JVM spends
most of its CPU loading and compiling Spark rather than on the traces (docs/analysis.md, "What the job costs").
A dynamic archive (JDK 13+, JEP 350) holds the classes the application class loader loaded, so a driver started
with `-XX:SharedArchiveFile` skips that work for Spark's own classes; the classes Spark generates while it runs
are not archived and are compiled as before.

The archive is only valid for the JVM and the class path it was made with, so its file name is a hash of both
(the java binary Spark will start and its `release` file, and the directory, names, sizes and times of Spark's
jars: the JVM checks each jar of the class path against the archive's record of it). A JVM that
finds the archive does not match its class path or its build does not refuse to start: it runs without it
(-Xshare:auto, the default), and its CDS warnings are switched off so they cannot reach a user's terminal.

Built by `make jvm` (`python -m zkconsumer.lab.analysis.class_archive`), in the JVM cache beside the broker's jars
(zkconsumer/embedded/jvm.py, `cache_root`); nothing needs it: without the file a driver starts as before.

The training run is a child process because the archive is written when the JVM exits, and the JVM exits after
the Python process that started it has closed the gateway's pipe; the parent renames the file only once the child
(and so the JVM) is gone, so a reader never maps a half-written archive.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from zkconsumer.embedded.jvm import cache_root

SUFFIX = ".jsa"
SOURCE = ".jars"  # beside each archive: the Spark jars directory it was made from
# CDS reports why an archive was not mapped (another class path, another JVM build) as warnings on stdout: the
# driver then simply runs without it, and the warning would only confuse a user.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
_TRAINING_TIMEOUT_S = 600
# the training run's module, named rather than imported: it starts an analysis, which maps this module's archive
_TRAINING = "zkconsumer.lab.analysis.class_training"


def _java() -> Path | None:
    """The java binary Spark's launcher starts: $JAVA_HOME/bin/java, else `java` on PATH (bin/spark-class)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def _spark_jars() -> Path:
    """Spark's jars: $SPARK_HOME/jars when set (pyspark then starts that installation), else pyspark's own."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home) / "jars"
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def archive_path() -> Path | None:
    """Where the archive of this java and these Spark jars is (or would be); None without a java to key it by."""
    java = _java()
    jars = _spark_jars()
    if java is None or not jars.is_dir():
        return None
    digest = hashlib.sha256()
    stat = java.stat()
    digest.update(f"{java}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    release = java.parent.parent / "release"
    if release.is_file():
        digest.update(release.read_bytes())
    # the JVM checks the class path the archive was made with, path by path, size and time: another install of the
    # same Spark (another venv, or the same one reinstalled) is another archive
    digest.update(f"{jars}\0".encode())
    for jar in sorted(jars.glob("*.jar")):
        stat = jar.stat()
        digest.update(f"{jar.name}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return cache_root() / "spark-cds" / f"{digest.hexdigest()[:20]}{SUFFIX}"


def java_options() -> str:
    """The driver's JVM options for the archive: mapping it when it exists, else nothing."""
    path = archive_path()
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def build(*, force: bool = False) -> Path | None:
    """Make the archive unless it exists (or `force`); returns its path, None when there is no java to key it."""
    path = archive_path()
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / ".lock", "w") as lock:
        # one builder at a time: a second `make jvm` waits and then finds the file
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.is_file() and not force:
            return path
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        try:
            # Spark's start-up chatter stays in the child's log; the parent shows it only when the training fails
            child = subprocess.run([sys.executable, "-m", _TRAINING, str(tmp)],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   check=False, text=True, timeout=_TRAINING_TIMEOUT_S)
            if child.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
                tail = "\n".join(child.stdout.splitlines()[-30:])
                raise RuntimeError(f"the class-data archive's training run failed (exit {child.returncode}); the "
                                   f"analysis runs without an archive. Its last lines:\n{tail}")
            path.with_suffix(SOURCE).write_text(f"{_spark_jars()}\n", encoding="utf-8")
            # the child and its JVM have exited, so the file is whole: publish it in one step
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        _prune(path)
    return path


def _prune(kept: Path) -> None:
    """Remove the archives no driver will map again: those of this Spark install before it changed, and those
    whose install is gone (a removed venv). Each archive's install is in its SOURCE file beside it."""
    jars = _spark_jars()
    for old in kept.parent.glob(f"*{SUFFIX}"):
        source = old.with_suffix(SOURCE)
        recorded = Path(source.read_text(encoding="utf-8").strip()) if source.is_file() else None
        if old != kept and (recorded is None or recorded == jars or not recorded.is_dir()):
            old.unlink(missing_ok=True)
            source.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the analysis driver's class-data archive (docs/analysis.md)")
    parser.add_argument("--force", action="store_true", help="build it again even if it exists")
    args = parser.parse_args(argv)
    began = time.monotonic()
    existed = (archive_path() or Path("/nonexistent")).is_file()
    try:
        path = build(force=args.force)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        # not fatal for `make jvm`: without the archive every analysis still runs, its JVM only starts slower
        print(f"class-data archive not built: {exc}", file=sys.stderr)
        return 0
    if path is None:
        print("class-data archive: no java found (JAVA_HOME or PATH); the analysis runs without one")
    elif existed and not args.force:
        print(f"class-data archive: {path} (up to date)")
    else:
        print(f"class-data archive: {path} built in {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
