"""
The scriptable SMTP sink (tests/helpers/smtpsink.py): every knob, with Python's smtplib (in a thread),
raw sockets (pipelining, STARTTLS injection) and the project's own OutboundSMTP.
"""
# ruff: noqa: F811 (every test takes the smtp_sink fixture imported below)

from __future__ import annotations

import smtplib
import socket
import ssl as stdlib_ssl
import time

import pytest
import pytest_twisted as pt
from twisted.internet import defer, endpoints, reactor, ssl, threads

from mailsvc.smtp.outbound import OutboundSMTP
from mailsvc.smtp.outbound_transaction import normalise_lines
from tests.helpers.smtpsink import Received, Sink, smtp_sink  # noqa: F401 (smtp_sink is a fixture)


def in_thread(f, *args, **kwargs):
    return threads.deferToThread(f, *args, **kwargs)


def client_context(sink: Sink) -> stdlib_ssl.SSLContext:
    return stdlib_ssl.create_default_context(cadata=sink.cert_pem.decode())


def send_with_smtplib(port, sender, recipients, message: bytes, tls_context=None, login=None):
    with smtplib.SMTP("127.0.0.1", port, local_hostname="client.test", timeout=10) as client:
        client.ehlo()
        if tls_context is not None:
            client.starttls(context=tls_context)
            client.ehlo()
        if login is not None:
            client.login(*login)
        return client.sendmail(sender, recipients, message)


def converse(port, *steps: tuple[bytes, int], tls_after: int | None = None,
             cadata: str | None = None) -> list[bytes]:
    """
    Raw socket: for each (bytes, replies) step writes the bytes in one go and reads that many
    replies; after step ``tls_after`` it starts TLS. Returns every reply line received.
    """
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    stream = sock.makefile("rb")
    lines = []

    def read_replies(count):
        while count:
            line = stream.readline()
            if not line:
                raise ConnectionError("closed")
            lines.append(line.rstrip(b"\r\n"))
            count -= line[3:4] != b"-"

    try:
        read_replies(1)
        for index, (chunk, replies) in enumerate(steps):
            sock.sendall(chunk)
            read_replies(replies)
            if tls_after == index:
                context = stdlib_ssl.create_default_context(cadata=cadata)
                sock = context.wrap_socket(sock, server_hostname="localhost")
                stream = sock.makefile("rb")
    finally:
        sock.close()
    return lines


def codes(lines: list[bytes]) -> list[bytes]:
    return [line[:3] for line in lines if line[3:4] != b"-"]


async def outbound(sink: Sink, **options) -> OutboundSMTP:
    client = OutboundSMTP(reactor, "client.test", command_timeout=10, data_timeout=30, **options)
    endpoint = endpoints.TCP4ClientEndpoint(reactor, "127.0.0.1", sink.port, timeout=10)
    return await endpoints.connectProtocol(endpoint, client)


@pt.ensureDeferred
async def test_records_a_message_as_sent_with_smtplib(smtp_sink):
    message = b"Subject: hi\r\n\r\n.leading dot\r\n..two\r\n.\r\nend\r\n"
    refused = await in_thread(send_with_smtplib, smtp_sink.port, "a@x.test", ["B@y.test", "c@y.test"], message)
    assert refused == {}
    await smtp_sink.wait_for(1)
    assert smtp_sink.messages == [
        Received("a@x.test", ["B@y.test", "c@y.test"], message, tls=False, helo="client.test")]
    assert smtp_sink.messages[0].auth_user is None
    assert smtp_sink.connections == 1 and smtp_sink.max_concurrent == 1


@pt.ensureDeferred
async def test_helo_noop_rset_quit_and_unknown_commands(smtp_sink):
    commands = [b"HELO old.test", b"NOOP", b"MAIL FROM:<>", b"MAIL FROM:<a@x.test>", b"RSET",
                b"RCPT TO:<b@y.test>", b"DATA", b"BOGUS", b"QUIT"]
    lines = await in_thread(converse, smtp_sink.port, *((c + b"\r\n", 1) for c in commands))
    assert codes(lines) == [
        b"220", b"250", b"250", b"250", b"503", b"250", b"503", b"503", b"500", b"221"]
    assert lines[0] == b"220 sink ESMTP"


@pt.ensureDeferred
async def test_starttls_then_ehlo_again(smtp_sink):
    def session():
        with smtplib.SMTP("127.0.0.1", smtp_sink.port, local_hostname="client.test", timeout=10) as client:
            client.ehlo()
            before = client.has_extn("starttls")
            client.starttls(context=client_context(smtp_sink))
            client.ehlo("tls.client.test")
            after = client.has_extn("starttls")
            client.sendmail("a@x.test", ["b@y.test"], b"Subject: s\r\n\r\nsecret\r\n")
            return before, after

    assert await in_thread(session) == (True, False)
    await smtp_sink.wait_for(1)
    [message] = smtp_sink.messages
    assert message.tls and message.helo == "tls.client.test"


@pt.ensureDeferred
async def test_starttls_off(smtp_sink):
    smtp_sink.starttls = False

    def session():
        with smtplib.SMTP("127.0.0.1", smtp_sink.port, timeout=10) as client:
            client.ehlo()
            offered = client.has_extn("starttls")
            code, _ = client.docmd("STARTTLS")
            return offered, code

    assert await in_thread(session) == (False, 454)


@pt.ensureDeferred
async def test_commands_pipelined_after_starttls_are_discarded(smtp_sink):
    lines = await in_thread(converse, smtp_sink.port, (b"EHLO c.test\r\n", 1),
                            (b"STARTTLS\r\nMAIL FROM:<evil@x.test>\r\n", 1), (b"EHLO c.test\r\n", 1),
                            (b"RCPT TO:<b@y.test>\r\n", 1), (b"NOOP\r\n", 1),
                            tls_after=1, cadata=smtp_sink.cert_pem.decode())
    # the MAIL sent with STARTTLS is dropped: RCPT finds no transaction, NOOP is answered next
    assert codes(lines) == [b"220", b"250", b"220", b"250", b"503", b"250"]


@pt.ensureDeferred
async def test_pipelined_commands_are_answered_in_order_even_when_slow(smtp_sink):
    smtp_sink.delay = 0.02
    smtp_sink.rcpt_replies["gone@y.test"] = b"550 5.1.1 no such user"
    lines = await in_thread(
        converse, smtp_sink.port, (b"EHLO c.test\r\n", 1),
        (b"MAIL FROM:<a@x.test>\r\nRCPT TO:<gone@y.test>\r\nRCPT TO:<b@y.test>\r\nDATA\r\n", 4),
        (b"x\r\n..dot\r\n.\r\nRSET\r\nNOOP\r\nQUIT\r\n", 4))
    assert codes(lines) == [b"220", b"250", b"250", b"550", b"250", b"354", b"250", b"250", b"250", b"221"]
    assert smtp_sink.messages == [Received("a@x.test", ["b@y.test"], b"x\r\n.dot\r\n", False, "c.test")]


@pt.ensureDeferred
async def test_pipelining_knob_and_outbound_client_pipelines(smtp_sink):
    client = await outbound(smtp_sink)
    result = await client.send("a@x.test", ["b@y.test"], b"Subject: p\n\nbody\n")
    assert "PIPELINING" in client.extensions and result.by_outcome("delivered") == ["b@y.test"]
    await client.quit()

    smtp_sink.pipelining = False
    client = await outbound(smtp_sink)
    result = await client.send("a@x.test", ["c@y.test"], b"Subject: p\n\nbody\n")
    assert "PIPELINING" not in client.extensions and result.by_outcome("delivered") == ["c@y.test"]
    await client.quit()
    assert smtp_sink.connections == 2


@pt.ensureDeferred
async def test_rcpt_replies_per_address_case_insensitive(smtp_sink):
    smtp_sink.rcpt_replies["gone@y.test"] = b"550 5.1.1 no such user"
    smtp_sink.rcpt_replies["busy@y.test"] = b"452 4.2.2 mailbox full"
    client = await outbound(smtp_sink)
    result = await client.send("a@x.test", ["Gone@Y.test", "ok@y.test", "busy@y.test"], b"x")
    await client.quit()
    assert [(r.outcome, r.reply.code, r.reply.text) for r in result.recipients] == [
        ("bounced", 550, "no such user"), ("delivered", 250, "queued as 1"), ("deferred", 452, "mailbox full")]
    assert smtp_sink.messages[0].rcpt_to == ["ok@y.test"]


@pt.ensureDeferred
async def test_data_reply_refusal_is_not_recorded(smtp_sink):
    smtp_sink.data_reply = b"451 4.3.0 try again later"
    with pytest.raises(smtplib.SMTPDataError) as refused:
        await in_thread(send_with_smtplib, smtp_sink.port, "a@x.test", ["b@y.test"], b"x\r\n")
    assert refused.value.smtp_code == 451
    assert smtp_sink.messages == []
    smtp_sink.data_reply = None
    await in_thread(send_with_smtplib, smtp_sink.port, "a@x.test", ["b@y.test"], b"x\r\n")
    await smtp_sink.wait_for(1)


@pt.ensureDeferred
async def test_greeting_421_closes(smtp_sink):
    smtp_sink.greeting = b"421 4.3.2 busy"
    with pytest.raises(smtplib.SMTPConnectError) as refused:
        await in_thread(smtplib.SMTP, "127.0.0.1", smtp_sink.port, timeout=10)
    assert refused.value.smtp_code == 421
    assert smtp_sink.connections == 1


@pt.ensureDeferred
async def test_close_after_mail(smtp_sink):
    smtp_sink.close_after_mail = True
    client = await outbound(smtp_sink)
    result = await client.send("a@x.test", ["b@y.test"], b"x")
    assert [(r.outcome, r.reply.code) for r in result.recipients] == [("deferred", 421)]
    await client.when_closed()
    assert smtp_sink.messages == []


@pt.ensureDeferred
async def test_delay_slows_every_reply(smtp_sink):
    smtp_sink.delay = 0.15

    def session():
        started = time.monotonic()
        with smtplib.SMTP("127.0.0.1", smtp_sink.port, timeout=10) as client:
            client.noop()
        return time.monotonic() - started

    # greeting, NOOP and QUIT each wait
    assert await in_thread(session) >= 0.44


@pt.ensureDeferred
async def test_auth_plain_and_login_when_required(smtp_sink):
    smtp_sink.require_auth = True

    def session():
        with smtplib.SMTP("127.0.0.1", smtp_sink.port, timeout=10) as client:
            client.ehlo()
            offered = client.esmtp_features.get("auth", "").split()
            refused = client.docmd("MAIL FROM:<a@x.test>")[0]
            client.login("relay-user", "anything")  # smtplib picks PLAIN
            client.sendmail("a@x.test", ["b@y.test"], b"x\r\n")
        with smtplib.SMTP("127.0.0.1", smtp_sink.port, timeout=10) as client:
            client.ehlo()
            client.user, client.password = "login-user", "secret"
            client.auth("LOGIN", client.auth_login)
            client.sendmail("a@x.test", ["c@y.test"], b"x\r\n")
        return offered, refused

    assert await in_thread(session) == (["PLAIN", "LOGIN"], 530)
    await smtp_sink.wait_for(2)
    assert [m.auth_user for m in smtp_sink.messages] == ["relay-user", "login-user"]


@pt.ensureDeferred
async def test_counts_connections_and_concurrency(smtp_sink):
    def session():
        clients = [smtplib.SMTP("127.0.0.1", smtp_sink.port, timeout=10) for _ in range(3)]
        for client in clients:
            client.noop()
        for client in clients:
            client.quit()
        with smtplib.SMTP("127.0.0.1", smtp_sink.port, timeout=10) as client:
            client.noop()

    await in_thread(session)
    assert (smtp_sink.connections, smtp_sink.max_concurrent) == (4, 3)


@pt.ensureDeferred
async def test_reset_restores_defaults_and_clears(smtp_sink):
    fresh = Sink()
    smtp_sink.rcpt_replies["x@y.test"] = b"550 no"
    smtp_sink.starttls = smtp_sink.pipelining = False
    smtp_sink.delay, smtp_sink.data_reply, smtp_sink.greeting = 0.1, b"451 no", b"554 no"
    smtp_sink.close_after_mail = smtp_sink.require_auth = True
    smtp_sink.messages.append(Received("a", ["b"], b"", False, "h"))
    smtp_sink.reset()
    knobs = ("messages", "connections", "max_concurrent", "starttls", "pipelining", "require_auth",
             "rcpt_replies", "data_reply", "greeting", "close_after_mail", "delay")
    assert {k: getattr(smtp_sink, k) for k in knobs} == {k: getattr(fresh, k) for k in knobs}


@pt.ensureDeferred
async def test_wait_for_times_out_and_resolves(smtp_sink):
    with pytest.raises(defer.TimeoutError):
        await smtp_sink.wait_for(1, timeout=0.1)
    waiting = defer.ensureDeferred(smtp_sink.wait_for(2))
    await in_thread(send_with_smtplib, smtp_sink.port, "a@x.test", ["b@y.test"], b"1\r\n")
    assert not waiting.called
    await in_thread(send_with_smtplib, smtp_sink.port, "a@x.test", ["b@y.test"], b"2\r\n")
    await waiting
    assert [m.data for m in smtp_sink.messages] == [b"1\r\n", b"2\r\n"]


@pt.ensureDeferred
async def test_outbound_client_with_verified_starttls_and_an_empty_message(smtp_sink):
    trusted = ssl.optionsForClientTLS("localhost", trustRoot=ssl.Certificate.loadPEM(smtp_sink.cert_pem))
    client = await outbound(smtp_sink, tls_options=trusted)
    empty = await client.send("", ["b@y.test"], b"")
    dotted = await client.send("a@x.test", ["c@y.test"], b".\n..\n.x")
    await client.quit()
    assert client.encrypted
    assert empty.by_outcome("delivered") == ["b@y.test"] and dotted.by_outcome("delivered") == ["c@y.test"]
    assert [(m.mail_from, m.data, m.tls) for m in smtp_sink.messages] == [
        ("", b"", True), ("a@x.test", b".\r\n..\r\n.x\r\n", True)]


@pytest.mark.slow
@pt.ensureDeferred
async def test_a_40_mib_message_arrives_intact(smtp_sink):
    line = b".x" + b"0123456789" * 7 + b"\r\n"
    message = line * (40 * 1024 * 1024 // len(line) + 1)
    assert len(message) > 40 * 1024 * 1024
    client = await outbound(smtp_sink)
    result = await client.send("a@x.test", ["b@y.test"], message)
    second = await client.send("a@x.test", ["c@y.test"], b"after\n")
    await client.quit()
    assert result.by_outcome("delivered") == ["b@y.test"] and second.by_outcome("delivered") == ["c@y.test"]
    assert smtp_sink.messages[0].data == normalise_lines(message)
    assert smtp_sink.messages[1].data == b"after\r\n"
