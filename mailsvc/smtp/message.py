"""
The submission a message submitted over SMTP asks for. The envelope decides who receives: the
``To`` and ``Cc`` headers only sort the envelope recipients they name into ``to`` and ``cc``
(the others are ``bcc``); an address named only in a header receives nothing. The rest is read
from the message's own headers, of which ``From`` must occur once. The header section is read
here, line by line (``header_fields``), so that the fields checked are those a receiver reads;
the common shapes of values and bodies are read without the ``email`` package's full parser,
which gives the same result more slowly.
"""

from __future__ import annotations

import base64
import binascii
import quopri
import re
from email import policy
from email.parser import BytesParser

from mailsvc.domain.email import Submission
from mailsvc.domain.errors import Invalid, NotAllowed, OverMimeLimit
from mailsvc.domain.headers import MAX_RECIPIENTS, Mailbox, parse_mailbox, parse_mailboxes, simple_mailbox
from mailsvc.mail.limits import MimeLimits, exceeded

#: ``Content-Type`` of a single text part with simple parameters (read without the parser).
_TEXT_TYPE = re.compile(
    r"text/(plain|html)"
    r"((?:\s*;\s*[A-Za-z0-9_.-]+\s*=\s*(?:\"[^\"\\\r\n]*\"|[A-Za-z0-9!#$%&'*+.^_`{|}~-]+))*)\s*;?\Z",
    re.I,
)
_PARAM = re.compile(r";\s*([A-Za-z0-9_.-]+)\s*=\s*(?:\"([^\"]*)\"|([^\s;]+))")
_TOKEN = re.compile(r"[A-Za-z0-9-]+\Z")
#: The header fields read for the submission, together: the ``email`` package's header parser
#: grows faster than its input (an 880 KB Subject of encoded words took 63 s, 30,000 quoted
#: addresses 20 s) and runs on the reactor; 32 KiB of them take well under a second.
MAX_READ_HEADER_BYTES = 32 * 1024
_READ_HEADERS = ("from", "sender", "to", "cc", "subject")
#: A header value read without the parser: printable ASCII, no encoded words, no quoting or
#: comments (the parser gives the same text and addresses for these).
_PLAIN_VALUE = re.compile(r"[\x20-\x7e\t]*\Z")


#: The first line of a header field (RFC 5322 §3.6.8): a name of printable ASCII but the colon,
#: the colon right after it (no white space before it, the obsolete syntax a receiver may read
#: otherwise).
_FIELD_START = re.compile(rb"[\x21-\x39\x3b-\x7e]+:")


#: A control character other than TAB, CR and LF (CR and LF are read as line breaks below): a
#: reader splitting lines as ``str.splitlines`` does breaks a line at VT, FF and FS-US.
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: NEL (U+0085), LINE SEPARATOR (U+2028) and PARAGRAPH SEPARATOR (U+2029) in UTF-8, where
#: ``str.splitlines`` breaks a line too. The code points, not the byte 0x85 alone: that is the
#: second byte of many letters (``х`` is D1 85, ``Å`` C3 85).
_UNICODE_BREAK = re.compile(rb"\xc2\x85|\xe2\x80[\xa8\xa9]")


def check_structure(raw: bytes, limits: MimeLimits) -> None:
    """
    Refuses a message with more MIME structure than ``limits`` allow (parts, nesting, header
    fields and bytes of every part), counted in one scan before anything parses it: the
    ``email`` package's parser recurses into nested parts and takes seconds over many.
    """
    over = exceeded(raw, limits)
    if over is not None:
        raise OverMimeLimit("message", f"message: {over.message}", over.setting)


def header_fields(raw: bytes) -> dict[str, list[str]]:
    """
    Each header field's values (by lower-case name, in order), unfolded, as read line by line
    with RFC 5322's grammar: the header section ends at the first empty line, each line before it
    starts a field or continues one. Anything else refuses the message, so that what is checked
    here is what every receiver reads, and what is stored and signed (``mime.resubmitted`` and
    ``dkim.sign`` split the header section the same way): a ``Name :`` line, which the
    ``email`` package drops or takes for the start of the body while a receiver may read it as
    a field; a line of white space only, which some readers take for the end of the header
    section; a bare CR or LF (the listener makes each a line break, but the reader does not
    rely on it).
    """
    if raw.startswith(b"\r\n"):
        raise Invalid("headers", "headers: the message starts with an empty line (no header section)")
    head = raw.partition(b"\r\n\r\n")[0]
    control = _CONTROL.search(head)
    if control is not None:
        number = head.count(b"\r\n", 0, control.start()) + 1
        raise Invalid("headers", f"headers: line {number} of the header section holds a control character"
                                 f" (0x{head[control.start()]:02x}), which some receivers take for a line break")
    breaking = _UNICODE_BREAK.search(head)
    break_line = head.count(b"\r\n", 0, breaking.start()) + 1 if breaking is not None else 0
    read: list[tuple[str, list[str]]] = []  # each field's pieces, joined once (no quadratic +=)
    for number, line in enumerate(head.split(b"\r\n"), 1):
        if b"\r" in line or b"\n" in line:
            raise Invalid("headers", f"headers: line {number} of the header section holds a bare CR or LF")
        if line[:1] in (b" ", b"\t"):
            if not read:
                raise Invalid("headers", "headers: the message starts with a continuation line (white space"
                                         " first), not a header field")
            if not line.strip(b" \t"):
                raise Invalid("headers", f"headers: line {number} of the header section is white space only")
            if breaking is not None and number == break_line:
                _refuse_break(read[-1][0], breaking.group())
            read[-1][1].append(line.decode("ascii", "surrogateescape"))
            continue
        if not line:
            break  # the CRLF that ends a message without a body
        found = _FIELD_START.match(line)
        if found is None:
            raise Invalid("headers", f"headers: line {number} of the header section is not a header field"
                                     f" (Name: value, no white space in the name or before the colon):"
                                     f" {_shown(line)}")
        name = line[:found.end() - 1].decode("ascii").lower()
        if breaking is not None and number == break_line:
            _refuse_break(name, breaking.group())
        read.append((name, [line[found.end():].decode("ascii", "surrogateescape").lstrip(" \t")]))
    fields: dict[str, list[str]] = {}
    for name, pieces in read:
        fields.setdefault(name, []).append("".join(pieces))
    return fields


def _refuse_break(name: str, found: bytes) -> None:
    raise Invalid("headers", f"headers: the {name.title()} header holds U+{ord(found.decode()):04X}, a line break"
                             " for some receivers")


def _shown(line: bytes) -> str:
    """The start of a refused line, printable, for the reply."""
    text = line[:40].decode("ascii", "replace")
    return "".join(c if " " <= c <= "~" else "?" for c in text) + ("..." if len(line) > 40 else "")


def _check_read_size(fields: dict[str, list[str]]) -> None:
    size = sum(len(value) for name in _READ_HEADERS for value in fields.get(name, ()))
    if size > MAX_READ_HEADER_BYTES:
        raise Invalid("headers", f"headers: From, Sender, To, Cc and Subject exceed {MAX_READ_HEADER_BYTES // 1024}"
                                 " KiB together")


def _plain(value: str) -> bool:
    return "=?" not in value and _PLAIN_VALUE.match(value) is not None


def _text(value: str) -> str:
    """
    A value of ``header_fields`` as text for ``parse_mailbox``, the one reading of a mailbox:
    its 8-bit bytes read as UTF-8 (RFC 6532), as the ``email`` package reads them.
    """
    if value.isascii():
        return value
    return value.encode("ascii", "surrogateescape").decode("utf-8", "replace")


def _simple_addresses(value: str) -> list[Mailbox] | None:
    """``a@b, Name <c@d>, <e@f>`` (no quoting, comments or groups), or None."""
    if not _plain(value) or any(c in value for c in "\"():;\\"):
        return None
    found = []
    for item in value.split(","):
        item = item.strip(" \t")
        if item.startswith("<") and item.endswith(">"):
            item = item[1:-1]
        mailbox = simple_mailbox(item)
        if mailbox is None:
            return None
        found.append(mailbox)
    return found


def _text_body(raw: bytes, fields: dict[str, list[str]]) -> tuple[str | None, str | None] | None:
    """(html, text) of a message that is one text part, decoded as ``get_content`` does; else None."""
    if "content-disposition" in fields:
        return None
    types = fields.get("content-type")
    if types is None:
        subtype, params = "plain", ""
    else:
        found = _TEXT_TYPE.match(types[0]) if _plain(types[0]) else None
        if found is None:
            return None
        subtype, params = found.group(1).lower(), found.group(2)
    charsets = [p.group(2) if p.group(2) is not None else p.group(3)
                for p in _PARAM.finditer(params) if p.group(1).lower() == "charset"]
    if len(charsets) > 1:
        return None
    encodings = fields.get("content-transfer-encoding", [""])
    encoding = encodings[0]
    if encoding and not _TOKEN.match(encoding):
        return None
    if encoding.lower() in ("x-uuencode", "uuencode", "uue", "x-uue"):
        return None
    # The body decoded as the parser's message would decode it, for a plain token (the header
    # section it reads is the one read here: header_fields refused any line it reads otherwise).
    data: object = decoded_body(raw, encoding)
    if data is None:
        data = BytesParser(policy=policy.compat32).parsebytes(raw).get_payload(decode=True)
    if not isinstance(data, bytes):  # bytes for a message that is not multipart, as this one is
        return None
    content = data.decode(charsets[0] if charsets else "ASCII", errors="replace").replace("\r\n", "\n")
    return (content, None) if subtype == "html" else (None, content)


def decoded_body(raw: bytes, encoding: str) -> bytes | None:
    """
    The body of a message of one part whose ``Content-Transfer-Encoding`` (its first, as read by
    ``header_fields``) is ``encoding``, decoded exactly as the ``email`` package's ``compat32``
    parser and ``get_payload(decode=True)`` decode it, without parsing the message; None where
    this does not read it as they do (the caller parses then). Exactly equivalent, because for
    a header section ``header_fields`` accepts (every line a field or a continuation, no bare CR
    or LF, ending at the first empty line) the parser's payload is the bytes after the first
    CRLF CRLF unchanged (its text is their ``surrogateescape`` decoding, and ``get_payload``
    encodes it back); then ``get_payload`` takes ``quoted-printable`` through
    ``quopri.decodestring``, ``base64`` through ``base64.b64decode(validate=True)`` of the lines
    joined when their length is a multiple of 4 (its first attempt; any other length or
    character goes to the parser, which tries more), and returns the bytes as they are for any
    other encoding (7bit, 8bit, binary, none, or one it does not know) but the uuencode ones,
    which go to the parser. ``tests/unit/test_mime_fast_intake.py`` compares both readings.
    """
    if not _TOKEN.match(encoding) and encoding:
        return None
    _, separator, body = raw.partition(b"\r\n\r\n")
    if not separator:
        return None
    kind = encoding.lower()
    if kind == "quoted-printable":
        return quopri.decodestring(body)
    if kind == "base64":
        joined = b"".join(body.splitlines())
        if len(joined) % 4:
            return None
        try:
            return base64.b64decode(joined, validate=True)
        except binascii.Error:
            return None
    if kind in ("x-uuencode", "uuencode", "uue", "x-uue"):
        return None
    return body


def submission_from_message(raw: bytes, envelope_recipients: list[str],
                            fields: dict[str, list[str]] | None = None) -> Submission:
    """
    The submission a message asks for. Its header fields are ``header_fields(raw)`` (``fields``,
    when the caller has them); the common shapes (plain header values, one text part) are read
    without the ``email`` package's full parser, anything else through it, header by header or
    for the bodies.
    """
    if fields is None:
        fields = header_fields(raw)
    _check_read_size(fields)
    # Every header is read (a malformed one refuses the message) before any is judged.
    to_found, cc_found = _addresses(fields, "To"), _addresses(fields, "Cc")
    subject = _subject(fields)
    senders = fields.get("from")
    if not senders:
        raise Invalid("from", "from: the message has no From header")
    if len(senders) > 1:
        raise Invalid("from", "from: the message has more than one From header")
    sender = parse_mailbox("from", _text(senders[0]))
    to, cc, bcc = envelope_split(envelope_recipients, tuple(parse_mailbox("to", t) for t in to_found),
                                 tuple(parse_mailbox("cc", c) for c in cc_found))
    html, text = _bodies(raw, fields)
    submission = Submission(sender=sender, to=to, cc=cc, bcc=bcc, subject=subject, html=html, text=text)
    check_storable(submission)
    return submission


def _parsed_header(name: str, value: str):
    try:
        return policy.default.header_fetch_parse(name, value)
    except Exception:
        raise Invalid("headers", "headers: the message headers cannot be parsed") from None


def _addresses(fields: dict[str, list[str]], name: str) -> list[str]:
    """The addresses the ``name`` headers hold, as text (each read without the parser if it can be)."""
    found = []
    for value in fields.get(name.lower(), ()):
        simple = _simple_addresses(value)
        if simple is not None:
            found += [str(m) for m in simple]
            continue
        for address in getattr(_parsed_header(name, value), "addresses", ()):
            found.append(str(address))
    return found


def _subject(fields: dict[str, list[str]]) -> str:
    """The first Subject header's text (encoded words decoded), without a line break of any kind."""
    subjects = fields.get("subject")
    if not subjects:
        subject = ""
    elif _plain(subjects[0]):
        subject = subjects[0]
    else:
        subject = str(_parsed_header("Subject", subjects[0]))
    breaking = re.search("[\x85\u2028\u2029]", subject)
    if breaking is not None:  # from an encoded word; the raw ones header_fields refused
        raise Invalid("subject", f"subject: the Subject header holds U+{ord(breaking.group()):04X}, a line break"
                                 " for some receivers")
    return subject


def _bodies(raw: bytes, fields: dict[str, list[str]]) -> tuple[str | None, str | None]:
    """(html, text) of the message: read without the parser for one text part, else through it."""
    try:
        bodies = _text_body(raw, fields)
    except (LookupError, ValueError):
        bodies = (None, None)  # an unknown charset: stored as submitted, shown without bodies
    if bodies is None:
        bodies = bodies_by_email_package(raw)
    html, text = bodies
    if text is None and html:
        text = ""  # the client sent no plain part: none is generated
    return html, text


def envelope_split(envelope_recipients: list[str], to: tuple[Mailbox, ...], cc: tuple[Mailbox, ...]
                   ) -> tuple[tuple[Mailbox, ...], tuple[Mailbox, ...], tuple[Mailbox, ...]]:
    """
    (to, cc, bcc) of the envelope recipients: those the To or Cc header names (with the
    header's display name), then the others. A header address outside the envelope is dropped.
    """
    envelope = {r.lower() for r in envelope_recipients}
    if len(envelope) > MAX_RECIPIENTS:
        raise Invalid("to", f"to: at most {MAX_RECIPIENTS} unique recipients")
    to = tuple(m for m in to if m.address.lower() in envelope)
    cc = tuple(m for m in cc if m.address.lower() in envelope)
    named = {m.address.lower() for m in (*to, *cc)}
    return to, cc, parse_mailboxes("bcc", [r for r in envelope_recipients if r.lower() not in named])


def check_storable(submission: Submission) -> None:
    """
    Refuses text PostgreSQL cannot store: a NUL, which a message can still carry once decoded
    (an encoded word, a base64 body), or a lone surrogate.
    """
    for field, value in (("subject", submission.subject), ("html", submission.html), ("text", submission.text)):
        if value and ("\x00" in value or not value.isascii() and _has_surrogate(value)):
            raise Invalid(field, f"{field}: the message's {field} holds a NUL character or a lone surrogate")


def _has_surrogate(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def sender_header(fields: dict[str, list[str]]) -> Mailbox | None:
    """
    The mailbox the ``Sender`` header of ``header_fields`` names (at most one header, one
    mailbox), which must be on a verified domain of the account like ``From``'s. A ``Resent-*``
    header, whatever its domain, is refused: it claims a resending identity that nothing here
    checks, and a submission is a new message.
    """
    _check_read_size(fields)
    resent = sorted(name for name in fields if name.startswith("resent-"))
    if resent:
        raise NotAllowed(f"Resent-* headers are not accepted ({resent[0].title()}); submit the message as a new one.")
    values = fields.get("sender")
    if not values:
        return None
    if len(values) > 1:
        raise Invalid("sender", "sender: the message has more than one Sender header")
    return parse_mailbox("sender", _text(values[0]))


def bodies_by_email_package(raw: bytes) -> tuple[str | None, str | None]:
    """(html, text) as the email package reads them: the reading of the messages the intake's
    own reader leaves (``None`` from it), and the reference that reader is checked against."""
    message = BytesParser(policy=policy.default).parsebytes(raw)
    html = text = None
    try:
        html_part = message.get_body(("html",))
        text_part = message.get_body(("plain",))
        # Shown through the API as JSON strings: with plain newlines, as POST /emails stores them.
        html = html_part.get_content().replace("\r\n", "\n") if html_part is not None else None
        text = text_part.get_content().replace("\r\n", "\n") if text_part is not None else None
    except (LookupError, ValueError, AssertionError):
        pass  # an unusual structure: stored as submitted, shown without bodies
    return html, text
