"""
What the test addresses answer, made as a receiving MTA would make it: an RFC 3464
delivery status notification for ``bounced@``, an RFC 5965 feedback report for
``complained@``, both sent to the VERP return path the message would have left with and handed
to the return path's own handling. And the node's test DKIM key, which signs the test sender's
mail: derived from the VERP key (every node has the same), so any process can verify what
another signed, and never published anywhere (its checks are labelled "simulated").
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime
from email.utils import format_datetime

from cryptography.hazmat.primitives.asymmetric import ed25519

from mailsvc.mail import dkim

TEST_SELECTOR = "mailsvc-test"


def test_signer(verp_key: bytes) -> dkim.Signer:
    seed = hmac.new(verp_key, b"mailsvc test sender DKIM key", hashlib.sha256).digest()
    return dkim.Signer(TEST_SELECTOR, dkim.ED25519, ed25519.Ed25519PrivateKey.from_private_bytes(seed))


def test_key_record(signer: dkim.Signer) -> str:
    """The TXT record the test key would have at ``<selector>._domainkey.<test domain>``."""
    return f"v=DKIM1; k=ed25519; p={dkim.public_key_of(signer.private_key)}"


def _header_section(message: bytes) -> bytes:
    end = message.find(b"\r\n\r\n")
    return message if end < 0 else message[:end + 2]


def _report(host: str, to: str, subject: str, report_type: str, human: str, machine: str,
            enclosed_type: str, enclosed: bytes, at: datetime) -> bytes:
    boundary = "report-" + secrets.token_hex(8)
    head = (
        f"From: Mail Delivery System <MAILER-DAEMON@{host}>\r\nTo: <{to}>\r\nSubject: {subject}\r\n"
        f"Date: {format_datetime(at)}\r\nMessage-ID: <{secrets.token_hex(12)}@{host}>\r\n"
        f"Auto-Submitted: auto-replied\r\nMIME-Version: 1.0\r\n"
        f"Content-Type: multipart/report; report-type={report_type}; boundary=\"{boundary}\"\r\n\r\n"
    )
    parts = (
        f"--{boundary}\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n{human}\r\n"
        f"--{boundary}\r\nContent-Type: message/{report_type}\r\n\r\n{machine}\r\n"
        f"--{boundary}\r\nContent-Type: {enclosed_type}\r\n\r\n"
    )
    return (head + parts).encode("ascii") + enclosed + f"\r\n--{boundary}--\r\n".encode("ascii")


def bounce(host: str, return_path: str, recipient: str, message: bytes, at: datetime) -> bytes:
    """The DSN of a hard bounce of ``recipient`` (``5.1.1``), with the message's headers."""
    machine = (
        f"Reporting-MTA: dns; {host}\r\nArrival-Date: {format_datetime(at)}\r\n\r\n"
        f"Final-Recipient: rfc822; {recipient}\r\nOriginal-Recipient: rfc822; {recipient}\r\n"
        f"Action: failed\r\nStatus: 5.1.1\r\n"
        f"Diagnostic-Code: smtp; 550 5.1.1 <{recipient}>: test address: simulated hard bounce"
    )
    human = f"The test address {recipient} simulates a mailbox that does not exist: nothing left this node."
    return _report(host, return_path, "Undelivered Mail Returned to Sender", "delivery-status", human, machine,
                   "text/rfc822-headers", _header_section(message), at)


def complaint(host: str, return_path: str, recipient: str, message: bytes, at: datetime) -> bytes:
    """The feedback report (``abuse``) of ``recipient`` marking the message as spam."""
    machine = (
        f"Feedback-Type: abuse\r\nUser-Agent: mailsvc-test-addresses/1\r\nVersion: 1\r\n"
        f"Original-Mail-From: <{return_path}>\r\nOriginal-Rcpt-To: <{recipient}>\r\n"
        f"Arrival-Date: {format_datetime(at)}\r\nReporting-MTA: dns; {host}"
    )
    human = f"The test address {recipient} simulates a recipient who marked this message as spam."
    return _report(host, return_path, "Complaint about message", "feedback-report", human, machine,
                   "text/rfc822-headers", _header_section(message), at)

