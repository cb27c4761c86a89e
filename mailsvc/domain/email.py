"""
A submission: what a client asks to send, validated. The same rules serve ``POST /emails``,
each item of a batch, and (through ``Submission`` directly) SMTP. The mailboxes and custom
headers are read by ``domain.headers``.
"""

from __future__ import annotations

import base64
import binascii
import html as html_escaping
import mimetypes
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import filetype

from mailsvc.domain import placeholders
from mailsvc.domain.errors import Invalid, InvalidAttachment
from mailsvc.domain.headers import (
    LIST_UNSUBSCRIBE_HEADERS,
    MAX_RECIPIENTS,
    Mailbox,
    custom_headers,
    parse_mailbox,
    parse_mailboxes,
)
from mailsvc.domain.text import holds_control, refuse_control

MAX_SUBJECT_BYTES = 998
MAX_ATTACHMENT_BYTES = 40 * 1024 * 1024
#: Counted before any item is read, so that a huge array costs nothing to refuse.
MAX_TAGS = 50
#: Each is fetched from outside while the request (and its idempotency claim) waits.
MAX_PATH_ATTACHMENTS = 10
#: Enough for any date phrase; natural-language parsing costs grow with the length.
MAX_SCHEDULE_CHARS = 256
SCHEDULE_HORIZON = timedelta(days=30)
STREAMS = ("transactional", "broadcast")
_TAG = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
#: Placeholders of the per-recipient unsubscribe link (ours and the vendor's alias).
UNSUBSCRIBE_KEYS = frozenset({"SVC_UNSUBSCRIBE_URL", "RESEND_UNSUBSCRIBE_URL"})

#: Refused by name: types that run when opened on common systems.
EXECUTABLE_EXTENSIONS = frozenset(
    "ade adp apk app appx bat cab chm cmd com cpl dll dmg exe hta inf ins isp iso jar js jse lib lnk "
    "mde msc msi msix msp mst nsh pif ps1 psm1 reg scr sct shb sys vb vbe vbs vxd wsc wsf wsh".split()
)
#: Refused by content, whatever the name says (sniffed with ``filetype``).
EXECUTABLE_TYPES = frozenset(
    {"application/x-msdownload", "application/x-executable", "application/x-mach-binary",
     "application/x-elf", "application/vnd.microsoft.portable-executable", "application/x-dosexec"}
)


@attrs.frozen
class Attachment:
    filename: str | None
    content: bytes | None  # None until a ``path`` was fetched
    path: str | None
    content_type: str
    content_id: str | None

    @property
    def inline(self) -> bool:
        return self.content_id is not None


@attrs.frozen
class Submission:
    sender: Mailbox
    to: tuple[Mailbox, ...]
    cc: tuple[Mailbox, ...] = ()
    bcc: tuple[Mailbox, ...] = ()
    reply_to: tuple[Mailbox, ...] = ()
    subject: str = ""
    html: str | None = None
    text: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    attachments: tuple[Attachment, ...] = ()
    tags: tuple[tuple[str, str], ...] = ()
    #: A phrase until the accept path has read it (``read_phrase``).
    scheduled_at: datetime | SchedulePhrase | None = None
    stream: str = "transactional"

    @property
    def recipients(self) -> tuple[str, ...]:
        """Unique envelope recipients across to, cc and bcc, first occurrence first."""
        seen: dict[str, str] = {}
        for mailbox in (*self.to, *self.cc, *self.bcc):
            seen.setdefault(mailbox.address.lower(), mailbox.address)
        return tuple(seen.values())


def _optional_string(body: dict, field: str) -> str | None:
    value = body.get(field)
    if value is not None and not isinstance(value, str):
        raise Invalid(field, f"{field} must be a string")
    if value:
        refuse_control(field, value)
    return value


def _tags(value: Any) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise Invalid("tags", "tags must be an array of {name, value} objects")
    if len(value) > MAX_TAGS:
        raise Invalid("tags", f"tags: at most {MAX_TAGS} tags")
    tags = []
    for tag in value:
        if not isinstance(tag, dict) or "name" not in tag or "value" not in tag:
            raise Invalid("tags", "tags: each tag needs a `name` and a `value`")
        for part in ("name", "value"):
            if not isinstance(tag[part], str) or not _TAG.match(tag[part]):
                raise Invalid(
                    "tags",
                    f"tags: the {part} `{str(tag[part])[:64]}` may only contain ASCII letters, numbers, "
                    "underscores or dashes and be 1 to 256 characters long",
                )
        tags.append((tag["name"], tag["value"]))
    return tuple(tags)


def decode_content(index: int, value: Any) -> bytes:
    """Attachment content as the SDKs send it: base64, a Node Buffer, or a list of bytes."""
    field = f"attachments[{index}].content"
    if isinstance(value, str):
        try:  # line breaks as MIME writes them are fine, anything else outside base64 is not
            return base64.b64decode("".join(value.split()), validate=True)
        except (binascii.Error, ValueError):
            raise Invalid("attachments", f"{field} must be base64") from None
    if isinstance(value, dict) and value.get("type") == "Buffer":
        value = value.get("data")
    if isinstance(value, list):
        try:
            return bytes(value)
        except (TypeError, ValueError):
            raise Invalid("attachments", f"{field} must be a list of byte values") from None
    raise Invalid("attachments", f"{field} must be a base64 string or a list of byte values")


def check_attachment_content(filename: str | None, content: bytes) -> None:
    """Refuse executables by name and by what the bytes are."""
    if filename:
        extension = filename.rpartition(".")[2].lower() if "." in filename else ""
        if extension in EXECUTABLE_EXTENSIONS:
            raise Invalid("attachments", f"attachments: `{filename}` is an executable file type, which is blocked")
    kind = filetype.guess(content[:8192])
    if kind is not None and kind.mime in EXECUTABLE_TYPES:
        raise Invalid("attachments", f"attachments: `{filename or 'attachment'}` is an executable, which is blocked")
    if content[:4] == b"\x7fELF" or content[:2] == b"MZ":
        raise Invalid("attachments", f"attachments: `{filename or 'attachment'}` is an executable, which is blocked")


def _attachments(value: Any) -> tuple[Attachment, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise Invalid("attachments", "attachments must be an array")
    fetched = sum(1 for item in value if isinstance(item, dict) and item.get("path") and not item.get("content"))
    if fetched > MAX_PATH_ATTACHMENTS:
        raise Invalid("attachments", f"attachments: at most {MAX_PATH_ATTACHMENTS} with a `path`")
    result = []
    total = 0
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise Invalid("attachments", f"attachments[{index}] must be an object")
        content, path = item.get("content"), item.get("path")
        if content in (None, "") and not path:
            raise InvalidAttachment("Attachment must have either a `content` or `path`.")
        filename = item.get("filename")
        if filename is False or filename == "":
            filename = None
        if path and not isinstance(path, str):
            raise Invalid("attachments", f"attachments[{index}].path must be a URL string")
        if path:
            refuse_control(f"attachments[{index}].path", path, line=True)
        if filename is None and path:
            filename = path.split("?", 1)[0].rstrip("/").rpartition("/")[2] or None
        if filename is not None and (not isinstance(filename, str) or "\r" in filename or "\n" in filename):
            raise Invalid("attachments", f"attachments[{index}].filename must be a string")
        if filename is not None:
            refuse_control(f"attachments[{index}].filename", filename, line=True)
        content_type = item.get("content_type") or item.get("contentType")
        if content_type is None:
            content_type = (mimetypes.guess_type(filename)[0] if filename else None) or "application/octet-stream"
        if not isinstance(content_type, str) or "/" not in content_type or "\n" in content_type:
            raise Invalid("attachments", f"attachments[{index}].content_type must be a MIME type")
        refuse_control(f"attachments[{index}].content_type", content_type, line=True)
        content_id = item.get("content_id") or item.get("inline_content_id")
        if content_id is not None and (not isinstance(content_id, str) or not content_id.strip()
                                       or any(c in content_id for c in "\r\n<> ")
                                       or holds_control(content_id, line=True)):
            raise Invalid("attachments", f"attachments[{index}].content_id must be a plain token")
        data = None
        if content not in (None, ""):
            data = decode_content(index, content)
            total += len(data)
            if total > MAX_ATTACHMENT_BYTES:
                raise Invalid("attachments", "attachments: the attachments exceed 40 MiB in total")
            check_attachment_content(filename, data)
            path = None
        result.append(Attachment(filename, data, path, content_type, content_id))
    return tuple(result)


@attrs.frozen
class SchedulePhrase:
    """A ``scheduled_at`` in natural language, still to be read (``read_phrase``, off the reactor)."""

    field: str
    text: str


def parse_schedule(field: str, value: Any, now: datetime) -> datetime | SchedulePhrase | None:
    """
    An ISO 8601 ``value`` read at once (UTC unless it names its offset) and checked against the
    window; any other text of at most MAX_SCHEDULE_CHARS kept as a phrase to read.
    """
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise Invalid(field, f"{field} must be a string")
    if len(value) > MAX_SCHEDULE_CHARS:
        raise Invalid(field, f"{field} must be at most {MAX_SCHEDULE_CHARS} characters")
    refuse_control(field, value, line=True)
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        return SchedulePhrase(field, value)
    return schedule_within(field, when if when.tzinfo else when.replace(tzinfo=UTC), now)


def read_phrase(phrase: SchedulePhrase, now: datetime, languages: tuple[str, ...]) -> datetime | None:
    """A date phrase ("in 1 hour", "tomorrow at 9am") in ``languages``, UTC; None if it is none."""
    import dateparser

    try:
        return dateparser.parse(
            phrase.text,
            languages=list(languages),
            settings={
                "RELATIVE_BASE": now.replace(tzinfo=None),
                "PREFER_DATES_FROM": "future",
                "TIMEZONE": "UTC",
                "TO_TIMEZONE": "UTC",
                "RETURN_AS_TIMEZONE_AWARE": True,
            },
        )
    except (ValueError, OverflowError):  # a date out of range ("year 99999")
        return None


def schedule_within(field: str, when: datetime | None, now: datetime) -> datetime:
    """``when`` if it is a date within the next 30 days (a minute of slack for the past)."""
    if when is None:
        raise Invalid(field, f"{field} must be an ISO 8601 date or a phrase like `in 1 hour`")
    if when > now + SCHEDULE_HORIZON:
        raise Invalid(field, f"{field} must be within 30 days")
    if when < now - timedelta(minutes=1):
        raise Invalid(field, f"{field} must not be in the past")
    return when


def has_unsubscribe_placeholder(submission: Submission) -> bool:
    return any(key in UNSUBSCRIBE_KEYS for body in (submission.html, submission.text) if body
               for key, _ in placeholders.keys_in(body))


def with_unsubscribe_url(submission: Submission, url: str) -> Submission:
    """
    The submission with ``{{{SVC_UNSUBSCRIBE_URL}}}`` (or the vendor-named alias) in its html and
    text replaced by one recipient's link: HTML-escaped in html, as is in text (the one
    placeholder scanner, ``mailsvc.domain.placeholders``; other placeholders are left as written).
    """
    def link(key: str, fallback: str | None) -> str | None:
        return url if key in UNSUBSCRIBE_KEYS else None

    def escape(value: str) -> str:
        return html_escaping.escape(value, quote=True)

    return attrs.evolve(
        submission,
        html=placeholders.fill(submission.html, link, escape) if submission.html else submission.html,
        text=placeholders.fill(submission.text, link) if submission.text else submission.text,
    )


def submission_from_json(body: dict, now: datetime, allow_attachments: bool = True) -> Submission:
    """Validate a send body (docs/contract/main-api.md, "Sending"); errors name the field first."""
    if body.get("template") is not None:
        raise Invalid("template", "template: templates are not available yet; send `html` or `text`")
    topic = body.get("topic_id")
    if topic not in (None, ""):
        raise Invalid("topic_id", "topic_id: topics are not supported")
    if body.get("from") in (None, ""):
        raise Invalid("from", "from is required")
    sender = parse_mailbox("from", body.get("from"))
    to = parse_mailboxes("to", body.get("to"), required=True)
    cc = parse_mailboxes("cc", body.get("cc"))
    bcc = parse_mailboxes("bcc", body.get("bcc"))
    reply_to = parse_mailboxes("reply_to", body.get("reply_to"))
    subject = body.get("subject")
    if subject in (None, ""):
        raise Invalid("subject", "subject is required")
    if not isinstance(subject, str):
        raise Invalid("subject", "subject must be a string")
    if len(subject.encode("utf-8")) > MAX_SUBJECT_BYTES:
        raise Invalid("subject", f"subject must be at most {MAX_SUBJECT_BYTES} bytes")
    if "\r" in subject or "\n" in subject:
        raise Invalid("subject", "subject must not contain line breaks")
    refuse_control("subject", subject, line=True)
    html = _optional_string(body, "html")
    text = _optional_string(body, "text")
    if not html and not text:
        raise Invalid("html", "html or text is required")
    stream = body.get("stream") or "transactional"
    if stream not in STREAMS:
        raise Invalid("stream", "stream must be `transactional` or `broadcast`")
    headers = custom_headers(body.get("headers"))
    if stream == "broadcast":
        for name, _ in headers:
            if name.lower() in LIST_UNSUBSCRIBE_HEADERS:
                raise Invalid("headers", f"headers: `{name}` is set by the platform on the broadcast stream")
    attachments_value = body.get("attachments")
    if attachments_value not in (None, []) and not allow_attachments:
        raise Invalid("attachments", "attachments are not supported in batch sends")
    submission = Submission(
        sender=sender, to=to, cc=cc, bcc=bcc, reply_to=reply_to, subject=subject,
        html=html or None, text=text,
        headers=headers,
        attachments=_attachments(attachments_value),
        tags=_tags(body.get("tags")),
        scheduled_at=parse_schedule("scheduled_at", body.get("scheduled_at"), now),
        stream=stream,
    )
    if len(submission.recipients) > MAX_RECIPIENTS:
        raise Invalid("to", f"to: at most {MAX_RECIPIENTS} unique recipients across to, cc and bcc")
    return submission
