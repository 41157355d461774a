"""The campaign's observer: a `group_view` record of the group's znodes about every `VIEW_S`, for the checkers.

It reads over its own, uncounted session on the direct ZooKeeper connection (never a member's proxy link, so no
fault of a member's touches it) and records what it finds as-is: a registration that is not JSON is `None`, an
offset that is not an integer is `None` (the malformed data faults write both, and the checkers must see them).
While ZooKeeper does not serve (the ensemble stopped), a read fails within `READ_TIMEOUT_S` and no view is written:
a gap in the views is what "ZooKeeper was down" looks like in the history.

    stopped ──start()──▶ viewing ──(every VIEW_S: read ids, owners, offsets, partitions → group_view)──▶ viewing
                               └──stop()──▶ stopped (the thread joined, the session closed)
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from zkconsumer.lab.trace import TraceWriter
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.client import ZkClient, ZkUnavailableError

log = logging.getLogger(__name__)

VIEW_S = 0.5
READ_TIMEOUT_S = 2.0


def _json(data: bytes | None) -> Any:
    try:
        return json.loads((data or b"").decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


def _offset(data: bytes | None) -> int | None:
    try:
        return int((data or b"").decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        return None


def read_view(zk: ZkClient, group: str, topics: list[str]) -> dict[str, Any]:
    """One snapshot of the group: registrations, owners, offsets and partition counts (the fields of `group_view`)."""
    ids = {}
    for member in zk.get_children(layout.ids_dir(group)) or []:
        found = zk.get(layout.registration_path(group, member))
        if found is not None:
            ids[member] = _json(found[0])
    owners: dict[str, str] = {}
    offsets: dict[str, int | None] = {}
    partitions: dict[str, int] = {}
    for topic in topics:
        partitions[topic] = len(zk.get_children(layout.topic_path(topic) + "/partitions") or [])
        for child in zk.get_children(layout.owners_dir(group, topic)) or []:
            found = zk.get(f"{layout.owners_dir(group, topic)}/{child}")
            if found is not None:
                owners[f"{topic}/{child}"] = (found[0] or b"").decode("utf-8", "replace")
        for child in zk.get_children(layout.offsets_dir(group, topic)) or []:
            found = zk.get(f"{layout.offsets_dir(group, topic)}/{child}")
            if found is not None:
                offsets[f"{topic}/{child}"] = _offset(found[0])
    return {"ids": ids, "owners": owners, "offsets": offsets, "partitions": partitions}


class GroupObserver:
    """Writes `group_view` records to `trace` until stopped; `latest(since)` is the last view read, if it was read
    after `since` (a view from before a fault says nothing of the recovery)."""

    def __init__(self, zookeeper: str, group: str, topics: list[str], trace: TraceWriter) -> None:
        self.group = group
        self.topics = topics
        self.trace = trace
        self._latest: tuple[float, dict[str, Any]] | None = None
        self._zk = ZkClient(zookeeper, session_timeout_ms=10000, request_timeout_s=READ_TIMEOUT_S,
                            log_id="chaos-observer")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-observer", daemon=True)

    def start(self) -> GroupObserver:
        self._zk.start()
        self._thread.start()
        return self

    def latest(self, since: float = 0.0) -> dict[str, Any] | None:
        """The last view whose read began at or after `since` (time.time()), or None."""
        latest = self._latest
        return latest[1] if latest is not None and latest[0] >= since else None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(READ_TIMEOUT_S * 4)
        self._zk.close()

    def _run(self) -> None:
        while not self._stop.wait(VIEW_S):
            began = time.time()
            try:
                view = read_view(self._zk, self.group, self.topics)
            except ZkUnavailableError:
                continue  # ZooKeeper down or unreachable: no view, and the gap shows that
            except Exception:
                log.exception("chaos observer: reading the group failed")
                continue
            self._latest = (began, view)
            self.trace.write("group_view", **view)
