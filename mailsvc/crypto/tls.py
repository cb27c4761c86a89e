"""
The server certificate for SMTP submission, inbound STARTTLS and optional HTTPS: the configured
PEM pair, or a self-signed one generated once into the state directory (with a warning). Every
TLS context the service makes, server or client, refuses versions older than ``MINIMUM``.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from twisted.internet import ssl
from twisted.logger import Logger
from twisted.web.iweb import IPolicyForHTTPS
from zope.interface import implementer

log = Logger()

#: The oldest TLS version spoken, as documented (older ones have no safe cipher suites).
MINIMUM = ssl.TLSVersion.TLSv1_2


def self_signed(hostname: str, valid_days: int = 825) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) for ``hostname``, localhost and the loopback addresses."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)])
    now = datetime.datetime.now(datetime.UTC)
    names = [x509.DNSName(hostname), x509.DNSName("localhost"),
             x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address("::1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=valid_days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def server_pem(cert_path: str, key_path: str, state_dir: Path, hostname: str) -> tuple[bytes, bytes]:
    if cert_path and key_path:
        return Path(cert_path).read_bytes(), Path(key_path).read_bytes()
    cert_file, key_file = state_dir / "tls-cert.pem", state_dir / "tls-key.pem"
    if not (cert_file.exists() and key_file.exists()):
        cert, key = self_signed(hostname)
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        cert_file.write_bytes(cert)
        log.warn("no tls.cert configured: generated a self-signed certificate in {path}", path=cert_file)
    return cert_file.read_bytes(), key_file.read_bytes()


def server_options(cert_pem: bytes, key_pem: bytes) -> ssl.CertificateOptions:
    """TLS 1.2 and newer, the certificate of the PEM file."""
    certificate = ssl.PrivateCertificate.loadPEM(cert_pem + b"\n" + key_pem)
    return ssl.CertificateOptions(
        privateKey=certificate.privateKey.original, certificate=certificate.original, raiseMinimumTo=MINIMUM
    )


def verified_client_options(hostname: str, trust=None):
    """A client connection to ``hostname``: its certificate verified (against ``trust``, by
    default the platform's roots), TLS 1.2 and newer."""
    return ssl.optionsForClientTLS(hostname, trustRoot=trust, extraCertificateOptions={"raiseMinimumTo": MINIMUM})


def unverified_client_options() -> ssl.CertificateOptions:
    """A client connection whose peer is not verified (MX hosts: no MTA-STS or DANE yet), TLS
    1.2 and newer."""
    return ssl.CertificateOptions(raiseMinimumTo=MINIMUM)


@implementer(IPolicyForHTTPS)
class VerifiedHTTPS:
    """An Agent's TLS policy: the platform's roots, the URL's host name, TLS 1.2 and newer."""

    def creatorForNetloc(self, hostname: bytes, port: int):  # noqa: N802 (Twisted's name)
        return verified_client_options(hostname.decode("ascii"))
