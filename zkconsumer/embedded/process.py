"""Background server processes owned by the embedded cluster: start detached, find free ports, stop by pid.

Everything here is deliberately small and explicit: a process we start is recorded with its pid and a
marker that must appear in its command line, so that `stop` never signals a pid that the OS has since
recycled for somebody else's process.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from zkconsumer.errors import UserError


class EmbeddedError(UserError, RuntimeError):
    """A one-line, user-facing failure of the embedded cluster (the CLI prints it and exits non-zero)."""


@dataclass
class ProcessRecord:
    """What we need to find and stop a background server later, possibly from another process."""

    name: str
    pid: int
    marker: str  # a string that must appear in /proc/<pid>/cmdline (guards against pid reuse)
    log: str

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ProcessRecord:
        return cls(name=data["name"], pid=int(data["pid"]), marker=data["marker"], log=data["log"])


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll `condition` until it is true or `timeout` seconds pass; returns the last result."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def wait_or_kill(proc: subprocess.Popen, timeout: float, what: str, kill_wait: float = 10.0) -> int:
    """Wait up to `timeout` for a child asked to stop; SIGKILL it if it has not (with a warning naming `what`).
    Returns its exit status."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        logging.getLogger(__name__).warning("%s did not stop within %.0f s: killing it", what, timeout)
        proc.kill()
        return proc.wait(kill_wait)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def check_port_free(port: int, option: str, host: str = "127.0.0.1") -> None:
    """Fail early, naming the option to change, when a user-chosen port is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise EmbeddedError(
                    f"port {port} on {host} is already in use: choose another with {option} or stop what holds it"
                ) from None
            raise


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def four_letter_word(port: int, word: str, host: str = "127.0.0.1", timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command and return the whole answer ('' if unreachable)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while True:
                data = sock.recv(4096)
                if not data:
                    break
                chunks.append(data)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def java_executable() -> str:
    """The java binary to use, checked to be version 17 or newer."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not candidate or not Path(candidate).exists():
        raise EmbeddedError(
            "java not found on PATH (or JAVA_HOME): install Java 17 or newer, "
            "e.g. apt-get install openjdk-17-jre-headless"
        )
    try:
        out = subprocess.run([candidate, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EmbeddedError(f"could not run {candidate} -version: {exc}") from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        raise EmbeddedError(f"could not read the Java version from `{candidate} -version`: {out.stderr.strip()!r}")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_x" style
        major = int(match.group(2))
    if major < 17:
        raise EmbeddedError(f"{candidate} is Java {major}; the embedded ZooKeeper needs Java 17 or newer")
    return candidate


def start_detached(
    name: str, argv: Sequence[str], log_path: Path, marker: str, cwd: Path | None = None
) -> ProcessRecord:
    """Start a server in its own session (so a terminal's Ctrl-C does not reach it) with output to a log."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(
                list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=cwd, start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            raise EmbeddedError(f"could not start {name} ({argv[0]}): {exc}") from None
    return ProcessRecord(name=name, pid=proc.pid, marker=marker, log=str(log_path))


def _cmdline(pid: int) -> str | None:
    """The process's command line; None if it is gone. Retries briefly because a process in the middle of
    execve (the java launcher re-execs itself) shows an empty command line for a moment."""
    for _ in range(50):
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        if raw:
            return raw.replace(b"\0", b" ").decode(errors="replace")
        time.sleep(0.01)
    return ""


def is_running(record: ProcessRecord) -> bool:
    """True if the pid is alive and still the process we started (its command line holds our marker)."""
    try:
        state = Path(f"/proc/{record.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    if state == "Z":
        return False
    cmdline = _cmdline(record.pid)
    return cmdline is not None and record.marker in cmdline


def _reap(pid: int) -> None:
    # Our own children must be waited for, or they linger as zombies until we exit.
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop_process(record: ProcessRecord, grace: float = 5.0) -> bool:
    """SIGTERM, then SIGKILL after `grace` seconds. Returns True if something of ours was running."""
    if not is_running(record):
        _reap(record.pid)
        return False
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.kill(record.pid, sig)
        except ProcessLookupError:
            break
        if wait_until(lambda: (_reap(record.pid), not is_running(record))[1], wait):
            break
    _reap(record.pid)
    if is_running(record):
        raise EmbeddedError(f"could not stop {record.name} (pid {record.pid}); kill it by hand")
    return True


def kill_process(record: ProcessRecord) -> None:
    """SIGKILL without grace (tests use it to crash a server); waits until it is gone."""
    if is_running(record):
        os.kill(record.pid, signal.SIGKILL)
        wait_until(lambda: (_reap(record.pid), not is_running(record))[1], 10.0)


def log_tail(path: str | Path, lines: int = 5) -> str:
    try:
        text = Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])
