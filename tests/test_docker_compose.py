"""docker-compose.yml runs what the embedded cluster runs: the same Kafka release (the pom's `kafka.version`), the same
ZooKeeper server, and the same settings, so the Docker path and the embedded path cannot drift apart. No Docker
engine needed: the file is parsed, and validated by a compose client when one is installed."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from zkconsumer.embedded import jvm
from zkconsumer.embedded.kafka import BASE_SETTINGS, KafkaBroker
from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble, zookeeper_classpath

COMPOSE = Path(__file__).resolve().parent.parent / "docker-compose.yml"
# Settings that say where a server is (host names, ports, paths) rather than how it behaves.
KAFKA_LOCATION = {"zookeeper.connect", "log.dirs", "listeners", "advertised.listeners"}
ZOOKEEPER_LOCATION = {"dataDir", "clientPort", "clientPortAddress"}
# How the official zookeeper image's entrypoint turns its environment into zoo.cfg lines.
ZOO_ENV = {"ZOO_TICK_TIME": "tickTime", "ZOO_INIT_LIMIT": "initLimit", "ZOO_SYNC_LIMIT": "syncLimit",
           "ZOO_MAX_CLIENT_CNXNS": "maxClientCnxns", "ZOO_4LW_COMMANDS_WHITELIST": "4lw.commands.whitelist",
           "ZOO_ADMINSERVER_ENABLED": "admin.enableServer"}


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def pom_kafka_version() -> str:
    found = ET.parse(jvm.POM).getroot().find("m:properties/m:kafka.version", {"m": "http://maven.apache.org/POM/4.0.0"})
    assert found is not None and found.text, f"no kafka.version property in {jvm.POM}"
    return found.text.strip()


def kafka_settings(service: dict) -> dict[str, str]:
    """The broker's settings: the command is kafka-server-start.sh, an empty file, then `--override k=v` pairs."""
    command = [str(arg) for arg in service["command"]]
    assert command[:2] == ["/opt/kafka/bin/kafka-server-start.sh", "/dev/null"], command[:2]
    flags, pairs = command[2::2], command[3::2]
    assert len(flags) == len(pairs) and set(flags) == {"--override"}, command
    settings = dict(pair.split("=", 1) for pair in pairs)
    assert len(settings) == len(pairs), "a setting is given twice"
    return settings


def zoo_cfg(service: dict) -> dict[str, str]:
    """The zoo.cfg lines the zookeeper image writes from this service's environment."""
    env = {k: str(v) for k, v in service["environment"].items()}
    cfg = {key: env[name] for name, key in ZOO_ENV.items() if name in env}
    cfg.update(entry.split("=", 1) for entry in env.get("ZOO_CFG_EXTRA", "").split())
    return cfg


def test_kafka_is_the_poms_release(services: dict):
    assert services["kafka"]["image"] == f"apache/kafka:{pom_kafka_version()}"


def test_kafka_has_every_base_setting(services: dict):
    settings = kafka_settings(services["kafka"])
    assert {k: settings.get(k) for k in BASE_SETTINGS} == BASE_SETTINGS


def test_kafka_has_exactly_the_settings_of_a_one_broker_embedded_cluster(services: dict, tmp_path: Path):
    settings = kafka_settings(services["kafka"])
    embedded = KafkaBroker.plan(tmp_path, 1, "127.0.0.1:2181")._properties(cluster_size=1)
    assert set(settings) == set(embedded)
    assert {k: v for k, v in settings.items() if k not in KAFKA_LOCATION} == \
           {k: v for k, v in embedded.items() if k not in KAFKA_LOCATION}
    # Where it is: the advertised listener is what the host reaches, i.e. the published port.
    assert settings["zookeeper.connect"] == "zookeeper:2181"
    assert settings["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert services["kafka"]["ports"] == ["127.0.0.1:9092:9092"]


def test_zookeeper_is_the_embedded_server_with_its_zoo_cfg(services: dict, tmp_path: Path):
    jar = next(Path(p).name for p in zookeeper_classpath().split(":") if Path(p).name.startswith("zookeeper-3"))
    assert services["zookeeper"]["image"] == f"zookeeper:{jar.removeprefix('zookeeper-').removesuffix('.jar')}"
    ensemble = ZooKeeperEnsemble.plan(tmp_path, 1)
    ensemble._write_config(ensemble.nodes[0])
    lines = ensemble.nodes[0].config_path.read_text().split()
    embedded = dict(line.split("=", 1) for line in lines)
    assert zoo_cfg(services["zookeeper"]) == {k: v for k, v in embedded.items() if k not in ZOOKEEPER_LOCATION}
    assert services["zookeeper"]["ports"] == ["127.0.0.1:2181:2181"]


@pytest.mark.slow
def test_docker_compose_file_is_valid():
    if shutil.which("docker-compose"):
        cmd = ["docker-compose", "-f", str(COMPOSE), "config", "-q"]
    elif shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True,
                                                    check=False).returncode == 0:
        cmd = ["docker", "compose", "-f", str(COMPOSE), "config", "-q"]
    else:
        pytest.skip("missing tool: docker-compose (or docker compose) to validate docker-compose.yml")
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
