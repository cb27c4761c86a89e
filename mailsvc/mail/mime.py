"""
Building the message once: headers, the multipart tree (alternative / related / mixed) and the
encodings, all by Python's ``email`` package under the SMTP policy (CRLF, RFC 2047 words,
RFC 2231 parameters, transfer encodings that keep every line under 998 octets).
"""

from __future__ import annotations

import secrets
from datetime import datetime
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime

import inscriptis

from mailsvc.domain.email import Submission

_POLICY = policy.SMTP.clone(max_line_length=78)


def new_message_id(domain: str) -> str:
    return f"<{secrets.token_hex(16)}@{domain}>"


def text_from_html(html: str) -> str:
    return inscriptis.get_text(html).strip() + "\n"


def build(
    submission: Submission,
    *,
    message_id: str,
    date: datetime,
    attachments: list[tuple[str | None, bytes, str, str | None]] = (),
) -> bytes:
    """
    The RFC 5322 message. ``attachments`` are (filename, content, content_type, content_id) with
    their content already fetched; Bcc never appears in the headers.
    """
    message = EmailMessage(policy=_POLICY)
    message["From"] = str(submission.sender)
    message["To"] = ", ".join(str(m) for m in submission.to)
    if submission.cc:
        message["Cc"] = ", ".join(str(m) for m in submission.cc)
    if submission.reply_to:
        message["Reply-To"] = ", ".join(str(m) for m in submission.reply_to)
    message["Subject"] = submission.subject
    message["Date"] = format_datetime(date)
    message["Message-ID"] = message_id
    for name, value in submission.headers:
        message[name] = value

    text = submission.text
    if text is None and submission.html:
        text = text_from_html(submission.html)
    if text:
        message.set_content(text, subtype="plain", charset="utf-8")
        if submission.html:
            message.add_alternative(submission.html, subtype="html", charset="utf-8")
    else:
        message.set_content(submission.html or "", subtype="html", charset="utf-8")

    inline = [a for a in attachments if a[3] is not None]
    regular = [a for a in attachments if a[3] is None]
    if inline:
        html_part = message
        if message.is_multipart():
            html_part = next(p for p in message.iter_parts() if p.get_content_type() == "text/html")
        for filename, content, content_type, content_id in inline:
            maintype, _, subtype = content_type.partition("/")
            html_part.add_related(
                content, maintype=maintype, subtype=subtype, cid=f"<{content_id}>",
                filename=filename, disposition="inline",
            )
    for filename, content, content_type, _ in regular:
        maintype, _, subtype = content_type.partition("/")
        message.add_attachment(content, maintype=maintype, subtype=subtype, filename=filename)
    for part in message.walk():
        if part is not message:
            del part["MIME-Version"]  # only the top-level entity carries it
    return message.as_bytes()


def unsubscribe_fields(url: str) -> list[bytes]:
    """RFC 8058 one-click unsubscribe: the HTTPS link and the POST body a mailbox provider sends."""
    if any(c in url for c in "\r\n<> ") or not url.isascii():
        raise ValueError("an unsubscribe URL must be plain ASCII without spaces or angle brackets")
    return [f"List-Unsubscribe: <{url}>".encode("ascii"), b"List-Unsubscribe-Post: List-Unsubscribe=One-Click"]


def with_fields(message: bytes, fields: list[bytes]) -> bytes:
    """``message`` (CRLF, as ``build`` makes it) with ``fields`` added at the end of its header."""
    end = message.find(b"\r\n\r\n")
    if end < 0:
        return message + b"\r\n" + b"".join(f + b"\r\n" for f in fields) + b"\r\n"
    return message[:end] + b"".join(b"\r\n" + f for f in fields) + message[end:]


#: Headers of a submitted message that the platform replaces or drops (SMTP submission).
RESUBMIT_DROPPED = frozenset(
    {b"bcc", b"message-id", b"date", b"dkim-signature", b"return-path", b"received",
     b"resend-idempotency-key", b"x-resend-idempotency-key", b"arc-seal", b"arc-message-signature",
     b"arc-authentication-results", b"authentication-results"}
)


def split_header_fields(raw: bytes) -> tuple[list[bytes], bytes]:
    """(the header fields with their folding kept, the body) of a CRLF message."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        head, body = raw, b""
    fields: list[bytes] = []
    for line in head.split(b"\r\n"):
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1] += b"\r\n" + line
        elif line:
            fields.append(line)
    return fields, body


def field_name(field: bytes) -> bytes:
    return field.partition(b":")[0].strip().lower()


def resubmitted(raw: bytes, message_id: str, date: datetime) -> bytes:
    """
    A submitted message with the platform's Message-ID and Date, without Bcc and the other
    headers only the platform may write; every other header and the body stay byte for byte.
    """
    fields, body = split_header_fields(raw)
    kept = [f for f in fields if field_name(f) not in RESUBMIT_DROPPED]
    head = [f"Date: {format_datetime(date)}".encode(), f"Message-ID: {message_id}".encode(), *kept]
    return b"\r\n".join(head) + b"\r\n\r\n" + body
