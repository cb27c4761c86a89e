"""
The message of a stored e-mail, built from its content (docs/decisions.md, "Content stored
once"): the e-mail row (subject, html, text, custom headers, addresses, Message-ID, accept time)
and its attachment rows are the truth, and the message is built again wherever it is needed (the
delivery worker, right before signing), deterministically: the Message-ID stored at accept, the
Date of the accept time and MIME boundaries seeded by the e-mail's id give the same bytes on
every retry. A message submitted over SMTP is stored as it came (``message``) and used as it is;
so are the messages of rows written before content was stored once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from typing import TYPE_CHECKING

import attrs

from mailsvc.domain.email import Submission, has_unsubscribe_placeholder, parse_mailbox, with_unsubscribe_url
from mailsvc.mail import mime

if TYPE_CHECKING:
    from mailsvc.app.unsubscribe import Unsubscribes


def submission_of(email: dict) -> Submission:
    """The submission an e-mail row was accepted from, as far as its message shows it."""
    recipients = email["recipients"]

    def mailboxes(field: str) -> tuple:
        return tuple(parse_mailbox(field, m) for m in recipients.get(field, ()))

    return Submission(
        sender=parse_mailbox("from", email["sender"]), to=mailboxes("to"), cc=mailboxes("cc"),
        reply_to=mailboxes("reply_to"), subject=email["subject"], html=email["html"], text=email["text"],
        headers=tuple((name, value) for name, value in email["headers"] or ()), stream=email["stream"])


def _parts(attachments: Sequence[dict]) -> list[tuple]:
    return [(a["filename"], bytes(a["content"]), a["content_type"], a["content_id"]) for a in attachments]


def _build(email: dict, submission: Submission, parts: list[tuple]) -> bytes:
    return mime.build(submission, message_id=email["message_id"], date=email["created_at"].astimezone(UTC),
                      attachments=parts, seed=email["id"].bytes)


def message_of(email: dict, attachments: Sequence[dict]) -> bytes:
    """The e-mail's one message (every recipient's, unless it is of the broadcast stream)."""
    if email["message"] is not None:
        return bytes(email["message"])
    return _build(email, submission_of(email), _parts(attachments))


class Messages:
    """Each recipient's own message of the broadcast stream: its unsubscribe link in
    ``List-Unsubscribe`` and, where the content names it, in the body."""

    def __init__(self, unsubscribes: Unsubscribes):
        self._unsubscribes = unsubscribes

    def per_recipient(self, email: dict, attachments: Sequence[dict], recipients: Sequence[str]) -> dict[str, bytes]:
        """The messages of ``recipients`` (the e-mail's content built once when only the header
        differs, and the text derived from the html once)."""
        links = self._unsubscribes
        base = email["links_base"] or links.public_url
        submission = submission_of(email)
        parts = _parts(attachments)
        personal = has_unsubscribe_placeholder(submission)
        if personal and submission.text is None and submission.html:
            submission = attrs.evolve(submission, text=mime.text_from_html(submission.html))
        generic = None if personal else _build(email, submission, parts)
        messages = {}
        for recipient in recipients:
            url = links.url(base, email["tenant_id"], email["id"], recipient)
            body = generic if generic is not None else _build(email, with_unsubscribe_url(submission, url), parts)
            messages[recipient] = mime.with_fields(body, mime.unsubscribe_fields(url))
        return messages
