"""SMTP submission: a certificate, the node's submission ports (fixtures), a message and a blocking submit."""

import smtplib
import ssl
from email.message import EmailMessage

import pytest
import pytest_twisted as pt
from twisted.internet import defer, reactor

from mailsvc import listeners
from mailsvc.crypto import tls


@pytest.fixture
def pem():
    return tls.self_signed("mx.test")


@pytest.fixture
def smtp_ports(api, pem):
    options = tls.server_options(*pem)
    ports = []
    for description in ("tcp:0:interface=127.0.0.1", "ssl:0:interface=127.0.0.1"):
        ports.append(pt.blockon(defer.ensureDeferred(
            listeners.listen_submission(reactor, description, api.parts.submission, options))))
    yield {"starttls": ports[0].getHost().port, "implicit": ports[1].getHost().port}
    for port in ports:
        pt.blockon(port.stopListening())


def tls_context(pem):
    context = ssl.create_default_context(cadata=pem[0].decode())
    context.check_hostname = False
    return context


def message(**headers) -> EmailMessage:
    m = EmailMessage()
    m["From"] = headers.pop("From", "Acme <news@acme.example.com>")
    m["To"] = headers.pop("To", "ann@example.com")
    m["Subject"] = headers.pop("Subject", "Over SMTP")
    for name, value in headers.items():
        m[name.replace("_", "-")] = value
    m.set_content("plain body\n.leading dot line\n")
    m.add_alternative("<p>html body</p>", subtype="html")
    return m


def submit(port, pem, key, msg, implicit=False, user="mailsvc", recipients=None):
    if implicit:
        client = smtplib.SMTP_SSL("127.0.0.1", port, context=tls_context(pem), timeout=10)
    else:
        client = smtplib.SMTP("127.0.0.1", port, timeout=10)
        client.ehlo()
        assert "auth" not in client.esmtp_features  # never offered before TLS
        client.starttls(context=tls_context(pem))
    try:
        client.ehlo()
        assert "auth" in client.esmtp_features and "pipelining" in client.esmtp_features
        client.login(user, key)
        client.send_message(msg, to_addrs=recipients)
        return client.noop()
    finally:
        client.quit()
