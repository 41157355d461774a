"""What really listens, from the kernel's tables of sockets (/proc/net/tcp and tcp6): the address a JVM bound,
not the one it was asked for."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from pathlib import Path

LISTEN = "0A"


def _listening_sockets() -> dict[int, tuple[str, int]]:
    """inode -> (address, port) of every listening TCP socket (IPv4 and IPv6; a v4-mapped address as v4)."""
    found = {}
    for table, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] != LISTEN:
                continue
            address, _, hex_port = cols[1].partition(":")
            raw = bytes.fromhex(address)  # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, width, 4))
            ip = ipaddress.ip_address(raw)
            if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
                ip = ip.ipv4_mapped
            found[int(cols[9])] = (str(ip), int(hex_port, 16))
    return found


def listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on `port`."""
    return {address for address, p in _listening_sockets().values() if p == port}


def listening_of(pids: Iterable[int]) -> set[tuple[str, int]]:
    """(address, port) of every socket the processes `pids` listen on (those still alive)."""
    inodes = set()
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:  # gone meanwhile
            continue
        for fd in fds:
            try:
                link = os.readlink(fd)
            except OSError:  # closed meanwhile
                continue
            if link.startswith("socket:["):
                inodes.add(int(link[8:-1]))
    sockets = _listening_sockets()
    return {sockets[i] for i in inodes if i in sockets}
