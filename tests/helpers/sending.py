"""A tenant able to send (a verified domain), the smallest valid e-mail, and its message as built."""

from mailsvc.app import messages


async def sending_tenant(api, domain="acme.example.com", **tenant_fields):
    """A tenant with a verified sending domain (verification itself is tested with the domains)."""
    tenant, key = await api.tenant(**tenant_fields)
    code, created, _ = await api.json("POST", "/domains", key, json={"name": domain})
    assert code in (200, 201), created
    await api.parts.db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (created["id"],))
    return tenant, key, created["id"]


BODY = {"from": "Acme <news@acme.example.com>", "to": ["ann@example.com"], "subject": "Hello", "html": "<p>Hi Ann</p>"}


async def stored(db, email_id) -> tuple[dict, list[dict]]:
    """An e-mail's row and attachment rows, as the delivery worker reads them to build its message."""
    email = await db.fetchone(
        "SELECT id, tenant_id, message_id, sender, recipients, subject, html, text, headers, stream, links_base,"
        " created_at, message FROM emails WHERE id = %s", (email_id,))
    attachments = await db.fetchall(
        "SELECT filename, content_type, content_id, content FROM attachments WHERE email_id = %s ORDER BY id",
        (email_id,))
    return email, attachments


async def message_of(db, email_id) -> bytes:
    """The e-mail's message as the delivery worker builds it (unsigned), or as it is stored."""
    return messages.message_of(*await stored(db, email_id))
