"""The submission protocol, bytes in and bytes out (Twisted's StringTransport, a Clock)."""

import base64

from twisted.internet import defer, task

from mailsvc.smtp.submission import Refusal, Submission, SubmissionFactory
from tests.smtpwire import connected, send

KEY = "re_goodkey1_secret"


class Recorder:
    def __init__(self):
        self.accepted = []
        self.pending: defer.Deferred | None = None
        self.refuse: Refusal | None = None

    async def authenticate(self, password):
        return {"caller": password} if password == KEY else None

    async def accept(self, caller, message, recipients, _):
        if self.refuse:
            raise self.refuse
        if self.pending is not None:
            await self.pending
        self.accepted.append((caller, message, recipients))
        return "0190-id"


def connect(encrypted=True, tls=object()):
    recorder = Recorder()
    clock = task.Clock()
    factory = SubmissionFactory(clock, Submission(recorder.authenticate, recorder.accept, "mx.test", 30),
                                tls, implicit_tls=encrypted)
    proto, transport = connected(factory)
    return proto, transport, recorder, clock


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
    assert send(proto, transport, b"AUTH PLAIN " + base64.b64encode(b"only\0two") + b"\r\n") == [
        b"501 5.5.2 Malformed AUTH PLAIN response"]
    assert send(proto, transport, b"AUTH PLAIN !!!notbase64\r\n")[0].startswith(b"501")
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
