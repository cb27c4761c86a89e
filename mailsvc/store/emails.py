"""
Rows of emails, their attachments and, for scheduled mail, their deliveries as the email
resource reads and changes them. The accept statement, which writes all of them at once, is
``mailsvc.store.accept``.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import attrs

from mailsvc.domain.paging import Page
from mailsvc.store.database import Database, Transaction
from mailsvc.store.delivery_contents import BroadcastContent
from mailsvc.store.paging import clause

#: A broadcast's e-mail stores no tags (``[]``): its one tag names the broadcast.
TAGS = ("CASE WHEN broadcast_id IS NOT NULL AND tags = '[]'::jsonb THEN jsonb_build_array(jsonb_build_object("
        "'name', 'broadcast_id', 'value', broadcast_id::text)) ELSE tags END AS tags")
_COLUMNS = (
    f"id, message_id, sender, recipients, subject, html, text, {TAGS}, scheduled_at, last_event, created_at,"
    " status, broadcast_id"
)
_ATTACHMENT_COLUMNS = "id, filename, size, content_type, content_disposition, content_id"


async def get(db: Database, tenant_id: uuid.UUID, email_id: uuid.UUID,
              domain_id: uuid.UUID | None = None) -> dict | None:
    """The email ``email_id`` of the account; with ``domain_id``, only if it was sent from that domain."""
    if domain_id is None:
        return await db.fetchone(
            f"SELECT {_COLUMNS} FROM emails WHERE tenant_id = %s AND id = %s", (tenant_id, email_id))
    return await db.fetchone(
        f"SELECT {_COLUMNS} FROM emails WHERE tenant_id = %s AND id = %s AND domain_id = %s",
        (tenant_id, email_id, domain_id))


async def broadcast_content(db: Database, broadcast_id: uuid.UUID,
                            email_id: uuid.UUID) -> tuple[BroadcastContent, uuid.UUID, dict | None] | None:
    """A broadcast's e-mail's content: the broadcast's, and the recipient's ``contact_id`` and
    ``snapshot``; None once the broadcast is deleted."""
    row = await db.fetchone(
        "SELECT b.id, b.subject, b.html, b.text, b.preview_text, b.links_base, r.contact_id, r.snapshot"
        " FROM broadcasts b JOIN broadcast_recipients r ON r.broadcast_id = b.id AND r.email_id = %s"
        " WHERE b.id = %s", (email_id, broadcast_id))
    if row is None:
        return None
    content = BroadcastContent(row["id"], row["subject"], row["html"], row["text"], row["preview_text"],
                               row["links_base"])
    return content, row["contact_id"], row["snapshot"]


async def page(db: Database, tenant_id: uuid.UUID, page: Page) -> tuple[list[dict], bool]:
    where, order, params = clause(page)
    rows = await db.fetchall(
        f"SELECT {_COLUMNS} FROM emails WHERE tenant_id = %s AND {where} {order}", [tenant_id, *params])
    return page.finish(rows)


async def deliveries(db: Database, tenant_id: uuid.UUID, email_id: uuid.UUID) -> list[dict]:
    return await db.fetchall(
        "SELECT id, recipient, status, attempts, last_response, updated_at FROM deliveries"
        " WHERE tenant_id = %s AND email_id = %s ORDER BY id",
        (tenant_id, email_id),
    )


async def sender(db: Database, tenant_id: uuid.UUID, email_id: uuid.UUID) -> tuple[bool, str | None]:
    """Whether the account exists, and the sender of its email ``email_id`` (None if absent)."""
    row = await db.fetchone(
        "SELECT (SELECT sender FROM emails WHERE tenant_id = t.id AND id = %s) AS sender"
        " FROM tenants t WHERE t.id = %s",
        (email_id, tenant_id),
    )
    return (False, None) if row is None else (True, row["sender"])


async def reschedule(db: Database, tenant_id: uuid.UUID, email_id: uuid.UUID, scheduled_at: datetime | None) -> bool:
    """Give a scheduled email another time; False when it is absent or no longer scheduled."""
    row = await db.fetchone(
        "UPDATE emails SET scheduled_at = %s WHERE tenant_id = %s AND id = %s AND status = 'scheduled' RETURNING id",
        (scheduled_at, tenant_id, email_id),
    )
    return row is not None


async def cancel(txn: Transaction, tenant_id: uuid.UUID, email_id: uuid.UUID, now: datetime) -> bool:
    """Cancel a scheduled email and its deliveries; False when it is absent or no longer scheduled."""
    row = await txn.fetchone(
        "UPDATE emails SET status = 'canceled', last_event = 'canceled'"
        " WHERE tenant_id = %s AND id = %s AND status = 'scheduled' RETURNING id",
        (tenant_id, email_id),
    )
    if row is None:
        return False
    await txn.execute(
        "UPDATE deliveries SET status = 'canceled', updated_at = %s WHERE email_id = %s AND status = 'scheduled'",
        (now, email_id),
    )
    return True


async def claim_due(txn: Transaction, now: datetime, limit: int) -> list[dict]:
    """Scheduled emails whose time has come, locked (each is taken by one node), oldest first."""
    return await txn.fetchall(
        "SELECT e.id, e.tenant_id, e.sender, e.subject, e.tags, e.scheduled_at"
        " FROM emails e WHERE e.status = 'scheduled' AND e.scheduled_at <= %s"
        " ORDER BY e.scheduled_at LIMIT %s FOR UPDATE OF e SKIP LOCKED",
        (now, limit),
    )


async def scheduled_deliveries(txn: Transaction, email_ids: list[uuid.UUID]) -> list[dict]:
    return await txn.fetchall(
        "SELECT id, email_id, recipient FROM deliveries WHERE email_id = ANY(%s::uuid[]) AND status = 'scheduled'"
        " ORDER BY id",
        (email_ids,),
    )


@attrs.frozen
class ReleasedDelivery:
    """A scheduled delivery's first state once its time has come."""

    id: uuid.UUID
    status: str
    due_at: datetime | None
    retry_until: datetime | None


@attrs.frozen
class ReleasedEmail:
    id: uuid.UUID
    last_event: str


async def release(txn: Transaction, now: datetime, deliveries: list[ReleasedDelivery],
                  emails: list[ReleasedEmail]) -> None:
    """Released deliveries and emails, written in two statements (the emails are queued)."""
    if deliveries:
        parameters: list = [now]
        for d in deliveries:
            parameters += (d.id, d.status, d.due_at, d.retry_until)
        await txn.execute(
            "UPDATE deliveries d SET status = v.status, due_at = v.due_at, updated_at = %s,"
            " retry_until = v.retry_until FROM (VALUES "
            + ", ".join(["(%s::uuid, %s, %s::timestamptz, %s::timestamptz)"] * len(deliveries))
            + ") AS v (id, status, due_at, retry_until) WHERE d.id = v.id",
            parameters,
        )
    if emails:
        await txn.execute(
            "UPDATE emails e SET status = 'queued', last_event = v.last_event FROM (VALUES "
            + ", ".join(["(%s::uuid, %s)"] * len(emails))
            + ") AS v (id, last_event) WHERE e.id = v.id",
            [value for e in emails for value in (e.id, e.last_event)],
        )


async def attachments(db: Database, tenant_id: uuid.UUID, email_id: uuid.UUID, page: Page) -> tuple[list[dict], bool]:
    where, order, params = clause(page)
    rows = await db.fetchall(
        f"SELECT {_ATTACHMENT_COLUMNS} FROM attachments WHERE tenant_id = %s AND email_id = %s AND {where} {order}",
        [tenant_id, email_id, *params],
    )
    return page.finish(rows)


async def attachment(db: Database, tenant_id: uuid.UUID, email_id: uuid.UUID, attachment_id: uuid.UUID) -> dict | None:
    return await db.fetchone(
        f"SELECT {_ATTACHMENT_COLUMNS} FROM attachments WHERE tenant_id = %s AND email_id = %s AND id = %s",
        (tenant_id, email_id, attachment_id),
    )


async def attachment_content(db: Database, attachment_id: uuid.UUID) -> dict | None:
    return await db.fetchone("SELECT filename, content_type, content FROM attachments WHERE id = %s", (attachment_id,))
