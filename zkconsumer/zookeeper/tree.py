"""A zookeeper-shell style dump of a subtree: one line per node, ephemeral nodes marked with their owner."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from zkconsumer.zookeeper.client import ZkClient


@dataclass(frozen=True)
class TreeNode:
    path: str
    data: bytes
    ephemeral_owner: int  # 0 for persistent nodes

    def format(self, max_data: int = 160) -> str:
        text = self.data.decode("utf-8", "replace")
        if len(text) > max_data:
            text = text[:max_data] + "..."
        mark = f" [ephemeral owner=0x{self.ephemeral_owner:x}]" if self.ephemeral_owner else ""
        return f"{self.path}{mark}" + (f" = {text}" if text else "")


def walk(zk: ZkClient, path: str = "/") -> Iterator[TreeNode]:
    """Depth-first, children sorted; nodes that vanish while we walk are skipped."""
    found = zk.get(path)
    if found is None:
        return
    data, stat = found
    yield TreeNode(path, data or b"", stat.ephemeralOwner)
    for child in sorted(zk.get_children(path) or []):
        if path == "/" and child == "zookeeper":
            continue  # ZooKeeper's own quota/config nodes
        yield from walk(zk, f"{path.rstrip('/')}/{child}")
