"""Bounce (DSN) and complaint (ARF) reports as receivers send them back."""

from __future__ import annotations

from tests.helpers.mta import DOMAIN


def dsn(to: str, *failed: str, original: str = "") -> bytes:
    """A DSN to ``to`` with a permanent failure for each address in ``failed``."""
    blocks = "".join(
        f"Final-Recipient: rfc822; {address}\r\nAction: failed\r\nStatus: 5.1.1\r\n"
        f"Diagnostic-Code: smtp; 550 5.1.1 <{address}>: User unknown\r\n\r\n"
        for address in failed)
    return (
        f"From: MAILER-DAEMON@mx.example.net\r\nTo: {to}\r\nSubject: Undelivered Mail\r\n"
        "MIME-Version: 1.0\r\n"
        'Content-Type: multipart/report; report-type=delivery-status; boundary="b"\r\n\r\n'
        "--b\r\nContent-Type: text/plain\r\n\r\nYour message could not be delivered.\r\n"
        "--b\r\nContent-Type: message/delivery-status\r\n\r\n"
        f"Reporting-MTA: dns; mx.example.net\r\n\r\n{blocks}"
        f"--b\r\nContent-Type: text/rfc822-headers\r\n\r\nFrom: news@{DOMAIN}\r\nSubject: Hello\r\n{original}\r\n"
        "--b--\r\n"
    ).encode()


def arf(to: str, *, return_path: str = "", rcpt_to: str = "", message_id: str = "", delivered_to: str = "",
        feedback_type: str = "abuse") -> bytes:
    """A feedback report to ``to``; its enclosed original has the Return-Path, Message-ID and Delivered-To given."""
    original = "".join(f"{name}: {value}\r\n" for name, value in (
        ("Return-Path", f"<{return_path}>" if return_path else ""), ("Message-ID", message_id),
        ("Delivered-To", delivered_to)) if value)
    rcpt = f"Original-Rcpt-To: {rcpt_to}\r\n" if rcpt_to else ""
    return (
        f"From: feedback@fbl.example.net\r\nTo: {to}\r\nSubject: FW: Hello\r\nMIME-Version: 1.0\r\n"
        'Content-Type: multipart/report; report-type=feedback-report; boundary="f"\r\n\r\n'
        "--f\r\nContent-Type: text/plain\r\n\r\nThis is an abuse report.\r\n"
        "--f\r\nContent-Type: message/feedback-report\r\n\r\n"
        f"Feedback-Type: {feedback_type}\r\nUser-Agent: FBL/1.0\r\nVersion: 1\r\n{rcpt}\r\n"
        f"--f\r\nContent-Type: message/rfc822\r\n\r\n{original}From: news@{DOMAIN}\r\nSubject: Hello\r\n\r\nHi\r\n"
        "--f--\r\n"
    ).encode()
