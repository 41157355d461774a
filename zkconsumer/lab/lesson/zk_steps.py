"""The ZooKeeper design's steps: the znode tree, the notification fan-out and every member's rebalance.

Sources, all from the run's traces (docs/traces.md): the ZooKeeper proxy's wire records (what each member
read, the watch notifications, registrations), the members' events (`rebalance/events.py`: attempts,
releases, claims, rollbacks, commits, sessions) and the orchestrator's records (membership, owner snapshots,
stable). Reads of one member are grouped by purpose: what `ZKRebalancerListener.rebalance` reads in a row
(its own subscription, the brokers, the group snapshot, the offsets) is one step.

The owner nodes come from the members' claim/release/rollback events, which each follow the wire reply they
describe. Ephemeral nodes that no member deletes are handled as ZooKeeper does: a session closed or expired
takes its registration and owner nodes with it; a killed member's nodes stay until its session times out,
which shows as the next notification on `/ids` (registration) and the next owner snapshot (owners).
"""

from __future__ import annotations

from typing import Any

from rebalance.listener import ZKRebalancerListener
from rebalance.offsets import OffsetCheckpoints
from rebalance.ownership import Ownership
from zkconsumer.connector import ZookeeperConsumerConnector
from zkconsumer.lab.lesson.model import Step, code_ref, member_of_thread, partition_order, short_thread, znode
from zkconsumer.lab.lesson.replay import Replay, Window, members_in
from zkconsumer.lab.runs.case_run import CaseRun
from zkconsumer.lab.runs.stability import ChangeTracker
from zkconsumer.registration import register
from zkconsumer.zookeeper.group import ZkGroupStore

ZK_READS = ("getData", "getChildren", "getChildren2", "exists")
L = ZKRebalancerListener  # short names for the step table below

# read purpose -> (code, Kafka 0.8.2 source, explanation)
READS: dict[str, tuple[Any, str, str]] = {
    "subscription": (L.read_own_subscription, "ZKRebalancerListener.rebalance (TopicCount.constructTopicCount)",
                     "each attempt starts by reading its own registration: which topics, how many streams"),
    "brokers": (ZkGroupStore.live_brokers, "ZkUtils.getAllBrokersInCluster",
                "no brokers, no rebalance: the attempt checks /brokers/ids first"),
    "snapshot": (L.build_assignment_context, "ZkUtils.getConsumersPerTopic, getPartitionsForTopics",
                 "every member reads every registration and the topics: the herd's N x N reads"),
    "offsets": (OffsetCheckpoints.fetch, "ZookeeperConsumerConnector.fetchOffsetFromZooKeeper",
                "where to resume: the committed offset of every partition it is about to own"),
    "watch": (ZookeeperConsumerConnector._reinitialize, "ZKRebalancerListener (IZkChildListener on /ids)",
              "ZooKeeper watches fire once: the client re-reads /ids with a new watch to hear of the next change"),
    "other": (L.rebalance, "ZKRebalancerListener.rebalance", "other reads of the attempt"),
}


def _purpose(path: str, me: str | None, open_purpose: str | None, watch: bool) -> str:
    if watch and path.endswith("/ids"):
        return "watch"
    if path.startswith("/brokers/ids"):
        return "brokers"
    if "/offsets/" in path:
        return "offsets"
    if me and path.endswith(f"/ids/{me}") and open_purpose not in ("snapshot",):
        return "subscription"
    if "/ids" in path or path.startswith("/brokers/topics"):
        return "snapshot"
    return "other"


def _consumer_member(path: str) -> str:
    """`/consumers/<g>/ids/<g>_m1` -> `m1` (the lab sets consumer.id to the member name)."""
    return path.rsplit("/", 1)[-1].rsplit("_", 1)[-1]


class ZkSteps:
    def __init__(self, records: list[dict[str, Any]], window: Window, design: str = "zk") -> None:
        self.design = design  # a ZooKeeper design (designs.py): this one's steps, or the original's
        self.records = records
        self.members = members_in(records)
        self.partitions = sorted(self._all_partitions(), key=partition_order)
        initial = {"ids": {}, "owners": {}, "offsets": {}, "consumed": {}, "members": {m: {"status": "not started"}
                                                                        for m in self.members}, "notified": []}
        self.replay = Replay(design, window, initial)
        self.replay.counter("requests", "ZooKeeper requests")
        self.replay.counter("notifications", "watch notifications")
        self.reads: dict[str, dict[str, Any]] = {}  # member -> the open group of reads
        self.consumed: dict[str, int] = {}  # partition -> the next offset after what was handed out, by anyone
        self.consumer_ids: dict[str, str] = {}  # member -> its consumer id (the registration's name)
        self.registering: dict[str, dict[str, Any]] = {}  # member -> its create request on /ids, until the reply

    def _all_partitions(self) -> set[str]:
        found: set[str] = set()
        for r in self.records:
            if r["type"] == "owners":
                found |= set(r["owners"])
            elif r["type"] == "member_event" and r["kind"] in ("claim", "release"):
                found.add(f"{r['topic']}/{r['partition']}")
        return found

    def build(self) -> tuple[dict[str, Any], list[Step]]:
        for r in self.records:
            handler = getattr(self, f"_on_{r['type']}", None)
            if handler is not None:
                handler(r)
        for member in list(self.reads):
            self._close_reads(member)
        initial, steps = self.replay.finish(self._derive)
        # the moment of the change: nobody has heard of it yet (earlier notifications were of earlier changes)
        initial["notified"] = []
        return initial, steps

    def _derive(self, state: dict[str, Any]) -> dict[str, Any]:
        unowned = [p for p in self.partitions if p not in state["owners"]]
        return {"partitions": self.partitions, "unowned": unowned,
                "counters": {**state["counters"], "partitions unowned": len(unowned)}}

    def _step(self, r: dict[str, Any], kind: str, title: str, explain: str, target: Any, kafka: str,
              mutation=None, **extra: Any) -> None:
        step = Step(self.design, 0.0, kind, title, explain, code_ref(target), kafka, **extra)
        self.replay.add(r["ts"], step, mutation)

    # --- the orchestrator ----------------------------------------------------------------------------

    def _on_membership(self, r: dict[str, Any]) -> None:
        action, names = r["action"], r["members"]

        def apply(state: dict[str, Any]) -> None:
            for name in names:
                member = state["members"].setdefault(name, {})
                member["status"] = {"join": "starting", "kill": "killed", "leave": "leaving",
                                    "expire": "session expired", "pause": "paused"}.get(action, member.get("status"))
                if action == "kill":  # its ephemerals outlive it until the session times out
                    _orphan(state, name)
                elif action == "expire":  # the lab expires the session on the server: ephemerals go now
                    _drop_ephemerals(state, name)
            state["notified"] = []

        what = f"{action} {', '.join(names)}" + (" (restart, same consumer.id)" if r.get("restart") else "")
        self._step(r, "change", f"membership change: {what}", _CHANGE_EXPLAIN.get(action, "the orchestrator acts"),
                   CaseRun._apply, "—", apply, member=names[0] if names else None)

    def _on_stable(self, r: dict[str, Any]) -> None:
        self._step(r, "stable", f"group stable again, {r['duration_s']:.2f} s after the change",
                   "owner nodes match what the strategy prescribes and every member owns its share",
                   ChangeTracker.track, "—")

    def _on_consume(self, r: dict[str, Any]) -> None:
        """What the application got: against the offset a new owner starts from, the duplicates."""
        p, upto = f"{r['topic']}/{r['partition']}", r["last_offset"] + 1
        self.consumed[p] = max(self.consumed.get(p, 0), upto)

        def apply(state: dict[str, Any]) -> None:
            state["consumed"][p] = max(state["consumed"].get(p, 0), upto)

        self.replay.add(r["ts"], None, apply)

    def _on_owners(self, r: dict[str, Any]) -> None:
        snapshot = r["owners"]

        def apply(state: dict[str, Any]) -> None:  # a dead session's owner nodes, gone when the snapshot says so
            for p, node in list(state["owners"].items()):
                if node.get("orphan") and p not in snapshot:
                    del state["owners"][p]

        self.replay.add(r["ts"], None, apply)

    # --- the wire ------------------------------------------------------------------------------------

    def _on_wire(self, r: dict[str, Any]) -> None:
        if r.get("proto") != "zk":
            return
        kind, member, path = r["kind"], r.get("link"), znode(r.get("path"))
        if kind == "request":
            self.replay.count("requests", r["ts"])
            if r.get("op") == "create" and "/ids/" in path and member:
                self.registering[member] = r
            if r.get("op") in ZK_READS and member:
                self._read(member, r, path)
            elif member:
                self._close_reads(member)
                if r.get("op") == "closeSession":
                    self._step(r, "close", f"{member} closes its session",
                               "its ephemeral nodes (registration, owners) go with it: the others are notified",
                               ZookeeperConsumerConnector.shutdown, "ZookeeperConsumerConnector.shutdown",
                               lambda s, m=member: _drop_ephemerals(s, m), member=member)
        elif kind == "event":
            self.replay.count("notifications", r["ts"])
            self._notify(r, member, path)
        elif kind == "reply" and r.get("op") == "create" and "/ids/" in path and member:
            self._registered(r, member, path)

    def _read(self, member: str, r: dict[str, Any], path: str) -> None:
        group = self.reads.get(member)
        purpose = _purpose(path, self.consumer_ids.get(member), group and group["purpose"], bool(r.get("watch")))
        if group is not None and group["purpose"] != purpose:
            self._close_reads(member)
            group = None
        if group is None:
            group = self.reads[member] = {"purpose": purpose, "records": []}
        group["records"].append(r)

    def _close_reads(self, member: str) -> None:
        group = self.reads.pop(member, None)
        if not group:
            return
        target, kafka, explain = READS[group["purpose"]]
        paths = [f"{x['op']} {znode(x.get('path'))}" + (" (watch)" if x.get("watch") else "")
                 for x in group["records"]]
        n = len(paths)
        title = f"{member} reads {n} znode{'s' if n > 1 else ''}: {group['purpose']}"
        self._step(group["records"][-1], "reads", title, explain, target, kafka, member=member, detail=paths,
                   arrow={"src": member, "dst": "zookeeper", "label": f"{n} read{'s' if n > 1 else ''}",
                          "tone": "read"})

    def _notify(self, r: dict[str, Any], member: str | None, path: str) -> None:
        if member is None:
            return
        self._close_reads(member)
        event = r.get("event_type") or "event"

        def apply(state: dict[str, Any]) -> None:
            if path.endswith("/ids"):  # a dead session's registration is gone once /ids changes
                state["ids"] = {m: node for m, node in state["ids"].items() if not node.get("orphan")}
            if member not in state["notified"]:
                state["notified"].append(member)

        self._step(r, "notify", f"ZooKeeper notifies {member}: {event} on {path}",
                   "one change, one notification to every member watching: the herd starts here",
                   L.trigger, "ZKRebalancerListener.handleChildChange", apply, member=member,
                   arrow={"src": "zookeeper", "dst": member, "label": event, "tone": "notify"})

    def _registered(self, r: dict[str, Any], member: str, path: str) -> None:
        """A registration, shown when its create was sent: ZooKeeper notifies the watchers of /ids as it applies
        the create, before its reply reaches the member, so at the reply's time the notifications it fired would
        be shown before it. The outcome is the reply's."""
        self.consumer_ids[member] = path.rsplit("/", 1)[-1]
        request = self.registering.pop(member, None)
        if request is not None:
            r = {**r, "ts": request["ts"]}
        ok = r.get("err") == 0
        name = _consumer_member(path)

        def apply(state: dict[str, Any]) -> None:
            if ok:
                state["ids"][name] = {"session": "live"}

        title = (f"{member} registers {path}" if ok else
                 f"{member} cannot register: {r.get('err_name')} (its old session's node is still there)")
        explain = ("an ephemeral node: the group is whoever has one, and every member watches their list" if ok else
                   "a restart with the same consumer.id waits for the old session to expire (docs/DESIGN.md)")
        self._step(r, "register", title, explain, register, "ZookeeperConsumerConnector.registerConsumerInZK",
                   apply, member=member, arrow={"src": member, "dst": "zookeeper", "label": "create ids/…",
                                                "tone": "write" if ok else "conflict"})

    # --- the members ---------------------------------------------------------------------------------

    def _on_member_event(self, r: dict[str, Any]) -> None:
        member, kind = r["member"], r["kind"]
        self._close_reads(member)
        handler = getattr(self, f"_ev_{kind}", None)
        if handler is not None:
            handler(r, member)

    def _set(self, member: str, **fields: Any):
        def apply(state: dict[str, Any]) -> None:
            state["members"].setdefault(member, {}).update(fields)

        return apply

    def _ev_state(self, r: dict[str, Any], member: str) -> None:
        status = r["state"] + (f" (attempt {r['attempt']})" if r["state"] == "rebalancing" else "")
        self.replay.add(r["ts"], None, self._set(member, status=status))

    def _ev_attempt_begin(self, r: dict[str, Any], member: str) -> None:
        self._step(r, "attempt", f"{member} begins rebalance {r['rebalance']}, attempt {r['attempt']}",
                   "a snapshot-read-decide-claim round; it may fail on a stale view and be retried",
                   L._attempts, "ZKRebalancerListener.syncedRebalance", self._set(member, status="rebalancing"),
                   member=member)

    def _ev_attempt_end(self, r: dict[str, Any], member: str) -> None:
        result = r["result"]
        if result == "ok":
            self._step(r, "owning", f"{member}: attempt {r['attempt']} succeeded", "it owns and fetches its share",
                       L.synced_rebalance, "ZKRebalancerListener.syncedRebalance", member=member)
            return
        explain = ("another member still holds a partition it wants: it gives back what it took and sleeps "
                   "rebalance.backoff.ms" if result == "conflict" else "the attempt failed; it backs off and retries")
        self._step(r, "backoff", f"{member}: attempt {r['attempt']} failed ({result}): backing off", explain,
                   L._attempts, "ZKRebalancerListener.syncedRebalance (rebalanceBackoffMs)",
                   self._set(member, status=f"backoff after {result}"), member=member)

    def _ev_rebalance_failed(self, r: dict[str, Any], member: str) -> None:
        self._step(r, "failed", f"{member} gives up: {r.get('error')}", "rebalance.max.retries ran out",
                   L.synced_rebalance, "ConsumerRebalanceFailedException", self._set(member, status="failed"),
                   member=member)

    def _ev_fetchers_stopped(self, r: dict[str, Any], member: str) -> None:
        if r.get("partitions"):
            self._step(r, "stop-fetchers", f"{member} stops fetching {len(r['partitions'])} partitions",
                       "before giving partitions up it stops its fetchers and commits what it consumed",
                       L.close_fetchers, "ZKRebalancerListener.closeFetchers", member=member)

    def _ev_release(self, r: dict[str, Any], member: str) -> None:
        p = f"{r['topic']}/{r['partition']}"

        def apply(state: dict[str, Any]) -> None:
            state["owners"].pop(p, None)

        self._step(r, "release", f"{member} releases {p}", "every member deletes all its owner nodes first: "
                   "the partition has no owner until somebody claims it", Ownership.release_all,
                   "ZKRebalancerListener.releasePartitionOwnership", apply, member=member,
                   arrow={"src": member, "dst": "zookeeper", "label": f"delete owners/{p}", "tone": "write"})

    def _ev_claim(self, r: dict[str, Any], member: str) -> None:
        p, thread = f"{r['topic']}/{r['partition']}", short_thread(str(r.get("thread")))
        if r.get("ok"):
            def apply(state: dict[str, Any]) -> None:
                state["owners"][p] = {"thread": thread}

            self._step(r, "claim", f"{member} claims {p} as {thread}", "an ephemeral owner node: first come, "
                       "first served", Ownership.claim, "ZKRebalancerListener.reflectPartitionOwnershipDecision",
                       apply, member=member, arrow={"src": member, "dst": "zookeeper", "label": f"create owners/{p}",
                                                    "tone": "write"})
            return
        owner = short_thread(str(r.get("owner")))
        self._step(r, "conflict", f"conflict: {member} wants {p}, still owned by {owner}",
                   "its view of the group is ahead of (or behind) the owner's: claims race, nobody arbitrates",
                   Ownership.claim, "ZKRebalancerListener.reflectPartitionOwnershipDecision", member=member,
                   arrow={"src": member, "dst": "zookeeper", "label": f"create owners/{p}: NodeExists",
                          "tone": "conflict"})

    def _ev_rollback(self, r: dict[str, Any], member: str) -> None:
        p = f"{r['topic']}/{r['partition']}"

        def apply(state: dict[str, Any]) -> None:
            node = state["owners"].get(p)
            if node and member_of_thread(node["thread"]) == member:
                del state["owners"][p]

        self._step(r, "rollback", f"{member} rolls back its claim of {p}", "after one conflict the whole "
                   "attempt is undone, so it never owns half a decision", Ownership.claim,
                   "ZKRebalancerListener.reflectPartitionOwnershipDecision", apply, member=member)

    def _ev_fetchers_started(self, r: dict[str, Any], member: str) -> None:
        offsets = r.get("offsets") or {}
        self._step(r, "fetch", f"{member} starts fetching {len(offsets)} partitions",
                   "from the offsets it read: whatever was consumed after the last commit is delivered again",
                   L.start_fetchers, "ZKRebalancerListener.updateFetcher", member=member,
                   detail=[f"{p} from offset {o}" + (f": {self.consumed[p] - o} messages were already handed out "
                                                     f"(up to {self.consumed[p] - 1}), so they come again"
                                                     if o >= 0 and self.consumed.get(p, 0) > o else "")
                           for p, o in offsets.items()])

    def _ev_commit(self, r: dict[str, Any], member: str) -> None:
        p = f"{r['topic']}/{r['partition']}"

        def apply(state: dict[str, Any]) -> None:
            state["offsets"][p] = r["offset"]

        self._step(r, "commit", f"{member} commits {p} = {r['offset']}", "the offset the next owner resumes from",
                   OffsetCheckpoints.commit, "ZookeeperConsumerConnector.commitOffsets", apply, member=member,
                   arrow={"src": member, "dst": "zookeeper", "label": f"setData offsets/{p}", "tone": "write"})

    def _ev_session_expired(self, r: dict[str, Any], member: str) -> None:
        self._step(r, "expired", f"{member} lost its ZooKeeper session", "its ephemeral registration and owner "
                   "nodes are gone; its fetchers may still be handing out messages others will get too",
                   L.handle_new_session, "ZKSessionExpireListener.handleNewSession", self._expired(member),
                   member=member)

    def _expired(self, member: str):
        def apply(state: dict[str, Any]) -> None:
            _drop_ephemerals(state, member)
            state["members"].setdefault(member, {})["status"] = "session expired"

        return apply

    def _ev_registration_failed(self, r: dict[str, Any], member: str) -> None:
        self._step(r, "register-retry", f"{member} cannot register yet: retry in {r.get('retry_in_s', 0):.1f} s",
                   "the old session's registration is still there", L._register,
                   "ZookeeperConsumerConnector.registerConsumerInZK", member=member)


def _orphan(state: dict[str, Any], member: str) -> None:
    if member in state["ids"]:
        state["ids"][member]["orphan"] = True
    for node in state["owners"].values():
        if member_of_thread(node["thread"]) == member:
            node["orphan"] = True


def _drop_ephemerals(state: dict[str, Any], member: str) -> None:
    state["ids"].pop(member, None)
    state["owners"] = {p: n for p, n in state["owners"].items() if member_of_thread(n["thread"]) != member}



_CHANGE_EXPLAIN = {
    "join": "a new process starts: it will register under /ids and every member will hear of it",
    "leave": "a member shuts down: its ephemeral nodes go with its session",
    "kill": "kill -9: its session (and its ephemeral nodes) live on until zookeeper.session.timeout.ms",
    "expire": "the session expires on the server: ephemerals go at once, the member finds out later",
    "pause": "SIGSTOP: no pings, so the session expires if the pause outlasts it",
}


def build_zk(records: list[dict[str, Any]], window: Window) -> tuple[dict[str, Any], list[Step]]:
    return ZkSteps(records, window).build()
