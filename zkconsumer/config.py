"""Consumer configuration: the Kafka 0.8.2 ``ConsumerConfig`` + ``ZKConfig`` keys, defaults and checks.

One snake_case field per Kafka key (``zookeeper.session.timeout.ms`` -> ``zookeeper_session_timeout_ms``);
the Kafka key of a field is always its name with ``_`` replaced by ``.``. Values are coerced and validated
once, in ``__post_init__``, so a ``ConsumerConfig`` that exists is a valid one however it was built.

Where we are stricter than 0.8.2 (each is a mistake 0.8.2 only reports much later, if ever):

* ``consumer.id`` is checked with the ``group.id`` charset: it becomes part of the znode name
  ``/consumers/<group>/ids/<group>_<consumer.id>``, of owner-node data and of metric names, so a ``/`` or a
  space would silently create nested nodes or unparseable names.
* ``group.id`` may not be ``.`` or ``..``: ZooKeeper rejects those as path components.
* ``partition.assignment.strategy`` typos are rejected (0.9 behaviour; 0.8.2 silently used ``range``).
* ``fetch.wait.max.ms <= socket.timeout.ms`` is enforced (0.9 behaviour; 0.8.2's check ran too early to work):
  otherwise every long poll on an idle partition ends in a socket timeout.
* Integers must fit a Java ``Int`` like in Kafka; whitespace around any value is ignored.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from jproperties import Properties, PropertyError

from zkconsumer.errors import UserError
from zkconsumer.zookeeper.security import DIGEST, ZkAuth, ZkTls

log = logging.getLogger(__name__)

AUTO_OFFSET_RESET_VALUES = ("smallest", "largest")
OFFSETS_STORAGE_VALUES = ("zookeeper", "kafka")
# "roundrobin-0.10.2" is our name for the KAFKA-2434 round robin (no identical-subscription precondition); "sticky"
# is not Kafka's: the opt-in sticky assignor every member agrees on (docs/modes.md).
PARTITION_ASSIGNMENT_STRATEGIES = ("range", "roundrobin", "roundrobin-0.10.2", "sticky")

_LEGAL_ID = re.compile(r"[a-zA-Z0-9._-]+")
_ID_RULE = "only ASCII letters, digits, '.', '_' and '-' are allowed (non-empty)"
_INT_LITERAL = re.compile(r"[+-]?[0-9]+")
_PORT = re.compile(r"[0-9]{1,5}")
_JAVA_INT_MIN, _JAVA_INT_MAX = -(2**31), 2**31 - 1
_REQUIRED = ("group_id", "zookeeper_connect")
# Fields whose default is computed from another field; None means "derive it".
_DERIVED = (
    "zookeeper_connection_timeout_ms",
    "rebalance_backoff_ms",
    "client_id",
    "dual_commit_enabled",
)


class ConfigError(UserError, ValueError):
    """A configuration value is missing or invalid; the one-line message names key, value and the fix."""


def _key(name: str) -> str:
    return name.replace("_", ".")


def _int(default: int | None, minimum: int | None) -> Any:
    return field(default=default, metadata={"kind": "int", "min": minimum})


def _bool(default: bool | None) -> Any:
    return field(default=default, metadata={"kind": "bool"})


def _str(default: str | None) -> Any:
    return field(default=default, metadata={"kind": "str"})


def _secret(default: str | None) -> Any:
    """A string never shown: not in the repr, not in an error message (docs/security.md)."""
    return field(default=default, repr=False, metadata={"kind": "str", "secret": True})


@dataclass(frozen=True)
class ConsumerConfig:
    """Kafka 0.8.2 high-level consumer configuration (`ConsumerConfig.scala`, `ZKConfig.scala`; every key is in
    docs/config.md), immutable and validated on construction.

    ``offsets.storage=kafka`` commits and fetches through the broker's offset manager, and
    ``dual.commit.enabled`` (default: true with Kafka storage, as 0.8.2) also writes ZooKeeper and reads the
    larger of both (docs/kafka-offsets.md). Fields listed in ``_DERIVED`` take ``None`` to mean "follow the
    field they default to"; after construction they always hold the effective value.
    """

    group_id: str = _str(None)
    zookeeper_connect: str = _str(None)
    consumer_id: str | None = _str(None)
    zookeeper_session_timeout_ms: int = _int(6000, 1)
    zookeeper_connection_timeout_ms: int | None = _int(None, 1)  # default: session timeout
    zookeeper_sync_time_ms: int = _int(2000, 0)
    rebalance_max_retries: int = _int(4, 1)
    rebalance_backoff_ms: int | None = _int(None, 0)  # default: zookeeper.sync.time.ms
    refresh_leader_backoff_ms: int = _int(200, 0)
    auto_commit_enable: bool = _bool(True)
    auto_commit_interval_ms: int = _int(60000, 1)  # a zero period is rejected by Java's scheduler too
    auto_offset_reset: str = _str("largest")
    fetch_message_max_bytes: int = _int(1024 * 1024, 1)
    fetch_min_bytes: int = _int(1, 0)  # 0 is a valid FetchRequest: "answer immediately"
    fetch_wait_max_ms: int = _int(100, 0)
    fetch_max_bytes: int = _int(50 * 1024 * 1024, 1)
    num_consumer_fetchers: int = _int(1, 1)
    queued_max_message_chunks: int = _int(2, 1)
    consumer_timeout_ms: int = _int(-1, None)  # any negative value blocks forever
    socket_timeout_ms: int = _int(30000, 1)
    socket_receive_buffer_bytes: int = _int(64 * 1024, 1)
    client_id: str | None = _str(None)  # default: group.id
    exclude_internal_topics: bool = _bool(True)
    partition_assignment_strategy: str = _str("range")
    offsets_storage: str = _str("zookeeper")
    dual_commit_enabled: bool | None = _bool(None)  # default: offsets.storage == "kafka"
    offsets_channel_backoff_ms: int = _int(1000, 0)
    offsets_channel_socket_timeout_ms: int = _int(10000, 1)
    offsets_commit_max_retries: int = _int(5, 0)
    # ZooKeeper security (docs/security.md); not in 0.8.2. The zookeeper.ssl.* keys are those of later Kafka.
    zookeeper_auth_scheme: str | None = _str(None)  # only "digest"; implied by credentials
    zookeeper_auth_credentials: str | None = _secret(None)  # "user:password"
    zookeeper_ssl_client_enable: bool = _bool(False)
    zookeeper_ssl_truststore_location: str | None = _str(None)
    zookeeper_ssl_truststore_type: str | None = _str(None)  # only PEM
    zookeeper_ssl_keystore_location: str | None = _str(None)
    zookeeper_ssl_keystore_password: str | None = _secret(None)
    zookeeper_ssl_keystore_type: str | None = _str(None)  # only PEM
    zookeeper_ssl_endpoint_identification_enable: bool = _bool(True)
    # Opt-in fixes beyond 0.8.2 (docs/modes.md), each off by default: off, the member is 0.8.2 byte for byte.
    zkconsumer_incremental_ownership: bool = _bool(False)
    zkconsumer_patient_membership_ms: int = _int(0, 0)  # the settle window; 0 = rebalance at once, as 0.8.2
    zkconsumer_claim_on_deletion: bool = _bool(False)
    zkconsumer_consensus_barrier: bool = _bool(False)
    # Which derived fields were left to their default, so with_overrides() can re-derive them.
    _derived: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        derived = set()
        for f in fields(self):
            if not f.init:
                continue
            value = getattr(self, f.name)
            if value is None:
                if f.name in _REQUIRED:
                    raise ConfigError(f"{_key(f.name)} is required: set it in the consumer properties")
                if f.name in _DERIVED:
                    derived.add(f.name)
                continue
            object.__setattr__(self, f.name, _coerce(f.metadata["kind"], _key(f.name), value,
                                                     secret=f.metadata.get("secret", False)))
        object.__setattr__(self, "offsets_storage", self.offsets_storage.lower())
        defaults = {
            "zookeeper_connection_timeout_ms": self.zookeeper_session_timeout_ms,
            "rebalance_backoff_ms": self.zookeeper_sync_time_ms,
            "client_id": self.group_id,
            "dual_commit_enabled": self.offsets_storage == "kafka",
        }
        for name in derived:
            object.__setattr__(self, name, defaults[name])
        object.__setattr__(self, "_derived", frozenset(derived))
        self._validate()

    def _validate(self) -> None:
        for f in fields(self):
            minimum = f.metadata.get("min")
            value = getattr(self, f.name)
            if minimum is not None and value < minimum:
                raise ConfigError(f"{_key(f.name)}={value!r} is invalid: must be >= {minimum}")
        _check_id("group.id", self.group_id)
        if self.group_id in (".", ".."):
            raise ConfigError(f"group.id={self.group_id!r} is invalid: ZooKeeper forbids '.' and '..' here")
        _check_id("client.id", self.client_id)
        if self.consumer_id is not None:
            _check_id("consumer.id", self.consumer_id)
        _check_choice("auto.offset.reset", self.auto_offset_reset, AUTO_OFFSET_RESET_VALUES)
        strategy = self.partition_assignment_strategy
        _check_choice("partition.assignment.strategy", strategy, PARTITION_ASSIGNMENT_STRATEGIES)
        _check_choice("offsets.storage", self.offsets_storage, OFFSETS_STORAGE_VALUES)
        _split_connect(self.zookeeper_connect)
        self._validate_security()
        if self.fetch_wait_max_ms > self.socket_timeout_ms:
            raise ConfigError(
                f"fetch.wait.max.ms={self.fetch_wait_max_ms!r} is invalid: must be <= "
                f"socket.timeout.ms ({self.socket_timeout_ms}), or idle fetches end in socket timeouts"
            )

    def _validate_security(self) -> None:
        scheme = self.zookeeper_auth_scheme
        if scheme is not None and scheme != DIGEST:
            raise ConfigError(
                f"zookeeper.auth.scheme={scheme!r} is invalid: only {DIGEST!r} is supported (ZooKeeper digest "
                f"authentication, no JAAS file): set zookeeper.auth.scheme={DIGEST} and "
                "zookeeper.auth.credentials=user:password"
            )
        credentials = self.zookeeper_auth_credentials
        if scheme is not None and credentials is None:
            raise ConfigError("zookeeper.auth.credentials is required when zookeeper.auth.scheme is set: "
                              "add zookeeper.auth.credentials=user:password")
        if credentials is not None and (":" not in credentials or not credentials.partition(":")[0]):
            raise ConfigError("zookeeper.auth.credentials (value hidden) is invalid: expected user:password "
                              "with a non-empty user")
        for key in ("zookeeper.ssl.truststore.type", "zookeeper.ssl.keystore.type"):
            kind = getattr(self, key.replace(".", "_"))
            if kind is not None and kind.upper() != "PEM":
                raise ConfigError(
                    f"{key}={kind!r} is invalid: only PEM is supported (this client is not on a JVM): export the "
                    f"store to PEM (e.g. `openssl pkcs12 -in store.p12 -out store.pem -nodes`) and set {key}=PEM"
                )
        if self.zookeeper_ssl_client_enable is False and (self.zookeeper_ssl_truststore_location
                                                          or self.zookeeper_ssl_keystore_location):
            log.warning("zookeeper.ssl.* locations are set but zookeeper.ssl.client.enable=false: "
                        "the ZooKeeper connection is not encrypted")

    @classmethod
    def from_properties(cls, source: str | os.PathLike[str] | Mapping[str, object]) -> ConsumerConfig:
        """Build from a Java ``.properties`` file path or a mapping of Kafka keys.

        Mapping values may be strings or already typed (``"6000"`` and ``6000``; ``"TRUE"`` and ``True``);
        ``None`` means "not set". Unknown keys only log a warning, like Kafka's ``VerifiableProperties``.
        """
        raw = dict(source) if isinstance(source, Mapping) else read_properties_file(source)
        by_key = {_key(f.name): f.name for f in fields(cls) if f.init}
        kwargs: dict[str, object] = {}
        for key, value in raw.items():
            name = by_key.get(key)
            if name is None:
                # A warning, as Kafka's VerifiableProperties logs it, naming the key that was probably meant.
                close = difflib.get_close_matches(str(key), list(by_key), n=1, cutoff=0.75)
                hint = f"; did you mean {close[0]}?" if close else ""
                log.warning("Property %s is not valid (not a Kafka 0.8.2 consumer setting; ignored)%s", key, hint)
            elif value is not None:
                kwargs[name] = value
        for name in _REQUIRED:
            if name not in kwargs:
                key = _key(name)
                raise ConfigError(f"{key} is required: add '{key}=...' to the consumer properties")
        return cls(**kwargs)  # type: ignore[arg-type]  # values are coerced in __post_init__

    from_dict = from_properties

    def to_properties(self) -> dict[str, str]:
        """Kafka key -> string value of every effective setting (derived defaults included, unset consumer.id
        omitted); ``from_properties`` of the result gives an equal config."""
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if not f.init or value is None:
                continue
            out[_key(f.name)] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out

    def with_overrides(self, **overrides: object) -> ConsumerConfig:
        """A validated copy with some fields (snake_case names) replaced.

        Derived defaults that were never set explicitly follow their source again, e.g. overriding
        ``group_id`` also changes a defaulted ``client_id``.
        """
        names = {f.name for f in fields(self) if f.init}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise TypeError(f"with_overrides() got unknown field(s) {', '.join(unknown)}; use field names")
        values: dict[str, object] = {name: getattr(self, name) for name in names}
        values.update({name: None for name in self._derived})
        values.update(overrides)
        return type(self)(**values)  # type: ignore[arg-type]

    @property
    def zk_auth(self) -> ZkAuth | None:
        """The digest identity of `zookeeper.auth.credentials`, or None (no authentication, open ACLs)."""
        if self.zookeeper_auth_credentials is None:
            return None
        user, _, password = self.zookeeper_auth_credentials.partition(":")
        return ZkAuth(user, password)

    @property
    def zk_tls(self) -> ZkTls | None:
        """The TLS settings of `zookeeper.ssl.*`, or None when `zookeeper.ssl.client.enable` is false."""
        if not self.zookeeper_ssl_client_enable:
            return None
        return ZkTls(self.zookeeper_ssl_truststore_location, self.zookeeper_ssl_keystore_location,
                     self.zookeeper_ssl_keystore_password, self.zookeeper_ssl_endpoint_identification_enable)

    @property
    def zk_hosts(self) -> str:
        """``zookeeper.connect`` without its chroot, e.g. ``"zk1:2181,zk2:2181"``."""
        return _split_connect(self.zookeeper_connect)[0]

    @property
    def zk_chroot(self) -> str | None:
        """The chroot of ``zookeeper.connect`` (``"/kafka"``), or None when there is none."""
        return _split_connect(self.zookeeper_connect)[1]


def _coerce(kind: str, key: str, value: object, *, secret: bool = False) -> object:
    """Turn a str or already-typed value into the field's type, or raise ConfigError naming key and value
    (a secret's value is never shown)."""
    if secret and not isinstance(value, str):
        raise ConfigError(f"{key} (value hidden) is invalid: expected a string")
    if kind == "int":
        if isinstance(value, str) and _INT_LITERAL.fullmatch(value.strip()):
            value = int(value.strip())
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{key}={value!r} is invalid: expected an integer such as {key}=1000")
        if not _JAVA_INT_MIN <= value <= _JAVA_INT_MAX:
            raise ConfigError(f"{key}={value!r} is invalid: must fit a 32-bit signed integer (Java Int)")
        return value
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = value.strip().lower() if isinstance(value, str) else None
        if text not in ("true", "false"):
            raise ConfigError(f"{key}={value!r} is invalid: expected true or false")
        return text == "true"
    if not isinstance(value, str):
        raise ConfigError(f"{key}={value!r} is invalid: expected a string, pass it as {key}='{value}'")
    return value.strip()


def _check_id(key: str, value: str | None) -> None:
    if value is None or not _LEGAL_ID.fullmatch(value):
        raise ConfigError(f"{key}={value!r} is invalid: {_ID_RULE}")


def _check_choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ConfigError(f"{key}={value!r} is invalid: allowed values are {choices}")


def _split_connect(connect: str) -> tuple[str, str | None]:
    """Split and check ``host:port[,host:port...][/chroot]``; returns (hosts, chroot or None)."""

    def bad(why: str) -> ConfigError:
        return ConfigError(
            f"zookeeper.connect={connect!r} is invalid: {why} (expected host:port[,host:port...][/chroot])"
        )

    hosts, slash, chroot = connect.partition("/")
    if not hosts:
        raise bad("no host:port given")
    for entry in hosts.split(","):
        host, colon, port = entry.rpartition(":")
        if not colon or not host or any(ch.isspace() for ch in host):
            raise bad(f"{entry!r} is not host:port")
        if not _PORT.fullmatch(port) or not 0 < int(port) <= 65535:
            raise bad(f"port {port!r} of {entry!r} is not a number in 1..65535")
    if not slash:
        return hosts, None
    chroot = "/" + chroot
    if chroot.endswith("/"):
        raise bad(f"chroot {chroot!r} must not end with '/'")
    if any(part in ("", ".", "..") for part in chroot[1:].split("/")):
        raise bad(f"chroot {chroot!r} has an empty, '.' or '..' path component")
    return hosts, chroot


def read_properties_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """Parse a Java .properties file with jproperties (read as UTF-8, a superset of the ASCII Kafka uses)."""
    props = Properties()
    shown = repr(os.fspath(path))
    try:
        with open(path, "rb") as fh:
            props.load(fh, "utf-8")
    except FileNotFoundError:
        raise ConfigError(f"consumer properties file {shown} does not exist: fix the path") from None
    except (OSError, UnicodeDecodeError, PropertyError) as exc:
        raise ConfigError(f"consumer properties file {shown} cannot be read: {exc}") from exc
    return dict(props.properties)
