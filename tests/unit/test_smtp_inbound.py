"""
The return-path listener: bytes in and bytes out through StringTransport and a Clock.
smtplib against a real listener: tests/integration/test_smtp_inbound_loopback.py.
"""

from twisted.internet import defer, task
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from mailsvc.mail import verp
from mailsvc.smtp.inbound import InboundFactory
from tests.helpers.inbound import VERP, Recorder
from tests.helpers.smtpwire import connected, send


def connect(tls_options=None, asynchronous=True, accepts=None, **kwargs):
    """A listener's connection; ``accepts`` (the recipient check) is the recorder's unless given."""
    recorder = Recorder(asynchronous)
    clock = task.Clock()
    kwargs.setdefault("idle_timeout", 30)
    factory = InboundFactory(clock, "mx.acme.example", accepts or recorder.accepts, recorder.deliver,
                             tls_options=tls_options, **kwargs)
    proto, transport = connected(factory)
    return proto, transport, recorder, clock


# Bytes in, bytes out


def test_greeting_and_extensions():
    proto, transport, _, _ = connect()
    assert transport.value() == b"220 mx.acme.example ESMTP mailsvc\r\n"
    lines = send(proto, transport, b"EHLO mx.example.org\r\n")
    assert lines == [b"250-mx.acme.example", b"250-SIZE 10485760", b"250-8BITMIME", b"250-PIPELINING",
                     b"250 ENHANCEDSTATUSCODES"]
    proto, transport, _, _ = connect(tls_options=object())
    lines = send(proto, transport, b"EHLO mx.example.org\r\n")
    assert lines[-1] == b"250 STARTTLS" and not any(b"AUTH" in line for line in lines)
    assert send(proto, transport, b"AUTH PLAIN AGEAYg==\r\n") == [b"500 5.5.2 Command not recognized"]


def test_pipelined_dsn_is_answered_in_order_and_delivered_byte_for_byte():
    proto, transport, recorder, _ = connect()
    recorder.accept_pending = defer.Deferred()
    recorder.deliver_pending = defer.Deferred()
    lines = send(proto, transport, (
        b"EHLO mx.example.org\r\nMAIL FROM:<> SIZE=2000\r\n"
        b"RCPT TO:<" + VERP.encode() + b">\r\nRCPT TO:<someone@elsewhere.example>\r\nDATA\r\n"
        b"Subject: bounce\r\n\r\n..leading dot\r\nbare LF line\n.\r\n"
        b"MAIL FROM:<>\r\nQUIT\r\n"))
    # Nothing after the first RCPT is answered while accepts() is pending.
    assert lines[0] == b"250-mx.acme.example" and lines[5:] == [b"250 2.1.0 Sender OK"]
    transport.clear()
    pending, recorder.accept_pending = recorder.accept_pending, None
    pending.callback(None)
    assert transport.value().split(b"\r\n")[:-1] == [
        b"250 2.1.5 Recipient OK", b"550 5.7.1 Relay not permitted", b"354 End data with <CR><LF>.<CR><LF>"]
    transport.clear()
    recorder.deliver_pending.callback(None)
    assert transport.value().split(b"\r\n")[:-1] == [
        b"250 2.0.0 OK: message accepted", b"250 2.1.0 Sender OK", b"221 2.0.0 Bye"]
    assert recorder.delivered == [("", [VERP], b"Subject: bounce\r\n\r\n.leading dot\r\nbare LF line\r\n")]
    assert recorder.asked == [VERP, "someone@elsewhere.example"]


def test_relay_is_refused_and_synchronous_accepts_work():
    proto, transport, recorder, _ = connect(asynchronous=False)
    send(proto, transport, b"EHLO c\r\nMAIL FROM:<spammer@example.net>\r\n")
    assert send(proto, transport, b"RCPT TO:<victim@gmail.example>\r\n") == [b"550 5.7.1 Relay not permitted"]
    assert send(proto, transport, b"RCPT TO:<postmaster@acme.example>\r\n") == [b"550 5.7.1 Relay not permitted"]
    assert send(proto, transport, b"DATA\r\n") == [b"503 5.5.1 Need MAIL and RCPT before DATA"]
    assert send(proto, transport, b"RCPT TO:<@relay.example:Abuse@bounces.acme.example>\r\n") == [
        b"250 2.1.5 Recipient OK"]
    assert send(proto, transport, b"DATA\r\nx\r\n.\r\n") == [
        b"354 End data with <CR><LF>.<CR><LF>", b"250 2.0.0 OK: message accepted"]
    assert recorder.delivered == [("spammer@example.net", ["Abuse@bounces.acme.example"], b"x\r\n")]


def test_a_failing_deliver_is_451_and_the_session_goes_on():
    proto, transport, recorder, _ = connect()
    recorder.fail = True
    lines = send(proto, transport, b"EHLO c\r\nMAIL FROM:<>\r\nRCPT TO:<fbl@bounces.acme.example>\r\n"
                                   b"DATA\r\nreport\r\n.\r\nNOOP\r\n")
    assert lines[-2:] == [b"451 4.3.0 Local error in processing; try again later", b"250 2.0.0 OK"]
    recorder.fail = False
    lines = send(proto, transport, b"MAIL FROM:<>\r\nRCPT TO:<fbl@bounces.acme.example>\r\nDATA\r\nagain\r\n.\r\n")
    assert lines[-1] == b"250 2.0.0 OK: message accepted" and recorder.delivered[0][2] == b"again\r\n"


def test_a_failing_accepts_is_451():
    def broken(address):
        raise RuntimeError("database down")

    proto, transport, recorder, _ = connect(asynchronous=False, accepts=broken)
    send(proto, transport, b"EHLO c\r\nMAIL FROM:<>\r\n")
    assert send(proto, transport, b"RCPT TO:<" + VERP.encode() + b">\r\n") == [
        b"451 4.3.0 Local error in processing; try again later"]


def test_sequence_and_syntax_errors():
    proto, transport, _, _ = connect()
    assert send(proto, transport, b"MAIL FROM:<>\r\n") == [b"503 5.5.1 Send EHLO first"]
    assert send(proto, transport, b"EHLO\r\n") == [b"501 5.5.4 EHLO needs a domain"]
    assert send(proto, transport, b"HELO mx.example.org\r\n") == [b"250 mx.acme.example"]
    assert send(proto, transport, b"RCPT TO:<" + VERP.encode() + b">\r\n") == [b"503 5.5.1 Need MAIL before RCPT"]
    assert send(proto, transport, b"MAIL TO:<x@y>\r\n") == [b"501 5.5.4 Syntax: MAIL FROM:<address>"]
    assert send(proto, transport, b"mail from: <Sender@Example.org> BODY=8BITMIME\r\n") == [b"250 2.1.0 Sender OK"]
    assert send(proto, transport, b"MAIL FROM:<>\r\n") == [b"503 5.5.1 Sender already given"]
    assert send(proto, transport, b"RCPT TO:<>\r\n") == [b"553 5.1.3 Bad recipient address syntax"]
    assert send(proto, transport, b"RSET\r\nVRFY x\r\nSTARTTLS\r\n") == [
        b"250 2.0.0 OK", b"252 2.5.0 Cannot VRFY user", b"502 5.5.1 TLS not available"]
    assert send(proto, transport, b"MAIL FROM:<" + b"a" * 3000 + b"@x>\r\n") == [b"500 5.5.2 Line too long"]
    assert send(proto, transport, b"BOGUS\r\n") == [b"500 5.5.2 Command not recognized"]


def test_too_many_errors_closes():
    proto, transport, _, _ = connect()
    lines = send(proto, transport, b"EHLO c\r\nMAIL FROM:<>\r\n" + b"RCPT TO:<x@gmail.example>\r\n" * 10
                 + b"BOGUS\r\n" * 15)
    assert lines.count(b"550 5.7.1 Relay not permitted") == 10
    assert lines[-1] == b"421 4.7.0 Too many errors, closing connection" and transport.disconnecting


def test_size_limits():
    proto, transport, recorder, _ = connect(max_message_bytes=1000)
    send(proto, transport, b"EHLO c\r\n")
    assert send(proto, transport, b"MAIL FROM:<> SIZE=1001\r\n") == [
        b"552 5.3.4 Message size exceeds fixed maximum message size"]
    lines = send(proto, transport, b"MAIL FROM:<>\r\nRCPT TO:<" + VERP.encode() + b">\r\nDATA\r\n"
                 + (b"y" * 98 + b"\r\n") * 20 + b".\r\n")
    assert lines[-1] == b"552 5.3.4 Message size exceeds fixed maximum message size"
    assert recorder.delivered == []
    # The transaction is over; long (but not endless) lines in a returned original are fine.
    lines = send(proto, transport, b"MAIL FROM:<>\r\nRCPT TO:<" + VERP.encode() + b">\r\nDATA\r\n"
                 + b"z" * 900 + b"\r\n.\r\n")
    assert lines[-1] == b"250 2.0.0 OK: message accepted"
    # A line beyond any reason ends the connection.
    send(proto, transport, b"NOOP " + b"x" * 70000)
    assert transport.disconnecting


def test_starttls_drops_what_was_pipelined_in_clear():
    proto, transport, recorder, _ = connect(tls_options=object())
    send(proto, transport, b"EHLO c\r\n")
    lines = send(proto, transport, b"STARTTLS\r\nMAIL FROM:<injected@evil.example>\r\n")
    assert lines == [b"220 2.0.0 Ready to start TLS"] and transport.tls is not None
    assert send(proto, transport, b"MAIL FROM:<>\r\n") == [b"503 5.5.1 Send EHLO first"]
    lines = send(proto, transport, b"EHLO c\r\n")
    assert lines[-1] == b"250 ENHANCEDSTATUSCODES" and not any(b"STARTTLS" in line for line in lines)
    assert send(proto, transport, b"STARTTLS\r\n") == [b"503 5.5.1 TLS already active"]


def test_idle_timeout():
    proto, transport, _, clock = connect()
    send(proto, transport, b"EHLO c\r\n")
    clock.advance(29)
    send(proto, transport, b"NOOP\r\n")
    transport.clear()
    clock.advance(29)
    assert transport.value() == b""
    clock.advance(2)
    assert transport.value() == b"421 4.4.2 mx.acme.example Idle timeout, closing connection\r\n"
    assert transport.disconnecting


def test_a_silent_peer_has_the_idle_timeout_to_its_first_command():
    # Mail servers send bounces and reports here: RFC 5321's 5 minutes from the start.
    proto, transport, _, clock = connect(idle_timeout=300)
    clock.advance(299)
    assert not transport.disconnecting
    clock.advance(1)
    assert transport.disconnecting


def test_a_session_has_a_length_however_busy_the_peer():
    proto, transport, _, clock = connect()
    for _ in range(31):  # a line every 29 s keeps the idle timeout (30 s) away for 899 s...
        clock.advance(29)
        send(proto, transport, b"NOOP\r\n")
    assert not transport.disconnecting
    transport.clear()
    clock.advance(1)  # ...but not the end of the session at 15 minutes
    assert transport.value() == b"421 4.4.2 mx.acme.example Session too long, closing connection\r\n"
    assert transport.disconnecting
    proto.connectionLost()
    assert clock.getDelayedCalls() == []


def test_connections_at_once_are_limited_in_all_and_per_peer():
    recorder = Recorder()
    factory = InboundFactory(task.Clock(), "mx.acme.example", recorder.accepts, recorder.deliver,
                             max_connections=3, max_connections_per_peer=2)

    def open_from(host):
        proto = factory.buildProtocol(None)
        transport = StringTransport(peerAddress=IPv4Address("TCP", host, 50000))
        proto.makeConnection(transport)
        return proto, transport

    open_from("192.0.2.1")
    second, _ = open_from("192.0.2.1")
    refused, transport = open_from("192.0.2.1")
    assert transport.value() == b"421 4.7.0 mx.acme.example Too many connections; try again later\r\n"
    assert transport.disconnecting
    refused.connectionLost()
    assert open_from("192.0.2.2")[1].value().startswith(b"220 ")
    # Three are open: a fourth peer is refused too; a refused connection that ends frees no place.
    refused, transport = open_from("192.0.2.3")
    refused.connectionLost()
    assert transport.value().startswith(b"421 4.7.0") and open_from("192.0.2.3")[1].value().startswith(b"421 ")
    # A closed one frees its place.
    second.connectionLost()
    assert open_from("192.0.2.1")[1].value().startswith(b"220 ")


def test_a_verp_address_made_by_verp_module_is_an_ordinary_recipient():
    # The listener does not interpret addresses: it asks accepts(), which the wiring builds on verp.
    import uuid

    key, delivery = b"k" * 32, uuid.uuid4()
    address = verp.envelope_sender(key, delivery, "bounces.acme.example")
    proto, transport, recorder, _ = connect(asynchronous=False, accepts=lambda a: verp.delivery_of(key, a) == delivery)
    send(proto, transport, b"EHLO c\r\nMAIL FROM:<>\r\n")
    assert send(proto, transport, f"RCPT TO:<{address.upper()}>\r\n".encode()) == [b"250 2.1.5 Recipient OK"]
    local = address.split("@")[0]
    forged = local[:-1] + ("a" if local[-1] != "a" else "b") + "@bounces.acme.example"  # a wrong MAC
    assert send(proto, transport, f"RCPT TO:<{forged}>\r\n".encode()) == [b"550 5.7.1 Relay not permitted"]
