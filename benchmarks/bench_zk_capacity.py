"""How many of the herd's reads a real ZooKeeper serves per second here, and what each read costs the server,
the members' Python hosts and the lab's counting proxy: the service rates of the simulation's capacity model
(zkconsumer/lab/sim/capacity.py, docs/simulation.md "Capacity").

    .venv/bin/python benchmarks/bench_zk_capacity.py [--servers 1,3] [--clients 1,2] [--depths 1,16,64]
                                                     [--seconds 4] [--registrations 64] [--proxy both|no|only]

For each ensemble size (the embedded ZooKeeper, zkconsumer/embedded/zookeeper.py: standalone, or 3 servers with
the clients spread over them) and each path (direct, or through the lab's `ZkProxy` in this process with a
sink that writes every record as the lab's traces do), K client processes (this project's `ZkClient`, kazoo
underneath, with the lab hosts' `select` patch) read as a rebalance does: list `/consumers/<g>/ids`, then every
registration with `ZkGroupStore.registrations` (pipelined `get_many`, decoded), `depth` reads in flight per
client; then one client writes (`path/w`: an ephemeral owner node created and deleted, one at a time).
Each level runs `--seconds` after every client has connected. Printed per level: reads/s, the mean
round trip (Little: in flight / throughput), and the CPU per request of the server JVM(s) (/proc), of the
clients (their own rusage) and of the proxy (this process's CPU while it only forwards). Ratios at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble  # noqa: E402
from zkconsumer.lab.wire.zk import ZkProxy  # noqa: E402
from zkconsumer.zookeeper import codecs, layout  # noqa: E402

GROUP = "bench"
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Level:
    servers: int
    path: str  # direct | proxy
    clients: int
    depth: int
    reads: int
    wall_s: float
    server_cpu_s: float
    client_cpu_s: float
    proxy_cpu_s: float

    @property
    def rate(self) -> float:
        return self.reads / self.wall_s

    def per_request_ms(self, cpu_s: float) -> float:
        return 1000.0 * cpu_s / max(1, self.reads)

    @property
    def rtt_ms(self) -> float:
        return 1000.0 * self.clients * self.depth / self.rate  # Little's law over a closed loop


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- one client process ------------------------------------------------------------------------------------

def worker(spec: dict) -> None:
    """Connect, say so, wait for `go`, read for `seconds`, print {"reads", "cpu_s"}."""
    from kazoo.handlers.threading import SequentialThreadingHandler

    from zkconsumer.lab.members.zk import _select
    from zkconsumer.zookeeper.client import ZkClient
    from zkconsumer.zookeeper.group import ZkGroupStore

    SequentialThreadingHandler.select = lambda _handler, *args, **kwargs: _select(*args, **kwargs)
    client = ZkClient(spec["connect"], log_id="bench").start()
    store = ZkGroupStore(client, GROUP)
    depth = spec["depth"]
    owner = layout.owner_path(GROUP, "herd", os.getpid())
    print("ready", flush=True)
    sys.stdin.readline()
    began_cpu, deadline = _self_cpu(), time.monotonic() + spec["seconds"]
    before = sum(client.op_counts().values())
    while time.monotonic() < deadline:
        if spec["writes"]:  # a claim and a release, one after the other, as a rebalance makes them
            store.zk.create(owner, b"bench-0", ephemeral=True)
            store.zk.delete(owner)
            continue
        ids = store.member_ids()
        for start in range(0, len(ids), depth):
            store.registrations(ids[start:start + depth])
    reads = sum(client.op_counts().values()) - before
    cpu = _self_cpu() - began_cpu
    print(json.dumps({"reads": reads, "cpu_s": cpu}), flush=True)
    client.close()


# --- the orchestrator --------------------------------------------------------------------------------------

def populate(connect: str, registrations: int) -> None:
    from rebalance.subscription import Registration
    from zkconsumer.zookeeper.client import ZkClient

    with ZkClient(connect, log_id="bench-admin").start() as admin:
        data = codecs.encode_registration(Registration.static({"herd": 1}), 0)
        for i in range(registrations):
            admin.create(layout.registration_path(GROUP, f"{GROUP}_m{i:04d}"), data)


def run_level(ensemble: ZooKeeperEnsemble, proxy: ZkProxy | None, clients: int, depth: int,
              seconds: float, writes: bool = False) -> Level:
    connects = []
    for i in range(clients):
        node = ensemble.nodes[i % len(ensemble.nodes)]
        if proxy is None:
            connects.append(f"127.0.0.1:{node.client_port}")
        else:
            name = f"c{len(proxy.links)}"
            proxy.add_link(name)
            connects.append(proxy.connect_string(name))
    specs = [{"connect": c, "depth": depth, "seconds": seconds, "writes": writes} for c in connects]
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(spec)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for spec in specs]
    try:
        for p in procs:
            if p.stdout.readline().strip() != "ready":  # type: ignore[union-attr]
                raise RuntimeError("a client did not connect")
        pids = [n.process.pid for n in ensemble.nodes if n.process]
        server0, self0, wall0 = sum(map(_cpu_of, pids)), _self_cpu(), time.monotonic()
        for p in procs:
            p.stdin.write("go\n")  # type: ignore[union-attr]
            p.stdin.flush()  # type: ignore[union-attr]
        results = [json.loads(p.stdout.readline()) for p in procs]  # type: ignore[union-attr]
        wall = time.monotonic() - wall0
        server, own = sum(map(_cpu_of, pids)) - server0, _self_cpu() - self0
    finally:
        for p in procs:
            p.stdin.close()  # type: ignore[union-attr]
            p.wait(timeout=30)
    return Level(len(ensemble.nodes), ("proxy" if proxy else "direct") + ("/w" if writes else ""), clients, depth,
                 sum(r["reads"] for r in results), wall, server, sum(r["cpu_s"] for r in results),
                 own if proxy else 0.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--servers", default="1,3")
    parser.add_argument("--clients", default="1,2")
    parser.add_argument("--depths", default="1,16,64")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--registrations", type=int, default=64)
    parser.add_argument("--proxy", choices=("both", "no", "only"), default="both")
    args = parser.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return 0
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    print("command:", " ".join([".venv/bin/python", "benchmarks/bench_zk_capacity.py", *sys.argv[1:]]))
    print("load average before:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    paths = {"both": ("direct", "proxy"), "no": ("direct",), "only": ("proxy",)}[args.proxy]
    levels: list[Level] = []
    print(f"{'servers':>7} {'path':>6} {'K':>2} {'depth':>5} | {'reads/s':>8} {'rtt ms':>7} | "
          f"{'server ms/req':>13} {'client ms/req':>13} {'proxy ms/req':>12} | {'server util':>11}")
    for size in ints(args.servers):
        with tempfile.TemporaryDirectory(prefix="bench-zk-") as tmp:
            ensemble = ZooKeeperEnsemble.plan(Path(tmp), size=size)
            ensemble.start()
            try:
                populate(ensemble.connect_string, args.registrations)
                for path in paths:
                    proxy = None
                    if path == "proxy":
                        trace = open(Path(tmp) / "wire.jsonl", "w")
                        proxy = ZkProxy(f"127.0.0.1:{ensemble.nodes[0].client_port}",
                                        sink=lambda r, t=trace: t.write(json.dumps(r.to_dict()) + "\n"),
                                        name="bench-zkproxy").start()
                    try:
                        for clients in ints(args.clients):
                            for depth in ints(args.depths):
                                level = run_level(ensemble, proxy, clients, depth, args.seconds)
                                levels.append(level)
                                print(f"{size:>7} {path:>6} {clients:>2} {depth:>5} | {level.rate:>8.0f} "
                                      f"{level.rtt_ms:>7.2f} | {level.per_request_ms(level.server_cpu_s):>13.3f} "
                                      f"{level.per_request_ms(level.client_cpu_s):>13.3f} "
                                      f"{level.per_request_ms(level.proxy_cpu_s):>12.3f} | "
                                      f"{level.server_cpu_s / level.wall_s:>11.2f}", flush=True)
                        # Writes (create + delete of an ephemeral owner node), one client, one at a time: what a
                        # write costs the server, the fsync of its transaction log included, in the round trip.
                        level = run_level(ensemble, proxy, 1, 1, args.seconds, writes=True)
                        levels.append(level)
                        print(f"{size:>7} {path + '/w':>6} {1:>2} {1:>5} | {level.rate:>8.0f} {level.rtt_ms:>7.2f} | "
                              f"{level.per_request_ms(level.server_cpu_s):>13.3f} "
                              f"{level.per_request_ms(level.client_cpu_s):>13.3f} "
                              f"{level.per_request_ms(level.proxy_cpu_s):>12.3f} | "
                              f"{level.server_cpu_s / level.wall_s:>11.2f}", flush=True)
                    finally:
                        if proxy is not None:
                            proxy.stop()
                            trace.close()
            finally:
                ensemble.stop()
    print("load average after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    _ratios(levels)
    return 0


def _ratios(levels: list[Level]) -> None:
    """Where a read's CPU goes at the highest throughput of each path, and the proxy's and ensemble's effect."""
    best: dict[tuple[int, str], Level] = {}
    for level in levels:
        if level.path.endswith("/w"):
            continue
        key = (level.servers, level.path)
        if key not in best or level.rate > best[key].rate:
            best[key] = level
    for (size, path), level in sorted(best.items()):
        total = level.server_cpu_s + level.client_cpu_s + level.proxy_cpu_s
        print(f"saturation, {size} server(s), {path}: {level.rate:.0f} reads/s (K={level.clients}, "
              f"depth {level.depth}); CPU per read {level.per_request_ms(total):.3f} ms = server "
              f"{level.server_cpu_s / total:.0%}, clients {level.client_cpu_s / total:.0%}, "
              f"proxy {level.proxy_cpu_s / total:.0%}; client/server CPU "
              f"{level.client_cpu_s / level.server_cpu_s:.1f}x")
    for size in sorted({s for s, _ in best}):
        if (size, "direct") in best and (size, "proxy") in best:
            ratio = best[size, "proxy"].rate / best[size, "direct"].rate
            print(f"{size} server(s): proxy/direct throughput {ratio:.2f}")
    if (1, "direct") in best and (3, "direct") in best:
        print(f"direct: 3 servers / 1 server throughput {best[3, 'direct'].rate / best[1, 'direct'].rate:.2f}")


if __name__ == "__main__":
    sys.exit(main())
