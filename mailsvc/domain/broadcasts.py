"""
Broadcasts: the rules of a broadcast's fields (docs/decisions.md, "Broadcasts"),
of its states, and the personalisation of its message for one contact through
the one placeholder scanner (``mailsvc.domain.placeholders``). Pure: no I/O.
"""

from __future__ import annotations

import html as html_escaping
import re
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import attrs

from mailsvc.domain import placeholders
from mailsvc.domain.email import MAX_SUBJECT_BYTES, UNSUBSCRIBE_KEYS
from mailsvc.domain.errors import BroadcastInProgress, BroadcastNotCancelable, BroadcastNotDraft, Invalid
from mailsvc.domain.headers import parse_mailbox, parse_mailboxes
from mailsvc.domain.templates import duplicate_name
from mailsvc.domain.text import checked_string, refuse_control

__all__ = [
    "STATUSES", "Content", "Contact", "broadcast_fields", "duplicate_name", "personalised", "next_utc_day",
    "used_fields", "snapshot", "contact_from_snapshot",
    "refuse_send", "refuse_cancel", "refuse_delete", "refuse_update",
]

STATUSES = ("draft", "scheduled", "queued", "sending", "sent", "canceled", "failed")
IN_PROGRESS = ("queued", "sending")
FINISHED = ("sent", "canceled", "failed")
#: Deleted at once: nothing of theirs was sent.
DELETABLE = ("draft", "scheduled")
#: Deleted once none of their mail is still queued (docs/decisions.md "Broadcast states").
DELETABLE_WHEN_QUIET = ("canceled", "failed")
NAME_MAX = 256
PREVIEW_TEXT_MAX = 1000
#: The fields a create or PATCH may carry (the body's names); others are ignored (the SDKs
#: send ``broadcast_id`` and undefined values).
FIELDS = ("name", "segment_id", "audience_id", "from", "subject", "reply_to", "preview_text", "html", "text",
          "topic_id")
#: Why a sending broadcast waits (``wait_reason``; docs/decisions.md "Broadcasts").
WAIT_REASONS = ("daily_quota", "monthly_quota", "account_paused")
#: The contact's own fields under ``contact.``; anything else after ``contact.`` is a property.
CONTACT_FIELDS = ("first_name", "last_name", "email")
#: The older upper-case names of the same fields.
UPPER_KEYS = {"FIRST_NAME": "first_name", "LAST_NAME": "last_name", "EMAIL": "email"}


def _subject(value: Any) -> str:
    if value in (None, ""):
        raise Invalid("subject", "subject is required")
    subject = checked_string("subject", value)
    if "\r" in subject or "\n" in subject:
        raise Invalid("subject", "subject must not contain line breaks")
    refuse_control("subject", subject, line=True)
    if len(subject.encode("utf-8")) > MAX_SUBJECT_BYTES:
        raise Invalid("subject", f"subject must be at most {MAX_SUBJECT_BYTES} bytes")
    return subject


def _segment(body: dict) -> uuid.UUID | None:
    """``segment_id``, or its legacy alias ``audience_id`` (the first one given)."""
    for field in ("segment_id", "audience_id"):
        value = body.get(field)
        if value in (None, ""):
            continue
        try:
            return uuid.UUID(value) if isinstance(value, str) else None
        except ValueError:
            pass
        raise Invalid(field, f"{field} must be a segment id (UUID)")
    return None


def broadcast_fields(body: dict, *, creating: bool) -> dict[str, Any]:
    """
    The fields of a create (``segment_id`` or ``audience_id``, ``from`` and ``subject``
    required) or of a PATCH (only the keys present), validated; ``from`` as ``sender``.
    """
    if not isinstance(body, dict):
        raise Invalid("body", "body must be a JSON object")
    given = {k: body[k] for k in FIELDS if k in body and body[k] is not None}
    fields: dict[str, Any] = {}
    if given.get("topic_id") not in (None, ""):
        raise Invalid("topic_id", "topic_id: topics are not supported")
    segment = _segment(given)
    if segment is not None:
        fields["segment_id"] = segment
    elif creating:
        raise Invalid("segment_id", "segment_id is required (or the legacy audience_id)")
    if "name" in given:
        fields["name"] = checked_string("name", given["name"], NAME_MAX, line=True).strip()
    elif creating:
        fields["name"] = ""
    if "from" in given or creating:
        if given.get("from") in (None, ""):
            raise Invalid("from", "from is required")
        parse_mailbox("from", given["from"])
        fields["sender"] = given["from"].strip()
    if "subject" in given or creating:
        fields["subject"] = _subject(given.get("subject"))
    if "reply_to" in given:
        fields["reply_to"] = [str(m) for m in parse_mailboxes("reply_to", given["reply_to"])]
    if "preview_text" in given:
        preview = checked_string("preview_text", given["preview_text"], PREVIEW_TEXT_MAX, line=True)
        fields["preview_text"] = preview or None
    for part in ("html", "text"):
        if part in given:
            fields[part] = checked_string(part, given[part]) or None
    return fields


def check_sendable(html: str | None, text: str | None) -> None:
    """What a send needs besides its state: something to send."""
    if not html and not text:
        raise Invalid("html", "html or text is required to send a broadcast")


# States (docs/decisions.md "Broadcast states"): why a guarded transition found nothing to change.
# A broadcast still to be sent (scheduled, queued, sending) is "in progress"; one that has been
# sent, canceled or failed is over, and nothing more can be done to it but delete it (canceled or
# failed, once its mail has left the queue) or duplicate it.

def refuse_update(status: str) -> BroadcastNotDraft:
    return BroadcastNotDraft(f"The broadcast is {status}: only a draft can be updated.")


def refuse_send(status: str) -> Exception:
    if status in ("scheduled", *IN_PROGRESS):
        return BroadcastInProgress(f"The broadcast is {status}: it is already being sent.")
    return BroadcastNotCancelable(f"The broadcast is {status}: it cannot be sent again; duplicate it.")


def refuse_delete(status: str) -> Exception:
    """A delete refused: sent broadcasts are kept; a canceled or failed one only while mail of it is queued."""
    if status in (*IN_PROGRESS, *DELETABLE_WHEN_QUIET):
        return BroadcastInProgress(f"The broadcast is {status}: it cannot be deleted while its mail is sent.")
    return BroadcastNotCancelable(f"The broadcast is {status}: a sent broadcast cannot be deleted.")


def refuse_cancel(status: str) -> BroadcastNotCancelable:
    return BroadcastNotCancelable(
        f"The broadcast is {status}: only scheduled, queued or sending broadcasts can be canceled.")


def next_utc_day(now: datetime) -> datetime:
    """00:00 UTC of the day after ``now`` (when a daily quota resets)."""
    return (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)


def next_utc_month(now: datetime) -> datetime:
    first = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return (first + timedelta(days=32)).replace(day=1)


# Personalisation.

@attrs.frozen
class Contact:
    """One recipient as the membership read it: the contact's fields and properties."""

    id: uuid.UUID
    email: str
    first_name: str | None = None
    last_name: str | None = None
    properties: Mapping[str, Any] = attrs.field(factory=dict)

    def value(self, key: str) -> str | None:
        """What ``{{{key}}}`` means for this contact: "" when the contact has no value, None for
        a key that names no contact field (left as written)."""
        field = UPPER_KEYS.get(key)
        if field is None:
            part, dot, name = key.partition(".")
            if not dot or part != "contact":
                return None
            field = name
        if field in CONTACT_FIELDS:
            return getattr(self, field) or ""
        given = self.properties.get(field)
        if given is None:
            return ""
        if isinstance(given, bool):
            return "true" if given else "false"
        if isinstance(given, float) and given.is_integer():
            return str(int(given))
        return str(given)


@attrs.frozen
class Content:
    """What a broadcast sends, before personalisation."""

    subject: str
    html: str | None
    text: str | None
    preview_text: str | None = None


def _escape(value: str) -> str:
    return html_escaping.escape(value, quote=True)


_BODY_TAG = re.compile(r"<body\b[^>]*>", re.IGNORECASE)
_PREHEADER_STYLE = ("display:none;font-size:1px;line-height:1px;max-height:0;max-width:0;opacity:0;"
                    "overflow:hidden;mso-hide:all")


def with_preheader(html: str, preview_text: str) -> str:
    """``html`` with ``preview_text`` as the hidden preheader: first in the body."""
    hidden = f'<div style="{_PREHEADER_STYLE}">{_escape(preview_text)}</div>'
    found = _BODY_TAG.search(html)
    if found is None:
        return hidden + html
    return html[:found.end()] + hidden + html[found.end():]


def personalised(content: Content, contact: Contact | None) -> Content:
    """
    ``content`` for ``contact``: each placeholder naming a contact field or property filled
    (HTML-escaped in html, as is in text, line breaks made spaces in the subject); a fallback
    (``{{{FIRST_NAME|there}}}``) stands for an empty or missing value. ``contact`` None: a
    preview without one shows every fallback. The unsubscribe placeholders are left for the
    accept path, which fills each recipient's own link; other keys are left as written.
    """
    def value_of(key: str, fallback: str | None) -> str | None:
        if key in UNSUBSCRIBE_KEYS:
            return None
        value = contact.value(key) if contact is not None else ("" if _contact_key(key) else None)
        if value is None:
            return None
        return value or (fallback if fallback is not None else "")

    def subject_value(key: str, fallback: str | None) -> str | None:
        value = value_of(key, fallback)
        return None if value is None else value.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")

    html = placeholders.fill(content.html, value_of, _escape) if content.html else content.html
    text = placeholders.fill(content.text, value_of) if content.text else content.text
    subject = placeholders.fill(content.subject, subject_value)
    if html and content.preview_text:
        preview = placeholders.fill(content.preview_text, subject_value)
        html = with_preheader(html, preview)
    return Content(subject, html, text, content.preview_text)


def used_fields(content: Content) -> tuple[frozenset[str], frozenset[str]]:
    """The contact's own fields and the properties that ``content``'s placeholders name."""
    fields: set[str] = set()
    properties: set[str] = set()
    for body in (content.subject, content.html, content.text, content.preview_text):
        for key, _ in placeholders.keys_in(body) if body else ():
            field = UPPER_KEYS.get(key)
            if field is None:
                part, dot, field = key.partition(".")
                if not dot or part != "contact":
                    continue
            (fields if field in CONTACT_FIELDS else properties).add(field)
    return frozenset(fields), frozenset(properties)


def snapshot(contact: Contact, used: tuple[frozenset[str], frozenset[str]]) -> dict[str, Any]:
    """What of ``contact`` its message is made of (``used_fields``), as it is at fan-out: its
    message is built from this when delivered, whatever happens to the contact since."""
    fields, properties = used
    taken: dict[str, Any] = {f: getattr(contact, f) for f in sorted(fields)}
    kept = {p: contact.properties[p] for p in sorted(properties) if p in contact.properties}
    if kept:
        taken["properties"] = kept
    return taken


def contact_from_snapshot(contact_id: uuid.UUID, taken: Mapping[str, Any]) -> Contact:
    """The contact as ``snapshot`` took it (fields it did not take are unused by the content)."""
    return Contact(contact_id, taken.get("email") or "", taken.get("first_name"), taken.get("last_name"),
                   taken.get("properties") or {})


def _contact_key(key: str) -> bool:
    return key in UPPER_KEYS or key.startswith("contact.")
