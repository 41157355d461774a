"""A lifeline for `cluster up`: the servers it starts outlive it once it succeeds, but not when it is killed.

The servers run detached (their own sessions), so nothing stops them if `cluster up` dies by SIGKILL half-way:
no `finally` runs. This watchdog, a separate process reading a pipe from `cluster up`, does it instead:

    watching ──"watch PID MARKER"──▶ watching (one more server to stop)
       │  └────"release"──────────▶ exit, servers keep running (the start succeeded)
       └─ EOF (the parent died, however) ─▶ stop every watched server, exit

Servers are stopped only while their command line still holds the marker they were started with, so a recycled pid
is never signalled (`process.is_running`).
"""

from __future__ import annotations

import subprocess
import sys
from typing import IO

from zkconsumer.embedded.process import ProcessRecord, kill_process


class Lifeline:
    """The parent's end: `watch` each server as it starts, `release` once all are up."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "zkconsumer.embedded.lifeline"], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
        )
        self._pipe: IO[bytes] = self._proc.stdin  # type: ignore[assignment]

    def watch(self, record: ProcessRecord) -> None:
        self._send(f"watch {record.pid} {record.marker}\n")

    def release(self) -> None:
        """The start succeeded: the watchdog exits and leaves the servers running."""
        self._send("release\n")
        self._close()

    def cut(self) -> None:
        """The start failed and the caller stops the servers itself: the watchdog stops what is left."""
        self._close()

    def _send(self, line: str) -> None:
        self._pipe.write(line.encode())
        self._pipe.flush()

    def _close(self) -> None:
        try:
            self._pipe.close()
        except OSError:
            pass
        self._proc.wait(timeout=60)


def main() -> int:
    watched: list[ProcessRecord] = []
    for line in sys.stdin:
        word, _, rest = line.strip().partition(" ")
        if word == "release":
            return 0
        if word == "watch":
            pid, _, marker = rest.partition(" ")
            watched.append(ProcessRecord(name="server", pid=int(pid), marker=marker, log=""))
    for record in reversed(watched):  # brokers before ZooKeeper, the reverse of their start
        kill_process(record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
