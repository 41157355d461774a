"""An in-memory ZooKeeper (server and `ZkClient`-compatible client) for fast tests, labs and simulations.

    server = MemoryZooKeeper()
    with MemoryZkClient(server, log_id="member-1") as zk:     # same surface as ZkClient
        zk.create("/consumers/g/ids/m1", b"{...}", ephemeral=True)
        zk.watch_children("/consumers/g/ids", on_members)
        zk.suspend(); zk.resume()                             # connection loss, session survives
        server.expire_session(zk.session_id)                  # "suspended", "lost", "connected" (new session)
    server.dump(); server.op_counts()

The server lives in `memory_server` (its records in `memory_nodes`), the client in `memory_client`; see their
docstrings for the semantics kept from ZooKeeper and kazoo, and for the threading model (`dispatch=` for
synchronous delivery).
"""

from zkconsumer.zookeeper.memory_client import MemoryZkClient
from zkconsumer.zookeeper.memory_nodes import MemoryStat, SessionInfo, WatchEvent
from zkconsumer.zookeeper.memory_server import MemoryZooKeeper

__all__ = ["MemoryStat", "MemoryZkClient", "MemoryZooKeeper", "SessionInfo", "WatchEvent"]
