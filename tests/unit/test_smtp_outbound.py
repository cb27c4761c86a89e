"""
The outbound SMTP client: bytes in and bytes out (StringTransport, a Clock), and against
Twisted's real ESMTP server connected in memory (iosim). Real TLS and AUTH against servers on
loopback: tests/integration/test_smtp_outbound_loopback.py.
"""

import base64

import pytest
from twisted.internet import defer, task
from twisted.internet.address import IPv4Address
from twisted.internet.interfaces import ISSLTransport
from twisted.internet.testing import StringTransport
from twisted.logger import formatEvent, globalLogPublisher
from twisted.test import iosim
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from mailsvc.smtp.outbound import OutboundSMTP
from mailsvc.smtp.outbound_tls import ENFORCED
from mailsvc.smtp.outbound_transaction import data_payload, normalise_lines
from mailsvc.smtp.replies import (
    MAX_REPLY_BYTES,
    MAX_REPLY_LINES,
    ConnectionFault,
    DeadlinePassed,
    DeadlinePassedUnsent,
    Reply,
    SMTPConnectionLost,
    SMTPProtocolError,
    SMTPTimeout,
    to_reply,
)
from tests.helpers.esmtp import (  # noqa: F401 (close_connections: a fixture)
    PipeliningESMTP,
    RecordingDelivery,
    close_connections,
    opened,
)

check = SynchronousTestCase()
EHLO_PIPELINING = (b"250-mx.test hello\r\n250-PIPELINING\r\n250-SIZE 100000\r\n"
                   b"250-8BITMIME\r\n250 ENHANCEDSTATUSCODES\r\n")
EHLO_PLAIN = b"250-mx.test hello\r\n250 8BITMIME\r\n"


class Transport(StringTransport):
    no_delay = None
    tls = None
    aborted = False

    def write(self, data):
        self.writes.append(data)
        super().write(data)

    def clear(self):
        self.writes = []
        super().clear()

    def abortConnection(self):  # noqa: N802
        self.aborted = True
        super().abortConnection()

    def setTcpNoDelay(self, enabled):  # noqa: N802
        self.no_delay = enabled

    def startTLS(self, options):  # noqa: N802
        self.tls = options


def connect(ehlo=EHLO_PIPELINING, **options):
    clock = task.Clock()
    client = OutboundSMTP(clock, "client.test", **options)
    opened.append(client)
    transport = Transport()
    transport.clear()
    client.makeConnection(transport)
    if ehlo is not None:
        assert reply(client, transport, b"220 mx.test ESMTP\r\n") == [b"EHLO client.test"]
        reply(client, transport, ehlo)
    return client, transport, clock


def reply(client, transport, data: bytes) -> list[bytes]:
    """Feeds the server's bytes; returns the lines the client wrote in answer."""
    transport.clear()
    client.dataReceived(data)
    return transport.value().split(b"\r\n")[:-1]


def test_ehlo_after_greeting_with_nodelay_and_extensions():
    client, transport, _ = connect()
    assert transport.no_delay is True
    assert client.extensions == {"PIPELINING": "", "SIZE": "100000", "8BITMIME": "",
                                 "ENHANCEDSTATUSCODES": ""}


def test_helo_fallback_when_ehlo_is_refused():
    client, transport, _ = connect(ehlo=None)
    reply(client, transport, b"220 old.test\r\n")
    assert reply(client, transport, b"502 5.5.2 what\r\n") == [b"HELO client.test"]
    reply(client, transport, b"250 old.test\r\n")
    d = client.send("a@x.test", ["b@y.test"], b"hi\r\n")
    assert transport.value() == b"MAIL FROM:<a@x.test>\r\n"
    assert client.extensions == {}
    check.assertNoResult(d)
    client.connectionLost(None)
    check.failureResultOf(d, SMTPConnectionLost)


def test_pipelined_transaction_is_one_write_and_results_are_per_recipient():
    client, transport, _ = connect()
    transport.clear()
    message = b"Subject: hi\r\n\r\nbody\r\n"
    d = client.send("bounce@rp.test", ["ok@y.test", "busy@y.test", "gone@y.test", "ok2@y.test"], message)
    assert len(transport.writes) == 1
    assert transport.value() == (
        b"MAIL FROM:<bounce@rp.test> SIZE=%d\r\n" % len(message)
        + b"RCPT TO:<ok@y.test>\r\nRCPT TO:<busy@y.test>\r\nRCPT TO:<gone@y.test>\r\n"
        + b"RCPT TO:<ok2@y.test>\r\nDATA\r\n")
    body = reply(client, transport, b"250 2.1.0 ok\r\n250 2.1.5 ok\r\n450 4.2.1 mailbox busy\r\n"
                                    b"550-5.1.1 no such\r\n550 5.1.1 user\r\n250 2.1.5 ok\r\n354 go\r\n")
    assert body == [b"Subject: hi", b"", b"body", b"."]
    check.assertNoResult(d)
    reply(client, transport, b"250 2.0.0 queued as X\r\n")
    result = check.successResultOf(d)
    assert [(r.recipient, r.outcome, r.reply, r.deferral_class) for r in result.recipients] == [
        ("ok@y.test", "delivered", Reply(250, "2.0.0", "queued as X"), None),
        ("busy@y.test", "deferred", Reply(450, "4.2.1", "mailbox busy"), "transient"),
        ("gone@y.test", "bounced", Reply(550, "5.1.1", "no such user"), None),
        ("ok2@y.test", "delivered", Reply(250, "2.0.0", "queued as X"), None),
    ]
    assert result.by_outcome("delivered") == ["ok@y.test", "ok2@y.test"]


def test_without_pipelining_one_command_at_a_time():
    client, transport, _ = connect(ehlo=EHLO_PLAIN)
    transport.clear()
    d = client.send("a@x.test", ["b@y.test", "c@y.test"], "héllo\n".encode())
    assert transport.value() == b"MAIL FROM:<a@x.test> BODY=8BITMIME\r\n"
    assert reply(client, transport, b"250 ok\r\n") == [b"RCPT TO:<b@y.test>"]
    assert reply(client, transport, b"550 no\r\n") == [b"RCPT TO:<c@y.test>"]
    assert reply(client, transport, b"250 ok\r\n") == [b"DATA"]
    assert reply(client, transport, b"354 go\r\n") == ["héllo".encode(), b"."]
    reply(client, transport, b"250 done\r\n")
    result = check.successResultOf(d)
    assert [r.outcome for r in result.recipients] == ["bounced", "delivered"]


def test_data_refusal_applies_to_every_accepted_recipient():
    client, transport, _ = connect()
    d = client.send("a@x.test", ["b@y.test", "c@y.test"], b"x")
    reply(client, transport, b"250 ok\r\n250 ok\r\n452 4.5.3 too many\r\n554 5.7.1 spam\r\n")
    result = check.successResultOf(d)
    assert [(r.outcome, r.reply.code) for r in result.recipients] == [("bounced", 554), ("deferred", 452)]


def test_temporary_failure_after_data_defers_the_accepted_recipients():
    client, transport, _ = connect()
    d = client.send("a@x.test", ["b@y.test"], b"x")
    reply(client, transport, b"250 ok\r\n250 ok\r\n354 go\r\n")
    reply(client, transport, b"451 4.3.0 try later\r\n")
    [result] = check.successResultOf(d).recipients
    assert (result.outcome, result.deferral_class, result.reply.enhanced_code) == ("deferred", "transient", "4.3.0")


def test_mail_refusal_decides_every_recipient():
    client, transport, _ = connect(ehlo=EHLO_PLAIN)
    d = client.send("a@x.test", ["b@y.test", "c@y.test"], b"x")
    assert reply(client, transport, b"553 5.1.8 bad sender\r\n") == []
    result = check.successResultOf(d)
    assert {(r.outcome, r.reply.code) for r in result.recipients} == {("bounced", 553)}


def test_next_transaction_follows_a_complete_one_without_rset():
    client, transport, _ = connect()
    first = client.send("a@x.test", ["b@y.test"], b"one")
    second = client.send("a@x.test", ["c@y.test"], b"two")
    reply(client, transport, b"250 ok\r\n250 ok\r\n354 go\r\n")
    following = reply(client, transport, b"250 ok\r\n")
    assert following == [b"MAIL FROM:<a@x.test> SIZE=5", b"RCPT TO:<c@y.test>", b"DATA"]
    check.successResultOf(first)
    check.assertNoResult(second)
    client.connectionLost(None)
    check.failureResultOf(second, SMTPConnectionLost)


def test_rset_before_the_next_transaction_after_a_failed_one():
    client, transport, _ = connect()
    first = client.send("a@x.test", ["b@y.test"], b"one")
    second = client.send("a@x.test", ["c@y.test"], b"two")
    following = reply(client, transport, b"250 ok\r\n550 no\r\n554 no valid recipients\r\n")
    assert check.successResultOf(first).by_outcome("bounced") == ["b@y.test"]
    assert following == [b"RSET", b"MAIL FROM:<a@x.test> SIZE=5", b"RCPT TO:<c@y.test>", b"DATA"]
    reply(client, transport, b"250 reset\r\n250 ok\r\n250 ok\r\n354 go\r\n")
    reply(client, transport, b"250 ok\r\n")
    assert check.successResultOf(second).by_outcome("delivered") == ["c@y.test"]


def test_354_with_no_accepted_recipient_sends_an_empty_message():
    client, transport, _ = connect()
    d = client.send("a@x.test", ["b@y.test"], b"secret")
    assert reply(client, transport, b"250 ok\r\n550 no\r\n354 go\r\n") == [b"."]
    reply(client, transport, b"554 no recipients\r\n")
    assert check.successResultOf(d).by_outcome("bounced") == ["b@y.test"]


def test_421_mid_transaction_defers_it_and_every_queued_one_and_closes():
    client, transport, _ = connect()
    first = client.send("a@x.test", ["b@y.test", "c@y.test"], b"one")
    second = client.send("a@x.test", ["d@y.test"], b"two")
    reply(client, transport, b"250 ok\r\n250 ok\r\n421 4.4.2 closing\r\n")
    assert transport.disconnecting
    for d in (first, second):
        for r in check.successResultOf(d).recipients:
            assert (r.outcome, r.reply, r.deferral_class) == (
                "deferred", Reply(421, "4.4.2", "closing"), "transient")
    client.connectionLost(None)
    later = client.send("a@x.test", ["e@y.test"], b"three")
    assert check.successResultOf(later).by_outcome("deferred") == ["e@y.test"]


def test_421_greeting_defers_queued_transactions():
    client, transport, _ = connect(ehlo=None)
    d = client.send("a@x.test", ["b@y.test"], b"x")
    reply(client, transport, b"421 busy\r\n")
    assert transport.disconnecting
    assert check.successResultOf(d).by_outcome("deferred") == ["b@y.test"]


def test_refusing_greeting_quits_and_defers():
    client, transport, _ = connect(ehlo=None)
    d = client.send("a@x.test", ["b@y.test"], b"x")
    assert reply(client, transport, b"554 go away\r\n") == [b"QUIT"]
    [result] = check.successResultOf(d).recipients
    assert (result.outcome, result.reply.code) == ("deferred", 554)


def test_command_timeout_aborts_and_fails_pending_transactions():
    client, transport, clock = connect(command_timeout=30)
    first = client.send("a@x.test", ["b@y.test"], b"x")
    second = client.send("a@x.test", ["c@y.test"], b"x")
    reply(client, transport, b"250 ok\r\n")
    clock.advance(29)
    check.assertNoResult(first)
    clock.advance(1)
    assert transport.aborted
    failure = check.failureResultOf(first, SMTPTimeout)
    assert str(failure.value) == "no reply to RCPT TO within 30 s; connection aborted"
    check.failureResultOf(second, SMTPTimeout)
    client.connectionLost(None)
    assert not clock.getDelayedCalls()


def test_data_timeout_is_separate_from_the_command_timeout():
    client, transport, clock = connect(command_timeout=30, data_timeout=600)
    d = client.send("a@x.test", ["b@y.test"], b"x")
    reply(client, transport, b"250 ok\r\n250 ok\r\n354 go\r\n")
    clock.advance(599)
    check.assertNoResult(d)
    clock.advance(1)
    assert "the end of data within 600 s" in str(check.failureResultOf(d, SMTPTimeout).value)


def test_idle_connection_sets_no_timer_and_connection_loss_fails_the_transaction():
    client, transport, clock = connect()
    assert not clock.getDelayedCalls()
    d = client.send("a@x.test", ["b@y.test"], b"x")
    client.connectionLost(None)
    assert "connection lost" in str(check.failureResultOf(d).value)
    assert not clock.getDelayedCalls()


def test_opportunistic_starttls_then_ehlo_again():
    tls = object()
    client, transport, _ = connect(ehlo=None, tls_options=tls)
    reply(client, transport, b"220 mx.test\r\n")
    assert reply(client, transport, b"250-mx.test\r\n250 STARTTLS\r\n") == [b"STARTTLS"]
    assert reply(client, transport, b"220 go ahead\r\n") == [b"EHLO client.test"]
    assert transport.tls is tls and client.encrypted
    reply(client, transport, b"250-mx.test\r\n250 PIPELINING\r\n")
    d = client.send("a@x.test", ["b@y.test"], b"x")
    assert transport.value().startswith(b"MAIL FROM:<a@x.test>\r\n")
    client.connectionLost(None)
    check.failureResultOf(d, SMTPConnectionLost)


def test_opportunistic_goes_on_in_plain_text_when_tls_is_not_offered():
    client, transport, _ = connect(ehlo=EHLO_PLAIN, tls_options=object())
    d = client.send("a@x.test", ["b@y.test"], b"x")
    assert transport.tls is None
    assert transport.value().startswith(b"MAIL FROM:")
    client.connectionLost(None)
    check.failureResultOf(d, SMTPConnectionLost)


def test_enforced_tls_not_offered_defers_as_blocked():
    client, transport, _ = connect(ehlo=None, tls_policy=ENFORCED, tls_options=object())
    d = client.send("a@x.test", ["b@y.test"], b"x")
    reply(client, transport, b"220 mx.test\r\n")
    assert reply(client, transport, EHLO_PLAIN) == [b"QUIT"]
    [result] = check.successResultOf(d).recipients
    assert (result.outcome, result.deferral_class, result.reply.enhanced_code) == ("deferred", "blocked", "4.7.4")


def test_enforced_policy_needs_tls_options():
    with pytest.raises(ValueError):
        OutboundSMTP(task.Clock(), "client.test", tls_policy=ENFORCED)


def test_message_over_the_servers_size_limit_bounces_without_being_sent():
    client, transport, _ = connect()
    transport.clear()
    d = client.send("a@x.test", ["b@y.test"], b"x" * 100_001)
    assert transport.value() == b""
    [result] = check.successResultOf(d).recipients
    assert (result.outcome, result.reply.code, result.reply.enhanced_code) == ("bounced", 552, "5.3.4")


@pytest.mark.parametrize("address", ["a@x.test>\r\nRCPT TO:<evil@z.test", "a b@x.test", "a@x.test\n"])
def test_addresses_that_could_inject_commands_are_refused(address):
    client, _, _ = connect()
    with pytest.raises(ValueError):
        client.send(address, ["b@y.test"], b"x")
    with pytest.raises(ValueError):
        client.send("a@x.test", [address], b"x")


def test_quit_after_queued_transactions_then_closed():
    client, transport, _ = connect()
    d = client.send("a@x.test", ["b@y.test"], b"x")
    closed = client.quit()
    reply(client, transport, b"250 ok\r\n250 ok\r\n354 go\r\n")
    assert reply(client, transport, b"250 ok\r\n") == [b"QUIT"]
    check.successResultOf(d)
    reply(client, transport, b"221 bye\r\n")
    assert transport.disconnecting
    check.assertNoResult(closed)
    client.connectionLost(None)
    check.successResultOf(closed)
    too_late = client.send("a@x.test", ["b@y.test"], b"x")
    assert "closed by quit()" in str(check.failureResultOf(too_late).value)


def test_garbage_reply_aborts():
    client, transport, _ = connect()
    d = client.send("a@x.test", ["b@y.test"], b"x")
    reply(client, transport, b"hello there\r\n")
    assert transport.aborted
    assert "not an SMTP reply" in str(check.failureResultOf(d).value)


def test_the_deadline_ends_a_transaction_whose_every_reply_came_in_time():
    client, transport, clock = connect(ehlo=EHLO_PLAIN, command_timeout=60)
    d = client.send("a@x.test", ["b@y.test", "c@y.test"], b"x", deadline=clock.seconds() + 120)
    for answer in (b"250 ok\r\n", b"250 ok\r\n"):  # a drip-feeding server: 50 s a reply
        clock.advance(50)
        check.assertNoResult(d)
        reply(client, transport, answer)
    transport.clear()
    clock.advance(20)  # waiting for the second RCPT's reply, within its 60 s
    assert transport.aborted and transport.value() == b""  # no DATA after the deadline
    failure = check.failureResultOf(d, DeadlinePassed)
    assert isinstance(failure.value, ConnectionFault)
    assert str(failure.value) == "the delivery deadline passed during the SMTP session; connection aborted"
    reply(client, transport, b"250 ok\r\n354 go\r\n")  # late replies change nothing
    assert transport.value() == b""
    client.connectionLost(None)
    assert not clock.getDelayedCalls()


def test_the_deadline_covers_the_session_opening():
    client, transport, clock = connect(ehlo=None)
    d = client.send("a@x.test", ["b@y.test"], b"x", deadline=clock.seconds() + 30)
    assert reply(client, transport, b"220 mx.test\r\n") == [b"EHLO client.test"]
    clock.advance(30)  # no EHLO reply yet
    assert transport.aborted
    check.failureResultOf(d, DeadlinePassed)


def test_a_transaction_within_its_deadline_leaves_no_timer():
    client, transport, clock = connect()
    d = client.send("a@x.test", ["b@y.test"], b"x", deadline=clock.seconds() + 30)
    reply(client, transport, b"250 ok\r\n250 ok\r\n354 go\r\n")
    reply(client, transport, b"250 queued\r\n")
    assert check.successResultOf(d).by_outcome("delivered") == ["b@y.test"]
    assert not clock.getDelayedCalls() and client.usable


class NotYours(Exception):
    pass


def test_may_send_is_asked_before_the_pipelined_data_and_a_refusal_sends_nothing():
    client, transport, _ = connect()
    transport.clear()
    asked = []

    def may_send():
        asked.append(defer.Deferred())
        return asked[-1]

    d = client.send("a@x.test", ["b@y.test"], b"x", may_send=may_send)
    assert len(asked) == 1 and transport.value() == b""
    asked[0].errback(NotYours("the lease was lost"))
    assert transport.value() == b""
    check.failureResultOf(d, NotYours)
    assert client.usable  # nothing was sent: the next transaction needs no RSET
    allowed = client.send("a@x.test", ["c@y.test"], b"x", may_send=may_send)
    asked[1].callback(None)
    assert transport.value() == b"MAIL FROM:<a@x.test> SIZE=3\r\nRCPT TO:<c@y.test>\r\nDATA\r\n"
    reply(client, transport, b"250 ok\r\n250 ok\r\n354 go\r\n")
    reply(client, transport, b"250 queued\r\n")
    assert check.successResultOf(allowed).by_outcome("delivered") == ["c@y.test"]


def test_without_pipelining_may_send_is_asked_after_rcpt_and_a_refusal_resets():
    client, transport, _ = connect(ehlo=EHLO_PLAIN)
    refusals = [NotYours("the lease was lost")]

    async def may_send():
        if refusals:
            raise refusals.pop()

    d = client.send("a@x.test", ["b@y.test"], b"x", may_send=may_send)
    reply(client, transport, b"250 ok\r\n")
    assert reply(client, transport, b"250 ok\r\n") == []  # no DATA
    check.failureResultOf(d, NotYours)
    second = client.send("a@x.test", ["c@y.test"], b"x", may_send=may_send)
    assert transport.value() == b"RSET\r\n"
    assert reply(client, transport, b"250 reset\r\n") == [b"MAIL FROM:<a@x.test>"]
    reply(client, transport, b"250 ok\r\n")
    assert reply(client, transport, b"250 ok\r\n") == [b"DATA"]
    reply(client, transport, b"354 go\r\n")
    reply(client, transport, b"250 queued\r\n")
    check.successResultOf(second)


def test_the_deadline_passing_while_may_send_is_asked_sends_nothing():
    client, transport, clock = connect()
    transport.clear()
    answer = defer.Deferred()
    d = client.send("a@x.test", ["b@y.test"], b"x", deadline=clock.seconds() + 10, may_send=lambda: answer)
    clock.advance(10)
    check.failureResultOf(d, DeadlinePassedUnsent)  # told apart: nothing of the message went out
    assert transport.aborted
    answer.callback(None)  # the proof comes too late
    assert transport.value() == b""


def test_an_endless_reply_line_drops_the_connection_at_the_line_limit():
    client, transport, _ = connect()
    d = client.send("a@x.test", ["b@y.test"], b"x")
    transport.clear()
    chunks = 0
    client.dataReceived(b"250-")
    while not transport.aborted and chunks < 1000:
        client.dataReceived(b"x" * 1024)
        chunks += 1
    assert 4 + 1024 * (chunks - 1) <= client.MAX_LENGTH < 4 + 1024 * chunks  # at the first chunk past it
    failure = check.failureResultOf(d, SMTPProtocolError)
    assert f"longer than {client.MAX_LENGTH} bytes" in str(failure.value)
    for _ in range(100):  # the rest of what it sends is not read
        client.dataReceived(b"x" * 1024 + b"\r\n250 ok\r\n")
    assert transport.value() == b"" and client.unread == b""


@pytest.mark.parametrize("line, lines", [
    (b"250-x\r\n", MAX_REPLY_LINES + 1),  # many short lines: the line cap
    (b"250-" + b"x" * 8000 + b"\r\n", MAX_REPLY_BYTES // 8000 + 1),  # long lines: the byte cap
])
def test_an_endless_multiline_reply_drops_the_connection(line, lines):
    client, transport, _ = connect(ehlo=None)
    d = client.send("a@x.test", ["b@y.test"], b"x")
    reply(client, transport, b"220 mx.test\r\n")
    sent = 0
    while not transport.aborted and sent < 100_000:
        client.dataReceived(line)
        sent += 1
    assert sent == lines
    failure = check.failureResultOf(d, SMTPProtocolError)
    assert f"{MAX_REPLY_LINES} lines or {MAX_REPLY_BYTES} bytes" in str(failure.value)


def test_a_long_but_bounded_ehlo_reply_is_taken():
    extensions = [b"X-EXT%d" % i for i in range(MAX_REPLY_LINES - 1)]
    ehlo = b"".join(b"250-" + e + b"\r\n" for e in [b"mx.test", *extensions[:-1]]) + b"250 " + extensions[-1] + b"\r\n"
    client, transport, _ = connect(ehlo=ehlo)
    assert len(client.extensions) == MAX_REPLY_LINES - 1 and not transport.aborted


def test_dot_stuffing_and_line_endings():
    assert normalise_lines(b"a\nb\rc\r\nd") == b"a\r\nb\r\nc\r\nd\r\n"
    assert normalise_lines(b"") == b""
    assert data_payload(normalise_lines(b".a\n.\n..b\nc.\n.")) == b"..a\r\n..\r\n...b\r\nc.\r\n..\r\n.\r\n"
    assert data_payload(b"") == b".\r\n"


def test_reply_parsing():
    assert to_reply(250, ["2.1.5 ok", "2.1.5 still ok"]) == Reply(250, "2.1.5", "ok still ok")
    assert to_reply(550, ["2.1.5 mismatched class"]) == Reply(550, "", "2.1.5 mismatched class")
    assert to_reply(250, [""]) == Reply(250, "", "")


# -- against Twisted's real ESMTP server, in memory --------------------------------------

class IosimTLS:
    """iosim's stand-in for TLS options: records which options the handshake paired it with."""

    peer = None

    def iosimVerify(self, other):  # noqa: N802
        self.peer = other
        return True


def real_server(clock, delivery, tls=None, client_tls=None):
    def server():
        proto = PipeliningESMTP(contextFactory=tls)
        proto.delivery, proto.callLater = delivery, clock.callLater
        return proto

    def client():
        return OutboundSMTP(clock, "client.test", tls_options=client_tls)

    server_address = IPv4Address("TCP", "127.0.0.1", 25)
    client_address = IPv4Address("TCP", "127.0.0.2", 40000)
    client_proto, server_proto, pump = iosim.connectedServerAndClient(
        server, client, clock=clock,
        clientTransportFactory=lambda p: iosim.FakeTransport(p, False, client_address, server_address),
        serverTransportFactory=lambda p: iosim.FakeTransport(p, True, server_address, client_address))
    opened.append(client_proto)
    return client_proto, server_proto, pump


def test_pipelined_transactions_against_a_real_esmtp_server():
    clock, delivery = task.Clock(), RecordingDelivery()
    client, _, pump = real_server(clock, delivery)
    pump.flush()
    first = client.send("bounce@rp.test", ["a@y.test", "nobody@y.test", "b@y.test"], b"Subject: one\n\nfirst\n")
    second = client.send("bounce@rp.test", ["c@y.test"], b"Subject: two\r\n\r\nsecond\r\n")
    pump.flush()
    assert "PIPELINING" in client.extensions
    one = check.successResultOf(first)
    assert [(r.recipient, r.outcome) for r in one.recipients] == [
        ("a@y.test", "delivered"), ("nobody@y.test", "bounced"), ("b@y.test", "delivered")]
    assert check.successResultOf(second).by_outcome("delivered") == ["c@y.test"]
    assert delivery.messages == [
        ("bounce@rp.test", "a@y.test", b"Subject: one\r\n\r\nfirst\r\n"),
        ("bounce@rp.test", "b@y.test", b"Subject: one\r\n\r\nfirst\r\n"),
        ("bounce@rp.test", "c@y.test", b"Subject: two\r\n\r\nsecond\r\n"),
    ]
    closed = client.quit()
    pump.flush()
    check.successResultOf(closed)


def test_starttls_against_a_real_esmtp_server():
    clock, delivery, client_tls, server_tls = task.Clock(), RecordingDelivery(), IosimTLS(), IosimTLS()
    client, server, pump = real_server(clock, delivery, tls=server_tls, client_tls=client_tls)
    pump.flush()
    d = client.send("a@x.test", ["b@y.test"], b"Subject: s\n\nsecret\n")
    pump.flush()
    assert client.encrypted and server.startedTLS
    assert client_tls.peer is server_tls and server_tls.peer is client_tls
    assert check.successResultOf(d).by_outcome("delivered") == ["b@y.test"]
    assert delivery.messages == [("a@x.test", "b@y.test", b"Subject: s\r\n\r\nsecret\r\n")]


def dotted_message(dot_at: int, lone: bool) -> bytes:
    """A message whose line starting at byte ``dot_at`` begins with '.', then an injection attempt."""
    head = b"Subject: dots\r\n\r\n"
    lines = head + b"x" * (dot_at - len(head) - 2) + b"\r\n"
    dotted = b".\r\n" if lone else b".dotted line\r\n"
    return (lines + dotted + b"MAIL FROM:<injected@evil.test>\r\nRCPT TO:<victim@y.test>\r\nDATA\r\n"
            b"injected\r\n.\r\n..\r\n.x\r\nend\r\n")


def test_dot_stuffing_round_trip_at_every_position_of_a_16_kib_boundary():
    clock, delivery = task.Clock(), RecordingDelivery()
    client, _, pump = real_server(clock, delivery)
    pump.flush()
    sent = []
    for dot_at in range(16384 - 4, 16384 + 5):
        for lone in (True, False):
            message = dotted_message(dot_at, lone)
            assert message[dot_at:dot_at + 1] == b"." and message[dot_at - 2:dot_at] == b"\r\n"
            sent.append(message)
            client.send("a@x.test", ["b@y.test"], message)
            pump.flush()
    assert [body for _, _, body in delivery.messages] == sent
    assert {sender for sender, _, _ in delivery.messages} == {"a@x.test"}
    assert {recipient for _, recipient, _ in delivery.messages} == {"b@y.test"}


# -- AUTH (relay through a smarthost) ----------------------------------------------------

USER, PASSWORD = "relay-user", "pässwörd-7Hq"
PLAIN_RESPONSE = base64.b64encode(b"\0relay-user\0" + PASSWORD.encode())
EHLO_TLS_AUTH = b"250-mx.test\r\n250-STARTTLS\r\n250-AUTH LOGIN PLAIN\r\n250 PIPELINING\r\n"
EHLO_AUTH = b"250-mx.test\r\n250-AUTH PLAIN LOGIN\r\n250 PIPELINING\r\n"


def connect_tls_auth(ehlo_after_tls=EHLO_AUTH, **options):
    """Greeting, EHLO, STARTTLS and EHLO again; returns what the client wrote after that."""
    client, transport, clock = connect(ehlo=None, tls_options=object(), auth=(USER, PASSWORD), **options)
    reply(client, transport, b"220 mx.test\r\n")
    assert reply(client, transport, EHLO_TLS_AUTH) == [b"STARTTLS"]
    assert reply(client, transport, b"220 go ahead\r\n") == [b"EHLO client.test"]
    return client, transport, clock, reply(client, transport, ehlo_after_tls)


def test_auth_plain_after_starttls_and_ehlo_again():
    client, transport, _, written = connect_tls_auth()
    assert written == [b"AUTH PLAIN " + PLAIN_RESPONSE]
    assert client.authenticated_with is None
    reply(client, transport, b"235 2.7.0 ok\r\n")
    assert client.authenticated_with == "PLAIN"
    d = client.send("a@x.test", ["b@y.test"], b"x")
    assert transport.value().startswith(b"MAIL FROM:<a@x.test>\r\n")
    client.connectionLost(None)
    check.failureResultOf(d, SMTPConnectionLost)


def test_auth_login_when_plain_is_not_offered_including_the_old_auth_equals_form():
    client, transport, _, written = connect_tls_auth(b"250-mx.test\r\n250-AUTH=LOGIN\r\n250 PIPELINING\r\n")
    assert written == [b"AUTH LOGIN"]
    assert reply(client, transport, b"334 VXNlcm5hbWU6\r\n") == [base64.b64encode(USER.encode())]
    assert reply(client, transport, b"334 UGFzc3dvcmQ6\r\n") == [base64.b64encode(PASSWORD.encode())]
    d = client.send("a@x.test", ["b@y.test"], b"x")
    assert reply(client, transport, b"235 2.7.0 ok\r\n")[0] == b"MAIL FROM:<a@x.test>"
    assert client.authenticated_with == "LOGIN"
    client.connectionLost(None)
    check.failureResultOf(d, SMTPConnectionLost)


@pytest.mark.parametrize("ehlo, tls_options, why", [
    (EHLO_AUTH, object(), "smarthost offers no TLS"),
    (EHLO_TLS_AUTH, None, "no TLS options were given for the smarthost"),
])
def test_credentials_are_not_sent_over_plain_text(ehlo, tls_options, why):
    client, transport, _ = connect(ehlo=None, tls_options=tls_options, auth=(USER, PASSWORD))
    d = client.send("a@x.test", ["b@y.test", "c@y.test"], b"x")
    reply(client, transport, b"220 mx.test\r\n")
    assert reply(client, transport, ehlo) == [b"QUIT"]
    assert transport.disconnecting
    for result in check.successResultOf(d).recipients:
        assert (result.outcome, result.deferral_class) == ("deferred", "blocked")
        assert result.reply == Reply(450, "4.7.0", f"{why}; credentials not sent")


def test_refused_starttls_is_named_when_credentials_are_withheld():
    client, transport, _ = connect(ehlo=None, tls_options=object(), auth=(USER, PASSWORD))
    d = client.send("a@x.test", ["b@y.test"], b"x")
    reply(client, transport, b"220 mx.test\r\n")
    reply(client, transport, EHLO_TLS_AUTH)
    assert reply(client, transport, b"454 4.7.0 TLS not available\r\n") == [b"QUIT"]
    [result] = check.successResultOf(d).recipients
    assert result.deferral_class == "blocked"
    assert result.reply.text == ("smarthost refused STARTTLS (454 TLS not available); credentials not sent")


def test_plain_text_auth_only_when_explicitly_allowed():
    client, transport, _ = connect(ehlo=None, auth=(USER, PASSWORD), allow_plaintext_auth=True)
    reply(client, transport, b"220 mx.test\r\n")
    assert reply(client, transport, EHLO_AUTH) == [b"AUTH PLAIN " + PLAIN_RESPONSE]
    assert not client.encrypted


@implementer(ISSLTransport)
class ImplicitTLSTransport(Transport):
    def getPeerCertificate(self):  # noqa: N802
        return None


def test_implicit_tls_counts_as_encrypted_and_skips_starttls():
    client = OutboundSMTP(task.Clock(), "client.test", tls_options=object(), auth=(USER, PASSWORD))
    opened.append(client)
    transport = ImplicitTLSTransport()
    client.makeConnection(transport)
    assert client.encrypted
    reply(client, transport, b"220 smarthost.test\r\n")
    assert reply(client, transport, EHLO_TLS_AUTH) == [b"AUTH PLAIN " + PLAIN_RESPONSE]
    assert transport.tls is None


@pytest.mark.parametrize("server_reply, deferral_class", [
    (b"535 5.7.8 Authentication credentials invalid\r\n", "blocked"),
    (b"534 5.7.9 Authentication mechanism is too weak\r\n", "blocked"),
    (b"454 4.7.0 Temporary authentication failure\r\n", "transient"),
])
def test_refused_auth_defers_every_recipient_with_the_servers_reply(server_reply, deferral_class):
    client, transport, _, _ = connect_tls_auth()
    first = client.send("a@x.test", ["b@y.test", "c@y.test"], b"x")
    second = client.send("a@x.test", ["d@y.test"], b"x")
    assert reply(client, transport, server_reply) == [b"QUIT"]
    expected = to_reply(int(server_reply[:3]), [server_reply[4:].decode().strip()])
    for d in (first, second):
        for result in check.successResultOf(d).recipients:
            assert (result.outcome, result.deferral_class, result.reply) == ("deferred", deferral_class, expected)


def test_421_during_auth_defers_as_transient():
    client, transport, _, _ = connect_tls_auth()
    d = client.send("a@x.test", ["b@y.test"], b"x")
    reply(client, transport, b"421 4.3.2 shutting down\r\n")
    [result] = check.successResultOf(d).recipients
    assert (result.deferral_class, result.reply.code) == ("transient", 421)


def test_an_unexpected_challenge_is_cancelled():
    client, transport, _, _ = connect_tls_auth()
    d = client.send("a@x.test", ["b@y.test"], b"x")
    assert reply(client, transport, b"334 \r\n") == [b"*"]
    assert reply(client, transport, b"501 5.0.0 cancelled\r\n") == [b"QUIT"]
    [result] = check.successResultOf(d).recipients
    assert (result.deferral_class, result.reply.code) == ("blocked", 501)


def test_no_supported_mechanism_sends_nothing_and_blocks():
    client, transport, _, written = connect_tls_auth(b"250-mx.test\r\n250 AUTH CRAM-MD5 XOAUTH2\r\n")
    d = client.send("a@x.test", ["b@y.test"], b"x")
    assert written == [b"QUIT"]
    [result] = check.successResultOf(d).recipients
    assert (result.deferral_class, result.reply.code, result.reply.enhanced_code) == ("blocked", 450, "4.7.0")
    assert "offered: CRAM-MD5 XOAUTH2" in result.reply.text


def test_no_auth_offered_at_all_blocks():
    client, transport, _, written = connect_tls_auth(b"250-mx.test\r\n250 PIPELINING\r\n")
    d = client.send("a@x.test", ["b@y.test"], b"x")
    assert written == [b"QUIT"]
    assert check.successResultOf(d).recipients[0].deferral_class == "blocked"


@pytest.mark.parametrize("auth", [("user",), ("user", "pass", "x"), ("", "pass"), ("us\0er", "p"),
                                  ("user", "pa\r\nss"), ("user", b"pass")])
def test_malformed_credentials_are_refused(auth):
    with pytest.raises(ValueError):
        OutboundSMTP(task.Clock(), "client.test", auth=auth)


def test_the_password_is_never_logged_nor_in_errors_or_repr():
    events = []
    globalLogPublisher.addObserver(events.append)
    try:
        client, transport, clock, _ = connect_tls_auth(command_timeout=30)
        refused = client.send("a@x.test", ["b@y.test"], b"x")
        reply(client, transport, b"535 5.7.8 no\r\n")
        client, transport, clock, _ = connect_tls_auth(b"250-mx.test\r\n250 AUTH LOGIN\r\n", command_timeout=30)
        reply(client, transport, b"334 VXNlcm5hbWU6\r\n")
        reply(client, transport, b"334 UGFzc3dvcmQ6\r\n")
        timed_out = client.send("a@x.test", ["b@y.test"], b"x")
        clock.advance(30)
    finally:
        globalLogPublisher.removeObserver(events.append)
    texts = [formatEvent(e) + repr(e) for e in events]
    texts += [repr(client), str(check.successResultOf(refused)), str(check.failureResultOf(timed_out).value)]
    assert any("535" in t and USER in t for t in texts)  # the refusal is logged, with the username
    secrets = (PASSWORD, base64.b64encode(PASSWORD.encode()).decode(), PLAIN_RESPONSE.decode())
    assert not [t for t in texts if any(s in t for s in secrets)]


