"""
The outside world on loopback, for tests of outbound requests (with ``tests.helpers.dnsserver`` for
names): a throw-away certificate authority, and an HTTPS receiver that records every request
and answers as told.
"""

from __future__ import annotations

import datetime
import ipaddress
import time

import attrs
import pytest
import pytest_twisted
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from twisted.internet import defer, reactor, ssl, task
from twisted.web import resource
from twisted.web.server import NOT_DONE_YET, Site


class ThrowawayCA:
    """A throw-away certificate authority issuing server certificates."""

    def __init__(self, name: str = "mailsvc test CA"):
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                    key_encipherment=False, data_encipherment=False, key_agreement=False,
                    encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def write(self, path) -> str:
        path.write_bytes(self.pem)
        return str(path)

    def server_options(self, *names: str):
        """Twisted server TLS options with a certificate for ``names`` (DNS names or IPs)."""
        return ssl.PrivateCertificate.loadPEM(self.server_pem(*names)).options()

    def server_pem(self, *names: str) -> bytes:
        """A new key and its certificate for ``names`` (DNS names or IPs), PEM, key first."""
        key = ec.generate_private_key(ec.SECP256R1())
        alt = []
        for name in names:
            try:
                alt.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                alt.append(x509.DNSName(name))
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return key_pem + cert.public_bytes(serialization.Encoding.PEM)


@attrs.frozen
class Received:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    at: float  # wall-clock time of arrival


@attrs.define
class Reply:
    code: int = 204
    headers: dict[str, str] = attrs.Factory(dict)
    body: bytes = b""
    stall: bool = False  # never answer (until release())


class Receiver(resource.Resource):
    """Records every request; answers with the queued replies, then with ``default``."""

    isLeaf = True

    def __init__(self):
        super().__init__()
        self.received: list[Received] = []
        self.replies: list[Reply] = []
        self.default = Reply()
        self.stalled: list = []
        self._waiting: list[tuple[int, defer.Deferred]] = []

    def render(self, request):
        headers = {
            name.decode().lower(): b", ".join(values).decode()
            for name, values in request.requestHeaders.getAllRawHeaders()
        }
        self.received.append(
            Received(request.method.decode(), request.path.decode(), headers, request.content.read(), time.time())
        )
        reply = self.replies.pop(0) if self.replies else self.default
        for count, d in list(self._waiting):
            if len(self.received) >= count:
                self._waiting.remove((count, d))
                d.callback(None)
        if reply.stall:
            self.stalled.append(request)
            return NOT_DONE_YET
        request.setResponseCode(reply.code)
        for name, value in reply.headers.items():
            request.setHeader(name, value)
        return reply.body

    def release(self) -> None:
        """Answer every stalled request (204), so nothing is left open."""
        stalled, self.stalled = self.stalled, []
        for request in stalled:
            if not request._disconnected:
                request.setResponseCode(204)
                request.finish()

    async def wait_for(self, count: int, timeout: float = 10) -> None:
        if len(self.received) >= count:
            return
        d = defer.Deferred()
        self._waiting.append((count, d))
        d.addTimeout(timeout, reactor)
        await d


class HttpsReceiver:
    """A Receiver served over HTTPS on 127.0.0.1 with a certificate for ``names``."""

    def __init__(self, ca: ThrowawayCA, *names: str):
        self.receiver = Receiver()
        site = Site(self.receiver)
        site.displayTracebacks = False
        self.port = reactor.listenSSL(0, site, ca.server_options(*names), interface="127.0.0.1")

    @property
    def number(self) -> int:
        return self.port.getHost().port

    async def stop(self) -> None:
        self.receiver.release()
        await self.port.stopListening()
        await task.deferLater(reactor, 0, lambda: None)


@pytest.fixture
def ca() -> ThrowawayCA:
    return ThrowawayCA()


@pytest_twisted.async_yield_fixture
async def https_receiver(ca):
    """An HTTPS receiver for ``hooks.example.com`` (and 127.0.0.1) on loopback."""
    running = HttpsReceiver(ca, "hooks.example.com", "127.0.0.1")
    yield running
    await running.stop()
