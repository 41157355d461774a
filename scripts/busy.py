"""Keep N cores busy until stopped (Ctrl-C or SIGTERM): the background load of docs/testing.md's "Flaky tests".

    .venv/bin/python scripts/busy.py 2 &
"""

from __future__ import annotations

import multiprocessing
import signal
import sys


def _spin() -> None:
    while True:
        sum(i * i for i in range(10_000))


def main() -> None:
    cores = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    workers = [multiprocessing.Process(target=_spin, name=f"busy-{i}", daemon=True) for i in range(cores)]
    for worker in workers:
        worker.start()

    def stop(*_: object) -> None:
        for worker in workers:
            worker.terminate()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for worker in workers:
        worker.join()


if __name__ == "__main__":
    main()
