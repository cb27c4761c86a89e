"""SMTP submission end to end: smtplib over STARTTLS and implicit TLS into the accept path."""

import base64
import email
import email.policy
import smtplib

import pytest_twisted as pt
from twisted.internet import reactor, threads
from twisted.internet.address import IPv4Address

from mailsvc.app.throttle import SmtpAuthFailures, Throttle
from mailsvc.smtp.submission import Submission, SubmissionFactory
from tests.helpers.polling import async_until
from tests.helpers.sending import sending_tenant
from tests.helpers.smtp import message, submit, tls_context
from tests.helpers.smtpwire import TLSStringTransport


@pt.ensureDeferred
async def test_submission_over_both_tls_modes(api, smtp_ports, pem):
    _, key, _ = await sending_tenant(api)
    for implicit, mode, user in ((False, "starttls", "mailsvc"), (True, "implicit", "resend")):
        msg = message(X_Entity_Ref_ID=mode)
        await threads.deferToThread(submit, smtp_ports[mode], pem, key, msg, implicit, user,
                                    ["ann@example.com", "hidden@example.com"])
    _, listed, _ = await api.json("GET", "/emails", key)
    assert len(listed["data"]) == 2
    row = await api.parts.db.fetchone("SELECT id, message, source, recipients FROM emails ORDER BY id LIMIT 1")
    assert row["source"] == "smtp" and row["recipients"]["bcc"] == ["hidden@example.com"]
    stored = email.message_from_bytes(bytes(row["message"]), policy=email.policy.strict)
    assert stored["DKIM-Signature"] is None  # signed at delivery (tests/integration/test_sign_at_delivery.py)
    assert stored["Bcc"] is None and stored["X-Entity-Ref-ID"] == "starttls"
    assert stored["Message-ID"].endswith("@acme.example.com>")
    assert stored.get_body(("plain",)).get_content().replace("\r\n", "\n") == "plain body\n.leading dot line\n"
    _, got, _ = await api.json("GET", f"/emails/{row['id']}", key)
    assert got["html"] == "<p>html body</p>\n" and got["subject"] == "Over SMTP"


@pt.ensureDeferred
async def test_refusals_are_smtp_replies(api, smtp_ports, pem):
    _, key, _ = await sending_tenant(api)

    def attempt(msg, password=key):
        try:
            submit(smtp_ports["implicit"], pem, password, msg, implicit=True)
        except smtplib.SMTPAuthenticationError as e:
            return e.smtp_code, e.smtp_error
        except smtplib.SMTPDataError as e:
            return e.smtp_code, e.smtp_error
        return 250, b""

    code, text = await threads.deferToThread(attempt, message(), "re_AAAAAAAA_wrong")
    assert code == 535
    code, text = await threads.deferToThread(attempt, message(From="x@unverified.example.com"))
    assert code == 550 and text.startswith(b"5.7.1") and b"not verified" in text
    code, _ = await threads.deferToThread(attempt, message())
    assert code == 250


@pt.ensureDeferred
async def test_idempotency_header(api, smtp_ports, pem):
    _, key, _ = await sending_tenant(api)
    msg = message(Resend_Idempotency_Key="smtp-1")
    for _ in range(2):
        await threads.deferToThread(submit, smtp_ports["starttls"], pem, key, msg)
    rows = await api.parts.db.fetchall("SELECT id FROM emails")
    assert len(rows) == 1
    stored = await api.parts.db.fetchone("SELECT message FROM emails")
    assert b"Resend-Idempotency-Key" not in bytes(stored["message"])


@pt.ensureDeferred
async def test_suppressed_recipients_are_skipped_over_smtp(api, smtp_ports, pem):
    _, key, _ = await sending_tenant(api)
    await api.json("POST", "/suppressions", key, json={"email": "gone@example.com"})
    await threads.deferToThread(submit, smtp_ports["starttls"], pem, key, message(To="gone@example.com"))
    row = await api.parts.db.fetchone("SELECT last_event FROM emails")
    assert row["last_event"] == "suppressed"
    charged = await api.parts.db.fetchall("SELECT count FROM usage")
    assert charged == []


@pt.ensureDeferred
async def test_the_accounts_rate_limit_applies(api, smtp_ports, pem):
    tenant, key, _ = await sending_tenant(api)
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token, json={"api_rate_per_sec": 1})

    def burst():
        client = smtplib.SMTP_SSL("127.0.0.1", smtp_ports["implicit"], context=tls_context(pem), timeout=10)
        replies = []
        try:
            client.login("mailsvc", key)
            for _ in range(4):
                try:
                    client.send_message(message())
                    replies.append(250)
                except smtplib.SMTPDataError as e:
                    replies.append((e.smtp_code, e.smtp_error[:5]))
        finally:
            client.quit()
        return replies

    replies = await threads.deferToThread(burst)
    assert (451, b"4.7.1") in replies and replies[0] == 250


async def answered(transports, seconds: float = 20) -> list[bytes]:
    """The last reply line of each connection, once every one has answered its AUTH."""
    def every_one() -> list[bytes] | None:
        lines = [t.value().split(b"\r\n")[-2] for t in transports]
        return lines if all(line[:3] in (b"235", b"421", b"535") for line in lines) else None

    return await async_until(every_one, seconds, lambda: f"every AUTH answered: {[t.value() for t in transports]}",
                             interval=0.01)


@pt.ensureDeferred
async def test_failed_auths_per_address_are_counted_across_processes(api, db):
    _, key, _ = await sending_tenant(api)
    # A second process of the node: its own submission service (the same keys) on the same database.
    node = api.parts.submission
    other = Submission(node.authenticate, node.accept_message, "mx.test",
                       auth_failures=SmtpAuthFailures(Throttle(reactor, db), reactor))
    factories = [SubmissionFactory(reactor, submission, object(), implicit_tls=True) for submission in (node, other)]

    def at_once(host: str, password: bytes) -> list:
        """30 connections from ``host``, spread over both processes, each sending AUTH at once."""
        transports = []
        for n in range(30):
            proto = factories[n % 2].buildProtocol(None)
            transport = TLSStringTransport(peerAddress=IPv4Address("TCP", host, 40000 + n))
            proto.makeConnection(transport)
            proto.dataReceived(b"EHLO c\r\nAUTH PLAIN " + base64.b64encode(b"\0mailsvc\0" + password) + b"\r\n")
            transports.append(transport)
        return transports

    # A client opening many connections at once with its right key: none is refused (an
    # exchange holds the count only while its key is checked, and a refused one asks again).
    codes = [line[:3] for line in await answered(at_once("192.0.2.9", key.encode()))]
    assert codes == [b"235"] * 30, codes
    # 30 wrong keys at once from one address: only 10 are checked.
    codes = [line[:3] for line in await answered(at_once("192.0.2.7", b"re_AAAAAAAA_wrong"))]
    assert codes.count(b"535") == 10 and codes.count(b"421") == 20, codes
    # Held on both processes, even with the right key; another address is not.
    right = base64.b64encode(b"\0mailsvc\0" + key.encode())
    for factory, host, code in ((factories[0], "192.0.2.7", b"421"), (factories[1], "192.0.2.7", b"421"),
                                (factories[0], "192.0.2.8", b"235")):
        proto = factory.buildProtocol(None)
        transport = TLSStringTransport(peerAddress=IPv4Address("TCP", host, 41000))
        proto.makeConnection(transport)
        proto.dataReceived(b"EHLO c\r\nAUTH PLAIN " + right + b"\r\n")
        assert (await answered([transport]))[0][:3] == code, host


@pt.ensureDeferred
async def test_the_test_sender_over_smtp_to_test_addresses_only(api, smtp_ports, pem):
    _, key = await api.tenant()  # no domain at all

    def attempt(msg, recipients):
        try:
            submit(smtp_ports["starttls"], pem, key, msg, recipients=recipients)
        except smtplib.SMTPDataError as e:
            return e.smtp_code, e.smtp_error
        return 250, b""

    test = message(From="Acme <onboarding@resend.dev>", To="delivered@resend.dev")
    assert await threads.deferToThread(attempt, test, ["delivered@resend.dev"]) == (250, b"")
    row = await api.parts.db.fetchone("SELECT sender, domain_id FROM emails")
    assert row["sender"] == "Acme <onboarding@resend.dev>" and row["domain_id"] is None
    # A real recipient among the envelope's (a hidden RCPT too) refuses the message whole.
    code, text = await threads.deferToThread(attempt, test, ["delivered@resend.dev", "hidden@example.net"])
    assert code == 550 and text.startswith(b"5.7.1") and b"hidden@example.net" in text
    # A Sender of the test domain goes with a From of the test domain only.
    code, text = await threads.deferToThread(
        attempt, message(Sender="onboarding@resend.dev", To="delivered@resend.dev"), ["delivered@resend.dev"])
    assert code == 550 and text.startswith(b"5.7.1") and b"Sender" in text
    code, _ = await threads.deferToThread(
        attempt, message(From="a@resend.dev", Sender="b@resend.dev", To="delivered@resend.dev"),
        ["delivered@resend.dev"])
    assert code == 250
    code, text = await threads.deferToThread(attempt, message(From="x@unverified.example.com"), ["ann@example.com"])
    assert code == 550 and b"onboarding@resend.dev" in text  # what to do
    assert len(await api.parts.db.fetchall("SELECT id FROM emails")) == 2


def _structured(body: bytes, content_type: bytes = b'multipart/mixed; boundary="b"') -> bytes:
    return (b"From: Acme <news@acme.example.com>\r\nTo: ann@example.com\r\nSubject: Parts\r\nMIME-Version: 1.0\r\n"
            b"Content-Type: " + content_type + b"\r\n\r\n" + body)


def _parts(count: int, fields: int = 1) -> bytes:
    """A message of ``count`` MIME parts in all, each part with ``fields`` header fields."""
    part = b"--b\r\n" + b"X-Part: 1\r\n" * (fields - 1) + b"Content-Type: text/plain\r\n\r\npart\r\n"
    return _structured(part * (count - 1) + b"--b--\r\n")


def _nested(depth: int) -> bytes:
    opened = b"".join(b'Content-Type: multipart/mixed; boundary="n%d"\r\n\r\n--n%d\r\n' % (i, i)
                      for i in range(depth - 1))
    closed = b"".join(b"\r\n--n%d--\r\n" % i for i in reversed(range(depth - 1)))
    return _structured(b"--b\r\n" + opened + b"Content-Type: text/plain\r\n\r\ndeep" + closed + b"\r\n--b--\r\n")


@pt.ensureDeferred
async def test_a_message_over_a_mime_limit_is_refused_for_good_naming_the_limit(api, smtp_ports, pem):
    _, key, _ = await sending_tenant(api)

    def attempt(raw: bytes):
        client = smtplib.SMTP_SSL("127.0.0.1", smtp_ports["implicit"], context=tls_context(pem), timeout=10)
        try:
            client.login("resend", key)
            client.sendmail("news@acme.example.com", ["ann@example.com"], raw)
        except smtplib.SMTPDataError as e:
            return e.smtp_code, e.smtp_error
        finally:
            client.quit()
        return 250, b""

    for raw, setting in ((_parts(501), b"mail.max_mime_parts is 500"),
                         (_nested(1200), b"mail.max_mime_depth is 50"),  # was 451 4.3.0 (a RecursionError)
                         (_parts(101, fields=10), b"mail.max_header_fields is 1000")):
        code, text = await threads.deferToThread(attempt, raw)
        assert (code, text[:6]) == (554, b"5.6.0 ") and setting in text, (code, text)
    assert await api.parts.db.fetchall("SELECT id FROM emails") == []
    # Just under every limit: accepted.
    for raw in (_parts(500), _nested(49), _parts(100, fields=10)):
        assert await threads.deferToThread(attempt, raw) == (250, b"")
    assert len(await api.parts.db.fetchall("SELECT id FROM emails")) == 3
