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
(the java binary Spark will start and its `release` file, and the names and sizes of Spark's jars). A JVM that
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
    for jar in sorted(jars.glob("*.jar")):
        digest.update(f"{jar.name}\0{jar.stat().st_size}\0".encode())
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
            # the child and its JVM have exited, so the file is whole: publish it in one step
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        for old in path.parent.glob(f"*{SUFFIX}"):
            # archives of another java or other Spark jars: never mapped again
            if old != path:
                old.unlink(missing_ok=True)
    return path


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
