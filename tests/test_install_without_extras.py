"""`pip install zkconsumer` with no extra, into a fresh virtual environment, is a working consumer (README.md,
"Installing"): none of the extras' packages is there, every module outside the lab and the extras' gateways imports,
the CLI starts and says in one line which extra the lab needs, and a program written as README.md shows consumes
through ZooKeeper, from the session's real ZooKeeper and Kafka broker, every message this test produced.

The package is built from a copy of the three packages (pip would build inside the checkout otherwise, beside other
work), non-editable, with pip's own index and cache (PIP_* settings as the environment has them): about 35 s of
the module's 50 here. `bare_venv` is in tests/conftest.py's list of expensive fixtures (slow).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kafka import KafkaProducer

from zkconsumer.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("zkconsumer", "rebalance", "fetcher_manager")
GATEWAYS = {"zkconsumer.embedded.certs", "zkconsumer.watch.app"}  # docs/DESIGN.md, Imports
MESSAGES = 40

CONSUMER = textwrap.dedent("""\
    import json, sys
    from zkconsumer import ConsumerConfig, ZookeeperConsumerConnector

    zookeeper, group, topic, wanted = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    config = ConsumerConfig.from_properties({
        "zookeeper.connect": zookeeper, "group.id": group, "auto.offset.reset": "smallest",
        "consumer.timeout.ms": 20000, "zookeeper.session.timeout.ms": 6000,
    })
    got = []
    with ZookeeperConsumerConnector(config) as connector:
        for message in connector.create_message_streams({topic: 1})[topic][0]:
            got.append([message.partition, message.offset, message.value.decode()])
            if len(got) == wanted:
                break
        connector.commit_offsets()
    print(json.dumps(got))
""")


def _run(argv: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, **kwargs)


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (no system site packages) with `pip install <copy of this checkout>`, no extra."""
    base = tmp_path_factory.mktemp("bare")
    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    venv = base / "venv"
    # The base interpreter, not this venv's: `python -m venv` from inside a venv would still be fresh, but say so.
    python = getattr(sys, "_base_executable", sys.executable)
    done = _run([python, "-m", "venv", str(venv)], timeout=120)
    assert done.returncode == 0, done.stderr
    done = _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(src)], timeout=600)
    assert done.returncode == 0, f"pip install failed:\n{done.stdout}\n{done.stderr}"
    return venv


def _python(venv: Path, code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    # cwd outside the checkout, and no PYTHONPATH: the installed copy is what gets imported
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return _run([str(venv / "bin" / "python"), "-c", code, *args], timeout=timeout, cwd=venv, env=env)


@pytest.mark.slow
def test_no_extra_is_installed_and_the_product_imports(bare_venv: Path) -> None:
    unwanted = sorted({name for names in EXTRAS.values() for name in names})
    done = _python(bare_venv, "import importlib.util, json, sys\n"
                   "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m)]))", *unwanted)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [], "an extra's package came with the bare install"

    modules = sorted(
        ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for package in PACKAGES for f in (ROOT / package).rglob("*.py"))
    product = [m for m in modules if not m.startswith("zkconsumer.lab") and m not in GATEWAYS
               and not m.endswith("__main__")]
    assert len(product) > 60
    done = _python(bare_venv, "import importlib, sys\n"
                   "import zkconsumer\n"
                   "assert '/site-packages/' in zkconsumer.__file__, zkconsumer.__file__\n"
                   "for m in sys.argv[1:]:\n    importlib.import_module(m)\n", *product)
    assert done.returncode == 0, f"a product module does not import without extras:\n{done.stderr}"


@pytest.mark.slow
def test_the_cli_starts_and_the_lab_names_its_extra(bare_venv: Path) -> None:
    zkconsumer = str(bare_venv / "bin" / "zkconsumer")
    done = _run([zkconsumer, "--help"], timeout=60)
    assert done.returncode == 0 and "consume" in done.stdout and "(needs the 'lab' extra)" in done.stdout
    for argv, extra, what in ((["lab", "--help"], "lab", "zkconsumer lab"),
                              (["lab", "run", "herd"], "lab", "zkconsumer lab"),
                              (["cluster", "up", "--tls", "--dir", str(bare_venv / "c")], "tls",
                               "zkconsumer cluster up --tls")):
        done = _run([zkconsumer, *argv], timeout=60)
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr == f"error: {what} needs the '{extra}' extra: pip install 'zkconsumer[{extra}]'\n"


@pytest.mark.slow
def test_the_bare_install_consumes_through_zookeeper(bare_venv: Path, cluster) -> None:
    topic = cluster.create_topic(partitions=3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5)
    for i in range(MESSAGES):
        producer.send(topic, value=f"m{i}".encode())
    producer.flush()
    producer.close()

    group = f"bare-{topic}"
    done = _python(bare_venv, CONSUMER, cluster.zookeeper_connect, group, topic, str(MESSAGES), timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert sorted(value for _, _, value in got) == sorted(f"m{i}" for i in range(MESSAGES))
    assert len({(p, o) for p, o, _ in got}) == MESSAGES and {p for p, _, _ in got} == {0, 1, 2}
    # ...and it consumed as a ZooKeeper-balanced member: its offsets are in ZooKeeper, where a 0.8 peer reads them
    offsets = [int(cluster.zk.get(f"/consumers/{group}/offsets/{topic}/{p}")[0]) for p in range(3)]
    assert sum(offsets) == MESSAGES
