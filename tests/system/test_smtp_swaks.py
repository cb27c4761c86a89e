"""
SMTP submission with a real, independent client: swaks (Debian's, installed by scripts/test)
over implicit TLS and over STARTTLS, AUTH with the service label and an API key, reading the
stored email back; and refusals as swaks sees them.
"""

from __future__ import annotations

import email
import email.policy
import os
import re
import shutil

import pytest
import pytest_twisted as pt
from twisted.internet import reactor
from twisted.internet.utils import getProcessOutputAndValue

from tests.helpers.sending import sending_tenant

#: Runs swaks (Perl) processes.
pytestmark = pytest.mark.slow

QUEUED = re.compile(r"^<~ +250 2\.0\.0 OK: queued as ([0-9a-f-]{36})\r?$", re.M)


async def swaks(port: int, key: str, *options: str, sender="news@acme.example.com",
                to="ann@example.com") -> tuple[int, str]:
    """Runs swaks against 127.0.0.1:``port``; its exit code and transcript."""
    program = shutil.which("swaks")
    assert program, "swaks is not installed: scripts/test installs it (MAILSVC_TEST_DEPS=1)"
    args = ["--server", "127.0.0.1", "--port", str(port), "--helo", "client.test",
            "--auth-user", "mailsvc", "--auth-password", key, "--from", sender, "--to", to,
            "--timeout", "20", *options]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    out, err, code = await getProcessOutputAndValue(program, args, env=env, reactor=reactor)
    return code, (out + err).decode(errors="replace")


def queued_id(transcript: str) -> str:
    found = QUEUED.findall(transcript)
    assert len(found) == 1, transcript
    return found[0]


@pt.ensureDeferred
async def test_swaks_over_implicit_tls_and_starttls(api, smtp_ports, pem):  # noqa: F811
    _, key, _ = await sending_tenant(api)
    sent = {}
    for mode, tls, auth in (("implicit", "--tls-on-connect", "PLAIN"), ("starttls", "--tls", "LOGIN")):
        code, transcript = await swaks(
            smtp_ports[mode], key, tls, "--auth", auth,
            "--header", "From: Acme <news@acme.example.com>", "--header", "To: ann@example.com",
            "--header", f"Subject: swaks over {mode}", "--header", f"X-Entity-Ref-ID: {mode}",
            "--body", f"Sent over {mode}.\n.a line that starts with a dot\n",
            to="ann@example.com,hidden@example.com",
        )
        assert code == 0, transcript
        assert re.search(r"^<~  235 2\.7\.0 ", transcript, re.M), transcript  # authenticated inside TLS
        assert re.search(r"^ ~> \.\.a line that starts with a dot", transcript, re.M), transcript
        sent[mode] = queued_id(transcript)

    for mode, email_id in sent.items():
        code, got, _ = await api.json("GET", f"/emails/{email_id}", key)
        assert code == 200 and got["subject"] == f"swaks over {mode}"
        assert got["from"] == "Acme <news@acme.example.com>" and got["to"] == ["ann@example.com"]
        assert got["bcc"] == ["hidden@example.com"] and got["last_event"] == "sent"
        row = await api.parts.db.fetchone("SELECT source, text, message FROM emails WHERE id = %s", (email_id,))
        assert row["source"] == "smtp"
        # Dot-stuffed on the wire, unstuffed when stored; swaks ends every body with two empty lines.
        assert row["text"] == f"Sent over {mode}.\n.a line that starts with a dot\n\n\n"
        stored = email.message_from_bytes(bytes(row["message"]), policy=email.policy.strict)
        assert stored["X-Entity-Ref-ID"] == mode and stored["Bcc"] is None
        assert stored["DKIM-Signature"] is None  # signed at delivery (tests/integration/test_sign_at_delivery.py)
        assert stored["Message-ID"].endswith("@acme.example.com>")
        deliveries = await api.parts.db.fetchall(
            "SELECT recipient, status FROM deliveries WHERE email_id = %s ORDER BY recipient", (email_id,))
        assert [(d["recipient"], d["status"]) for d in deliveries] == [
            ("ann@example.com", "queued"), ("hidden@example.com", "queued")]


@pt.ensureDeferred
async def test_swaks_sees_the_refusals(api, smtp_ports, pem):  # noqa: F811
    _, key, _ = await sending_tenant(api)
    # An unverified From domain: refused after DATA with 550 5.7.1 (swaks exit 26).
    code, transcript = await swaks(smtp_ports["implicit"], key, "--tls-on-connect", "--auth", "PLAIN",
                                   sender="news@unverified.example.com")
    assert code == 26, transcript
    assert re.search(r"^<~\* +550 5\.7\.1 .*unverified\.example\.com.*not verified", transcript, re.M), transcript
    # A wrong key: 535 5.7.8 to AUTH (exit 28).
    code, transcript = await swaks(smtp_ports["starttls"], "re_AAAAAAAA_wrong", "--tls", "--auth", "PLAIN")
    assert code == 28 and re.search(r"^<~\* +535 5\.7\.8 ", transcript, re.M), transcript
    # No AUTH without TLS: the plain session never offers it (exit 28, nothing sent).
    code, transcript = await swaks(smtp_ports["starttls"], key, "--auth", "PLAIN")
    assert code == 28 and "Host did not advertise authentication" in transcript, transcript
    assert re.search(r"^<-  250 STARTTLS", transcript, re.M) and "AUTH" not in transcript, transcript
    rows = await api.parts.db.fetchall("SELECT id FROM emails")
    assert rows == []
