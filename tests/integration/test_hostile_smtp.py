"""
Hostile SMTP submission, driven as a client would over implicit TLS, raw lines on a
socket: each case gets its reply, nothing is stored for the sender, and another tenant's sends
made at the same moment all succeed (``tests.helpers.hostile.attack``). The envelope decides who
receives, line endings are normalised before signing (dkimpy verifies), and failed AUTHs end
the connection.
"""

from __future__ import annotations

import base64
import re
import socket

import dkim as dkimpy
import pytest
import pytest_twisted as pt
from twisted.internet import reactor, task, threads
from twisted.protocols.tls import TLSMemoryBIOFactory

from mailsvc.app.throttle import SmtpAuthFailures, Throttle
from mailsvc.crypto import tls
from mailsvc.mail import dkim
from mailsvc.smtp.submission import Submission, SubmissionFactory
from tests.helpers.hostile import Tenant, attack, bystander, bystander_sends_during, victim  # noqa: F401 (fixtures)
from tests.helpers.smtp import tls_context


class Wire:
    """One SMTP client connection over TLS (implicit, or by STARTTLS): raw bytes out, each reply's last line in."""

    def __init__(self, port: int, cert, starttls: bool = False):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        if starttls:
            self.file = self.sock.makefile("rb")
            assert self.reply().startswith(b"220")
            assert self.send(b"EHLO client.example\r\n")[0].startswith(b"250")
            assert self.send(b"STARTTLS\r\n")[0].startswith(b"220")
        self.sock = tls_context(cert).wrap_socket(self.sock)
        self.file = self.sock.makefile("rb")
        if not starttls:
            assert self.reply().startswith(b"220")

    def reply(self) -> bytes:
        """The last line of the next reply, or b"" when the server has closed the connection."""
        while True:
            line = self.file.readline()
            if not line:
                return b""
            if line[3:4] != b"-":
                return line.rstrip(b"\r\n")

    def send(self, data: bytes, replies: int = 1) -> list[bytes]:
        self.sock.sendall(data)
        return [self.reply() for _ in range(replies)]

    def login(self, key: str) -> None:
        assert self.send(b"EHLO client.example\r\n")[0].startswith(b"250")
        assert self.send(b"AUTH PLAIN " + base64.b64encode(b"\0mailsvc\0" + key.encode()) + b"\r\n")[0].startswith(
            b"235")

    def close(self) -> None:
        self.sock.close()


def transaction(tenant: Tenant, message: bytes, recipients=("ann@example.com",)) -> bytes:
    """MAIL, RCPT, DATA lines for ``message`` (dot-stuffing is the caller's)."""
    return (f"MAIL FROM:<news@{tenant.domain}>\r\n".encode()
            + b"".join(f"RCPT TO:<{r}>\r\n".encode() for r in recipients)
            + b"DATA\r\n" + message + b".\r\n")


def headers(tenant: Tenant, extra: bytes = b"", subject: bytes = b"Hostile") -> bytes:
    return (f"From: News <news@{tenant.domain}>\r\nTo: ann@example.com\r\n".encode()
            + b"Subject: " + subject + b"\r\n" + extra)


def plain_message(tenant: Tenant, extra: bytes = b"", body: bytes = b"body\r\n") -> bytes:
    return headers(tenant, extra) + b"\r\n" + body


# Each case: (id, what the client sends after EHLO and AUTH as a function of the victim and
# the bystander, how many replies it waits for, the start of each of those replies). The
# connection is then dropped without QUIT.
CASES = [
    # Hostile SMTP submissions.
    ("51st rcpt", lambda v, b: f"MAIL FROM:<news@{v.domain}>\r\n".encode()
     + b"".join(b"RCPT TO:<r%d@example.com>\r\n" % n for n in range(51)) + b"RSET\r\n",
     53, [b"250 2.1.0"] + [b"250 2.1.5"] * 50 + [b"452 4.5.3 Too many recipients", b"250 2.0.0"]),
    ("second from", lambda v, b: transaction(v, plain_message(v, b"From: Other <other@example.net>\r\n")),
     4, [b"250", b"250", b"354", b"550 5.6.0 from: the message has more than one From header"]),
    ("sender on an unverified domain", lambda v, b: transaction(
        v, plain_message(v, b"Sender: x@unverified.example\r\n")),
     4, [b"250", b"250", b"354", b"550 5.7.1 The Sender header's domain unverified.example is not a verified"]),
    ("sender on another tenant's domain", lambda v, b: transaction(
        v, plain_message(v, f"Sender: desk@{b.domain}\r\n".encode())),
     4, [b"250", b"250", b"354", b"550 5.7.1 The Sender header's domain bystander.example.com"]),
    ("two sender headers", lambda v, b: transaction(
        v, plain_message(v, f"Sender: a@{v.domain}\r\nSender: b@{v.domain}\r\n".encode())),
     4, [b"250", b"250", b"354", b"550 5.6.0 sender: the message has more than one Sender header"]),
    ("resent-from", lambda v, b: transaction(v, plain_message(v, f"Resent-From: a@{v.domain}\r\n".encode())),
     4, [b"250", b"250", b"354", b"550 5.7.1 Resent-* headers are not accepted (Resent-From)"]),
    # Our own.
    ("from another tenant's domain", lambda v, b: transaction(v, plain_message(b)),
     4, [b"250", b"250", b"354", b"550 5.7.1 The bystander.example.com domain is not verified"]),
    ("nul in data", lambda v, b: transaction(v, plain_message(v, body=b"a\0b\r\n")),
     4, [b"250", b"250", b"354", b"550 5.6.0 Message contains NUL characters"]),
    ("nul in an encoded subject", lambda v, b: transaction(
        v, headers(v, subject=b"=?utf-8?b?AAE=?=") + b"\r\nbody\r\n"),
     4, [b"250", b"250", b"354", b"550 5.6.0 subject: the message's subject holds a NUL"]),
    ("nul in a base64 body", lambda v, b: transaction(
        v, plain_message(v, b"Content-Transfer-Encoding: base64\r\n", b"AAE=\r\n")),
     4, [b"250", b"250", b"354", b"550 5.6.0 text: the message's text holds a NUL"]),
    ("999-octet data line", lambda v, b: transaction(v, plain_message(v, body=b"x" * 999 + b"\r\n")),
     4, [b"250", b"250", b"354", b"550 5.6.0 Message has lines longer than 998"]),
    ("70 KB command line", lambda v, b: b"MAIL FROM:<" + b"a" * 70_000 + b"@example.com>\r\n",
     2, [b"500 5.5.2 Line too long", b""]),
    ("1000 rcpts", lambda v, b: f"MAIL FROM:<news@{v.domain}>\r\n".encode()
     + b"".join(b"RCPT TO:<r%d@example.com>\r\n" % n for n in range(1000)) + b"QUIT\r\n",
     1002, [b"250 2.1.0"] + [b"250 2.1.5"] * 50 + [b"452 4.5.3"] * 950 + [b"221"]),
    ("mail from with nul", lambda v, b: f"MAIL FROM:<news\0@{v.domain}>\r\n".encode(),
     1, [b"501 5.5.4"]),
    ("size of 5000 digits", lambda v, b: f"MAIL FROM:<news@{v.domain}> SIZE={'9' * 5000}\r\n".encode(),
     1, [b"552 5.3.4"]),
    ("pipelined garbage", lambda v, b: b"".join(b"\x16\x03\x01 GARBAGE %d\r\n" % n for n in range(50)),
     22, [b"500 5.5.2"] * 20 + [b"421 4.7.0 Too many errors", b""]),
    ("data before rcpt", lambda v, b: f"MAIL FROM:<news@{v.domain}>\r\nDATA\r\n".encode() + plain_message(v)
     + b".\r\n", 2, [b"250", b"503 5.5.1 Need MAIL and RCPT before DATA"]),
    ("1001 header fields", lambda v, b: transaction(
        v, plain_message(v, b"".join(b"X-H%d: v\r\n" % n for n in range(998)))),
     4, [b"250", b"250", b"354", b"550 5.6.0 Message has more than 1000 header fields"]),
    ("200 KB subject of encoded words", lambda v, b: transaction(
        v, headers(v, subject=b"\r\n ".join(b"=?utf-8?q?caf=C3=A9?=" for _ in range(10_000))) + b"\r\nx\r\n"),
     4, [b"250", b"250", b"354", b"550 5.6.0 headers: From, Sender, To, Cc and Subject exceed 32 KiB"]),
    ("bdat is not offered", lambda v, b: f"MAIL FROM:<news@{v.domain}>\r\nRCPT TO:<a@example.com>\r\n".encode()
     + b"BDAT 5 LAST\r\n", 3, [b"250", b"250", b"500 5.5.2 Command not recognized"]),
    ("no from header", lambda v, b: transaction(v, b"To: ann@example.com\r\nSubject: x\r\n\r\nbody\r\n"),
     4, [b"250", b"250", b"354", b"550 5.6.0 from: the message has no From header"]),
    ("rcpt with two at signs", lambda v, b: f"MAIL FROM:<news@{v.domain}>\r\nRCPT TO:<a@b@example.com>\r\n".encode(),
     2, [b"250", b"553 5.1.3"]),
]


def hostile_session(port: int, cert, key: str, data: bytes, replies: int) -> list[bytes]:
    wire = Wire(port, cert)
    try:
        wire.login(key)
        return wire.send(data, replies)
    finally:
        wire.close()


@pytest.mark.parametrize("name, script, replies, expected", CASES, ids=[c[0] for c in CASES])
@pt.ensureDeferred
async def test_hostile_submission(api, smtp_ports, pem, victim, bystander, name, script, replies, expected):  # noqa: F811
    data = script(victim, bystander)
    got = await attack(api, victim, bystander, lambda: threads.deferToThread(
        hostile_session, smtp_ports["implicit"], pem, victim.key, data, replies))
    assert len(got) == len(expected)
    for reply, start in zip(got, expected, strict=True):
        assert reply.startswith(start) if start else reply == b"", (reply, start)


@pytest.fixture
def clock():
    return task.Clock()


@pytest.fixture
def clocked_port(api, pem, clock):  # noqa: F811
    """An implicit-TLS submission listener of the node whose time (its AUTH failures' too) is ``clock``."""
    options = tls.server_options(*pem)
    node = api.parts.submission
    clocked = Submission(node.authenticate, node.accept_message, "mx.test",
                         auth_failures=SmtpAuthFailures(Throttle(clock, api.parts.db), reactor))
    factory = TLSMemoryBIOFactory(options, False, SubmissionFactory(clock, clocked, options, True))
    port = reactor.listenTCP(0, factory, interface="127.0.0.1")
    yield port.getHost().port
    pt.blockon(port.stopListening())


def failed_logins(port: int, cert, attempts: int, then: int = 0, key: str | None = None) -> list[bytes]:
    """``attempts`` AUTHs with wrong keys (or ``key``), then ``then`` more replies read."""
    wire = Wire(port, cert)
    try:
        wire.send(b"EHLO client.example\r\n")
        replies = []
        for n in range(attempts):
            secret = key or f"re_AAAAAAAA_wrong{n}"
            replies += wire.send(b"AUTH PLAIN " + base64.b64encode(b"\0mailsvc\0" + secret.encode()) + b"\r\n")
        return replies + [wire.reply() for _ in range(then)]
    finally:
        wire.close()


@pt.ensureDeferred
async def test_three_failed_auths_close_the_connection_and_an_address_is_held_back(
        api, clocked_port, clock, pem, victim, bystander):  # noqa: F811
    got = await attack(api, victim, bystander, lambda: threads.deferToThread(failed_logins, clocked_port, pem, 3, 2))
    assert got == [b"535 5.7.8 Authentication credentials invalid"] * 3 + [
        b"421 4.7.0 Too many failed authentications, closing connection", b""]
    for attempts, then in ((3, 2), (3, 2), (1, 0)):  # 10 failures from this address in no time
        await threads.deferToThread(failed_logins, clocked_port, pem, attempts, then)
    # The 11th try is answered at once, even with the right key.
    got = await threads.deferToThread(failed_logins, clocked_port, pem, 1, 1, victim.key)
    assert got == [b"421 4.7.0 Too many failed authentications from your address; try again later", b""]
    clock.advance(6)  # a minute allows 10: one more try every 6 s
    got = await threads.deferToThread(failed_logins, clocked_port, pem, 1, 0, victim.key)
    assert got == [b"235 2.7.0 Authentication successful"]


def send_message(port: int, cert, key: str, data: bytes) -> list[bytes]:
    wire = Wire(port, cert)
    try:
        wire.login(key)
        rcpts = data.count(b"RCPT TO:")
        return wire.send(data + b"QUIT\r\n", rcpts + 4)
    finally:
        wire.close()


async def stored_recipients(api, tenant: Tenant) -> list[str]:
    rows = await api.parts.db.fetchall(
        "SELECT d.recipient FROM deliveries d JOIN emails e ON e.id = d.email_id WHERE e.tenant_id = %s"
        " ORDER BY d.recipient", (tenant.id,))
    return [r["recipient"] for r in rows]


@pt.ensureDeferred
async def test_the_envelope_decides_who_receives(api, smtp_ports, pem, victim, bystander):  # noqa: F811
    # The case once broken: RCPT TO:<a@x> with "To: a@x, b@y" went to both.
    message = (f"From: News <news@{victim.domain}>\r\nTo: a@x.example, b@y.example\r\n".encode()
               + b"Cc: c@z.example\r\nBcc: d@w.example\r\nSubject: x\r\n\r\nbody\r\n")
    data = transaction(victim, message, ["a@x.example", "hidden@example.com"])
    got = await bystander_sends_during(api, bystander, lambda: threads.deferToThread(
        send_message, smtp_ports["implicit"], pem, victim.key, data))
    assert got[-2].startswith(b"250 2.0.0 OK: queued as")
    assert await stored_recipients(api, victim) == ["a@x.example", "hidden@example.com"]
    row = await api.parts.db.fetchone("SELECT recipients, message FROM emails WHERE tenant_id = %s", (victim.id,))
    assert row["recipients"]["to"] == ["a@x.example"] and row["recipients"]["cc"] == []
    assert row["recipients"]["bcc"] == ["hidden@example.com"]
    stored = bytes(row["message"])
    assert b"To: a@x.example, b@y.example\r\n" in stored and b"Bcc:" not in stored  # the header is for display


@pt.ensureDeferred
async def test_1000_rcpts_then_data_reach_the_first_50(api, smtp_ports, pem, victim):  # noqa: F811
    data = transaction(victim, plain_message(victim), [f"r{n:04}@example.com" for n in range(1000)])
    got = await threads.deferToThread(send_message, smtp_ports["implicit"], pem, victim.key, data)
    assert got.count(b"452 4.5.3 Too many recipients (at most 50)") == 950
    assert got[-2].startswith(b"250 2.0.0 OK")
    assert await stored_recipients(api, victim) == [f"r{n:04}@example.com" for n in range(50)]


@pt.ensureDeferred
async def test_a_header_injected_by_a_bare_lf_is_a_header_and_bcc_is_no_recipient(api, smtp_ports, pem, victim):  # noqa: F811
    message = headers(victim, subject=b"hi\nBcc: evil@example.net") + b"\r\nbody\r\n"
    got = await threads.deferToThread(send_message, smtp_ports["implicit"], pem, victim.key,
                                      transaction(victim, message))
    assert got[-2].startswith(b"250 2.0.0 OK")
    assert await stored_recipients(api, victim) == ["ann@example.com"]
    row = await api.parts.db.fetchone("SELECT subject, message FROM emails WHERE tenant_id = %s", (victim.id,))
    assert row["subject"] == "hi" and b"evil" not in bytes(row["message"])


@pt.ensureDeferred
async def test_8bit_headers_without_smtputf8_and_a_verified_sender_are_accepted(api, smtp_ports, pem, victim):  # noqa: F811
    message = headers(victim, f"Sender: Desk <desk@{victim.domain}>\r\n".encode(), subject="Grüße".encode()) + (
        b"\r\nbody\r\n")
    got = await threads.deferToThread(send_message, smtp_ports["implicit"], pem, victim.key,
                                      transaction(victim, message))
    assert got[-2].startswith(b"250 2.0.0 OK")
    row = await api.parts.db.fetchone("SELECT subject FROM emails WHERE tenant_id = %s", (victim.id,))
    assert row["subject"] == "Grüße"


def transit(message: bytes) -> bytes:
    """What a relay on the way does to line endings: each bare CR or LF becomes CRLF."""
    return re.sub(rb"\r\n|\r|\n", b"\r\n", message)


@pt.ensureDeferred
async def test_bare_line_endings_are_normalised_before_signing(api, smtp_ports, pem, victim):  # noqa: F811
    message = (f"From: News <news@{victim.domain}>\nTo: ann@example.com\r\nSubject: bare\r\n".encode()
               + b"\r\nline one\nline two\rline three\r\n\n.\r\nlast\r\n")
    got = await threads.deferToThread(send_message, smtp_ports["implicit"], pem, victim.key,
                                      transaction(victim, message))
    assert got[-2].startswith(b"250 2.0.0 OK")
    row = await api.parts.db.fetchone("SELECT message, subject FROM emails WHERE tenant_id = %s", (victim.id,))
    stored = bytes(row["message"])
    assert transit(stored) == stored  # nothing left for a relay to change
    assert stored.endswith(b"\r\n\r\nline one\r\nline two\r\nline three\r\n\r\n.\r\nlast\r\n")
    assert row["subject"] == "bare" and stored.count(b"\r\nTo: ann@example.com\r\n") == 1
    _, domain, _ = await api.json("GET", "/domains", victim.key)
    domain_id = domain["data"][0]["id"]
    _, detail, _ = await api.json("GET", f"/domains/{domain_id}", victim.key)
    records = {f"{r['name']}.{victim.domain}.".encode(): r["value"].encode()
               for r in detail["records"] if "_domainkey" in r["name"]}
    # Stored unsigned; signed as the delivery worker signs it, with the domain's keys.
    sending = await api.parts.domains.lookup_sending_domain(victim.id, victim.domain)
    stored = dkim.sign(stored, sending.name, sending.signers) + stored
    checker = dkimpy.DKIM(stored)
    dnsfunc = lambda name, timeout=5: records.get(name if name.endswith(b".") else name + b".")  # noqa: E731
    signatures = stored.count(b"DKIM-Signature:")
    assert signatures == 2
    assert [checker.verify(idx=i, dnsfunc=dnsfunc) for i in range(signatures)] == [True, True]



#: Header sections that the email package's compat32 reader misread: it dropped a
#: ``Name :`` line or ended the header section there, while the message was stored, signed and
#: read by receivers with the line as a header field. Each: (id, the header section as a
#: function of the victim and the bystander, the reply).
MISREAD_HEADERS = [
    ("from with a space before the colon", lambda v, b: f"To: ann@example.com\r\nSubject: s\r\nFrom : ceo@{b.domain}"
     f"\r\nFrom: news@{v.domain}\r\n", b"550 5.6.0 headers: line 3 of the header section is not a header field"),
    ("sender with a space before the colon", lambda v, b: f"From: news@{v.domain}\r\nSender : ceo@{b.domain}\r\n",
     b"550 5.6.0 headers: line 2 of the header section is not a header field"),
    ("resent-from with a space before the colon", lambda v, b: f"From: news@{v.domain}\r\n"
     f"Resent-From : ceo@{b.domain}\r\n", b"550 5.6.0 headers: line 2 of the header section is not a header field"),
    ("a from after a name-space-colon line", lambda v, b: f"From: news@{v.domain}\r\nX-Junk : y\r\n"
     f"From: ceo@bank.example\r\n", b"550 5.6.0 headers: line 2 of the header section is not a header field"),
    ("a tab before the colon", lambda v, b: f"From\t: ceo@{b.domain}\r\nFrom: news@{v.domain}\r\n",
     b"550 5.6.0 headers: line 1 of the header section is not a header field"),
    ("a line of white space only", lambda v, b: f"From: news@{v.domain}\r\n \t\r\nFrom: ceo@{b.domain}\r\n",
     b"550 5.6.0 headers: line 2 of the header section is white space only"),
    ("a continuation line first", lambda v, b: f" From: ceo@{b.domain}\r\nFrom: news@{v.domain}\r\n",
     b"550 5.6.0 headers: the message starts with a continuation line"),
    ("an mbox from line", lambda v, b: f"From: news@{v.domain}\r\nFrom ceo@{b.domain} Mon Jan  1 00:00:00 2024\r\n",
     b"550 5.6.0 headers: line 2 of the header section is not a header field"),
    ("a second from on the account's own domain", lambda v, b: f"From: news@{v.domain}\r\nFrom: ceo@{v.domain}\r\n",
     b"550 5.6.0 from: the message has more than one From header"),
    ("a second from on another account's domain", lambda v, b: f"From: news@{v.domain}\r\nFrom: ceo@{b.domain}\r\n",
     b"550 5.6.0 from: the message has more than one From header"),
    ("sender on another account's domain", lambda v, b: f"From: news@{v.domain}\r\nSender: ceo@{b.domain}\r\n",
     b"550 5.7.1 The Sender header's domain bystander.example.com is not a verified domain"),
    ("resent-from on another account's domain", lambda v, b: f"From: news@{v.domain}\r\nResent-From: ceo@{b.domain}"
     "\r\n", b"550 5.7.1 Resent-* headers are not accepted (Resent-From)"),
    ("resent-from on the account's own domain", lambda v, b: f"From: news@{v.domain}\r\nResent-From: a@{v.domain}"
     "\r\n", b"550 5.7.1 Resent-* headers are not accepted (Resent-From)"),
]


def misread_headers_session(port: int, cert, key: str, starttls: bool, transactions: list[bytes]) -> list[bytes]:
    """Each transaction's last reply (after DATA), on one connection."""
    wire = Wire(port, cert, starttls)
    try:
        wire.login(key)
        return [wire.send(data, 4)[-1] for data in transactions]
    finally:
        wire.close()


@pytest.mark.parametrize("mode", ["starttls", "implicit"])
@pt.ensureDeferred
async def test_a_header_section_is_read_as_receivers_read_it(api, smtp_ports, pem, victim, bystander, mode):  # noqa: F811
    transactions = [transaction(victim, head(victim, bystander).encode() + b"\r\nbody\r\n")
                    for _, head, _ in MISREAD_HEADERS]
    got = await attack(api, victim, bystander, lambda: threads.deferToThread(
        misread_headers_session, smtp_ports[mode], pem, victim.key, mode == "starttls", transactions))
    for (name, _, expected), reply in zip(MISREAD_HEADERS, got, strict=True):
        assert reply.startswith(expected), (name, reply)


#: Header values a reader takes for other than what is checked (each: id, the header section as
#: a function of the victim, the start of the reply): a From or Sender naming a second address
#: after the first, which the email package drops while a receiver may show it; a group or a
#: list; a line break as ``str.splitlines`` reads one (NEL, U+2028, U+2029 in UTF-8).
ONE_MAILBOX = b"550 5.6.0 from must be exactly one email address"
MISREAD_VALUES = [
    ("a second address in angle brackets after a name-addr",
     lambda v: f'From: "PayPal Security" <news@{v.domain}> <service@paypal.com>\r\n', ONE_MAILBOX),
    ("a second bare address", lambda v: f"From: news@{v.domain} onboarding@resend.dev\r\n", ONE_MAILBOX),
    ("a semicolon and more", lambda v: f"From: news@{v.domain}; x\r\n", ONE_MAILBOX),
    ("junk after a second angle-addr", lambda v: f"From: news@{v.domain} <onboarding@resend.dev>x\r\n", ONE_MAILBOX),
    ("a list", lambda v: f"From: news@{v.domain}, ceo@{v.domain}\r\n", ONE_MAILBOX),
    ("a group", lambda v: f"From: staff: news@{v.domain};\r\n", ONE_MAILBOX),
    ("a sender naming a second address", lambda v: f"From: news@{v.domain}\r\n"
     f"Sender: <news@{v.domain}> <service@paypal.com>\r\n", b"550 5.6.0 sender must be exactly one email address"),
    ("a line separator in the subject", lambda v: f"From: news@{v.domain}\r\nSubject: hi\u2028Bcc: x@example.net\r\n",
     b"550 5.6.0 headers: the Subject header holds U+2028"),
    ("a next line in a custom header", lambda v: f"From: news@{v.domain}\r\nX-Note: a\x85b\r\n",
     b"550 5.6.0 headers: the X-Note header holds U+0085"),
    ("a paragraph separator in a continuation line", lambda v: f"From: news@{v.domain}\r\nTo: ann@example.com,\r\n"
     " bob@example.com\u2029\r\n", b"550 5.6.0 headers: the To header holds U+2029"),
    ("a line separator in the from's name", lambda v: f"From: A\u2028B <news@{v.domain}>\r\n",
     b"550 5.6.0 headers: the From header holds U+2028"),
    ("a line separator in an encoded subject",
     lambda v: f"From: news@{v.domain}\r\nSubject: =?utf-8?q?a=E2=80=A8b?=\r\n",
     b"550 5.6.0 subject: the Subject header holds U+2028"),
    ("a line separator in an encoded name", lambda v: f"From: =?utf-8?q?a=E2=80=A8b?= <news@{v.domain}>\r\n",
     b"550 5.6.0 from must not contain line breaks (U+2028)"),
]


@pt.ensureDeferred
async def test_a_header_value_is_read_as_receivers_read_it(api, smtp_ports, pem, victim, bystander):  # noqa: F811
    transactions = [transaction(victim, head(victim).encode() + b"\r\nbody\r\n") for _, head, _ in MISREAD_VALUES]
    got = await attack(api, victim, bystander, lambda: threads.deferToThread(
        misread_headers_session, smtp_ports["starttls"], pem, victim.key, True, transactions))
    for (name, _, expected), reply in zip(MISREAD_VALUES, got, strict=True):
        assert reply.startswith(expected), (name, reply)


@pt.ensureDeferred
async def test_letters_holding_the_byte_0x85_pass(api, smtp_ports, pem, victim):  # noqa: F811
    subject = "х Å"  # D1 85 and C3 85 in UTF-8
    message = headers(victim, f"X-Note: {subject}\r\n".encode(), subject=subject.encode()) + b"\r\nbody\r\n"
    got = await threads.deferToThread(misread_headers_session, smtp_ports["starttls"], pem, victim.key, True,
                                      [transaction(victim, message)])
    assert got[0].startswith(b"250 2.0.0 OK"), got
    row = await api.parts.db.fetchone("SELECT subject FROM emails WHERE tenant_id = %s", (victim.id,))
    assert row["subject"] == subject
