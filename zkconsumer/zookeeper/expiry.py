"""A real server-side session expiry, forced from outside the session's owner.

kazoo's own `expire_session()` only simulates one in the client: the server keeps the session and its ephemeral
nodes until the timeout. The ZooKeeper FAQ's technique makes the server end it now: a second client joins the
session with its id and password, then closes it; the server deletes the session's ephemerals and the owner sees
its session expire when it next talks to the server (docs/lab.md).
"""

from __future__ import annotations

from kazoo.client import KazooClient

from zkconsumer.zookeeper.client import CONNECTION_RETRY


def expire_session(connect: str, session_id: int, password: bytes, timeout_s: float = 10.0) -> None:
    """End the session `session_id` on the server at `connect` (any server of its ensemble)."""
    intruder = KazooClient(hosts=connect, client_id=(session_id, password), connection_retry=dict(CONNECTION_RETRY))
    intruder.start(timeout=timeout_s)
    try:
        intruder.stop()
    finally:
        intruder.close()
