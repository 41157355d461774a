"""A throw-away certificate authority and the certificates of a local TLS ZooKeeper (docs/security.md).

Made with `cryptography`, written as PEM, the one store format both ZooKeeper (`ssl.keyStore.type=PEM`, its
`PemReader`) and Python's `ssl` read. The keys are not encrypted: they protect a test server on 127.0.0.1 and
live only in the cluster's directory; never use them for anything else.

`cryptography` comes with the `tls` extra (zkconsumer/extras.py): the embedded cluster imports this module only when
it makes an authority, after checking the extra; the files' layout (`TlsFiles`) is in tls_files.py, which needs none.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from zkconsumer.embedded.tls_files import TlsFiles

__all__ = ["SERVER_IPS", "SERVER_NAMES", "VALIDITY", "TlsFiles", "make_authority"]

VALIDITY = datetime.timedelta(days=30)
# The names a client may check the server's certificate against (zookeeper.ssl.endpoint.identification.enable).
SERVER_NAMES = ("localhost",)
SERVER_IPS = ("127.0.0.1",)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())  # fast to make, and both Java and OpenSSL read it


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "zkconsumer throw-away"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: str, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY))


def _pem(key: ec.EllipticCurvePrivateKey, *certs: x509.Certificate) -> bytes:
    # PKCS#8 ("BEGIN PRIVATE KEY"): the form ZooKeeper's PemReader reads.
    out = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    return out + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def make_authority(directory: Path, name: str = "zkconsumer test CA") -> TlsFiles:
    """A new CA, a server certificate for localhost/127.0.0.1 and a client certificate, all signed by it."""
    files = TlsFiles(Path(directory))
    files.directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = _name(name)
    ca_cert = (_builder(name, ca_name, ca_key.public_key())
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False, decipher_only=False),
                              critical=True)
               .sign(ca_key, hashes.SHA256()))
    alt_names = [x509.DNSName(n) for n in SERVER_NAMES] + [x509.IPAddress(ipaddress.ip_address(i)) for i in SERVER_IPS]
    for path, subject, usage in ((files.server, "zookeeper", ExtendedKeyUsageOID.SERVER_AUTH),
                                 (files.client, "zkconsumer", ExtendedKeyUsageOID.CLIENT_AUTH)):
        key = _key()
        cert = (_builder(subject, ca_name, key.public_key())
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
                .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        _write_private(path, _pem(key, cert))
    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    return files


def _write_private(path: Path, data: bytes) -> None:
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_bytes(data)
