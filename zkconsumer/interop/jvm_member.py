"""A small Java program run as a child JVM that speaks JSON lines, as the differential tests use it (docs/interop.md).

Both reference members, the original 0.8.2.2 connector (`original.py`) and Kafka's own Java consumer
(`java_consumer.py`), are such programs: never committed compiled, `build()` compiles a source folder with javac
against a classpath of the pom (`zkconsumer.embedded.jvm`) into the JVM cache, keyed by the sources', the jars' and
the release's hashes, under the cache's file lock; `JvmMember` runs one, reads the events it writes on stdout (one
JSON object a line, written by the shared `JsonLine`) on a named thread, sends it commands on stdin, and stops it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from rebalance.events import parse_partition_key
from zkconsumer.embedded import jvm
from zkconsumer.embedded.process import EmbeddedError

# Class files for Java 11: a newer javac than the java that runs them must not produce unloadable classes.
JAVAC_RELEASE = "11"
JVM_FLAGS = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss1m")


class InteropError(EmbeddedError):
    """A reference member could not be built or run (one line saying why), or its driver reported an error."""


def find_javac(compiles: str) -> str:
    """javac from JAVA_HOME or PATH; without one, a one-line error naming the JDK to install and what it `compiles`."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = str(Path(java_home) / "bin" / "javac") if java_home else shutil.which("javac")
    if not candidate or not Path(candidate).exists():
        raise InteropError("javac not found on PATH (or JAVA_HOME): install a JDK 17, e.g. apt-get install "
                           f"openjdk-17-jdk-headless; it compiles {compiles}")
    return candidate


@dataclass(frozen=True)
class JvmBuild:
    """Compiled classes and the jars they were compiled against; `str()` is the classpath that runs them."""

    classes: Path
    jars: jvm.Classpath

    def __str__(self) -> str:
        return f"{self.classes}:{self.jars}"


def build(jars: jvm.Classpath, source_root: Path, prefix: str, *, javac: Callable[[], str],
          shared: Sequence[Path] = (), into: Path | None = None) -> JvmBuild:
    """Every `.java` file under `source_root`, plus the `shared` ones, compiled against `jars` into
    `into` (the JVM cache's `interop/` by default) as `<prefix>-<hash>`, unless a build of them is there already.

    `javac` finds the compiler, or fails with the caller's own one line on what it is needed for.
    """
    sources = [*shared, *sorted(source_root.rglob("*.java"))]
    # Relative names, so checkouts in different places share one cache entry for the same sources.
    names = [os.path.relpath(source, source_root) for source in sources]
    digest = hashlib.sha256(f"{jars} {JAVAC_RELEASE}".encode())
    for name, source in zip(names, sources, strict=True):
        digest.update(name.encode() + b"\0" + source.read_bytes() + b"\0")
    entry = (into or jvm.cache_root() / "interop") / f"{prefix}-{digest.hexdigest()[:12]}"
    if not (entry / "build.json").is_file():
        entry.parent.mkdir(parents=True, exist_ok=True)
        with open(entry.parent / ".lock", "w") as lock:
            # A second test run waits, then finds the build done.
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (entry / "build.json").is_file():
                _compile(entry, jars, source_root, sources, names, javac)
    return JvmBuild(entry / "classes", jars)


def _compile(entry: Path, jars: jvm.Classpath, source_root: Path, sources: list[Path], names: list[str],
             javac: Callable[[], str]) -> None:
    # Renamed into place only when complete.
    staging = entry.with_name(entry.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        argv = [javac(), "--release", JAVAC_RELEASE, "-Xlint:all,-path", "-Werror", "-encoding", "UTF-8",
                "-d", str(staging / "classes"), "-cp", str(jars), *map(str, sources)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False,
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            first = " | ".join((done.stderr or done.stdout).strip().splitlines()[:3])
            raise InteropError(f"javac failed on {source_root} (exit {done.returncode}): {first}")
        (staging / "build.json").write_text(json.dumps({"sources": names, "jars": [str(j) for j in jars.jars]}))
        shutil.rmtree(entry, ignore_errors=True)
        staging.rename(entry)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class JvmMember:
    """One driver in its own JVM; its events are read by a named thread as they come.

    A subclass builds the command line, starts it with `_spawn`, and keeps what it needs from each event in `_note`
    (called under `_cond`, before the event joins `_events`). The JVM reads our end of a pipe on its stdin and exits
    when it closes, so a test process that dies takes its drivers with it. The reader thread ends when the JVM's
    stdout closes, i.e. when the JVM is stopped, which `stop()`, `kill()` and the context manager do by its PID.
    """

    def __init__(self, label: str, log_path: Path) -> None:
        # `label` names the member in every error, e.g. "original c1" or "java consumer java-1".
        self._label = label
        self.log_path = log_path
        self.spawned_at: float | None = None
        self._events: list[dict] = []
        self._cond = threading.Condition()
        self._eof = False
        self._commands = 0
        self._proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------------------

    def _spawn(self, argv: list[str], thread_name: str) -> None:
        with open(self.log_path, "ab") as log:
            self.spawned_at = time.time()
            # Its own session: a terminal's Ctrl-C reaches the test, which then stops the driver itself.
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                          text=True, encoding="utf-8", bufsize=1, start_new_session=True)
        self._reader = threading.Thread(target=self._read_events, name=thread_name, daemon=True)
        self._reader.start()

    def stop(self, grace: float = 20.0) -> int | None:
        """SIGTERM (the driver's shutdown hook closes its consumer), SIGKILL after `grace` seconds."""
        return self._end(signal.SIGTERM, grace)

    def begin_stop(self) -> None:
        """SIGTERM without waiting, so several drivers stop at once; `stop()` then waits for each."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)

    def kill(self) -> int | None:
        """kill -9: no shutdown, no commit, no leave; the group keeps the member until its session times out."""
        return self._end(signal.SIGKILL, 0.0)

    def _end(self, sig: signal.Signals, grace: float) -> int | None:
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=grace if grace > 0 else 10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if proc.stdin:
            try:
                proc.stdin.close()
            except OSError:
                # The pipe's reader is gone.
                pass
        if self._reader is not None:
            self._reader.join(timeout=10)
        return proc.returncode

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- talking to it -------------------------------------------------------------------------------

    def commit(self, timeout: float = 30.0) -> dict[tuple[str, int], int | None]:
        """`commit ID` on its stdin: the driver commits, then reports the offsets the group holds for the
        partitions it owns (ZooKeeper's for the original, the coordinator's for Kafka's Java consumer)."""
        ident = self._next_id()
        self._send(f"commit {ident}")
        event = self.wait_for(lambda e: e.get("id") == ident or e.get("where") == f"commit {ident}", timeout,
                              f"commit {ident}")
        if event["event"] == "error":
            raise InteropError(f"{self._label}: commit failed: {event['error']}")
        return {parse_partition_key(k): v for k, v in event["offsets"].items()}

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float, what: str = "an event",
                 since: int = 0) -> dict:
        """The first event from index `since` on that satisfies `predicate`; fails early if the JVM exited."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self._events[since:]:
                    if predicate(event):
                        return event
                since = len(self._events)
                remaining = deadline - time.monotonic()
                if self._eof or remaining <= 0:
                    state = "exited" if self._eof else f"no {what} after {timeout:.0f} s"
                    raise InteropError(f"{self._label}: {state} waiting for {what}; "
                                       f"last events {self._events[-3:]}; log {self.log_path}: {self.log_tail()}")
                self._cond.wait(remaining)

    def log_tail(self, lines: int = 5) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _next_id(self) -> str:
        with self._cond:
            self._commands += 1
            return str(self._commands)

    def _send(self, command: str) -> None:
        if self._proc is None or self._proc.stdin is None or self._proc.poll() is not None:
            raise InteropError(f"{self._label} is not running (log: {self.log_path})")
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()

    def _read_events(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            for line in self._proc.stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    # Not an event line (the driver sends everything else to stderr).
                    continue
                with self._cond:
                    self._note(event)
                    self._events.append(event)
                    self._cond.notify_all()
        finally:
            with self._cond:
                self._eof = True
                self._cond.notify_all()

    def _note(self, event: dict) -> None:
        """What a subclass keeps from `event`, under `_cond`; nothing here."""
