"""Holds the embedded broker's ZooKeeper registration, as a ZooKeeper-mode Kafka broker holds its own.

Run as a background process by `zkconsumer cluster up`: it registers `/brokers/ids/<id>` (ephemeral),
re-registers after a session expiry, and ends its session cleanly on SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading

from fetcher_manager.broker import Broker
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.client import NodeExistsError, ZkClient

log = logging.getLogger("zkconsumer.registrar")


def register(zk: ZkClient, broker: Broker) -> None:
    for path in (layout.BROKER_IDS, layout.BROKER_TOPICS):
        zk.ensure_path(path)
    path = layout.broker_path(broker.id)
    try:
        zk.create(path, codecs.encode_broker(broker), ephemeral=True)
    except NodeExistsError:
        if zk.ephemeral_owner(path) != zk.session_id:
            raise
    log.info("registered broker %s at %s", broker.id, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--zookeeper", required=True)
    parser.add_argument("--broker-id", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    stop = threading.Event()
    renew = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    broker = Broker(args.broker_id, args.host, args.port)
    zk = ZkClient(args.zookeeper, session_timeout_ms=args.session_timeout_ms, log_id=f"broker-{broker.id}")
    zk.on_new_session(renew.set)
    zk.start()
    try:
        register(zk, broker)
        while not stop.wait(0.2):
            if renew.is_set():
                renew.clear()
                register(zk, broker)
    finally:
        zk.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
