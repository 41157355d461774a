"""Spark listens on the loopback interface only (zkconsumer/lab/analysis/local_spark.py)."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from pyspark.sql import SparkSession

from zkconsumer.lab.analysis.job import session


def listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on `port`, from the kernel's tables (IPv4 and IPv6): what
    the JVM really bound, not what it was asked."""
    found = set()
    for table, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(address)  # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, width, 4))
            ip = ipaddress.ip_address(raw)
            found.add(str(ip.ipv4_mapped or ip) if isinstance(ip, ipaddress.IPv6Address) else str(ip))
    return found


def test_the_driver_binds_to_loopback(spark: SparkSession) -> None:
    assert spark.conf.get("spark.driver.host") == "127.0.0.1"
    assert spark.conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert listening_addresses(int(spark.conf.get("spark.driver.port"))) == {"127.0.0.1"}
    assert session() is spark  # the job reuses the active session, which was built the same way
