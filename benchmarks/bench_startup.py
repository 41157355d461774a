"""Start-up cost of a member process: `import zkconsumer`, and process start to registration in ZooKeeper.

The lab starts many member processes, so both matter. Run from the repo (or any checkout given by --tree,
to compare two versions side by side on the same ZooKeeper):

    .venv/bin/python benchmarks/bench_startup.py [--runs 5] [--tree OTHER_CHECKOUT]

Registration is observed from outside: a watcher polls `/consumers/<g>/ids` for the member's node, so both
versions are timed the same way whatever they log.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kazoo.client import KazooClient

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble  # noqa: E402


def import_time(tree: Path) -> float:
    """Wall seconds of `python -c 'import zkconsumer'` with `tree` first on the path (median of 5)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    samples = []
    for _ in range(5):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import zkconsumer"], check=True, env=env, cwd=tree)
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def time_to_registration(tree: Path, connect: str, probe: KazooClient, run: int) -> float:
    group = f"startup-{run}-{tree.name}"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [sys.executable, "-m", "zkconsumer", "consume", "--zookeeper", connect, "--group", group,
            "--topic", "startup", "--consumer-id", "m", "--timeout-ms", "100"]
    path = f"/consumers/{group}/ids/{group}_m"
    began = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while probe.exists(path) is None:
            if time.perf_counter() - began > 30:
                raise RuntimeError(f"{tree}: no registration within 30 s")
            time.sleep(0.002)
        return time.perf_counter() - began
    finally:
        proc.kill()
        proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="another checkout to time side by side (repeatable)")
    args = parser.parse_args()
    trees = [REPO, *args.tree]
    with tempfile.TemporaryDirectory() as tmp:
        servers = ZooKeeperEnsemble.plan(Path(tmp), size=1)
        servers.start()
        probe = KazooClient(hosts=servers.connect_string)
        probe.start(timeout=10)
        try:
            probe.create("/brokers/topics/startup", b'{"version":1,"partitions":{"0":[1]}}', makepath=True)
            rows = []
            for tree in trees:
                regs = [time_to_registration(tree, servers.connect_string, probe, run) for run in range(args.runs)]
                rows.append((tree, import_time(tree), statistics.median(regs)))
        finally:
            probe.stop()
            probe.close()
            servers.stop()
    print(f"{'tree':<40} {'import zkconsumer (s)':>22} {'start to registered (s)':>24}")
    for tree, imp, reg in rows:
        print(f"{str(tree)[-40:]:<40} {imp:>22.3f} {reg:>24.3f}")
    if len(rows) > 1:
        base = rows[0]
        for tree, imp, reg in rows[1:]:
            print(f"{str(tree)[-40:]}: import {imp / base[1]:.1f}x, registration {reg / base[2]:.2f}x this tree's time")


if __name__ == "__main__":
    main()
