"""The submission protocol, bytes in and bytes out (Twisted's StringTransport, a Clock)."""

import base64

from twisted.internet import defer, task
from twisted.internet.address import IPv4Address, IPv6Address

from mailsvc.smtp.server import Refusal
from mailsvc.smtp.submission import Submission, SubmissionFactory
from tests.helpers.smtpwire import TLSStringTransport, connected, send

KEY = "re_goodkey1_secret"


class Recorder:
    def __init__(self):
        self.accepted = []
        self.pending: defer.Deferred | None = None
        self.refuse: Refusal | None = None
        self.key_checks = 0
        #: The client network of each AUTH exchange counted as failed when it began, and given back.
        self.reserved: list[str] = []
        self.given_back: list[str] = []
        #: Client networks over their limit: the seconds to wait.
        self.over_limit: dict[str, int] = {}

    async def authenticate(self, password):
        self.key_checks += 1
        return {"caller": password} if password == KEY else None

    async def accept(self, caller, message, recipients, _):
        if self.refuse:
            raise self.refuse
        if self.pending is not None:
            await self.pending
        self.accepted.append((caller, message, recipients))
        return "0190-id"

    async def reserve(self, client):
        if client in self.over_limit:
            return self.over_limit[client]
        self.reserved.append(client)
        return None

    async def give_back(self, client):
        self.given_back.append(client)


def connect(encrypted=True, tls=object()):
    recorder = Recorder()
    clock = task.Clock()
    factory = SubmissionFactory(clock, Submission(recorder.authenticate, recorder.accept, "mx.test", 30,
                                                      auth_failures=recorder),
                                tls, implicit_tls=encrypted)
    proto, transport = connected(factory)
    return proto, transport, recorder, clock


def node():
    """One node's submission service on a Clock, and ``client(host)``: a new connection from ``host``."""
    recorder = Recorder()
    clock = task.Clock()
    factory = SubmissionFactory(clock, Submission(recorder.authenticate, recorder.accept, "mx.test", 30,
                                                      auth_failures=recorder),
                                object(), implicit_tls=True)

    def client(host="192.0.2.1"):
        proto = factory.buildProtocol(None)
        transport = TLSStringTransport(peerAddress=IPv4Address("TCP", host, 40000) if ":" not in host
                                       else IPv6Address("TCP", host, 40000))
        proto.makeConnection(transport)
        send(proto, transport, b"EHLO c\r\n")
        return proto, transport

    return client, recorder, clock


def plain(user=b"mailsvc", password=KEY.encode()):
    return base64.b64encode(b"\0" + user + b"\0" + password)


def test_greeting_and_ehlo_on_implicit_tls():
    proto, transport, _, _ = connect(encrypted=True)
    assert transport.value().startswith(b"220 mx.test ESMTP")
    lines = send(proto, transport, b"EHLO client.example\r\n")
    assert lines[0] == b"250-mx.test"
    assert b"250-SIZE 41943040" in lines and b"250-8BITMIME" in lines and b"250-PIPELINING" in lines
    assert lines[-1] == b"250 AUTH PLAIN LOGIN"
    assert not any(b"STARTTLS" in line for line in lines)


def test_no_auth_before_tls():
    proto, transport, _, _ = connect(encrypted=False)
    lines = send(proto, transport, b"EHLO client.example\r\n")
    assert b"250 STARTTLS" in lines[-1] and not any(b"AUTH" in line for line in lines)
    assert send(proto, transport, b"AUTH PLAIN " + plain() + b"\r\n") == [
        b"538 5.7.11 Encryption required for requested authentication mechanism"]
    assert send(proto, transport, b"MAIL FROM:<a@acme.example>\r\n") == [b"530 5.7.0 Authentication required"]


def test_starttls_drops_what_was_pipelined_in_clear():
    proto, transport, _, _ = connect(encrypted=False)
    send(proto, transport, b"EHLO c\r\n")
    transport.clear()
    proto.dataReceived(b"STARTTLS\r\nMAIL FROM:<injected@evil.example>\r\n")
    assert transport.value() == b"220 2.0.0 Ready to start TLS\r\n"
    assert transport.tls is not None
    lines = send(proto, transport, b"EHLO c\r\n")
    assert lines[-1] == b"250 AUTH PLAIN LOGIN"


def test_auth_plain_login_and_failures():
    proto, transport, _, _ = connect()
    send(proto, transport, b"EHLO c\r\n")
    assert send(proto, transport, b"AUTH PLAIN " + plain(password=b"wrong") + b"\r\n") == [
        b"535 5.7.8 Authentication credentials invalid"]
    assert send(proto, transport, b"AUTH PLAIN " + plain(user=b"someone") + b"\r\n")[0].startswith(b"535")
    proto, transport, _, _ = connect()  # the third failure would close the connection
    send(proto, transport, b"EHLO c\r\n")
    assert send(proto, transport, b"AUTH PLAIN " + base64.b64encode(b"only\0two") + b"\r\n") == [
        b"501 5.5.2 Malformed AUTH PLAIN response"]
    assert send(proto, transport, b"AUTH PLAIN !!!notbase64\r\n")[0].startswith(b"501")
    proto, transport, _, _ = connect()
    send(proto, transport, b"EHLO c\r\n")
    assert send(proto, transport, b"AUTH LOGIN\r\n") == [b"334 VXNlcm5hbWU6"]
    assert send(proto, transport, base64.b64encode(b"resend") + b"\r\n") == [b"334 UGFzc3dvcmQ6"]
    assert send(proto, transport, base64.b64encode(KEY.encode()) + b"\r\n") == [
        b"235 2.7.0 Authentication successful"]
    assert send(proto, transport, b"AUTH PLAIN " + plain() + b"\r\n")[0].startswith(b"503")


def test_pipelined_transaction_is_answered_in_order():
    proto, transport, recorder, clock = connect()
    send(proto, transport, b"EHLO c\r\nAUTH PLAIN " + plain() + b"\r\n")
    recorder.pending = defer.Deferred()
    lines = send(proto, transport, (
        b"MAIL FROM:<a@acme.example> SIZE=100\r\nRCPT TO:<b@example.com>\r\nRCPT TO:<c@example.com>\r\nDATA\r\n"
        b"From: a@acme.example\r\nSubject: x\r\n\r\n..leading dot\r\nbody\r\n.\r\n"
        b"MAIL FROM:<a@acme.example>\r\nQUIT\r\n"))
    assert lines == [b"250 2.1.0 Sender OK", b"250 2.1.5 Recipient OK", b"250 2.1.5 Recipient OK",
                     b"354 End data with <CR><LF>.<CR><LF>"]
    transport.clear()
    recorder.pending.callback(None)
    assert transport.value().split(b"\r\n")[:-1] == [
        b"250 2.0.0 OK: queued as 0190-id", b"250 2.1.0 Sender OK", b"221 2.0.0 Bye"]
    caller, message, recipients = recorder.accepted[0]
    assert message == b"From: a@acme.example\r\nSubject: x\r\n\r\n.leading dot\r\nbody\r\n"
    assert recipients == ["b@example.com", "c@example.com"]


def test_refusals_are_replies():
    proto, transport, recorder, _ = connect()
    send(proto, transport, b"EHLO c\r\nAUTH PLAIN " + plain() + b"\r\n")
    recorder.refuse = Refusal(550, "5.7.1", "The acme.example domain is not verified.")
    lines = send(proto, transport, b"MAIL FROM:<a@acme.example>\r\nRCPT TO:<b@example.com>\r\nDATA\r\nx\r\n.\r\n")
    assert lines[-1] == b"550 5.7.1 The acme.example domain is not verified."
    assert send(proto, transport, b"MAIL FROM:<a@acme.example> SIZE=99999999999\r\n")[0].startswith(b"552 5.3.4")
    assert send(proto, transport, b"RCPT TO:<b@example.com>\r\n")[0].startswith(b"503")
    send(proto, transport, b"MAIL FROM:<a@acme.example>\r\n")
    assert send(proto, transport, b"RCPT TO:<not an address>\r\n")[0].startswith(b"553 5.1.3")
    lines = send(proto, transport, b"".join(b"RCPT TO:<r%d@example.com>\r\n" % i for i in range(51)))
    assert lines[-1].startswith(b"452 4.5.3") and lines.count(b"250 2.1.5 Recipient OK") == 50
    assert send(proto, transport, b"BOGUS\r\n") == [b"500 5.5.2 Command not recognized"]


def test_long_lines_and_idle_timeout():
    proto, transport, recorder, clock = connect()
    send(proto, transport, b"EHLO c\r\nAUTH PLAIN " + plain() + b"\r\n")
    lines = send(proto, transport, b"MAIL FROM:<a@acme.example>\r\nRCPT TO:<b@example.com>\r\nDATA\r\n"
                 + b"x" * 999 + b"\r\n.\r\n")
    assert lines[-1].startswith(b"550 5.6.0")
    assert recorder.accepted == []
    transport.clear()
    clock.advance(31)
    assert transport.value() == b"421 4.4.2 Idle timeout, closing connection\r\n"
    assert transport.disconnecting


def test_a_client_has_30_s_to_its_first_command_then_the_idle_timeout():
    recorder, clock = Recorder(), task.Clock()
    factory = SubmissionFactory(clock, Submission(recorder.authenticate, recorder.accept, "mx.test",
                                                  auth_failures=recorder), object(), implicit_tls=True)
    silent, silent_transport = connected(factory)
    talking, talking_transport = connected(factory)
    clock.advance(29)
    send(talking, talking_transport, b"EH")  # a part of a line is no command
    clock.advance(0.5)
    send(talking, talking_transport, b"LO c\r\n")
    assert not silent_transport.disconnecting
    silent_transport.clear()
    clock.advance(1)
    assert silent_transport.value() == b"421 4.4.2 Idle timeout, closing connection\r\n"
    assert silent_transport.disconnecting and not talking_transport.disconnecting
    clock.advance(298)  # then 5 minutes between commands (RFC 5321 §4.5.3.2), from EHLO at 29.5 s
    assert not talking_transport.disconnecting
    clock.advance(1)
    assert talking_transport.disconnecting


def test_the_third_failed_auth_closes_the_connection():
    client, recorder, _ = node()
    proto, transport = client()
    assert send(proto, transport, b"AUTH PLAIN " + plain(password=b"wrong") + b"\r\n")[0].startswith(b"535")
    assert send(proto, transport, b"AUTH LOGIN\r\n*\r\n")[-1] == b"501 5.0.0 Authentication aborted"
    assert not transport.disconnecting
    assert send(proto, transport, b"AUTH PLAIN " + plain(password=b"wrong") + b"\r\n") == [
        b"535 5.7.8 Authentication credentials invalid",
        b"421 4.7.0 Too many failed authentications, closing connection"]
    assert transport.disconnecting and recorder.key_checks == 2


def test_every_auth_exchange_counts_against_its_address_until_it_succeeds():
    client, recorder, _ = node()
    proto, transport = client("192.0.2.7")
    assert send(proto, transport, b"AUTH PLAIN " + plain(password=b"wrong") + b"\r\n")[0].startswith(b"535")
    assert send(proto, transport, b"AUTH LOGIN\r\n*\r\n")[-1].startswith(b"501")
    assert (recorder.reserved, recorder.given_back) == (["192.0.2.7"] * 2, [])
    # Counted once the credentials are in (a client's slow dialogue holds no count), before the check.
    assert send(proto, transport, b"AUTH LOGIN " + base64.b64encode(b"mailsvc") + b"\r\n") == [b"334 UGFzc3dvcmQ6"]
    assert len(recorder.reserved) == 2
    assert send(proto, transport, base64.b64encode(KEY.encode()) + b"\r\n") == [b"235 2.7.0 Authentication successful"]
    assert (recorder.reserved, recorder.given_back) == (["192.0.2.7"] * 3, ["192.0.2.7"])
    # An IPv6 client counts by its /64.
    proto, transport = client("2001:db8:1:2::5")
    assert send(proto, transport, b"AUTH PLAIN " + plain() + b"\r\n")[0].startswith(b"235")
    assert recorder.reserved[-1] == recorder.given_back[-1] == "2001:db8:1:2::/64"


def test_an_address_over_its_limit_gets_421_before_any_key_is_checked():
    client, recorder, _ = node()
    recorder.over_limit["192.0.2.7"] = 6
    proto, transport = client("192.0.2.7")
    assert send(proto, transport, b"AUTH PLAIN " + plain() + b"\r\n") == [
        b"421 4.7.0 Too many failed authentications from your address; try again later"]
    assert transport.disconnecting and recorder.key_checks == 0 and recorder.reserved == []
    other, other_transport = client("192.0.2.8")  # another address is not held up
    assert send(other, other_transport, b"AUTH PLAIN " + plain() + b"\r\n")[0].startswith(b"235")


def transaction(data: bytes) -> tuple[list[bytes], Recorder]:
    proto, transport, recorder, _ = connect()
    send(proto, transport, b"EHLO c\r\nAUTH PLAIN " + plain() + b"\r\n")
    lines = send(proto, transport, b"MAIL FROM:<a@acme.example>\r\nRCPT TO:<b@example.com>\r\nDATA\r\n" + data)
    return lines, recorder


def test_bare_cr_and_lf_become_crlf():
    lines, recorder = transaction(b"From: a@acme.example\nSubject: x\r\n\r\nbare\rcr\r\nbare\nlf\n.\r\n.\r\n")
    assert lines[-1].startswith(b"250 2.0.0")
    _, message, _ = recorder.accepted[0]
    assert message == b"From: a@acme.example\r\nSubject: x\r\n\r\nbare\r\ncr\r\nbare\r\nlf\r\n.\r\n"


def test_messages_that_are_no_text_or_too_many_headers_are_refused():
    too_many = b"".join(b"X-H%d: v\r\n" % n for n in range(1000))
    cases = [
        (b"From: a@acme.example\r\n\r\nnul\0here\r\n.\r\n", b"550 5.6.0 Message contains NUL characters"),
        (too_many + b"From: a@acme.example\r\n\r\nx\r\n.\r\n",
         b"550 5.6.0 Message has more than 1000 header fields"),
        (b"From: a@acme.example\r\nX-Big: " + b"v\r\n " * 300_000 + b"\r\n\r\nx\r\n.\r\n",
         b"550 5.6.0 Message header exceeds 1048576 bytes"),
    ]
    for data, reply in cases:
        lines, recorder = transaction(data)
        assert lines[-1] == reply and recorder.accepted == []
    lines, recorder = transaction(too_many[:-len(b"X-H999: v\r\n")] + b"From: a@acme.example\r\n\r\nx\r\n.\r\n")
    assert lines[-1].startswith(b"250") and len(recorder.accepted) == 1  # exactly 1,000 fields pass


def test_malformed_envelopes():
    proto, transport, _, _ = connect()
    send(proto, transport, b"EHLO c\r\nAUTH PLAIN " + plain() + b"\r\n")
    assert send(proto, transport, b"MAIL FROM:<a\0b@acme.example>\r\n") == [b"501 5.5.4 Syntax: MAIL FROM:<address>"]
    assert send(proto, transport, b"MAIL FROM:<a@acme.example> SIZE=" + b"9" * 5000 + b"\r\n")[0].startswith(
        b"552 5.3.4")
    assert send(proto, transport, b"MAIL FROM:<a@acme.example>\r\n") == [b"250 2.1.0 Sender OK"]
    assert send(proto, transport, b"RCPT TO:<b\0@example.com>\r\n")[0].startswith(b"553 5.1.3")


def test_garbage_ends_the_connection():
    proto, transport, _, _ = connect()
    lines = send(proto, transport, b"".join(b"GARBAGE %d\r\n" % n for n in range(100)))
    assert lines == [b"500 5.5.2 Command not recognized"] * 20 + [b"421 4.7.0 Too many errors, closing connection"]
    assert transport.disconnecting


def bounded(idle_timeout=30, **limits):
    """A submission service with the bounds given (short ones), and ``client(host)`` as ``node`` has."""
    recorder = Recorder()
    clock = task.Clock()
    service = Submission(recorder.authenticate, recorder.accept, "mx.test", idle_timeout, auth_failures=recorder,
                         **limits)
    # Two listeners (465 and 587) of one process share the caps.
    factories = [SubmissionFactory(clock, service, object(), implicit_tls=True) for _ in range(2)]

    def client(host="192.0.2.1", listener=0):
        proto = factories[listener].buildProtocol(None)
        transport = TLSStringTransport(peerAddress=IPv4Address("TCP", host, 40000) if ":" not in host
                                       else IPv6Address("TCP", host, 40000))
        proto.makeConnection(transport)
        return proto, transport

    return client, recorder, clock


def test_connections_at_once_are_capped_in_all_and_per_client():
    client, _, _ = bounded(max_connections=3, max_connections_per_client=2)
    first, _ = client("192.0.2.1")
    assert client("192.0.2.1", listener=1)[1].value().startswith(b"220 mx.test")
    refused, transport = client("192.0.2.1")  # the address's third, on either listener
    assert transport.value() == b"421 4.7.0 Too many connections; try again later\r\n" and transport.disconnecting
    refused.connectionLost()  # a refused connection frees no place
    # One IPv6 client is its /64: two addresses of it are one client.
    client("2001:db8::1")
    assert client("2001:db8::2")[1].value().startswith(b"421 4.7.0")
    # Three are open: connection 4 is refused whoever makes it...
    assert client("192.0.2.9", listener=1)[1].value() == b"421 4.7.0 Too many connections; try again later\r\n"
    # ...until one closes.
    first.connectionLost()
    assert client("192.0.2.9")[1].value().startswith(b"220 mx.test")


def test_a_trickled_command_line_gets_421_at_its_deadline_from_its_first_byte():
    client, _, clock = bounded(idle_timeout=300, command_line_timeout=60)
    proto, transport = client()
    send(proto, transport, b"EHLO c\r\n")
    # A line that ends within the deadline is a command like any other, however slow...
    for byte in b"NOOP":
        clock.advance(14)
        send(proto, transport, bytes([byte]))
    clock.advance(3)
    assert send(proto, transport, b"\r\n") == [b"250 2.0.0 OK"]
    # ...one that goes on does not: a byte every 2 s does not move its deadline.
    transport.clear()
    proto.dataReceived(b"MAIL FROM:<")
    for _ in range(29):
        clock.advance(2)
        proto.dataReceived(b"a")
    assert transport.value() == b"" and not transport.disconnecting
    clock.advance(2)  # 60 s since its first byte
    assert transport.value() == b"421 4.7.0 Command line too slow, closing connection\r\n"
    assert transport.disconnecting
    proto.connectionLost()
    assert clock.getDelayedCalls() == []


def test_a_session_gets_421_at_its_deadline_however_busy():
    client, _, clock = bounded(session_timeout=100)
    proto, transport = client()
    for _ in range(3):  # a line every 29 s keeps the idle timeout (30 s) away...
        clock.advance(29)
        assert send(proto, transport, b"NOOP\r\n") == [b"250 2.0.0 OK"]
    transport.clear()
    clock.advance(13)  # ...but not the end of the session
    assert transport.value() == b"421 4.7.0 Session too long, closing connection\r\n" and transport.disconnecting
    proto.connectionLost()
    assert clock.getDelayedCalls() == []


def test_a_message_flowing_longer_than_the_command_line_deadline_is_accepted():
    client, recorder, clock = bounded(command_line_timeout=5)
    proto, transport = client()
    send(proto, transport, b"EHLO c\r\nAUTH PLAIN " + plain() + b"\r\n")
    assert send(proto, transport, b"MAIL FROM:<a@acme.example>\r\nRCPT TO:<b@example.com>\r\nDATA\r\n")[-1] == (
        b"354 End data with <CR><LF>.<CR><LF>")
    send(proto, transport, b"From: a@acme.example\r\nSubject: x\r\n\r\n")
    for _ in range(10):  # 40 s of body, and a line of it taking 8 s, past the 5 s of a command line
        clock.advance(2)
        proto.dataReceived(b"part of a long line, ")
        clock.advance(2)
        proto.dataReceived(b"and its end\r\n")
    assert not transport.disconnecting
    assert send(proto, transport, b".\r\n") == [b"250 2.0.0 OK: queued as 0190-id"]
    assert recorder.accepted[0][1].count(b"part of a long line, and its end\r\n") == 10
    # Command lines have their deadline again.
    proto.dataReceived(b"NO")
    clock.advance(5)
    assert transport.value().endswith(b"421 4.7.0 Command line too slow, closing connection\r\n")
