"""The original design's steps: the ZooKeeper design replayed for Kafka 0.8.2.2's own connector.

Same protocol, same znodes, same wire (zk_steps.py reads it), but the original has no rebalance listener, so its
members report no claim, release, rollback or fetcher events (docs/traces.md). Its owner nodes are taken from
the wire instead, as the ZooKeeper proxy saw each member's link create and delete them
(`/consumers/<group>/owners/<topic>/<partition>`, zkconsumer/lab/analysis/owner_nodes.py): a create answered OK
is a claim, one answered NodeExists a conflict, a delete a release (or a rollback: the wire does not tell them
apart). The owner shown is the member whose link created the node; the thread id it wrote into it is not on
the wire.
"""

from __future__ import annotations

import re
from typing import Any

from rebalance.ownership import Ownership
from zkconsumer.lab.analysis.owner_nodes import NODE_EXISTS, OK, OWNER_PATH
from zkconsumer.lab.lesson.model import Step, znode
from zkconsumer.lab.lesson.replay import Window
from zkconsumer.lab.lesson.zk_steps import ZkSteps

_OWNER = re.compile(OWNER_PATH)
KAFKA_CLAIM = "ZKRebalancerListener.reflectPartitionOwnershipDecision (ZkUtils.createEphemeralPathExpectConflict)"


def owner_partition(path: str | None) -> str | None:
    """"topic/partition" of an owner node's path (with or without a chroot), or None."""
    found = _OWNER.search(path or "")
    return f"{found.group(1)}/{found.group(2)}" if found else None


class OriginalSteps(ZkSteps):
    def __init__(self, records: list[dict[str, Any]], window: Window) -> None:
        super().__init__(records, window, design="original")

    # The wire is this design's only source of ownership (as in the analysis): any claim, release or rollback
    # event a driver may add is not replayed a second time.
    _ev_claim = _ev_release = _ev_rollback = None

    def _all_partitions(self) -> set[str]:
        found = super()._all_partitions()
        for r in self.records:
            if r["type"] == "wire" and r.get("proto") == "zk" and (p := owner_partition(r.get("path"))):
                found.add(p)
        return found

    def _on_wire(self, r: dict[str, Any]) -> None:
        super()._on_wire(r)
        if r.get("proto") != "zk" or r["kind"] != "reply" or not r.get("link"):
            return
        p = owner_partition(r.get("path"))
        if p is None:
            return
        member, op, err = r["link"], r.get("op"), r.get("err")
        if op == "create" and err == OK:
            self._claimed(r, member, p)
        elif op == "create" and err == NODE_EXISTS:
            self._step(r, "conflict", f"conflict: {member} wants {p}, its owner node exists",
                       "its view of the group is ahead of (or behind) the owner's: claims race, nobody arbitrates "
                       "(seen on the wire: the original reports no claims)", Ownership.claim, KAFKA_CLAIM,
                       member=member, arrow={"src": member, "dst": "zookeeper",
                                             "label": f"create owners/{p}: NodeExists", "tone": "conflict"})
        elif op == "delete":
            self._released(r, member, p)

    def _claimed(self, r: dict[str, Any], member: str, p: str) -> None:
        def apply(state: dict[str, Any]) -> None:
            state["owners"][p] = {"thread": member}

        self._step(r, "claim", f"{member} claims {p}", "an ephemeral owner node: first come, first served (seen on "
                   "the wire, which names the member, not the thread)", Ownership.claim, KAFKA_CLAIM, apply,
                   member=member, detail=[f"create {znode(r.get('path'))}"],
                   arrow={"src": member, "dst": "zookeeper", "label": f"create owners/{p}", "tone": "write"})

    def _released(self, r: dict[str, Any], member: str, p: str) -> None:
        def apply(state: dict[str, Any]) -> None:
            node = state["owners"].get(p)
            if node and node["thread"] == member:
                del state["owners"][p]

        self._step(r, "release", f"{member} deletes its owner node of {p}", "a release before the claims, or the "
                   "rollback of an attempt that met a conflict: the partition has no owner until somebody claims it",
                   Ownership.release_all, "ZKRebalancerListener.releasePartitionOwnership, "
                   "deletePartitionOwnershipFromZK", apply, member=member,
                   arrow={"src": member, "dst": "zookeeper", "label": f"delete owners/{p}", "tone": "write"})


def build_original(records: list[dict[str, Any]], window: Window) -> tuple[dict[str, Any], list[Step]]:
    return OriginalSteps(records, window).build()
