"""
The outbound SMTP client against real servers on loopback with the real reactor: STARTTLS
with a verified certificate or not, AUTH at a smarthost and at the SMTP sink. The protocol
itself, bytes in and bytes out: tests/unit/test_smtp_outbound.py.
"""

import pytest
import pytest_twisted as pt
from twisted.cred.checkers import InMemoryUsernamePasswordDatabaseDontUse
from twisted.cred.portal import IRealm, Portal
from twisted.internet import endpoints, protocol, reactor, ssl
from twisted.mail import smtp
from twisted.mail.imap4 import LOGINCredentials, PLAINCredentials  # the public names of twisted.mail._cred's
from zope.interface import implementer

from mailsvc.crypto import tls as tls_files
from mailsvc.smtp.outbound import OutboundSMTP
from mailsvc.smtp.outbound_tls import ENFORCED
from mailsvc.smtp.replies import ConnectionFault
from tests.helpers.esmtp import (  # noqa: F401 (close_connections: a fixture)
    PipeliningESMTP,
    RecordingDelivery,
    close_connections,
    opened,
)
from tests.helpers.smtpsink import smtp_sink  # noqa: F401 (a fixture: the scriptable SMTP sink)

# -- real TLS over loopback, with the real reactor ---------------------------------------

@pytest.fixture
def tls_server():
    """A real ESMTP server on 127.0.0.1 offering STARTTLS with a self-signed mx.test certificate."""
    cert_pem, key_pem = tls_files.self_signed("mx.test")
    delivery, servers = RecordingDelivery(), []

    def build():
        proto = PipeliningESMTP(contextFactory=tls_files.server_options(cert_pem, key_pem))
        proto.delivery = delivery
        servers.append(proto)
        return proto

    port = reactor.listenTCP(0, protocol.Factory.forProtocol(build), interface="127.0.0.1")
    yield port.getHost().port, cert_pem, delivery, servers
    pt.blockon(port.stopListening())


async def connect_loopback(port, **options) -> OutboundSMTP:
    client = OutboundSMTP(reactor, "client.test", command_timeout=10, data_timeout=10, **options)
    endpoint = endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", port, timeout=10)
    return await endpoints.connectProtocol(endpoint, client)


@pt.ensureDeferred
async def test_enforced_tls_with_a_verified_certificate_over_loopback(tls_server):
    port, cert_pem, delivery, servers = tls_server
    trusted = ssl.optionsForClientTLS("mx.test", trustRoot=ssl.Certificate.loadPEM(cert_pem))
    client = await connect_loopback(port, tls_policy=ENFORCED, tls_options=trusted)
    first = await client.send("a@x.test", ["b@y.test"], b"Subject: one\n\n.first\n")
    second = await client.send("a@x.test", ["c@y.test"], b"Subject: two\n\nsecond\n")
    await client.quit()
    assert client.encrypted and servers[0].startedTLS
    assert first.by_outcome("delivered") == ["b@y.test"] and second.by_outcome("delivered") == ["c@y.test"]
    assert [body for _, _, body in delivery.messages] == [
        b"Subject: one\r\n\r\n.first\r\n", b"Subject: two\r\n\r\nsecond\r\n"]


@pt.ensureDeferred
async def test_a_certificate_that_does_not_verify_fails_the_connection(tls_server):
    port, _, delivery, _ = tls_server
    untrusted = ssl.optionsForClientTLS("mx.test", trustRoot=ssl.Certificate.loadPEM(
        tls_files.self_signed("mx.test")[0]))
    client = await connect_loopback(port, tls_policy=ENFORCED, tls_options=untrusted)
    with pytest.raises(ConnectionFault):
        await client.send("a@x.test", ["b@y.test"], b"Subject: one\n\nbody\n")
    await client.when_closed()
    assert delivery.messages == []


USER, PASSWORD = "relay-user", "pässwörd-7Hq"


# -- AUTH against real servers on loopback, with real TLS --------------------------------

@implementer(IRealm)
class DeliveryRealm:
    def __init__(self, delivery):
        self.delivery = delivery

    def requestAvatar(self, avatar_id, mind, *interfaces):  # noqa: N802
        assert smtp.IMessageDelivery in interfaces
        return smtp.IMessageDelivery, self.delivery, lambda: None


@pytest.fixture
def auth_server():
    """
    Twisted's ESMTP on 127.0.0.1 with STARTTLS and a cred portal: unauthenticated senders are
    refused, credentials are checked. ``mechanisms`` picks the challengers offered.
    """
    cert_pem, key_pem = tls_files.self_signed("smarthost.test")
    delivery, servers, listening = RecordingDelivery(), [], []
    checker = InMemoryUsernamePasswordDatabaseDontUse(**{USER: PASSWORD.encode()})
    portal = Portal(DeliveryRealm(delivery), [checker])
    challengers = {b"PLAIN": PLAINCredentials, b"LOGIN": LOGINCredentials}

    def start(mechanisms=(b"PLAIN", b"LOGIN")):
        def build():
            proto = PipeliningESMTP({m: challengers[m] for m in mechanisms},
                                    tls_files.server_options(cert_pem, key_pem))
            proto.portal = portal
            servers.append(proto)
            return proto

        port = reactor.listenTCP(0, protocol.Factory.forProtocol(build), interface="127.0.0.1")
        listening.append(port)
        return port.getHost().port

    yield start, cert_pem, delivery, servers
    for port in listening:
        pt.blockon(port.stopListening())


def trusting(cert_pem, name="smarthost.test"):
    return ssl.optionsForClientTLS(name, trustRoot=ssl.Certificate.loadPEM(cert_pem))


@pytest.mark.parametrize("mechanisms, used", [((b"PLAIN", b"LOGIN"), "PLAIN"), ((b"LOGIN",), "LOGIN")])
@pt.ensureDeferred
async def test_auth_against_a_real_smarthost_over_starttls(auth_server, mechanisms, used):
    start, cert_pem, delivery, servers = auth_server
    port = start(mechanisms)
    client = await connect_loopback(port, tls_options=trusting(cert_pem), auth=(USER, PASSWORD))
    result = await client.send("a@x.test", ["b@y.test"], b"Subject: relayed\n\nbody\n")
    await client.quit()
    assert client.encrypted and servers[0].startedTLS and servers[0].authenticated
    assert client.authenticated_with == used
    assert result.by_outcome("delivered") == ["b@y.test"]
    assert delivery.messages == [("a@x.test", "b@y.test", b"Subject: relayed\r\n\r\nbody\r\n")]


@pt.ensureDeferred
async def test_wrong_password_at_a_real_smarthost_blocks_every_recipient(auth_server):
    start, cert_pem, delivery, _ = auth_server
    client = await connect_loopback(start(), tls_options=trusting(cert_pem), auth=(USER, "wrong"))
    result = await client.send("a@x.test", ["b@y.test", "c@y.test"], b"Subject: x\n\nbody\n")
    await client.when_closed()
    assert {(r.outcome, r.deferral_class, r.reply.code) for r in result.recipients} == {
        ("deferred", "blocked", 535)}
    assert delivery.messages == []


@pt.ensureDeferred
async def test_without_credentials_a_real_smarthost_refuses_the_sender(auth_server):
    """Why relay mode needs AUTH: the smarthost refuses unauthenticated senders."""
    start, cert_pem, delivery, _ = auth_server
    client = await connect_loopback(start(), tls_options=trusting(cert_pem))
    result = await client.send("a@x.test", ["b@y.test"], b"x")
    await client.quit()
    assert result.recipients[0].reply.code == 550 and delivery.messages == []


@pt.ensureDeferred
async def test_auth_at_the_sink_after_verified_starttls(smtp_sink):  # noqa: F811 (the fixture)
    smtp_sink.require_auth = True
    client = await connect_loopback(smtp_sink.port, tls_options=trusting(smtp_sink.cert_pem, "localhost"),
                                    auth=(USER, PASSWORD))
    result = await client.send("a@x.test", ["b@y.test"], b"Subject: x\n\nbody\n")
    await client.quit()
    assert result.by_outcome("delivered") == ["b@y.test"]
    [message] = smtp_sink.messages
    assert (message.auth_user, message.tls) == (USER, True)


@pt.ensureDeferred
async def test_sink_without_tls_gets_no_credentials(smtp_sink):  # noqa: F811 (the fixture)
    smtp_sink.require_auth, smtp_sink.starttls = True, False
    client = await connect_loopback(smtp_sink.port, tls_options=trusting(smtp_sink.cert_pem, "localhost"),
                                    auth=(USER, PASSWORD))
    result = await client.send("a@x.test", ["b@y.test"], b"x")
    await client.when_closed()
    [recipient] = result.recipients
    assert (recipient.outcome, recipient.deferral_class, recipient.reply.text) == (
        "deferred", "blocked", "smarthost offers no TLS; credentials not sent")
    assert smtp_sink.messages == []


# -- writes straight to the socket on a plain connection ----------------------------------

@pt.ensureDeferred
async def test_plain_connection_writes_to_the_socket_and_falls_back_in_order(smtp_sink):  # noqa: F811
    """
    Without TLS every write goes straight to the socket while the transport holds nothing; a
    message larger than the socket takes at once leaves the rest to the transport, and what
    follows (the next transaction's commands) comes after it, in order, on the same connection.
    """
    smtp_sink.starttls = False
    client = await connect_loopback(smtp_sink.port)
    small = b"Subject: one\r\n\r\nfirst\r\n"
    assert (await client.send("a@x.test", ["b@y.test"], small)).by_outcome("delivered") == ["b@y.test"]
    large = b"Subject: two\r\n\r\n" + b"".join(b"%07d ." % n + b"x" * 60 + b"\r\n" for n in range(150_000))
    third = b"Subject: three\r\n\r\n.third\r\n"
    results = [client.send("a@x.test", ["c@y.test"], large), client.send("a@x.test", ["d@y.test"], third)]
    outcomes = [(await r).by_outcome("delivered") for r in results]
    await client.quit()
    assert outcomes == [["c@y.test"], ["d@y.test"]]
    assert [m.data for m in smtp_sink.messages] == [small, large, third]
    assert smtp_sink.connections == 1 and not any(m.tls for m in smtp_sink.messages)


@pt.ensureDeferred
async def test_starttls_after_plain_writes_encrypts_everything_after(tls_server):
    """The greeting's EHLO and STARTTLS go straight to the socket; everything after it, through TLS."""
    port, cert_pem, delivery, servers = tls_server
    client = await connect_loopback(port, tls_options=trusting(cert_pem, "mx.test"))
    body = b"Subject: x\r\n\r\n" + (b"y" * 70 + b"\r\n") * 5_000
    result = await client.send("a@x.test", ["b@y.test"], body)
    await client.quit()
    assert result.by_outcome("delivered") == ["b@y.test"] and client.encrypted
    assert [m for _, _, m in delivery.messages] == [body]
