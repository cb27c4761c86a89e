"""
Building the message once: headers, the multipart tree (alternative / related / mixed) and the
encodings (CRLF, RFC 2047 words, RFC 2231 parameters, transfer encodings keeping lines under 998
octets). ``build`` writes the bytes directly for the shapes the API produces, making the same
choices as Python's ``email`` package under the SMTP policy (docs/benchmarks.md). What it does
not handle itself it hands to the ``email`` package, field by field or for the whole message
(``build_with_email_package``, also the reference the tests compare against).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import random
import re
import secrets
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from email import policy
from email.headerregistry import HeaderRegistry
from email.message import EmailMessage, MIMEPart
from email.utils import encode_rfc2231, format_datetime
from email.utils import quote as _quote_param

from mailsvc.domain.addresses import is_dot_atom
from mailsvc.domain.email import Submission
from mailsvc.domain.htmltext import html_to_text

_POLICY = policy.SMTP.clone(max_line_length=78)
#: Header lines are folded to this many characters where they can be (RFC 5322 §2.1.1).
_MAX = 78
#: The hard limit of a line (RFC 5322 §2.1.1).
_HARD_MAX = 998


def new_message_id(domain: str) -> str:
    return f"<{secrets.token_hex(16)}@{domain}>"


def text_from_html(html: str) -> str:
    return html_to_text(html).strip() + "\n"


class _Unusual(Exception):
    """A shape ``build`` leaves to the ``email`` package."""


# Header fields


#: Printable ASCII, neither starting nor ending with a space.
_PLAIN = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?\Z")
#: Type and subtype with nothing else (RFC 6838 §4.2 restricted names).
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\Z")
#: Bytes written as themselves in a "Q" encoded word: the set allowed even in a phrase
#: (RFC 2047 §5 (3)), so one encoding serves Subject and display names alike.
_Q_LITERAL = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!*+-/"
_Q_TABLE = {b: ("_" if b == 0x20 else chr(b) if b in _Q_LITERAL else f"={b:02X}") for b in range(256)}
#: Bytes a "Q" word writes as one character (a space as "_"); any other takes three ("=XX").
_Q_ONE_CHAR = _Q_LITERAL + b" "
#: Header names the email package parses by their own grammar (a client may set Orig-Date).
_STRUCTURED = frozenset(HeaderRegistry().registry)  # the policy's own, as policy.SMTP makes it


def _by_email_package(name: str, value: str) -> str:
    """The field exactly as the ``email`` package writes it (its folding and encoding)."""
    return _POLICY.header_factory(name, value).fold(policy=_POLICY)


def _fold(name: str, value: str) -> str | None:
    """
    ``Name: value`` with CRLF, folded before spaces so that lines keep to 78 characters where
    a word allows it (unfolding gives ``value`` back); None when the value starts or ends with
    a space or a line would pass 998.
    """
    if len(name) + 2 + len(value) <= _MAX:
        return f"{name}: {value}\r\n"
    words = value.split(" ")
    if not words[0] or not words[-1]:
        return None
    if "" in words:  # a run of spaces stays in front of the word that follows it
        merged: list[str] = []
        run = ""
        for word in words:
            if word:
                merged.append(run + word)
                run = ""
            else:
                run += " "
        words = merged
    lines = []
    line = name + ":"
    bare = True
    for word in words:
        if not bare and len(line) + 1 + len(word) > _MAX:
            lines.append(line)
            line = " " + word
        else:
            line += " " + word
            bare = False
    lines.append(line)
    if any(len(line) > _HARD_MAX for line in lines):
        return None
    return "\r\n".join(lines) + "\r\n"


def _encoded_words(text: str, room: int) -> list[str]:
    """
    ``text`` as RFC 2047 encoded words in UTF-8 ("Q" or "B", whichever is shorter), each at
    most ``room`` (≤ 75) characters and holding whole characters, to be joined by spaces: a
    reader drops the space between two encoded words, so the words decode to ``text`` exactly.
    """
    data = text.encode("utf-8")
    q_size = _q_size(data)
    b_size = (len(data) + 2) // 3 * 4
    kind = "b" if b_size < q_size else "q"
    payload_room = room - 12  # =?utf-8?q? ... ?=
    if min(q_size, b_size) <= payload_room:
        return [_encoded_word(kind, data)]
    words = []
    chunk = bytearray()
    size = 0
    limit = payload_room // 4 * 3 if kind == "b" else payload_room
    for char in text:
        encoded = char.encode("utf-8")
        cost = len(encoded) if kind == "b" else _q_size(encoded)
        if size + cost > limit and chunk:
            words.append(_encoded_word(kind, bytes(chunk)))
            chunk.clear()
            size = 0
        chunk += encoded
        size += cost
    if chunk:
        words.append(_encoded_word(kind, bytes(chunk)))
    return words


def _q_size(data: bytes) -> int:
    """The length of ``data`` in a "Q" encoded word."""
    return len(data) + 2 * len(data.translate(None, _Q_ONE_CHAR))


def _encoded_word(kind: str, data: bytes) -> str:
    if kind == "b":
        return f"=?utf-8?b?{base64.b64encode(data).decode('ascii')}?="
    return f"=?utf-8?q?{''.join([_Q_TABLE[b] for b in data])}?="


def _word_room(name: str) -> int:
    return max(min(75, _MAX - len(name) - 2), 24)


def _unstructured(name: str, value: str) -> str:
    """A field of free text (Subject, a client's own header)."""
    if value.isascii():
        if _PLAIN.match(value) and "=?" not in value:
            folded = _fold(name, value)
            if folded is not None:
                return folded
        return _by_email_package(name, value)
    return _fold(name, " ".join(_encoded_words(value, _word_room(name)))) or _by_email_package(name, value)


def _address_list(name: str, mailboxes) -> str:
    """From, To, Cc, Reply-To: the addresses as ``Mailbox`` writes them, display names encoded."""
    items = []
    for mailbox in mailboxes:
        display = mailbox.display_name
        if not display:
            items.append(mailbox.address)
            continue
        if display.isascii():
            item = str(mailbox)
            if not _PLAIN.match(item) or "=?" in item:
                break
            items.append(item)
            continue
        if not is_dot_atom(mailbox.address.rpartition("@")[0]):
            break
        items.append(" ".join(_encoded_words(display, _word_room(name))) + f" <{mailbox.address}>")
    else:
        folded = _fold(name, ", ".join(items))
        if folded is not None:
            return folded
    return _by_email_package(name, ", ".join(str(m) for m in mailboxes))


def _param_field(name: str, value: str, param: str, text: str | None) -> str:
    """``Name: value; param="text"`` as ``Message.set_param`` makes it (RFC 2231 when not ASCII)."""
    if not text:
        return f"{name}: {value}\r\n" if len(name) + 2 + len(value) <= _MAX else _by_email_package(name, value)
    if text.isascii():
        if _PLAIN.match(text) and '"' not in text and "\\" not in text:
            line = f'{name}: {value}; {param}="{text}"'
            if len(line) <= _MAX:
                return line + "\r\n"
        return _by_email_package(name, f'{value}; {param}="{_quote_param(text)}"')
    return _by_email_package(name, f"{value}; {param}*={encode_rfc2231(text, 'utf-8', '')}")


# Parts: (header fields, body) as bytes; the body ends with CRLF unless it is empty


class _Boundaries:
    """
    Where a message's boundaries come from: with a ``seed`` (its e-mail's id), the same ones
    every time it is built (a hash of the seed and a counter: seeding a ``random.Random`` costs
    tens of microseconds), so that a retry sends the same bytes; the seed is no secret.
    """

    def __init__(self, seed: bytes | None):
        self._seed = seed
        self._drawn = 0

    def number(self) -> int:
        if self._seed is None:
            return random.randrange(sys.maxsize)
        self._drawn += 1
        digest = hashlib.blake2b(self._seed + self._drawn.to_bytes(4, "big"), digest_size=8).digest()
        return int.from_bytes(digest, "big") % sys.maxsize


def _boundary(boundaries: _Boundaries) -> str:
    # The email package's form: the Content-Type fields fold as they did.
    return f"==============={boundaries.number():019d}=="


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _date(date: datetime) -> str:
    """``format_datetime(date)``, written directly for UTC (the time of every message built)."""
    if date.utcoffset() != timedelta(0):
        return format_datetime(date)
    return (f"{_DAYS[date.weekday()]}, {date.day:02d} {_MONTHS[date.month - 1]} {date.year:04d}"
            f" {date.hour:02d}:{date.minute:02d}:{date.second:02d} +0000")


def _text_part(text: str, subtype: str) -> tuple[bytes, bytes]:
    """A text part as ``set_content(text, subtype, charset="utf-8")`` encodes it."""
    lines = text.encode("utf-8").splitlines()
    if max(map(len, lines), default=0) <= _MAX:
        body = b"\r\n".join(lines) + b"\r\n"
        cte = "7bit" if body.isascii() else "8bit"
    else:
        # The shorter of quoted-printable and base64, judged on the first ten lines as the
        # email package does (its encoder, in Python, made the same choice more slowly).
        sniff_qp = binascii.b2a_qp(b"\n".join(lines[:10]) + b"\n")
        if len(sniff_qp) > len(binascii.b2a_base64(b"\r\n".join(lines[:10]) + b"\r\n")):
            cte = "base64"
            body = base64.encodebytes(b"\r\n".join(lines) + b"\r\n").replace(b"\n", b"\r\n")
        else:
            cte = "quoted-printable"
            encoded = sniff_qp if len(lines) <= 10 else binascii.b2a_qp(b"\n".join(lines) + b"\n")
            body = encoded.replace(b"\n", b"\r\n")
    head = f'Content-Type: text/{subtype}; charset="utf-8"\r\nContent-Transfer-Encoding: {cte}\r\n'
    return head.encode("ascii"), body


def _binary_part(filename: str | None, content: bytes, content_type: str,
                 content_id: str | None) -> tuple[bytes, bytes]:
    """An attachment (inline when it has a Content-ID) in base64."""
    if not _MEDIA_TYPE.match(content_type) or content_type.partition("/")[0].lower() in ("multipart", "message"):
        raise _Unusual(content_type)
    fields = [f"Content-Type: {content_type}\r\n", "Content-Transfer-Encoding: base64\r\n",
              _param_field("Content-Disposition", "inline" if content_id is not None else "attachment",
                           "filename", filename)]
    if content_id is not None:
        fields.append(_unstructured("Content-ID", f"<{content_id}>"))
    body = base64.encodebytes(content).replace(b"\n", b"\r\n")
    return "".join(fields).encode("ascii"), body


def _multipart(subtype: str, parts: list[tuple[bytes, bytes]], boundaries: _Boundaries) -> tuple[bytes, bytes]:
    texts = [head + b"\r\n" + body for head, body in parts]
    while True:
        boundary = _boundary(boundaries)
        marker = f"--{boundary}".encode("ascii")
        if not any(marker in text for text in texts):
            break
    body = marker + b"\r\n" + (b"\r\n" + marker + b"\r\n").join(texts) + b"\r\n" + marker + b"--\r\n"
    field = f'Content-Type: multipart/{subtype}; boundary="{boundary}"'
    if len(field) > _MAX:
        field = f'Content-Type: multipart/{subtype};\r\n boundary="{boundary}"'
    return (field + "\r\n").encode("ascii"), body


def build(
    submission: Submission,
    *,
    message_id: str,
    date: datetime,
    attachments: Sequence[tuple[str | None, bytes, str, str | None]] = (),
    seed: bytes | None = None,
) -> bytes:
    """
    The RFC 5322 message. ``attachments`` are (filename, content, content_type, content_id) with
    their content already fetched; Bcc never appears in the headers. The same ``seed`` gives the
    same MIME boundaries, so the same inputs give the same bytes.
    """
    try:
        return _build(submission, message_id, date, attachments, _Boundaries(seed))
    except (_Unusual, UnicodeError):
        # Not a shape written here (or text that is no valid Unicode): the email package
        # decides, as it always did.
        return build_with_email_package(submission, message_id=message_id, date=date, attachments=attachments,
                                        seed=seed)


def _build(submission: Submission, message_id: str, date: datetime, attachments, boundaries: _Boundaries) -> bytes:
    fields = [_address_list("From", (submission.sender,)), _address_list("To", submission.to)]
    if submission.cc:
        fields.append(_address_list("Cc", submission.cc))
    if submission.reply_to:
        fields.append(_address_list("Reply-To", submission.reply_to))
    fields.append(_unstructured("Subject", submission.subject))
    fields.append(f"Date: {_date(date)}\r\n")
    fields.append((_PLAIN.match(message_id) and _fold("Message-ID", message_id))
                  or _by_email_package("Message-ID", message_id))
    for name, value in submission.headers:
        lower = name.lower()
        if lower in _STRUCTURED or lower.startswith("content-"):
            # The email package parses these by their grammar, or moves them into the first
            # part of a multipart message.
            raise _Unusual(name)
        fields.append(_unstructured(name, value))

    text = submission.text
    if text is None and submission.html:
        text = text_from_html(submission.html)
    alternatives = None
    if text:
        content = _text_part(text, "plain")
        if submission.html:
            html_part = _text_part(submission.html, "html")
            alternatives = [content, html_part]
    else:
        html_part = content = _text_part(submission.html or "", "html")

    inline = [_binary_part(*a) for a in attachments if a[3] is not None]
    regular = [_binary_part(*a) for a in attachments if a[3] is None]
    if inline:
        if alternatives is not None:
            alternatives[1] = _multipart("related", [html_part, *inline], boundaries)
        else:
            content = _multipart("related", [content, *inline], boundaries)
    if alternatives is not None:
        content = _multipart("alternative", alternatives, boundaries)
    if regular:
        content = _multipart("mixed", [content, *regular], boundaries)

    head, body = content
    if alternatives is None and not inline and not regular:
        # A single part: its fields first, MIME-Version last (the email package's order).
        top = "".join(fields).encode("ascii") + head + b"MIME-Version: 1.0\r\n"
    else:
        top = "".join(fields).encode("ascii") + b"MIME-Version: 1.0\r\n" + head
    return top + b"\r\n" + body


def part_count(submission: Submission, attachments: Sequence[tuple[str | None, bytes, str, str | None]] = ()) -> int:
    """
    At least the number of MIME parts (the message itself included) ``build`` makes: the text
    and html parts and their ``multipart/alternative``, the inline attachments and their
    ``multipart/related``, the others and their ``multipart/mixed``.
    """
    inline = sum(1 for a in attachments if a[3] is not None)
    regular = len(attachments) - inline
    both = bool(submission.html) and (submission.text is None or bool(submission.text))
    return (3 if both else 1) + (inline + 1 if inline else 0) + (regular + 1 if regular else 0)


def size_bound(submission: Submission, attachments: Sequence[tuple[str | None, bytes, str, str | None]] = ()) -> int:
    """
    At least the size of the message ``build`` makes (with any Message-ID and unsubscribe link
    of usual length): a check against a limit that needs no build. A body grows at most threefold
    (quoted-printable), a text derived from the html is no longer than twice it, base64 takes 4
    bytes for 3 and a line break for 76, a header field at most four times its text.
    """
    html = len(submission.html.encode("utf-8", "surrogatepass")) if submission.html else 0
    text = len(submission.text.encode("utf-8", "surrogatepass")) if submission.text is not None else 2 * html
    fields = [submission.subject, *(str(m) for m in (submission.sender, *submission.to, *submission.cc,
                                                        *submission.reply_to))]
    fields += [name + value for name, value in submission.headers]
    header = sum(4 * len(f.encode("utf-8", "surrogatepass")) + 16 for f in fields)
    encoded = sum((len(a[1]) + 2) // 3 * 4 * 78 // 76 + 4 * len(a[0] or "") + 512 for a in attachments)
    return 4096 + header + 3 * (html + text) + 2 * 80 * ((html + text) // 76 + 2) + encoded


def build_with_email_package(
    submission: Submission,
    *,
    message_id: str,
    date: datetime,
    attachments: Sequence[tuple[str | None, bytes, str, str | None]] = (),
    seed: bytes | None = None,
) -> bytes:
    """``build`` by Python's ``email`` package (the SMTP policy): the reference, and the fallback."""
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
        html_part: MIMEPart = message
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
    boundaries = _Boundaries(seed)
    for part in message.walk():
        if part is not message:
            del part["MIME-Version"]  # only the top-level entity carries it
        if part.is_multipart():
            part.set_boundary(_boundary(boundaries))
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
    fields: list[list[bytes]] = []  # each field's lines, joined once: a long folded field stays linear
    for line in head.split(b"\r\n"):
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1].append(line)
        elif line:
            fields.append([line])
    return [b"\r\n".join(lines) for lines in fields], body


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
