"""A Spark standalone cluster on this machine's loopback: one master and N workers from pyspark's own classes.

    with standalone_cluster(workers=2) as cluster:
        spark-submit --master {cluster.master_url} zkconsumer/lab/analysis/job.py ...

    python -m zkconsumer.lab.analysis.standalone [--workers 2]     # prints the master URL; up until Ctrl-C

It is the cluster a user would point the job at (docs/analysis.md, "On a Spark cluster"), only smaller: the same
`org.apache.spark.deploy.master.Master` and `...worker.Worker` daemons that Spark's `sbin/start-*.sh` scripts run,
started through `bin/spark-class` of the installed pyspark, so the job meets real executors in JVMs of their
own, each with its own Python workers, talking to the driver over RPC.

Everything listens on 127.0.0.1 (`SPARK_LOCAL_IP`, read by spark-class, and `--host`); every port is chosen by the
kernel (port 0) and read back from the daemon's own log line; the master's REST submission server, which would
take the fixed port 6066, is off. The master's web UI serves its state as JSON (`/json/`): the cluster is ready
when that lists every worker ALIVE. Each daemon runs in a process group of its own, which also holds the
executors and Python workers it starts: stopping a group (SIGTERM, then SIGKILL) leaves nothing behind.

The workers' executors run Python tasks with the interpreter the driver names (`PYSPARK_PYTHON` of the driver,
set by local_spark.py); the workers get the same variable, for anything they start themselves. The project is
importable there because it is installed in that interpreter, as it must be on an existing cluster's workers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from zkconsumer.embedded.process import EmbeddedError, ProcessRecord, log_tail, wait_until
from zkconsumer.lab.analysis.local_spark import LOOPBACK

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# The daemons' own lines saying which port the kernel gave them (org.apache.spark.util.Utils.startServiceOnPort,
# deploy.master.Master.onStart).
MASTER_URL_LINE = re.compile(r"Starting Spark master at (spark://\S+)")
WEB_UI_LINE = re.compile(r"Successfully started service '(?:Master|Worker)UI' on port (\d+)")
START_TIMEOUT_S = 120.0  # JVM starts on a loaded 2-core machine take 5-15 s each
STOP_GRACE_S = 15.0  # a worker's shutdown hook stops its executors first
# JVM options for short-lived JVMs doing little work: C1 only (no C2 compile threads competing for the cores) and
# the serial collector. Results do not depend on them.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@dataclass
class StandaloneCluster:
    master_url: str  # spark://127.0.0.1:PORT, what --master takes
    web_url: str  # the master's web UI; /json/ is the cluster's state
    work_dir: Path  # the daemons' logs and the workers' application directories (executor logs)
    processes: list[ProcessRecord] = field(default_factory=list)  # the daemons, each its process group's leader
    _children: dict[int, subprocess.Popen] = field(default_factory=dict, repr=False)

    def state(self) -> dict:
        """The master's view: workers (id, host, webuiaddress, state, cores...), active and completed apps."""
        return _get_json(self.web_url)

    def pids(self) -> list[int]:
        """Every live process of the cluster: the daemons, and the executors and Python workers they started."""
        return [pid for record in self.processes for pid in group_members(record.pid)]

    def worker_states(self) -> list[dict]:
        """Each worker's own view, from its web UI: its executors running and finished (with their `appid`)."""
        return [_get_json(w["webuiaddress"]) for w in self.state()["workers"]]


def spark_home() -> Path:
    """The installed pyspark, which carries Spark's jars and bin/spark-class."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@contextmanager
def standalone_cluster(workers: int = 2, *, cores: int = 1, memory: str = "1g", work_dir: Path | None = None,
                       watch: Callable[[ProcessRecord], None] | None = None,
                       timeout: float = START_TIMEOUT_S) -> Iterator[StandaloneCluster]:
    """Start a master and `workers` workers (each `cores` cores and `memory` for executors) on 127.0.0.1, wait
    until the master shows them all ALIVE, and stop every process on exit, whatever happened. Logs and the
    workers' directories go to a temporary directory under `work_dir` (default: the system's), removed on exit.
    `watch` is told of each daemon as it starts (a watchdog that stops it should this process die uncleanly)."""
    with tempfile.TemporaryDirectory(prefix="spark-standalone-", dir=work_dir) as tmp:
        root = Path(tmp)
        conf = root / "conf"  # an empty SPARK_CONF_DIR: no spark-env.sh or defaults of the machine leak in
        conf.mkdir()
        (conf / "master.properties").write_text("spark.master.rest.enabled false\n")
        env = _daemon_env(conf)
        cluster = StandaloneCluster("", "", root)
        try:
            master_log = root / "master.log"
            _start(cluster, "spark master", [MASTER_CLASS, "--host", LOOPBACK, "--port", "0", "--webui-port", "0",
                                             "--properties-file", str(conf / "master.properties")],
                   master_log, env, watch)
            cluster.master_url = _await_line(cluster, master_log, MASTER_URL_LINE, timeout)
            cluster.web_url = f"http://{LOOPBACK}:{_await_line(cluster, master_log, WEB_UI_LINE, timeout)}"
            for i in range(workers):
                work = root / f"worker-{i}"
                work.mkdir()
                _start(cluster, f"spark worker {i}",
                       [WORKER_CLASS, "--host", LOOPBACK, "--port", "0", "--webui-port", "0", "--cores", str(cores),
                        "--memory", memory, "--work-dir", str(work), cluster.master_url],
                       root / f"worker-{i}.log", env, watch)
            if not wait_until(lambda: _all_alive(cluster, workers), timeout, interval=0.25):
                raise EmbeddedError(f"the Spark standalone cluster did not show {workers} workers ALIVE within "
                                    f"{timeout:.0f} s; master log: {log_tail(master_log)}")
            yield cluster
        finally:
            for record in reversed(cluster.processes):  # workers (and their executors) before the master
                stop_group(record, cluster._children[record.pid])


def _daemon_env(conf: Path) -> dict[str, str]:
    # A driver's gateway variables would make a nested PySpark connect to the caller's JVM.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}
    env.update(SPARK_HOME=str(spark_home()), SPARK_CONF_DIR=str(conf), SPARK_LOCAL_IP=LOOPBACK,
               PYSPARK_PYTHON=env.get("PYSPARK_PYTHON", sys.executable),
               # the daemons only schedule (executors get --memory): a small heap and QUICK_JVM
               SPARK_DAEMON_MEMORY="256m", SPARK_DAEMON_JAVA_OPTS=QUICK_JVM)
    return env


def _start(cluster: StandaloneCluster, name: str, args: list[str], log: Path, env: dict[str, str],
           watch: Callable[[ProcessRecord], None] | None) -> None:
    # A session, hence a process group, of its own: the daemon's executors and Python workers join it. The
    # cluster's directory is in no other process's command line, so it marks the pid as ours (process.is_running).
    with open(log, "ab") as out:
        proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                close_fds=True)
    record = ProcessRecord(name=name, pid=proc.pid, marker=str(cluster.work_dir), log=str(log))
    cluster.processes.append(record)
    cluster._children[proc.pid] = proc
    if watch is not None:
        watch(record)


def _await_line(cluster: StandaloneCluster, log: Path, pattern: re.Pattern[str], timeout: float) -> str:
    found: list[str] = []

    def seen() -> bool:
        match = pattern.search(log.read_text(errors="replace")) if log.exists() else None
        if match:
            found.append(match.group(1))
        return bool(match) or not group_members(cluster.processes[0].pid)

    if not wait_until(seen, timeout, interval=0.1) or not found:
        raise EmbeddedError(f"the Spark master did not start within {timeout:.0f} s: {log_tail(log)}")
    return found[0]


def _all_alive(cluster: StandaloneCluster, workers: int) -> bool:
    dead = [r.name for r in cluster.processes if not group_members(r.pid)]
    if dead:
        raise EmbeddedError(f"{', '.join(dead)} exited while the cluster started; see {cluster.work_dir}")
    try:
        state = cluster.state()
    except (OSError, ValueError):
        # not up yet; ValueError: the master's web UI can answer with its HTML page before its /json/ handler is
        # attached, which json.load refuses
        return False
    return state.get("status") == "ALIVE" and sum(w["state"] == "ALIVE" for w in state["workers"]) == workers


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(f"{url.rstrip('/')}/json/", timeout=5) as reply:
        return json.load(reply)


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of a process group, from /proc: a daemon's executors and their Python
    workers are in it too."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(stat.parent.name))
    return members


def stop_group(record: ProcessRecord, leader: subprocess.Popen) -> None:
    """SIGTERM to the daemon's whole process group, SIGKILL to what is left after a grace period; raises if
    anything survives. The group is signalled only while it has members, so its id cannot have been reused."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        leader.poll()  # reaps the leader: a zombie would keep its group alive
        if not group_members(record.pid):
            break
        try:
            os.killpg(record.pid, sig)
        except ProcessLookupError:
            break
        wait_until(lambda: (leader.poll(), not group_members(record.pid))[1], wait, interval=0.1)
    leader.poll()
    left = group_members(record.pid)
    if left:
        raise EmbeddedError(f"could not stop {record.name}: pids {left} of its group are still running")


def main(argv: list[str] | None = None) -> int:
    """Start a cluster, print its master URL, keep it up until Ctrl-C or SIGTERM, then stop it. A watchdog
    process (embedded/lifeline.py) stops the daemons should this process be killed outright."""
    from zkconsumer.embedded.lifeline import Lifeline

    parser = argparse.ArgumentParser(prog="python -m zkconsumer.lab.analysis.standalone",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="1g", help="memory per worker, for its executors")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    lifeline = Lifeline()
    try:
        with standalone_cluster(args.workers, cores=args.cores, memory=args.memory, watch=lifeline.watch) as cluster:
            print(f"master: {cluster.master_url}  (web UI {cluster.web_url}; Ctrl-C stops it)", flush=True)
            try:
                stop.wait()
            except KeyboardInterrupt:
                pass
    finally:
        lifeline.cut()
    return 0


if __name__ == "__main__":
    sys.exit(main())
