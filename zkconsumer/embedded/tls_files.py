"""Where the PEM files of the embedded cluster's throw-away authority live (made by certs.py, docs/security.md).

Paths only, so a cluster with TLS can be loaded, described and stopped without the `tls` extra that making one needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TlsFiles:
    """Where the PEM files of one throw-away authority live."""

    directory: Path

    @property
    def ca(self) -> Path:
        """The CA certificate: the trust store of clients (zookeeper.ssl.truststore.location) and of the server."""
        return self.directory / "ca.pem"

    @property
    def server(self) -> Path:
        """The server's private key and certificate (ssl.keyStore.location)."""
        return self.directory / "server.pem"

    @property
    def client(self) -> Path:
        """A client's private key and certificate, for mutual TLS (zookeeper.ssl.keystore.location)."""
        return self.directory / "client.pem"

    def exist(self) -> bool:
        return all(p.is_file() for p in (self.ca, self.server, self.client))
