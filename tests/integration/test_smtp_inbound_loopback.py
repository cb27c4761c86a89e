"""
The return-path listener on 127.0.0.1 with smtplib as the peer (in clear and over
STARTTLS). Bytes in and bytes out: tests/unit/test_smtp_inbound.py.
"""

import smtplib
import ssl
from pathlib import Path

import pytest
import pytest_twisted as pt
from twisted.internet import defer, reactor, threads

from mailsvc.crypto import tls
from mailsvc.mail import reports
from mailsvc.smtp.inbound import InboundFactory, listen
from tests.helpers.inbound import VERP, Recorder

SAMPLES = Path(__file__).parent.parent / "samples"
# smtplib against a real listener


@pytest.fixture
def pem():
    return tls.self_signed("mx.acme.example")


@pytest.fixture
def server(pem):
    recorder = Recorder()
    factory = InboundFactory(reactor, "mx.acme.example", recorder.accepts, recorder.deliver,
                             tls_options=tls.server_options(*pem))
    port = pt.blockon(defer.ensureDeferred(listen(reactor, "tcp:0:interface=127.0.0.1", factory)))
    yield port.getHost().port, recorder
    pt.blockon(port.stopListening())


def tls_context(pem):
    context = ssl.create_default_context(cadata=pem[0].decode())
    context.check_hostname = False
    return context


def smtp_session(port, body, *, starttls_pem=None, recipients=(VERP,)):
    """One session as an MTA returning a report would hold it: MAIL FROM:<>, RCPT, DATA."""
    client = smtplib.SMTP("127.0.0.1", port, local_hostname="mx.example.org", timeout=10)
    try:
        client.ehlo()
        features = dict(client.esmtp_features)
        if starttls_pem is not None:
            client.starttls(context=tls_context(starttls_pem))
            client.ehlo()
        try:
            refused = client.sendmail("", list(recipients), body)
            result = ("ok", refused)
        except smtplib.SMTPRecipientsRefused as e:
            result = ("refused", e.recipients)
        except smtplib.SMTPDataError as e:
            result = ("data", (e.smtp_code, e.smtp_error))
        return features, result, client.noop()
    finally:
        client.quit()


@pt.ensureDeferred
async def test_smtplib_delivers_a_dsn(server):
    port, recorder = server
    # Its returned original has a lone "." line, dot-stuffed by smtplib and unstuffed by the server.
    body = (SAMPLES / "exim_failed.eml").read_bytes().replace(b"\n", b"\r\n")
    assert b"\r\n.\r\n" in body
    features, result, noop = await threads.deferToThread(smtp_session, port, body)
    assert result == ("ok", {}) and noop[0] == 250
    assert {"pipelining", "size", "8bitmime", "enhancedstatuscodes", "starttls"} <= set(features)
    assert "auth" not in features and features["size"] == "10485760"
    ((mail_from, recipients, message),) = recorder.delivered
    assert (mail_from, recipients) == ("", [VERP])
    assert message == body
    report = reports.parse(message)
    assert report.recipients[0].final_recipient == "gone@example.net" and report.recipients[0].is_permanent


@pt.ensureDeferred
async def test_smtplib_relay_refused(server):
    port, recorder = server
    _, result, _ = await threads.deferToThread(smtp_session, port, b"Subject: hi\r\n\r\nhi\r\n",
                                               recipients=("friend@gmail.example",))
    assert result == ("refused", {"friend@gmail.example": (550, b"5.7.1 Relay not permitted")})
    # One good and one foreign recipient: only ours receives it.
    _, result, _ = await threads.deferToThread(smtp_session, port, b"Subject: hi\r\n\r\nhi\r\n",
                                               recipients=(VERP, "friend@gmail.example"))
    assert result == ("ok", {"friend@gmail.example": (550, b"5.7.1 Relay not permitted")})
    assert [r for _, r, _ in recorder.delivered] == [[VERP]]


@pt.ensureDeferred
async def test_smtplib_feedback_report_over_starttls(server, pem):
    port, recorder = server
    body = (SAMPLES / "yahoo_arf.eml").read_bytes()
    _, result, _ = await threads.deferToThread(smtp_session, port, body, starttls_pem=pem,
                                               recipients=("fbl@bounces.acme.example",))
    assert result == ("ok", {})
    ((_, recipients, message),) = recorder.delivered
    assert recipients == ["fbl@bounces.acme.example"]
    report = reports.parse(message)
    assert report.feedback_type == "abuse" and report.original_return_path == VERP


@pt.ensureDeferred
async def test_smtplib_deliver_failure_is_451(server):
    port, recorder = server
    recorder.fail = True
    _, result, noop = await threads.deferToThread(smtp_session, port, b"Subject: x\r\n\r\nx\r\n")
    assert result == ("data", (451, b"4.3.0 Local error in processing; try again later"))
    assert noop[0] == 250


