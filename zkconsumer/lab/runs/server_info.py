"""What a lab run really ran against, asked of the servers themselves, for the run's manifest.

ZooKeeper: each server's `srvr` answer (`Zookeeper version: 3.9.5-<commit>, built on ...`, `Mode: ...`), so an
external ensemble records its own version, not the embedded jar's. The broker: an embedded one is Apache Kafka
at the version of the `kafka_2.13` jar it ran; any broker is also asked, on a plain socket, for ApiVersions
(v0, which every broker answers) and Metadata (v2, the first with the cluster id), and for its classic group
settings (DescribeConfigs). Nothing is inferred: an external broker's kind and version are unknown unless it
says so, and it does not (ApiVersions carries only the API ranges), so they are recorded as null next to what it
did tell.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from typing import Any

from kafka.errors import KafkaError

from zkconsumer.embedded.process import EmbeddedError, four_letter_word
from zkconsumer.lab.wire import kafka_codec
from zkconsumer.lab.wire.frames import read_frame
from zkconsumer.lab.wire.tcp import host_port

log = logging.getLogger(__name__)
_TIMEOUT_S = 5.0
_METADATA_VERSION = 2  # the first Metadata response with cluster_id (KIP-78)
# The broker settings of the classic group protocol the coordinator design runs on (Kafka 3.9 also reports the
# new consumer and share group protocols' group.consumer.* and group.share.*, which no lab member uses).
CLASSIC_GROUP_SETTINGS = ("group.coordinator.rebalance.protocols", "group.initial.rebalance.delay.ms",
                          "group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.max.size")
# The KRaft broker's: the classic ones (the cooperative design's) and the consumer protocol's (KIP-848), which
# the broker owns: its members cannot set their heartbeat, session or assignor list.
CONSUMER_GROUP_SETTINGS = (*CLASSIC_GROUP_SETTINGS, "group.consumer.heartbeat.interval.ms",
                           "group.consumer.min.heartbeat.interval.ms", "group.consumer.session.timeout.ms",
                           "group.consumer.assignors", "group.consumer.max.size")


def zookeeper_info(hosts: list[str], embedded: bool) -> dict[str, Any]:
    """{"embedded", "version", "servers": [{"address", "version", "mode"}]} from every server's `srvr`;
    `version` is the servers' common version (None if they differ or none answered)."""
    servers = []
    for address in hosts:
        host, port = host_port(address)
        answer = four_letter_word(port, "srvr", host=host, timeout=_TIMEOUT_S)
        fields = dict(line.split(": ", 1) for line in answer.splitlines() if ": " in line)
        full = fields.get("Zookeeper version")
        servers.append({"address": address, "version": full.split("-", 1)[0].split(",", 1)[0] if full else None,
                        "build": full, "mode": fields.get("Mode")})
    versions = {s["version"] for s in servers}
    return {"embedded": embedded, "version": versions.pop() if len(versions) == 1 else None, "servers": servers}


def broker_info(bootstrap: str, *, embedded: bool, kind: str | None = None, version: str | None = None,
                settings: tuple[str, ...] = CLASSIC_GROUP_SETTINGS) -> dict[str, Any]:
    """What the broker at `bootstrap` tells about itself (API ranges, cluster, its group settings), plus the
    kind and version the lab knows when it started the broker itself."""
    info: dict[str, Any] = {"embedded": embedded, "kind": kind, "version": version, "address": bootstrap}
    try:
        info.update(ask_broker(bootstrap))
        node = info["brokers"][0].split("@", 1)[0] if info["brokers"] else None
        info["settings"] = group_settings(bootstrap, node, settings) if node is not None else None
    except (OSError, ValueError, kafka_codec.KafkaDecodeError, KafkaError) as exc:
        log.warning("lab: the broker at %s did not describe itself: %s", bootstrap, exc)
        info["error"] = f"{type(exc).__name__}: {exc}"
    return info


def group_settings(bootstrap: str, broker_id: str,
                   keys: tuple[str, ...] = CLASSIC_GROUP_SETTINGS) -> dict[str, str]:
    """The broker's classic group settings as it reports them (DescribeConfigs): what it really runs with, e.g.
    `group.initial.rebalance.delay.ms`, whoever configured it."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="lab-server-info",
                             request_timeout_ms=int(_TIMEOUT_S * 1000))
    try:
        found = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, broker_id)], config_filter="all")
    finally:
        admin.close()
    configs = next(iter(found.get("broker", {}).values()), {})
    return {key: configs[key]["value"] for key in keys if key in configs}


def ask_broker(bootstrap: str) -> dict[str, Any]:
    """{"api_versions": {api: [min, max]}, "cluster_id", "controller_id", "brokers"} from ApiVersions v0 and
    Metadata v2 on one connection."""
    from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

    with socket.create_connection(host_port(bootstrap), timeout=_TIMEOUT_S) as sock:
        versions = _call(sock, ApiVersionsRequest[0](), 1)
        if versions["error_code"]:
            raise ValueError(f"ApiVersions answered error {versions['error_code']}")
        metadata = _call(sock, MetadataRequest[_METADATA_VERSION](topics=[]), 2)
    api_versions = {kafka_codec.api_name(k["api_key"]): [k["min_version"], k["max_version"]]
                    for k in versions["api_keys"]}
    return {"api_versions": dict(sorted(api_versions.items())), "cluster_id": metadata.get("cluster_id"),
            "controller_id": metadata.get("controller_id"),
            "brokers": sorted(f"{b['node_id']}@{b['host']}:{b['port']}" for b in metadata.get("brokers", []))}


def wait_group_coordinator(bootstrap: str, timeout: float = 60.0) -> None:
    """Until the broker answers FindCoordinator without error. A fresh broker creates `__consumer_offsets` on the
    first FindCoordinator and answers COORDINATOR_NOT_AVAILABLE (15) until its partitions are loaded: waiting here
    keeps that one-off cost out of the first run's counts and times."""
    from kafka.protocol.metadata import FindCoordinatorRequest

    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(host_port(bootstrap), timeout=_TIMEOUT_S) as sock:
                error = _call(sock, FindCoordinatorRequest[0](key="lab-warm-up"), 1)["error_code"]
        except (OSError, ValueError, kafka_codec.KafkaDecodeError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        if error == 0:
            return
        if time.monotonic() > deadline:
            raise EmbeddedError(f"the broker at {bootstrap} had no group coordinator after {timeout:.0f} s "
                                f"(FindCoordinator: {error}): see its log")
        time.sleep(0.2)


def _call(sock: socket.socket, request: Any, correlation_id: int) -> dict[str, Any]:
    request.with_header(correlation_id=correlation_id, client_id="lab-server-info")
    sock.sendall(request.encode(header=True, framed=True))
    payload = read_frame(sock)
    if struct.unpack_from(">i", payload)[0] != correlation_id:
        raise ValueError("a response to another request")
    cls = kafka_codec.response_class(request.API_KEY, request.API_VERSION)
    if cls is None:
        raise ValueError(f"kafka-python has no response class for api {request.API_KEY} v{request.API_VERSION}")
    return cls.decode(payload[4:], version=request.API_VERSION).to_dict(json=False)


def servers_line(manifest: dict[str, Any]) -> str | None:
    """"ZooKeeper 3.9.5, Apache Kafka 3.9.2" (embedded) or with "external" and what an external broker told
    (its cluster id): a run's servers in one line, from its manifest's `servers` (what `zookeeper_info` and
    `broker_info` found); None for runs made before manifests recorded them."""
    servers = manifest.get("servers")
    if not isinstance(servers, dict):
        return None
    zookeeper, broker = servers.get("zookeeper") or {}, servers.get("broker") or {}
    parts = [f"ZooKeeper {zookeeper.get('version') or 'of unknown version'}"
             + ("" if zookeeper.get("embedded") else " (external)")]
    if broker.get("embedded"):
        parts.append(f"{broker.get('kind')} {broker.get('version')}")
    else:
        parts.append(f"an external broker (cluster {broker.get('cluster_id') or 'unknown'})")
    return ", ".join(parts)
