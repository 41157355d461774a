"""The lab's design "original": Kafka 0.8.2.2's own ZookeeperConsumerConnector on the ZooKeeper design, measured
exactly as this project's connector is (zkconsumer/lab/drivers/zk.py).

Members are JVMs running `zkconsumer.interop.LabOriginalHost` (compiled by `zkconsumer.interop.original.build()`):
one member per JVM with `--members processes`, so that SIGKILL, SIGSTOP/SIGCONT and SIGTERM (a real
`connector.shutdown()`) reach exactly that member; up to `zk_driver.MEMBERS_PER_HOST` rebalance-only members per JVM
with `--members threads` (the connector built with `enableFetcher = false`, as ours runs with `NoFetchers`). Each
member gets the same settings as ours: its own link of the counting ZooKeeper proxy, the Kafka proxy as broker, the
scenario's `[zk]` keys unchanged, `consumer.id` = `client.id` = its name.

Members write lab trace records themselves (`LabTrace.java`): member_events that a log4j appender inside the JVM
derives from the connector's log lines (`LabRebalanceTracker.java` has the mapping and the Scala lines it relies
on), session ids, assignments and consumed messages; the session's password goes only to the driver, as a
`session` reply on the JVM's stdout. Everything else is the ZooKeeper design's driver: the
same `stable()` check, the same uncounted observer connection (`env.direct_zookeeper`) for owners and stability, the
same forced expiry with the member's own session credentials.
"""

from __future__ import annotations

import logging
import re
import signal
from pathlib import Path
from typing import Any

from zkconsumer.embedded.process import java_executable
from zkconsumer.interop import original
from zkconsumer.lab.drivers.host_process import HostProcess
from zkconsumer.lab.drivers.interface import LabEnvironment
from zkconsumer.lab.drivers.zk import ZkDriver
from zkconsumer.lab.members.zk import ZkMemberSettings

log = logging.getLogger(__name__)
HOST_MAIN = "zkconsumer.interop.LabOriginalHost"
_STOP_S = 20.0  # a JVM's shutdown (connector.shutdown(), then exit) is ~1 s; the host's own bound is 15 s
# One member: the interop tests' flags. A host of 32 connectors (6 threads and a ZooKeeper client each) needs more.
_MEMBER_HEAP = "-Xmx128m"
_HOST_HEAP = "-Xmx384m"
# The connector's logger at DEBUG, into the lab's appender (the DEBUG line it needs is the owner-node delete,
# ZookeeperConsumerConnector.scala:577); people's log (stderr, the member's log file) keeps INFO and up.
_LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.logger.kafka.consumer.ZookeeperConsumerConnector=DEBUG, lab
log4j.appender.lab=zkconsumer.interop.LabRebalanceAppender
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.Threshold=INFO
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=%d{HH:mm:ss,SSS} %p [%t] %m (%c)%n
"""


def check_toolchain() -> None:
    """Raises `InteropError`/`EmbeddedError` (one line naming the fix) if java or javac is missing; builds once."""
    java_executable()
    original.build()


def original_version() -> str | None:
    """The version of the kafka jar the original members run (the kafka-0.8.2 profile's, e.g. 0.8.2.2)."""
    for jar in original.build().jars.jars:
        found = re.fullmatch(r"kafka_[\d.]+-([\d.]+)\.jar", jar.name)
        if found:
            return found.group(1)
    return None


class _Jvm(HostProcess):
    """A LabOriginalHost JVM: the same replies as our member hosts, commands as `join NAME PROPERTIES_FILE`,
    `leave NAME` and `stop`."""

    stop_wait_s = _STOP_S

    def __init__(self, name: str, run_path: Path, log_path: Path, heap: str) -> None:
        self.run_path = run_path
        log4j = run_path / "original-log4j.properties"
        if not log4j.exists():
            log4j.write_text(_LOG4J)
        argv = [java_executable(), heap, *(f for f in original.JVM_FLAGS if not f.startswith("-Xmx")),
                f"-Dlog4j.configuration=file:{log4j}", "-cp", str(original.build()), HOST_MAIN, name]
        # Its own session: a terminal's Ctrl-C reaches the lab, which stops the JVM through its stdin.
        super().__init__(name, log_path, argv, start_new_session=True)

    def _encode(self, command: dict[str, Any]) -> str:
        return " ".join(str(command[key]) for key in ("op", "name", "path") if key in command)

    def join(self, settings: ZkMemberSettings) -> None:
        path = self.run_path / "original-members" / f"{settings.name}.properties"
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(f"{k}={_escape(v)}\n" for k, v in sorted(member_properties(settings).items())))
        self._joining(settings.name, {"op": "join", "name": settings.name, "path": path})

    def stop(self) -> None:
        self.signal(signal.SIGCONT)  # a paused member's JVM must run to leave
        super().stop()

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self._wait_or_kill()


def _escape(value: Any) -> str:
    """A java.util.Properties value: booleans as Java spells them (a scenario's TOML `false` is Python's False,
    which 0.8.2.2's ConsumerConfig rejects), backslashes and newlines escaped."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def member_properties(settings: ZkMemberSettings) -> dict[str, Any]:
    """The consumer's keys, as ours gets them (zk_member.ZkMemberSettings.config, minus its stream timeout, which
    only our draining threads need), plus the lab's: name, trace file, topics, fetchers or not."""
    return {"auto.offset.reset": "smallest", **settings.properties, "group.id": settings.group,
            "zookeeper.connect": settings.zookeeper_connect, "consumer.id": settings.name,
            "client.id": settings.name, "lab.name": settings.name, "lab.trace": settings.trace_path,
            "lab.topics": ",".join(f"{t}={n}" for t, n in settings.topics.items()),
            "lab.fetch": str(settings.fetch).lower()}


class _ProcessMember:
    """One original member in a JVM of its own."""

    is_process = True

    def __init__(self, settings: ZkMemberSettings, run_path: Path, log_path: Path) -> None:
        self.name = settings.name
        self.jvm = _Jvm(settings.name, run_path, log_path, _MEMBER_HEAP)
        self.proc = self.jvm.proc
        self.jvm.join(settings)

    def signal(self, sig: int) -> None:
        self.jvm.signal(sig)

    def session(self, timeout: float) -> tuple[int, str] | None:
        return self.jvm.session(self.name, timeout)

    def stop(self, graceful: bool = True) -> None:
        if not graceful:
            self.jvm.kill()
            return
        # SIGTERM: the JVM's shutdown hook runs connector.shutdown() for its member, then the JVM exits.
        self.jvm.signal(signal.SIGCONT)
        self.jvm.signal(signal.SIGTERM)
        self.jvm.stop()

    def error(self) -> str | None:
        failure = self.jvm.failure(self.name)
        if failure is not None:
            return f"failed to start: {failure}: see {self.jvm.log_file.name}"
        code = self.jvm.exit_code()
        return None if code is None else f"exited with code {code}: see {self.jvm.log_file.name}"


class _ThreadMember:
    """A rebalance-only original member on a shared JVM."""

    is_process = False

    def __init__(self, host: _Jvm, settings: ZkMemberSettings) -> None:
        self.host = host
        self.name = settings.name
        host.join(settings)

    def stop(self, graceful: bool = True) -> None:
        self.host.leave(self.name)

    def session(self, timeout: float) -> tuple[int, str] | None:
        return self.host.session(self.name, timeout)

    def error(self) -> str | None:
        failure = self.host.failure(self.name)
        if failure is not None:
            return f"failed to start: {failure}: see {self.host.log_file.name}"
        code = self.host.exit_code()
        if code is not None:
            return f"is on {self.host.name}, which exited with code {code}: see {self.host.log_file.name}"
        return None


class OriginalDriver(ZkDriver):
    """`ZkDriver` with the original's members; stability, observation, expiry and stats are the ZooKeeper design's."""

    design = "original"
    min_hosts = 1  # one JVM's threads already run on every core

    def start(self, env: LabEnvironment) -> None:
        check_toolchain()  # one line naming the fix if java or javac is missing, before anything starts
        super().start(env)

    def _new_member(self, settings: ZkMemberSettings) -> Any:
        run = self._env().run
        if self.process_mode == "processes":
            return _ProcessMember(settings, run.path, run.log_path(settings.name))
        return _ThreadMember(self._host_for(), settings)

    def _new_host(self, name: str) -> Any:
        run = self._env().run
        return _Jvm(name, run.path, run.log_path(name), _HOST_HEAP)

