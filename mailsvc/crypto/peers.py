"""
Authenticating an MX host's certificate after the STARTTLS handshake, by MTA-STS (RFC 8461:
a chain to a trusted root, valid for the MX name) or by DANE (RFC 7672: a TLSA record of
the MX host matches the leaf, DANE-EE, or a certificate of the chain the leaf is issued
under, DANE-TA).

The handshake itself never fails on the certificate (the client context does not verify):
the protocol reads the chain once TLS is up and asks ``PeerCheck.failure``; a failure ends the
session before MAIL FROM with a deferral of class ``blocked`` and a reason for TLS reports.
"""

from __future__ import annotations

import datetime
import hashlib
import ssl as stdlib_ssl
import warnings
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509 import verification
from OpenSSL import SSL
from twisted.internet import ssl
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator
from zope.interface import implementer

from mailsvc.crypto.tls import MINIMUM

#: TLSA certificate usages (RFC 6698 §2.1.1); only DANE-TA and DANE-EE are usable for SMTP
#: (RFC 7672 §3.1.3).
DANE_TA, DANE_EE = 2, 3
USABLE_USAGES = (DANE_TA, DANE_EE)
#: Selectors: the full certificate or its SubjectPublicKeyInfo; matching: exact, SHA-256, SHA-512.
FULL, SPKI = 0, 1
EXACT, SHA256, SHA512 = 0, 1, 2


@attrs.frozen
class Tlsa:
    usage: int
    selector: int
    matching: int
    data: bytes

    @property
    def usable(self) -> bool:
        return (self.usage in USABLE_USAGES and self.selector in (FULL, SPKI)
                and self.matching in (EXACT, SHA256, SHA512))

    @classmethod
    def from_wire(cls, rdata: bytes) -> Tlsa | None:
        if len(rdata) < 4:
            return None
        return cls(rdata[0], rdata[1], rdata[2], bytes(rdata[3:]))

    def to_wire(self) -> bytes:
        return bytes((self.usage, self.selector, self.matching)) + self.data

    def matches(self, cert: x509.Certificate) -> bool:
        return _selected(cert, self.selector, self.matching) == self.data


def _selected(cert: x509.Certificate, selector: int, matching: int) -> bytes:
    if selector == FULL:
        data = cert.public_bytes(serialization.Encoding.DER)
    else:
        data = cert.public_key().public_bytes(serialization.Encoding.DER,
                                              serialization.PublicFormat.SubjectPublicKeyInfo)
    if matching == SHA256:
        return hashlib.sha256(data).digest()
    if matching == SHA512:
        return hashlib.sha512(data).digest()
    return data


def tlsa_for(cert: x509.Certificate, usage: int = DANE_EE, selector: int = SPKI, matching: int = SHA256) -> Tlsa:
    """The TLSA record that designates ``cert`` (for tests and operators' tooling)."""
    return Tlsa(usage, selector, matching, _selected(cert, selector, matching))


class TrustStore:
    """The platform's roots plus ``security.ca_file``: the anchors of MTA-STS verification."""

    def __init__(self, ca_file: str = ""):
        roots: list[x509.Certificate] = []
        system = stdlib_ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt"
        for path in (system, ca_file):
            if path and Path(path).is_file():
                try:
                    with warnings.catch_warnings():  # a few platform roots have odd serial numbers
                        warnings.simplefilter("ignore")
                        roots += x509.load_pem_x509_certificates(Path(path).read_bytes())
                except ValueError:
                    continue
        self._store = verification.Store(roots) if roots else None

    def failure(self, chain: list[x509.Certificate], host: str, now: datetime.datetime | None = None) -> str | None:
        """None when ``chain`` leads to a trusted root and its leaf is valid for ``host``."""
        if not chain:
            return "certificate-not-trusted: the server sent no certificate"
        if self._store is None:
            return "certificate-not-trusted: no trusted roots are configured"
        builder = verification.PolicyBuilder().store(self._store)
        if now is not None:
            builder = builder.time(now)
        try:
            verifier = builder.build_server_verifier(x509.DNSName(host))
            verifier.verify(chain[0], chain[1:])
        except verification.VerificationError as e:
            text = str(e)
            kind = "certificate-host-mismatch" if "name" in text.lower() or "san" in text.lower() else (
                "certificate-expired" if "expired" in text.lower() else "certificate-not-trusted")
            return f"{kind}: {text}"
        except ValueError as e:
            return f"certificate-not-trusted: {e}"
        return None


def dane_failure(chain: list[x509.Certificate], records: tuple[Tlsa, ...], host: str) -> str | None:
    """
    None when a usable TLSA record matches (RFC 7672 §3.1): DANE-EE on the leaf (no name or
    expiry check), or DANE-TA on a certificate of the chain that the leaf verifies up to, with
    the leaf valid for ``host``.
    """
    if not chain:
        return "validation-failure: the server sent no certificate"
    usable = [r for r in records if r.usable]
    leaf = chain[0]
    if any(r.usage == DANE_EE and r.matches(leaf) for r in usable):
        return None
    for record in (r for r in usable if r.usage == DANE_TA):
        for anchor in chain:
            if not record.matches(anchor):
                continue
            try:
                verifier = verification.PolicyBuilder().store(verification.Store([anchor])).build_server_verifier(
                    x509.DNSName(host))
                verifier.verify(leaf, [c for c in chain[1:] if c is not anchor])
                return None
            except (verification.VerificationError, ValueError):
                continue
    return "tlsa-invalid: no TLSA record of the MX host matches its certificate"


@implementer(IOpenSSLClientConnectionCreator)
class RecordingClientTLS:
    """
    STARTTLS to an MX host: TLS 1.2 or newer, SNI for ``host``, no verification in the
    handshake; the connection is kept so that the chain can be checked once TLS is up.
    """

    def __init__(self, host: str):
        self._host = host
        self._options = ssl.CertificateOptions(raiseMinimumTo=MINIMUM)
        self.connection: SSL.Connection | None = None

    def clientConnectionForTLS(self, tls_protocol):  # noqa: N802 (Twisted's name)
        connection = SSL.Connection(self._options.getContext(), None)
        connection.set_app_data(tls_protocol)
        try:
            connection.set_tlsext_host_name(self._host.encode("idna"))
        except (UnicodeError, ValueError):
            pass
        self.connection = connection
        return connection

    def peer_chain(self) -> list[x509.Certificate]:
        if self.connection is None:
            return []
        return list(self.connection.get_peer_cert_chain(as_cryptography=True) or [])
