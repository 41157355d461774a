"""ZooKeeper security settings as the client uses them: digest authentication, the ACL of the nodes a consumer
creates, and TLS (docs/security.md).

Digest authentication (ZooKeeper's `DigestAuthenticationProvider`) never refuses a password: the server turns
`user:password` into the identity `digest:user:base64(sha1(user:password))` and accepts it. A wrong password is
therefore another identity, which the server refuses only where an ACL asks for the right one: a NoAuth on the
first write into a group that the right identity created. `ZkAuthError` says so in its message.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, field

from kazoo.protocol.serialization import Auth
from kazoo.security import ACL, READ_ACL_UNSAFE, make_digest_acl

from zkconsumer.errors import UserError
from zkconsumer.zookeeper import layout

DIGEST = "digest"
REDACTED = "<redacted>"


class ZkAuthError(UserError, PermissionError):
    """ZooKeeper refused the session's credentials (AUTH_FAILED) or a request (NoAuth) for want of permission."""


class ZkTlsError(UserError):
    """A `zookeeper.ssl.*` file cannot be read or is not PEM."""


@dataclass(frozen=True)
class ZkAuth:
    """`zookeeper.auth.scheme` and `zookeeper.auth.credentials` (`user:password`); the password never shows in a
    repr, a log line or an error message."""

    user: str
    password: str = field(repr=False)
    scheme: str = DIGEST

    @property
    def auth_data(self) -> list[tuple[str, str]]:
        return [(self.scheme, f"{self.user}:{self.password}")]

    def acl(self) -> list[ACL]:
        """This identity may do anything; everyone else may only read (and list children)."""
        return [make_digest_acl(self.user, self.password, all=True), *READ_ACL_UNSAFE]

    def describe(self) -> str:
        return f"{self.scheme} user {self.user!r}"


def protected(path: str) -> bool:
    """Whether a node the consumer creates at `path` (relative to the chroot) gets the protective ACL.

    Only a group's subtree (`/consumers/<group>` and below: registrations, owners, offsets and their parents).
    `/consumers` itself, `/brokers/...` paths a watch creates before any broker did, and the chroot stay open, as
    today: other groups (other identities) create their own group under `/consumers`, and brokers register under
    `/brokers`."""
    return path.startswith(layout.CONSUMERS + "/") and path != layout.CONSUMERS + "/"


@dataclass(frozen=True)
class ZkTls:
    """The `zookeeper.ssl.*` settings that kazoo can use (PEM files only)."""

    truststore: str | None = None  # CA certificates that sign the server's; None: the system's default CAs
    keystore: str | None = None  # PEM holding the client's certificate and private key, for mutual TLS
    keystore_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True

    def context(self) -> ssl.SSLContext:
        """The context kazoo builds from the same settings (`kazoo.handlers.utils.create_tcp_connection`)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        context.check_hostname = self.check_hostname
        context.verify_mode = ssl.CERT_REQUIRED
        if self.truststore:
            context.load_verify_locations(self.truststore)
        if self.keystore:
            context.load_cert_chain(self.keystore, self.keystore, self.keystore_password)
        return context

    def check_files(self) -> None:
        """Fail before connecting on a missing or unreadable file: kazoo would only log it and retry for ever."""
        for key, path in (("zookeeper.ssl.truststore.location", self.truststore),
                          ("zookeeper.ssl.keystore.location", self.keystore)):
            if path is None:
                continue
            try:
                with open(path, "rb"):
                    pass
            except OSError as exc:
                raise ZkTlsError(f"{key}={path!r} cannot be read ({exc.strerror}): fix the path") from None
        try:
            self.context()
        except ssl.SSLError as exc:
            raise ZkTlsError(f"the zookeeper.ssl.* files cannot be loaded as PEM ({exc.reason or exc}): the trust "
                             "store must hold PEM certificates, the key store a PEM certificate and private key "
                             "(zookeeper.ssl.keystore.password if the key is encrypted)") from None

    def kazoo_kwargs(self) -> dict[str, object]:
        return {
            "use_ssl": True, "ca": self.truststore, "certfile": self.keystore, "keyfile": self.keystore,
            "keyfile_password": self.keystore_password, "verify_certs": True, "check_hostname": self.check_hostname,
        }


class RedactAuth(logging.Filter):
    """kazoo logs every request it sends at DEBUG, its Auth packet (`scheme`, `user:password`) included: the
    credentials are replaced before the record is formatted."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(arg, Auth) for arg in record.args):
            record.args = tuple(arg._replace(auth=REDACTED) if isinstance(arg, Auth) else arg for arg in record.args)
        return True


_REDACT = RedactAuth()


def redact_kazoo_logs(logger: logging.Logger) -> None:
    """Attach the filter once (filters are a set-like list: adding it again is a no-op)."""
    logger.addFilter(_REDACT)
