"""The process life every broker-side lab member shares (`python -m zkconsumer.lab.<kind>_member SETTINGS_JSON|-`):
settings as one JSON argument (or `-`, the first line of stdin), logging tagged with the member's name, its own
trace file, and one way to end: SIGTERM, SIGINT, a `stop` line on stdin or the end of stdin (the driver is gone)
is a graceful leave; SIGKILL kills and SIGSTOP pauses, which the driver sends to the process itself.

    settings ──parse──▶ trace opened ──start──▶ running ──stop asked, or the member ended──▶ stopped, trace closed

The members themselves (members/coordinator.py, members/librdkafka.py, members/java.py) differ in their client only.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol, TypeVar

from zkconsumer.lab.trace import RunDirectory, TraceWriter

log = logging.getLogger(__name__)


class JsonSettings:
    """A member's settings dataclass as the one JSON argument its process is started with (the driver writes it,
    the process reads it back); mixed into each member kind's frozen settings dataclass."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Any:
        return cls(**json.loads(text))


class StopRequest:
    """Whether the member process was asked to stop: by SIGTERM or SIGINT (`on_signal`), or by a thread (`set`: the
    stdin lifeline). `wait(timeout)` returns True once asked.

    Python runs a signal handler in the main thread between two bytecodes, wherever that thread is, locks held
    included (docs.python.org, signal: "Python signal handlers are always executed in the main Python thread"). A
    handler that called `threading.Event.set()` took the event's lock, which the main thread itself can hold at that
    moment: inside `Event.wait()` on the same event, or inside the first handler's own `set()` when a second SIGTERM
    lands (the driver sends one in `request_stop` and, in `CoordinatorDriver.stop`, another from `stop`). The lock is
    not reentrant, so the handler waited for itself for ever: the member never closed its consumer, its stdin's end
    could not stop it either (the lifeline's `set()` waits for the same lock), and the driver killed it. So the
    handler takes no lock: it sets a plain attribute, which `wait` reads before and after each bounded wait."""

    def __init__(self, poll_s: float = 0.2) -> None:
        self.poll_s = poll_s
        self._event = threading.Event()
        self._signalled = False

    def on_signal(self, _signum: int, _frame: object) -> None:
        self._signalled = True

    def set(self) -> None:
        """From a thread (never from a signal handler)."""
        self._event.set()

    def is_set(self) -> bool:
        return self._signalled or self._event.is_set()

    def wait(self, timeout: float) -> bool:
        """Up to `timeout`, in waits of at most `poll_s` (a signal sets no event to wake the wait)."""
        deadline = time.monotonic() + timeout
        while not self.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._event.wait(min(left, self.poll_s))
        return True

    def install(self, signals: Sequence[int] = (signal.SIGTERM, signal.SIGINT)) -> None:
        for sig in signals:
            signal.signal(sig, self.on_signal)


class MemberSettings(Protocol):
    name: str
    run_path: str
    incarnation: int
    log_level: str


class ProcessMember(Protocol):
    error: object

    @property
    def alive(self) -> bool: ...

    def start(self) -> None: ...


S = TypeVar("S", bound=MemberSettings)
M = TypeVar("M", bound=ProcessMember)


def run_member(module: str, argv: Sequence[str] | None, parse: Callable[[str], S], design: Callable[[S], str],
               make: Callable[[S, TraceWriter], M], stop: Callable[[M], object], *,
               start_errors: tuple[type[Exception], ...] = (), quiet: Sequence[str] = ()) -> int:
    """The member process's `main`: exit 0 after a clean stop, 1 if the member failed, 2 for bad arguments.
    `design(settings)` is the design its trace file is written for.

    `start_errors` are failures of `start` that are the machine's, not the member's (no JDK, say): logged as one
    line naming the fix, exit 1. `quiet` names loggers held at INFO even at DEBUG (a client's own request log: the
    proxy counts those already)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        sys.stderr.write(f"usage: python -m {module} SETTINGS_JSON|-\n")
        return 2
    try:
        settings = parse(sys.stdin.readline() if args[0] == "-" else args[0])
    except (ValueError, TypeError) as exc:
        sys.stderr.write(f"lab member settings: {exc}\n")
        return 2
    level = logging.getLevelName(settings.log_level.upper())
    logging.basicConfig(level=level, format=f"%(asctime)s %(levelname)s [{settings.name}] %(name)s: %(message)s")
    for name in quiet:
        logging.getLogger(name).setLevel(max(logging.INFO, level))
    stopping = StopRequest()
    stopping.install()
    # stdin is the lifeline: a `stop` line or its end (the driver is gone) is a graceful leave.
    threading.Thread(target=watch_stdin, args=(stopping,), name="lab-stdin", daemon=True).start()
    trace = RunDirectory(Path(settings.run_path)).trace(settings.name, design(settings), pid=os.getpid(),
                                                        incarnation=settings.incarnation)
    member = make(settings, trace)
    try:
        member.start()
    except start_errors as exc:
        log.error("lab member %s: %s", settings.name, exc)
        trace.close()
        return 1
    try:
        while not stopping.wait(0.2) and member.alive:
            pass
    finally:
        stop(member)
        trace.close()
    return 1 if member.error is not None else 0


def watch_stdin(stopping: StopRequest | threading.Event) -> None:
    try:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
    except (OSError, ValueError):
        pass
    stopping.set()
