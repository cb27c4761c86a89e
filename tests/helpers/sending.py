"""A tenant able to send (a verified domain), the smallest valid e-mail, and its message as built."""

import uuid
from datetime import UTC, datetime

from mailsvc.app import messages
from mailsvc.store.delivery_contents import AttachmentContent, EmailContent


async def sending_tenant(api, domain="acme.example.com", **tenant_fields):
    """A tenant with a verified sending domain (verification itself is tested with the domains)."""
    tenant, key = await api.tenant(**tenant_fields)
    code, created, _ = await api.json("POST", "/domains", key, json={"name": domain})
    assert code in (200, 201), created
    await api.parts.db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (created["id"],))
    return tenant, key, created["id"]


BODY = {"from": "Acme <news@acme.example.com>", "to": ["ann@example.com"], "subject": "Hello", "html": "<p>Hi Ann</p>"}


def email_content(**fields) -> EmailContent:
    """An e-mail as the delivery worker reads it (``store.delivery_contents``): ``fields``, and
    for the others a transactional e-mail of a sending domain, to be built from its content."""
    return EmailContent(**{
        "id": uuid.uuid4(), "tenant_id": uuid.uuid4(), "message_id": "<m1@acme.example.com>",
        "sender": "news@acme.example.com", "recipients": {"to": ["ann@example.com"]}, "subject": "Hello",
        "html": None, "text": "Hi", "headers": None, "stream": "transactional", "links_base": None,
        "created_at": datetime(2026, 11, 22, tzinfo=UTC), "message": None, "signed": False, "domain_id": uuid.uuid4(),
        "domain": "acme.example.com", "return_path": "bounces", "tls": "opportunistic", "broadcast_id": None,
        "contact_id": None, "snapshot": None, **fields})


async def stored(db, email_id) -> tuple[EmailContent, list[AttachmentContent]]:
    """An e-mail's content and attachments, as the delivery worker reads them to build its message."""
    email = await db.fetchone(
        "SELECT id, tenant_id, message_id, sender, recipients, subject, html, text, headers, stream, links_base,"
        " created_at, message FROM emails WHERE id = %s", (email_id,))
    attachments = await db.fetchall(
        "SELECT filename, content_type, content_id, content FROM attachments WHERE email_id = %s ORDER BY id",
        (email_id,))
    return email_content(**email), [AttachmentContent(**a) for a in attachments]


async def message_of(db, email_id) -> bytes:
    """The e-mail's message as the delivery worker builds it (unsigned), or as it is stored."""
    return messages.message_of(*await stored(db, email_id))
