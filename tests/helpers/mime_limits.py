"""Messages at the MIME limits (``mail/limits.py``), for the Inbox's and submission's tests."""

from __future__ import annotations

from mailsvc.mail.limits import MimeLimits, exceeded

HEAD = (b"From: Tester <onboarding@resend.dev>\r\nTo: delivered+x@resend.dev\r\nSubject: Many parts\r\n"
        b"Date: Tue, 01 Dec 2026 23:00:00 +0000\r\nMIME-Version: 1.0\r\n")


def largest_allowed(limits: MimeLimits = MimeLimits()) -> bytes:
    """As many parts as allowed (html and text among them), their header sections near the byte limit."""
    parts = limits.parts - 1
    room = (limits.header_bytes - 4096) // parts  # the bytes of each part's header section
    pad = b"".join(b";\r\n x-p=" + b"p" * 70 for _ in range(max(0, room - 80) // 80))
    body = [b'--b\r\nContent-Type: text/html; charset="utf-8"\r\n\r\n<p>Hello <b>there</b></p>\r\n',
            b"--b\r\nContent-Type: text/plain\r\n\r\nHello there\r\n"]
    body += [b"--b\r\nContent-Type: application/octet-stream" + pad + b';\r\n name="f%d.bin"' % i
             + b"\r\n\r\nhello\r\n" for i in range(parts - 2)]
    raw = HEAD + b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n' + b"".join(body) + b"--b--\r\n"
    assert exceeded(raw, limits) is None, exceeded(raw, limits)
    assert exceeded(raw, MimeLimits(parts=limits.parts - 1)) is not None  # no part to spare
    assert exceeded(raw, MimeLimits(header_bytes=limits.header_bytes * 9 // 10)) is not None  # near the byte limit
    return raw


def too_many_parts(count: int = 20_000) -> bytes:
    part = b"--b\r\nContent-Type: text/plain\r\n\r\npart\r\n"
    return HEAD + b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n' + part * (count - 1) + b"--b--\r\n"
