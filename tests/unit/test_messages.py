"""
The message of a stored e-mail (``app/messages``): built from the row the accept path writes,
the same bytes every time (a retry sends what the first attempt sent), and the content it
carries is the row's.
"""

import base64
import email
import email.policy
import email.utils
import re
import uuid
from datetime import UTC, datetime, timedelta, timezone

import attrs

from mailsvc.app.messages import Messages, broadcast_content, message_of, plain_text, submission_of
from mailsvc.app.unsubscribe import Unsubscribes
from mailsvc.domain.broadcasts import Contact, Content, personalised, snapshot, used_fields
from mailsvc.domain.email import submission_from_json
from mailsvc.mail import mime
from mailsvc.store.delivery_contents import AttachmentContent, BroadcastContent
from tests.helpers.sending import email_content

NOW = datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=UTC)
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
BODY = {"from": '"Acme, Inc." <news@acme.example>', "to": ["Ann <ann@example.com>", "bob@example.com"],
        "cc": "carol@example.com", "reply_to": "help@acme.example", "subject": "Grüße", "html": "<p>Hi</p>",
        "headers": {"X-Entity-Ref-ID": "7"},
        "attachments": [{"filename": "a.txt", "content": "aGk="},
                        {"filename": "logo.png", "content": base64.b64encode(PNG).decode(), "content_id": "logo"}]}


def row(email_id=None, message=None, stream="transactional", **body):
    """An e-mail as the accept statement stores it (``store/accept.py``) and the worker reads it."""
    s = submission_from_json({**BODY, **body}, NOW)
    attachments = [AttachmentContent(a.filename, a.content_type, a.content_id, memoryview(a.content))
                   for a in s.attachments]
    return email_content(
        id=email_id or uuid.uuid4(), tenant_id=uuid.UUID(int=1), message_id="<m1@acme.example>",
        sender=str(s.sender), subject=s.subject, html=s.html, text=s.text,
        recipients={"to": [str(m) for m in s.to], "cc": [str(m) for m in s.cc], "bcc": [],
                    "reply_to": [str(m) for m in s.reply_to]},
        headers=[list(h) for h in s.headers] or None, stream=stream, links_base="https://mail.example",
        # As PostgreSQL gives it back in another session time zone.
        created_at=NOW.astimezone(timezone(timedelta(hours=2))), message=message,
    ), attachments


def boundaries(raw: bytes) -> list[bytes]:
    return re.findall(rb'boundary="([^"]+)"', raw)


def test_the_same_row_gives_the_same_bytes():
    email_row, attachments = row()
    first = message_of(email_row, attachments)
    assert message_of(email_row, attachments) == first
    assert len(boundaries(first)) == 3  # mixed, alternative, related: each seeded by the id
    other = message_of(attrs.evolve(email_row, id=uuid.uuid4()), attachments)
    assert boundaries(other) != boundaries(first)
    assert re.sub(rb"={15}\d{19}==", b"B", other) == re.sub(rb"={15}\d{19}==", b"B", first)


def test_the_message_carries_the_rows_content():
    email_row, attachments = row(text="Hi, in text")
    message = email.message_from_bytes(message_of(email_row, attachments), policy=email.policy.default)
    assert message["Message-ID"] == "<m1@acme.example>"
    assert message["Date"] == "Sun, 22 Nov 2026 10:00:00 +0000"  # the accept time, in UTC
    assert message["From"] == '"Acme, Inc." <news@acme.example>' and message["Subject"] == "Grüße"
    assert message["To"] == "Ann <ann@example.com>, bob@example.com" and message["Cc"] == "carol@example.com"
    assert message["Reply-To"] == "help@acme.example" and message["X-Entity-Ref-ID"] == "7"
    assert message.get_body(("html",)).get_content() == "<p>Hi</p>\r\n"
    assert message.get_body(("plain",)).get_content() == "Hi, in text\r\n"
    assert {a.get_filename(): a.get_content() for a in message.iter_attachments()} == {"a.txt": "hi"}
    related = next(p for p in message.walk() if p["Content-ID"] == "<logo>")
    assert related.get_content() == PNG


def test_a_stored_message_is_used_as_it_is():
    email_row, attachments = row(message=memoryview(b"Subject: as submitted\r\n\r\nbody\r\n"))
    assert message_of(email_row, attachments) == b"Subject: as submitted\r\n\r\nbody\r\n"


def test_the_submission_reads_back_from_the_row():
    email_row, _ = row()
    s = submission_of(email_row)
    original = submission_from_json(BODY, NOW)
    assert (s.sender, s.to, s.cc, s.reply_to, s.headers) == (
        original.sender, original.to, original.cc, original.reply_to, original.headers)


def test_each_broadcast_recipient_gets_its_own_link_the_same_on_every_build():
    links = Unsubscribes(None, None, b"k" * 32)
    messages = Messages(links)
    for html in ("<p>News</p>", '<p>News</p><a href="{{{SVC_UNSUBSCRIBE_URL}}}">Leave</a>'):
        email_row, attachments = row(stream="broadcast", html=html, attachments=[])
        built = messages.per_recipient(email_row, attachments, ["ann@example.com", "bob@example.com"])
        assert built == messages.per_recipient(email_row, attachments, ["ann@example.com", "bob@example.com"])
        for recipient, raw in built.items():
            message = email.message_from_bytes(raw, policy=email.policy.default)
            url = links.url("https://mail.example", email_row.tenant_id, email_row.id, recipient)
            assert message["List-Unsubscribe"] == f"<{url}>"
            assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
            text = message.get_body(("plain",)).get_content()
            assert (url in text) == ("UNSUBSCRIBE" in html)  # the text derived from the html names it too
            assert "UNSUBSCRIBE_URL" not in raw.decode()


def test_the_size_bound_holds():
    for body in ({}, {"text": "x" * 5000}, {"html": "é" * 3000 + "<br>" * 500}, {"attachments": []},
                 {"subject": "ü" * 490}):
        email_row, attachments = row(**body)
        s = submission_of(email_row)
        parts = [(a.filename, bytes(a.content), a.content_type, a.content_id) for a in attachments]
        built = mime.build(s, message_id="<m1@acme.example>", date=NOW, attachments=parts)
        assert len(built) <= mime.size_bound(s, parts) <= 8 * len(built) + 8192, body


def test_a_broadcast_recipient_keeps_only_what_its_content_uses():
    content = Content("News for {{{FIRST_NAME|you}}}", "<p>{{{contact.plan|free}}} {{{SVC_UNSUBSCRIBE_URL}}}</p>",
                      None, "Big {{{contact.last_name}}} news")
    used = used_fields(content)
    assert used == (frozenset({"first_name", "last_name"}), frozenset({"plan"}))
    contact = Contact(uuid.uuid4(), "ann@example.com", "Ann", "Lee", {"plan": "pro", "secret": "kept out"})
    taken = snapshot(contact, used)
    assert taken == {"first_name": "Ann", "last_name": "Lee", "properties": {"plan": "pro"}}
    broadcast = BroadcastContent(uuid.uuid4(), content.subject, content.html, None, content.preview_text, None)
    shown = broadcast_content(broadcast, contact.id, taken)
    assert shown == personalised(attrs.evolve(content, text=plain_text(broadcast)), contact)
    assert shown.subject == "News for Ann" and "pro {{{SVC_UNSUBSCRIBE_URL}}}" in shown.text


def test_the_date_is_the_email_packages():
    for seconds in range(0, 10**9, 7_654_321):
        date = datetime(2000, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds, microseconds=seconds % 10**6)
        for shown in (date, date.astimezone(timezone(timedelta(hours=-3)))):
            built = mime.build(submission_from_json(BODY | {"attachments": []}, NOW), message_id="<m@x>", date=shown)
            assert f"\r\nDate: {email.utils.format_datetime(shown)}\r\n".encode() in built
