"""The only place that talks to kazoo: bounded retries, watches that survive reconnects, and op counting.

Semantics follow zkclient as Kafka 0.8.2 used it (calls retry while disconnected; watches re-arm), with two
deliberate bounds: every call gives up after `request_timeout_s` (a synchronous kazoo call made while
SUSPENDED can otherwise block for minutes), and every request and watch notification is counted by kind so
the lab can measure the herd effect.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any, assert_never

from kazoo.client import KazooClient, KazooState, KeeperState
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionClosedError,
    ConnectionLoss,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from zkconsumer.errors import UserError
from zkconsumer.zookeeper.operations import WatchHandle, ZkOp, ZkOperations, ZnodeStat
from zkconsumer.zookeeper.security import ZkAuth, ZkAuthError, ZkTls, protected, redact_kazoo_logs

log = logging.getLogger(__name__)
# kazoo's connection logs every request it sends through this logger, the Auth packet's password included.
_KAZOO_LOG = logging.getLogger("kazoo.client")
redact_kazoo_logs(_KAZOO_LOG)

__all__ = [
    "NoNodeError", "NodeExistsError", "NotEmptyError", "WatchHandle", "ZkAuthError", "ZkClient", "ZkClosedError",
    "ZkUnavailableError",
]

_RETRYABLE = (ConnectionLoss, SessionExpiredError, KazooTimeoutError)
_WRITES = frozenset({"create", "set", "delete"})
# Short and persistent: the kazoo default backs off for up to an hour between reconnect attempts.
# How long a diagnosis of a failed TLS connection waits, after its handshake, for the server to refuse it.
TLS_REFUSAL_WAIT_S = 0.5
CONNECTION_RETRY = {"max_tries": -1, "delay": 0.05, "backoff": 1.5, "max_delay": 1.0}


class _Resending(threading.local):
    """Per thread: the failure a read or delete of a pipelined batch is being sent again after (`get_many`,
    `delete_many`), for the `on_resend` callbacks of the bounded path that sends it."""

    after: str | None = None


class ZkUnavailableError(UserError, RuntimeError):
    """ZooKeeper could not be reached within the bound; nothing was changed by the failed call."""


class ZkSessionChangedError(ZkUnavailableError):
    """A write failed with its session, and was not resent under the session that replaced it."""


class ZkClosedError(ZkUnavailableError):
    """The client was closed (the member is shutting down): no call is sent, and none waits."""


class ZkClient(ZkOperations):
    """A started kazoo session plus counters. `log_id` (the consumer id) prefixes every log line."""

    def __init__(
        self, connect: str, *, session_timeout_ms: int = 6000, connection_timeout_ms: int | None = None,
        request_timeout_s: float | None = None, log_id: str = "zk", auth: ZkAuth | None = None,
        tls: ZkTls | None = None,
    ) -> None:
        self.connect = connect
        self.log_id = log_id
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000.0
        self.request_timeout_s = request_timeout_s or max(10.0, 2 * session_timeout_ms / 1000.0)
        super().__init__()
        self._connected = threading.Event()
        self._closed = threading.Event()
        self._session_id: int | None = None
        self._new_session_callbacks: list[Callable[[], None]] = []
        self._state_callbacks: list[Callable[[str], None]] = []
        self._resend_callbacks: list[Callable[[str, str, str], None]] = []
        self._resending = _Resending()
        self.auth = auth
        self.tls = tls
        self._acl = auth.acl() if auth else None  # None: kazoo's OPEN_ACL_UNSAFE, the very requests of 0.8.2
        self._auth_failed = threading.Event()
        self._kazoo = KazooClient(
            hosts=connect, timeout=session_timeout_ms / 1000.0, connection_retry=dict(CONNECTION_RETRY),
            command_retry={"max_tries": 3, "delay": 0.05, "backoff": 1.5, "max_delay": 1.0}, **self._security_kwargs(),
        )
        self._kazoo.add_listener(self._on_state)

    # --- lifecycle ---------------------------------------------------------------------------------

    def _security_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"logger": _KAZOO_LOG}
        if self.auth:
            kwargs["auth_data"] = self.auth.auth_data
        if self.tls:
            kwargs.update(self.tls.kazoo_kwargs())
        return kwargs

    def start(self) -> ZkClient:
        if self.tls:
            self.tls.check_files()
        try:
            self._kazoo.start(timeout=self.connection_timeout_s)
        except AuthFailedError:  # the server answered the Auth packet before start() returned
            self._kazoo.stop()
            self._kazoo.close()
            raise self._auth_failed_error() from None
        except KazooTimeoutError:
            self._kazoo.stop()
            self._kazoo.close()
            reason = self._tls_failure() if self.tls else None
            if reason:
                raise ZkUnavailableError(
                    f"could not connect to ZooKeeper at {self.connect} over TLS: {reason}; check "
                    "zookeeper.ssl.truststore.location (the CA that signed the server's certificate), "
                    "zookeeper.ssl.endpoint.identification.enable and that the port is the server's secureClientPort"
                ) from None
            raise ZkUnavailableError(
                f"could not connect to ZooKeeper at {self.connect} within {self.connection_timeout_s:.1f} s: "
                "check zookeeper.connect and that the server is up"
            ) from None
        self._session_id = self._kazoo.client_id[0] if self._kazoo.client_id else None
        self._connected.set()
        if self.auth:
            # kazoo reports CONNECTED before the server answered the Auth packet: one request settles it.
            try:
                self.exists("/")
            except ZkAuthError:
                self.close()  # a caller that sees start() fail holds nothing to close
                raise
        self._ensure_chroot()
        return self

    def _tls_failure(self) -> str | None:
        """Why a TLS handshake with the first server fails (kazoo only logs it and retries), or None."""
        host, _, port = self.connect.split("/", 1)[0].split(",")[0].rpartition(":")
        assert self.tls is not None
        try:
            context = self.tls.context()
            with socket.create_connection((host.strip("[]"), int(port)), timeout=self.connection_timeout_s) as raw, \
                    context.wrap_socket(raw, server_hostname=host.strip("[]")) as secured:
                # Under TLS 1.3 a server that requires a client certificate refuses a missing one only after the
                # client's Finished, so the refusal arrives on the first read: wait briefly for it. A server that
                # accepted the handshake sends nothing until the client speaks (a read times out).
                secured.settimeout(TLS_REFUSAL_WAIT_S)
                try:
                    if secured.recv(1) == b"":
                        return (f"{host}:{port} closed the connection after the TLS handshake (as a server that "
                                "requires a client certificate does): set zookeeper.ssl.keystore.location")
                except TimeoutError:
                    return None
                return None
        except ssl.SSLError as exc:
            if "CERTIFICATE_REQUIRED" in str(exc) or "BAD_CERTIFICATE" in str(exc):
                return (f"{host}:{port} requires a client certificate ({exc.reason or exc}): set "
                        "zookeeper.ssl.keystore.location (the client's certificate and key)")
            return f"TLS handshake with {host}:{port} failed ({exc.__class__.__name__}: {exc})"
        except OSError as exc:
            return f"{host}:{port} cannot be reached ({exc})"

    def _ensure_chroot(self) -> None:
        chroot = self._kazoo.chroot
        if chroot and not self.exists("/"):
            root = KazooClient(hosts=self.connect.split("/", 1)[0], timeout=self.session_timeout_ms / 1000.0,
                               connection_retry=dict(CONNECTION_RETRY), **self._security_kwargs())
            root.start(timeout=self.connection_timeout_s)
            try:
                root.ensure_path(chroot)
            finally:
                root.stop()
                root.close()

    def close(self) -> None:
        """End the session (ephemeral nodes vanish on the server) and free the connection threads.

        Calls waiting for a connection fail at once with `ZkClosedError`, so nothing (an auto-commit, a claim)
        can reach ZooKeeper after the member's final commit."""
        self._closed.set()
        self._connected.set()  # wake every waiter in `_call`; it sees `_closed` and fails fast
        try:
            self._kazoo.stop()
        finally:
            self._kazoo.close()

    def __enter__(self) -> ZkClient:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return self._connected.is_set() and not self._closed.is_set()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def session_id(self) -> int | None:
        return self._session_id

    @property
    def session_credentials(self) -> tuple[int, bytes] | None:
        """(session id, password): what a test needs to force a real server-side expiry."""
        credentials: tuple[int, bytes] | None = self._kazoo.client_id
        return credentials

    def on_new_session(self, callback: Callable[[], None]) -> None:
        """Call `callback` (must not block) whenever the client comes back with a *different* session."""
        self._new_session_callbacks.append(callback)

    def on_state_change(self, callback: Callable[[str], None]) -> None:
        """Call `callback(state)` (must not block) on every connection state change: "connected", "suspended"
        (connection lost, session may survive) or "lost" (session expired or closed)."""
        self._state_callbacks.append(callback)

    def on_resend(self, callback: Callable[[str, str, str], None]) -> None:
        """Call `callback(op, path, after)` (must not block) just before a request is sent again because its earlier
        send failed (`after`: the failure's name, ConnectionLoss after a dropped connection): what a connection loss
        costs on the wire beyond the requests themselves (the lab's `resent` events,
        zkconsumer/lab/rules/reconnects.py)."""
        self._resend_callbacks.append(callback)

    def _resent(self, op: str, path: str, after: str) -> None:
        for callback in list(self._resend_callbacks):
            try:
                callback(op, path, after)
            except Exception:
                log.exception("%s: resend callback failed", self.log_id)

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: record and signal only, never block here.
        if state == KazooState.LOST and self._kazoo.client_state == KeeperState.AUTH_FAILED:
            # kazoo stops connecting for good: fail every waiting and later call at once instead of after the bound.
            self._auth_failed.set()
            self._connected.set()
        self._count(f"state:{state.lower()}")
        for state_callback in list(self._state_callbacks):
            state_callback(state.lower())
        if state == KazooState.CONNECTED:
            new_id = self._kazoo.client_id[0] if self._kazoo.client_id else None
            renewed = self._session_id is not None and new_id != self._session_id
            self._session_id = new_id
            self._connected.set()
            if renewed:
                log.warning("%s: ZooKeeper session expired; new session 0x%x", self.log_id, new_id or 0)
                for callback in list(self._new_session_callbacks):
                    callback()
        elif not self._closed.is_set():
            self._connected.clear()
            log.info("%s: ZooKeeper connection %s", self.log_id, state)

    # --- bounded calls -----------------------------------------------------------------------------

    def _request(self, kind: str, op: ZkOp, path: str, *, data: bytes | None = None, ephemeral: bool = False) -> Any:
        deadline = time.monotonic() + self.request_timeout_s
        # The session a write was decided in: the caller's, when it asked. A write asked for while disconnected
        # waits below; if the session expires meanwhile it must not go out under the next one either (a commit
        # decided under the old session, sent once the new one connected, moved an offset back: docs/chaos.md).
        sent_in: int | None = self._session_id if op in _WRITES else None
        # a read or delete of a pipelined batch the connection lost is sent again here (get_many, delete_many)
        failed = self._resending.after
        self._resending.after = None
        while True:
            if self._closed.is_set():
                raise ZkClosedError(f"{self.log_id}: the ZooKeeper client is closed ({kind} {path})")
            if self._auth_failed.is_set():
                raise self._auth_failed_error()
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._connected.wait(remaining):
                raise ZkUnavailableError(
                    f"{self.log_id}: ZooKeeper at {self.connect} unreachable for {self.request_timeout_s:.0f} s "
                    f"({kind} {path})"
                )
            if op in _WRITES:
                # A write the old session may not have made is not made by the new one either: it was decided
                # under the old session (an offset of a partition owned then), and the caller must decide again.
                if sent_in is not None and self._session_id != sent_in:
                    raise ZkSessionChangedError(f"{self.log_id}: the ZooKeeper session expired during {kind} {path}; "
                                                "not resent under the new session")
                sent_in = self._session_id
            self._count(kind)
            if failed is not None:
                self._resent(op, path, failed)
            try:
                return self._send(op, path, data, ephemeral).get(timeout=remaining)
            except _RETRYABLE as exc:
                log.debug("%s: %s %s failed with %r; retrying", self.log_id, kind, path, exc)
                failed = type(exc).__name__
                time.sleep(0.05)
            except ConnectionClosedError:
                raise ZkClosedError(f"{self.log_id}: the ZooKeeper client is closed") from None
            except AuthFailedError:
                raise self._auth_failed_error() from None
            except NoAuthError:
                raise self._no_auth_error(kind, path) from None

    def _auth_failed_error(self) -> ZkAuthError:
        who = self.auth.describe() if self.auth else "no credentials"
        return ZkAuthError(f"{self.log_id}: ZooKeeper at {self.connect} refused the credentials ({who}) and closed "
                           "the session: check zookeeper.auth.scheme and zookeeper.auth.credentials")

    def _no_auth_error(self, kind: str, path: str) -> ZkAuthError:
        who = self.auth.describe() if self.auth else "a client without credentials"
        return ZkAuthError(
            f"{self.log_id}: ZooKeeper refused {kind} {path} (NoAuth): the ACL of the node (of its parent for a create "
            f"or delete) does not give {who} that permission; if another identity created the group, set its "
            "zookeeper.auth.credentials (a wrong password is just another identity to ZooKeeper)"
        )

    def get_many(self, paths: list[str]) -> list[tuple[bytes | None, ZnodeStat] | None]:
        """Every read sent before the first answer is awaited (pipelined on the one connection). ZooKeeper answers
        one session's requests in the order sent, so the requests and what they can see are those of the same
        reads made one after another; only the round trips between them are gone. A read the connection loses is
        sent again through the bounded path (and counted again, as it is sent again)."""
        if len(paths) < 2 or not self.connected:
            return super().get_many(paths)  # the bounded path waits for a connection and retries
        sent = []
        for path in paths:
            self._count("get_data")
            sent.append(self._send("get", path, None, False))
        deadline = time.monotonic() + self.request_timeout_s
        results: list[tuple[bytes | None, ZnodeStat] | None] = []
        for path, pending in zip(paths, sent, strict=True):
            try:
                results.append(pending.get(timeout=max(0.0, deadline - time.monotonic())))
            except NoNodeError:
                results.append(None)
            except _RETRYABLE as exc:
                self._resending.after = type(exc).__name__
                results.append(self.get(path))
            except ConnectionClosedError:
                raise ZkClosedError(f"{self.log_id}: the ZooKeeper client is closed") from None
        return results

    def delete_many(self, paths: list[str]) -> None:
        """Every delete sent before the first answer is awaited, as `get_many` does for reads: the same requests in
        the same order, one round trip (claim on deletion: a member's releases reach the waiting claimers together,
        docs/modes.md). A missing node is fine; a delete the connection loses goes again through `delete`."""
        if len(paths) < 2 or not self.connected:
            super().delete_many(paths)
            return
        sent = []
        sent_in = self._session_id
        for path in paths:
            self._count("delete")
            sent.append(self._send("delete", path, None, False))
        deadline = time.monotonic() + self.request_timeout_s
        for path, pending in zip(paths, sent, strict=True):
            try:
                pending.get(timeout=max(0.0, deadline - time.monotonic()))
            except NoNodeError:
                pass
            except _RETRYABLE as exc:
                if self._session_id != sent_in:  # as `_request`: never resent under a new session
                    raise ZkSessionChangedError(f"{self.log_id}: the ZooKeeper session expired during delete "
                                                f"{path}; not resent under the new session") from None
                self._resending.after = type(exc).__name__
                self.delete(path)
            except ConnectionClosedError:
                raise ZkClosedError(f"{self.log_id}: the ZooKeeper client is closed") from None

    def _send(self, op: ZkOp, path: str, data: bytes | None, ephemeral: bool) -> Any:
        k = self._kazoo
        if op == "create":  # never kazoo's makepath: parents are ours, with null data
            acl = self._acl if self._acl and protected(path) else None
            return k.create_async(path, data, acl, ephemeral, False, False)
        if op == "set":
            return k.set_async(path, data, -1)
        if op == "delete":
            return k.delete_async(path, -1)
        if op == "get":
            return k.get_async(path)
        if op == "exists":
            return k.exists_async(path)
        if op == "get_children":
            return k.get_children_async(path)
        assert_never(op)

    def _install_children_watch(self, path: str, on_change: Callable[[list[str]], bool | None]) -> None:
        ChildrenWatch(self._kazoo, path, on_change)

    def _install_data_watch(self, path: str, on_change: Callable[..., bool | None]) -> None:
        DataWatch(self._kazoo, path, on_change)
