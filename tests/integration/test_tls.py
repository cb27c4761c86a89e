"""
TLS 1.2 is the minimum of every context the service makes: the server's (submission, inbound,
HTTPS), the outbound SMTP client's (relay verified, MX unverified), the outbound HTTPS
fetcher's and the DNS provider client's. The contexts are inspected (OpenSSL's own policy may
already refuse TLS 1.1, so a refused handshake alone would prove nothing about ours), and a
TLS 1.1 client is refused on loopback while a TLS 1.2 one is served.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import pytest_twisted as pt
from OpenSSL import SSL
from twisted.internet import defer, endpoints, protocol, reactor, ssl, task
from twisted.internet.interfaces import IHandshakeListener, IOpenSSLClientConnectionCreator
from zope.interface import implementer

from mailsvc.crypto import tls
from mailsvc.outside.addresses import PublicAddresses
from mailsvc.outside.fetch import Fetcher

OLDER_THAN_1_2 = SSL.OP_NO_SSLv3 | SSL.OP_NO_TLSv1 | SSL.OP_NO_TLSv1_1


@pytest.fixture(scope="module")
def pem() -> tuple[bytes, bytes]:
    return tls.self_signed("localhost")


def _refused_versions(connection: SSL.Connection) -> int:
    return connection.set_options(0) & OLDER_THAN_1_2  # set_options returns the options in force


def _from_options(options) -> SSL.Connection:
    return SSL.Connection(options.getContext(), None)


def _client(creator) -> SSL.Connection:
    """The connection ``creator`` makes (for a protocol offering no ALPN)."""
    tls_protocol = SimpleNamespace(factory=SimpleNamespace(wrappedFactory=protocol.Factory()))
    return creator.clientConnectionForTLS(tls_protocol)


def _fetcher_connection() -> SSL.Connection:
    """The context of the fetcher's HTTPS request to a host, as given to its agent."""
    clock = task.Clock()
    given = []

    def agent_for(address, options, timeout):
        given.append(options)
        raise ConnectionRefusedError("not connecting in this test")

    fetcher = Fetcher(clock, PublicAddresses(clock, None, allow_private=True), agent_for=agent_for)
    defer.ensureDeferred(fetcher.get("https://127.0.0.1/x", 100, 5)).addErrback(lambda _: None)
    (options,) = given
    return _client(options)


def test_the_inspection_tells_a_context_that_speaks_older_versions():
    """Twisted's own default is TLS 1.2 today; ours is set whatever a later default may be."""
    lowered = _from_options(ssl.CertificateOptions(insecurelyLowerMinimumTo=ssl.TLSVersion.TLSv1_0))
    assert _refused_versions(lowered) & (SSL.OP_NO_TLSv1 | SSL.OP_NO_TLSv1_1) == 0


@pytest.mark.parametrize("made", [
    "server", "relay client", "mx client", "dns provider client", "fetcher",
])
def test_every_context_refuses_versions_older_than_1_2(made, pem):
    connection = {
        "server": lambda: _from_options(tls.server_options(*pem)),
        "relay client": lambda: _client(tls.verified_client_options("relay.example.com")),
        "mx client": lambda: _from_options(tls.unverified_client_options()),
        "dns provider client": lambda: _client(tls.VerifiedHTTPS().creatorForNetloc(b"api.example.com", 443)),
        "fetcher": _fetcher_connection,
    }[made]()
    assert _refused_versions(connection) == OLDER_THAN_1_2


@implementer(IOpenSSLClientConnectionCreator)
class _Client:
    """A client speaking at most ``version`` and every cipher OpenSSL has (security level 0)."""

    def __init__(self, version: int):
        self._context = SSL.Context(SSL.TLS_METHOD)
        self._context.set_max_proto_version(version)
        self._context.set_cipher_list(b"ALL:@SECLEVEL=0")

    def clientConnectionForTLS(self, tls_protocol):  # noqa: N802 (Twisted's name)
        connection = SSL.Connection(self._context, None)
        connection.set_app_data(tls_protocol)
        return connection


@implementer(IHandshakeListener)
class _Handshake(protocol.Protocol):
    def __init__(self):
        self.done: defer.Deferred = defer.Deferred()

    def handshakeCompleted(self):  # noqa: N802
        self.done.callback(self.transport.getHandle().get_protocol_version_name())
        self.transport.loseConnection()

    def connectionLost(self, reason=None):  # noqa: N802
        if not self.done.called:
            self.done.errback(reason)


async def _handshake(port: int, version: int) -> str:
    endpoint = endpoints.wrapClientTLS(_Client(version), endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", port))
    probe = await endpoints.connectProtocol(endpoint, _Handshake())
    return await probe.done


@pt.ensureDeferred
async def test_a_tls_1_1_client_is_refused_and_a_tls_1_2_one_served(pem):
    listening = reactor.listenSSL(0, protocol.Factory.forProtocol(protocol.Protocol), tls.server_options(*pem),
                                  interface="127.0.0.1")
    try:
        port = listening.getHost().port
        assert await _handshake(port, SSL.TLS1_2_VERSION) == "TLSv1.2"
        with pytest.raises(SSL.Error):
            await _handshake(port, SSL.TLS1_1_VERSION)
    finally:
        await listening.stopListening()
