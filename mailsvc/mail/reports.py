"""
Reports that come back on the return path: delivery status notifications (RFC 3464) and abuse
feedback reports (RFC 5965, ARF). Pure parsing, no I/O: ``parse(bytes)`` answers a
:class:`DeliveryReport`, a :class:`FeedbackReport`, or None for anything else; it never raises.
It reads tolerantly, as real senders bend the rules (bare LF, folded or any-case fields, vendor
extras, a missing ``report-type``, one ``multipart/mixed`` wrapper, redacted recipients).
The port is open to anyone and this runs on the reactor thread, so only a message's head is
read (``MAX_REPORT_BYTES``, ``MAX_PART_DELIMITERS``); the machine-readable part comes before
the original, so a cut only shortens the original.
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import itertools
import quopri
import re
from email import message_from_bytes
from email.message import Message
from email.parser import BytesHeaderParser
from email.policy import compat32

import attrs

# Statuses are class.subject.detail, where subject and detail may have up to three digits
# (Exchange's 5.1.10, 5.4.316).
_STATUS = re.compile(r"\b([245])\.(\d{1,3})\.(\d{1,3})\b")
_SMTP_CODE = re.compile(r"^\s*([2-5]\d\d)(?:[ \-]|$)")
_TYPED = re.compile(r"^\s*[A-Za-z0-9][A-Za-z0-9.+\-]*\s*;\s*")
_FOLD = re.compile(r"\r?\n[ \t]+")
_SPACE = re.compile(r"[ \t]+")
_ORIGINAL_TYPES = ("message/rfc822", "text/rfc822-headers", "message/global", "message/global-headers")
_DEPTH = 8

#: What is read of a message at most: parsing takes about 16 ms per MiB of plain text, and a
#: report with its original's headers is a few KiB.
MAX_REPORT_BYTES = 128 * 1024
#: Part delimiter lines read at most (a report and a returned original with attachments need
#: about 10); 64 parse within a few milliseconds, however they are nested.
MAX_PART_DELIMITERS = 64
_DELIMITER = re.compile(rb"^--", re.M)

#: Feedback types that mean "a person reported this message" (RFC 5965 and the IANA registry);
#: ``not-spam`` and ``auth-failure`` (RFC 6591) are reports too, but not complaints.
COMPLAINT_TYPES = frozenset({"abuse", "fraud", "other", "virus"})


@attrs.frozen
class DsnRecipient:
    """One per-recipient block of a delivery status notification."""

    final_recipient: str | None
    original_recipient: str | None = None
    action: str | None = None  # failed, delayed, delivered, relayed, expanded (lower-case)
    status: str | None = None  # "5.1.1"
    diagnostic_code: str | None = None  # text after the diagnostic type ("smtp; ")
    diagnostic_type: str | None = None  # "smtp", "x-postfix", ...
    remote_mta: str | None = None  # text after the MTA type ("dns; ")

    @property
    def smtp_code(self) -> int | None:
        """The SMTP reply code: from an SMTP diagnostic when it has one, else from the status class."""
        if self.diagnostic_code:
            match = _SMTP_CODE.match(self.diagnostic_code)
            if match:
                return int(match.group(1))
        if self.status:
            return {"2": 250, "4": 450, "5": 550}[self.status[0]]
        return None

    @property
    def enhanced_code(self) -> str | None:
        """
        The status, or the more specific enhanced code of the remote server's reply when the
        reporting MTA only said ``X.0.0`` (Exim reports 5.0.0 for a remote "550 5.1.1").
        """
        if self.diagnostic_code:
            match = _STATUS.search(self.diagnostic_code[:40])
            if match and (self.status is None or (self.status.endswith(".0.0") and self.status[0] == match.group(1))):
                return match.group(0)
        return self.status

    @property
    def is_permanent(self) -> bool:
        """A hard bounce: the action is ``failed`` with a 5.x.x status (or, without a status, a 5xx reply)."""
        if self.action != "failed":
            return False
        if self.status:
            return self.status.startswith("5")
        code = self.smtp_code
        return code is not None and code >= 500


@attrs.frozen
class DeliveryReport:
    """An RFC 3464 delivery status notification."""

    reporting_mta: str | None
    original_envelope_id: str | None
    recipients: tuple[DsnRecipient, ...]
    original_message_id: str | None = None

    @property
    def permanent_failures(self) -> tuple[DsnRecipient, ...]:
        return tuple(r for r in self.recipients if r.is_permanent)


@attrs.frozen
class FeedbackReport:
    """An RFC 5965 abuse feedback report (a spam complaint, from a feedback loop)."""

    feedback_type: str  # abuse, fraud, other, virus, not-spam, auth-failure (lower-case)
    user_agent: str | None = None
    original_mail_from: str | None = None
    original_rcpt_to: tuple[str, ...] = ()
    arrival_date: str | None = None  # as written (Arrival-Date, or Yahoo's Received-Date)
    source_ip: str | None = None
    reported_domain: str | None = None
    original_message_id: str | None = None
    original_to: tuple[str, ...] = ()  # addresses in the To header of the enclosed original
    original_cc: tuple[str, ...] = ()  # and in its Cc header
    #: The enclosed original's Delivered-To and X-Original-To: the recipient's own MTA wrote them.
    original_delivered_to: tuple[str, ...] = ()
    original_return_path: str | None = None  # the enclosed original's Return-Path: our VERP address

    @property
    def is_complaint(self) -> bool:
        return self.feedback_type in COMPLAINT_TYPES


def parse(message: bytes) -> DeliveryReport | FeedbackReport | None:
    """The report in ``message``, or None when it is not a DSN or feedback report."""
    try:
        return parse_or_raise(message)
    except Exception:  # noqa: BLE001 - anything the outside world sends must not crash the listener
        return None


# Parsing


def parse_or_raise(raw: bytes) -> DeliveryReport | FeedbackReport | None:
    """``parse`` without its safety net: what reading the report raises is let through."""
    if not isinstance(raw, bytes | bytearray | memoryview) or not raw:
        return None
    msg = message_from_bytes(_head(bytes(raw)), policy=compat32)
    report = _find_report(msg, 0)
    if report is None:
        return None
    parts = report.get_payload()
    if not isinstance(parts, list):
        return None
    status_part: Message | None = None
    feedback_part: Message | None = None
    original: Message | None = None
    for part in parts:
        if not isinstance(part, Message):
            continue
        ctype = part.get_content_type()
        if ctype in ("message/delivery-status", "message/global-delivery-status") and status_part is None:
            status_part = part
        elif ctype == "message/feedback-report" and feedback_part is None:
            feedback_part = part
        elif ctype in _ORIGINAL_TYPES and original is None:
            original = part
    kind = (report.get_param("report-type", header="content-type") or "")
    kind = kind.lower() if isinstance(kind, str) else ""
    if feedback_part is not None and (kind == "feedback-report" or status_part is None):
        return _feedback(feedback_part, _original_headers(original))
    if status_part is not None:
        return _delivery(status_part, _original_headers(original))
    return None


def _head(raw: bytes) -> bytes:
    """The part of a message that is read (see the module's docstring)."""
    head = raw[:MAX_REPORT_BYTES]
    beyond = next(itertools.islice(_DELIMITER.finditer(head), MAX_PART_DELIMITERS, None), None)
    return head if beyond is None else head[:beyond.start()]


def _find_report(msg: Message, depth: int) -> Message | None:
    """The ``multipart/report`` at the top, or inside a ``multipart/*`` wrapper (never inside an enclosed message)."""
    if depth > _DEPTH or not msg.is_multipart():
        return None
    if msg.get_content_type() == "multipart/report":
        return msg
    if msg.get_content_maintype() != "multipart":
        return None
    for part in msg.get_payload():
        if not isinstance(part, Message):
            continue
        found = _find_report(part, depth + 1)
        if found is not None:
            return found
    return None


def _text(value) -> str:
    """A header value as clean text: unfolded, whitespace collapsed, stray bytes replaced."""
    if not isinstance(value, str):
        value = str(value)
    value = value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return _SPACE.sub(" ", _FOLD.sub(" ", value)).strip()


def _untyped(value: str | None) -> tuple[str | None, str | None]:
    """("rfc822", "a@b") from "rfc822; a@b"; a value with no type comes back with type None."""
    if value is None:
        return None, None
    match = _TYPED.match(value)
    if match is None:
        return None, value.strip() or None
    kind = match.group(0).split(";")[0].strip().lower()
    return kind, value[match.end():].strip() or None


def _address(value: str | None) -> str | None:
    _, text = _untyped(value)
    if not text:
        return None
    text = text.strip()
    if text.startswith("<") and ">" in text:
        text = text[1:text.index(">")]
    return text.strip() or None


def _field_blocks(part: Message) -> list[dict[str, list[str]]]:
    """The blocks of fields in a machine-readable part, each {lower-case name: [values]}."""
    payload = part.get_payload()
    if isinstance(payload, list):
        # The email package already split ``message/delivery-status`` into blocks (or parsed a
        # ``message/*`` body as one enclosed message): read their fields, and fields hiding in the body.
        blocks = []
        for sub in payload:
            if not isinstance(sub, Message):
                continue
            blocks.append(_fields(sub.items()))
            body = sub.get_payload()
            if isinstance(body, str) and body.strip():
                blocks.extend(_blocks_of_text(body))
        return blocks
    data = part.get_payload(decode=True)
    if not isinstance(data, bytes):
        return []
    return _blocks_of_text(data.decode("utf-8", "replace"))


def _blocks_of_text(text: str) -> list[dict[str, list[str]]]:
    blocks: list[dict[str, list[str]]] = []
    for chunk in re.split(r"\r?\n(?:[ \t]*\r?\n)+", text.replace("\r\r\n", "\r\n")):
        items: list[tuple[str, str]] = []
        for line in re.split(r"\r?\n", chunk):
            if not line.strip():
                continue
            if line[0] in " \t" and items:
                name, value = items[-1]
                items[-1] = (name, value + " " + line.strip())
                continue
            name, colon, value = line.partition(":")
            if colon and name.strip() and " " not in name.strip():
                items.append((name.strip(), value))
        if items:
            blocks.append(_fields(items))
    return blocks


def _fields(items) -> dict[str, list[str]]:
    fields: dict[str, list[str]] = {}
    for name, value in items:
        fields.setdefault(name.strip().lower(), []).append(_text(value))
    return fields


def _first(fields: dict[str, list[str]], *names: str) -> str | None:
    for name in names:
        for value in fields.get(name, ()):
            if value:
                return value
    return None


def _original_headers(part: Message | None) -> Message | None:
    """The headers of the enclosed original message, from ``message/rfc822`` or ``text/rfc822-headers``."""
    if part is None:
        return None
    payload = part.get_payload()
    cte = _text(part.get("content-transfer-encoding") or "").lower()
    if isinstance(payload, list) and payload and cte not in ("base64", "quoted-printable"):
        inner = payload[0]
        return inner if isinstance(inner, Message) else None
    if isinstance(payload, list):
        # A base64 / quoted-printable enclosed message was parsed as if it were plain: undo that.
        inner = payload[0] if payload else None
        text = inner.as_bytes() if isinstance(inner, Message) else b""
        data = _decode(text, cte)
    else:
        decoded = part.get_payload(decode=True)
        data = decoded if isinstance(decoded, bytes) else b""
    if not data.strip():
        return None
    return BytesHeaderParser(policy=compat32).parsebytes(data.lstrip(b"\r\n"))


def _decode(data: bytes, cte: str) -> bytes:
    if cte == "base64":
        try:
            return base64.b64decode(re.sub(rb"[^A-Za-z0-9+/=]", b"", data) + b"==", validate=False)
        except (binascii.Error, ValueError):
            return b""
    return quopri.decodestring(data)


def _message_id(headers: Message | None) -> str | None:
    if headers is None:
        return None
    value = headers.get("message-id")
    if value is None:
        return None
    return _bracketed(_text(value))


def _bracketed(value: str) -> str | None:
    """The ``<...>`` Message-ID in a field's text, else the text as written."""
    match = re.search(r"<[^<>\s]+>", value)
    return match.group(0) if match else (value or None)


def _addresses(values: list[str]) -> tuple[str, ...]:
    found = []
    for _, address in email.utils.getaddresses([_text(v) for v in values]):
        address = address.strip()
        if "@" in address and address not in found:
            found.append(address)
    return tuple(found)


def _one_line_reply(text: str) -> str:
    """A multi-line SMTP reply as one: "550-5.1.1 a 550-5.1.1 b 550 5.1.1 c" becomes "550 5.1.1 a b c"."""
    match = re.match(r"([2-5]\d\d)-((?:[245]\.\d{1,3}\.\d{1,3})?)\s*", text)
    if match is None:
        return text
    code, enhanced = match.group(1), match.group(2)
    prefix = re.escape(code) + r"[ \-]" + (r"(?:" + re.escape(enhanced) + r")?" if enhanced else "")
    rest = re.sub(r"\s+" + prefix + r"\s*", " ", text[match.end():])
    return " ".join(part for part in (code, enhanced, rest.strip()) if part)


def _delivery(part: Message, original: Message | None) -> DeliveryReport | None:
    blocks = _field_blocks(part)
    if not blocks:
        return None
    envelope: dict[str, list[str]] = {}
    recipients = []
    for fields in blocks:
        if "final-recipient" in fields or "original-recipient" in fields or "action" in fields:
            recipients.append(_recipient(fields))
        else:
            for name, values in fields.items():
                envelope.setdefault(name, []).extend(values)
    if not recipients:
        return None
    _, reporting_mta = _untyped(_first(envelope, "reporting-mta"))
    message_id = _message_id(original)
    if message_id is None:
        # Gmail names the original in a per-message field.
        message_id = _bracketed(_first(envelope, "x-original-message-id") or "")
    return DeliveryReport(
        reporting_mta=reporting_mta,
        original_envelope_id=_first(envelope, "original-envelope-id"),
        recipients=tuple(recipients),
        original_message_id=message_id,
    )


def _recipient(fields: dict[str, list[str]]) -> DsnRecipient:
    # "failed", also from "Failed" or "failed (bad recipient)"; unknown words are kept as written.
    action = (_first(fields, "action") or "").lower().split(" ")[0].strip("();,") or None
    status = None
    match = _STATUS.search(_first(fields, "status") or "")
    if match:
        status = match.group(0)
    diagnostic_type, diagnostic = _untyped(_first(fields, "diagnostic-code"))
    if diagnostic and diagnostic_type == "smtp":
        diagnostic = _one_line_reply(diagnostic)
    _, remote_mta = _untyped(_first(fields, "remote-mta"))
    return DsnRecipient(
        final_recipient=_address(_first(fields, "final-recipient")),
        original_recipient=_address(_first(fields, "original-recipient")),
        action=action,
        status=status,
        diagnostic_code=diagnostic,
        diagnostic_type=diagnostic_type,
        remote_mta=remote_mta,
    )


def _feedback(part: Message, original: Message | None) -> FeedbackReport:
    fields: dict[str, list[str]] = {}
    for block in _field_blocks(part):
        for name, values in block.items():
            fields.setdefault(name, []).extend(values)
    feedback_type = (_first(fields, "feedback-type") or "abuse").lower().split(" ")[0]
    rcpt_to = []
    for value in fields.get("original-rcpt-to", ()):
        address = _address(value)
        if address and "@" in address and address not in rcpt_to:
            rcpt_to.append(address)
    mail_from = _address(_first(fields, "original-mail-from"))
    return_path = None
    to: tuple[str, ...] = ()
    cc: tuple[str, ...] = ()
    delivered_to: tuple[str, ...] = ()
    if original is not None:
        values = original.get_all("return-path") or []
        for value in values:
            address = _address(_text(value))
            if address is not None:
                return_path = address
                break
        to = _addresses(original.get_all("to") or [])
        cc = _addresses(original.get_all("cc") or [])
        delivered_to = _addresses([*(original.get_all("delivered-to") or []),
                                   *(original.get_all("x-original-to") or [])])
    return FeedbackReport(
        feedback_type=feedback_type,
        user_agent=_first(fields, "user-agent"),
        original_mail_from=mail_from,
        original_rcpt_to=tuple(rcpt_to),
        arrival_date=_first(fields, "arrival-date", "received-date"),
        source_ip=_first(fields, "source-ip"),
        reported_domain=_first(fields, "reported-domain"),
        original_message_id=_message_id(original),
        original_to=to,
        original_cc=cc,
        original_delivered_to=delivered_to,
        original_return_path=return_path,
    )
