"""
The message of a stored e-mail, built from its content (docs/decisions.md, "Content stored
once"): the e-mail row (subject, html, text, custom headers, addresses, Message-ID, accept time)
and its attachment rows are the truth, and the message is built again wherever it is needed (the
delivery worker, right before signing), deterministically: the Message-ID stored at accept, the
Date of the accept time and MIME boundaries seeded by the e-mail's id give the same bytes on
every retry. A broadcast's e-mail stores neither html nor text: its content is the broadcast's,
filled from the snapshot of the contact taken at fan-out (``broadcast_content``, which
``GET /emails/{id}`` shows too). A message submitted over SMTP is stored as it came
(``message``) and used as it is; so are the messages of rows written before content was stored
once.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC
from typing import TYPE_CHECKING

import attrs

from mailsvc.domain.broadcasts import Content, contact_from_snapshot, personalised
from mailsvc.domain.email import Submission, has_unsubscribe_placeholder, with_unsubscribe_url
from mailsvc.domain.headers import parse_mailbox
from mailsvc.mail import mime
from mailsvc.store.delivery_contents import AttachmentContent, BroadcastContent, EmailContent

if TYPE_CHECKING:
    from mailsvc.app.unsubscribe import Unsubscribes


#: Broadcasts whose text (derived from the html) and use of the unsubscribe link a process keeps,
#: each found once rather than per recipient.
_BROADCASTS_KEPT = 64


def plain_text(broadcast: BroadcastContent) -> str | None:
    """A broadcast's text: its own, else derived from its html with the placeholders kept."""
    if broadcast.text or not broadcast.html:
        return broadcast.text
    return mime.text_from_html(broadcast.html)


def broadcast_content(broadcast: BroadcastContent, contact_id: uuid.UUID, snapshot: dict | None,
                      text: str | None = None) -> Content:
    """
    What a broadcast's recipient is sent: the broadcast's subject, html (with its preview) and
    text (``plain_text``, or ``text`` when already derived) filled from the e-mail's snapshot of
    the contact ``contact_id``; the unsubscribe placeholders are left for the message
    (``Messages``).
    """
    content = Content(broadcast.subject, broadcast.html, text if text is not None else plain_text(broadcast),
                      broadcast.preview_text)
    return personalised(content, contact_from_snapshot(contact_id, snapshot or {}))


def submission_of(email: EmailContent, content: Content | None = None) -> Submission:
    """The submission an e-mail row was accepted from, as far as its message shows it;
    ``content`` stands for a broadcast's e-mail's (``broadcast_content``)."""
    recipients = email.recipients

    def mailboxes(field: str) -> tuple:
        return tuple(parse_mailbox(field, m) for m in recipients.get(field, ()))

    subject, html, text = (email.subject, email.html, email.text) if content is None else (
        content.subject, content.html, content.text)
    return Submission(
        sender=parse_mailbox("from", email.sender), to=mailboxes("to"), cc=mailboxes("cc"),
        reply_to=mailboxes("reply_to"), subject=subject, html=html, text=text,
        headers=tuple((name, value) for name, value in email.headers or ()), stream=email.stream)


def _parts(attachments: Sequence[AttachmentContent]) -> list[tuple]:
    return [(a.filename, bytes(a.content), a.content_type, a.content_id) for a in attachments]


def _build(email: EmailContent, submission: Submission, parts: list[tuple]) -> bytes:
    return mime.build(submission, message_id=email.message_id, date=email.created_at.astimezone(UTC),
                      attachments=parts, seed=email.id.bytes)


def message_of(email: EmailContent, attachments: Sequence[AttachmentContent]) -> bytes:
    """The e-mail's one message (every recipient's, unless it is of the broadcast stream)."""
    if email.message is not None:
        return bytes(email.message)
    return _build(email, submission_of(email), _parts(attachments))


class Messages:
    """Each recipient's own message of the broadcast stream: its unsubscribe link in
    ``List-Unsubscribe`` and, where the content names it, in the body."""

    def __init__(self, unsubscribes: Unsubscribes):
        self._unsubscribes = unsubscribes
        #: By broadcast id: its text, and whether it names the unsubscribe link.
        self._broadcasts: dict[uuid.UUID, tuple[str | None, bool]] = {}

    def per_recipient(self, email: EmailContent, attachments: Sequence[AttachmentContent], recipients: Sequence[str],
                      broadcast: BroadcastContent | None = None) -> dict[str, bytes]:
        """The messages of ``recipients`` (the e-mail's content built once when only the header
        differs, and the text derived from the html once); ``broadcast``: the broadcast whose
        recipient the e-mail is, its content filled from the e-mail's snapshot."""
        links = self._unsubscribes
        # A broadcast's e-mail keeps no links_base of its own: the broadcast's.
        base = email.links_base or (broadcast.links_base if broadcast is not None else None) or links.public_url
        if broadcast is None:
            submission = submission_of(email)
            personal = has_unsubscribe_placeholder(submission)
        else:
            kept = self._broadcasts.get(broadcast.id)
            if kept is None:
                if len(self._broadcasts) >= _BROADCASTS_KEPT:
                    del self._broadcasts[next(iter(self._broadcasts))]
                text = plain_text(broadcast)
                unfilled = attrs.evolve(submission_of(email), html=broadcast.html, text=text)
                named = has_unsubscribe_placeholder(unfilled)
                kept = self._broadcasts[broadcast.id] = (text, named)
            text, personal = kept
            assert email.contact_id is not None  # a broadcast's e-mail: its recipient's row is read with it
            submission = submission_of(email, broadcast_content(broadcast, email.contact_id, email.snapshot, text))
        parts = _parts(attachments)
        if personal and submission.text is None and submission.html:
            submission = attrs.evolve(submission, text=mime.text_from_html(submission.html))
        generic = None if personal else _build(email, submission, parts)
        messages = {}
        for recipient in recipients:
            url = links.url(base, email.tenant_id, email.id, recipient)
            body = generic if generic is not None else _build(email, with_unsubscribe_url(submission, url), parts)
            messages[recipient] = mime.with_fields(body, mime.unsubscribe_fields(url))
        return messages
