"""
Broadcasts: one draft message sent to every contact of a segment, each contact
getting its own copy (its name and properties filled in, its own one-click unsubscribe link).

``Broadcasts`` is the resource: create, read, PATCH (drafts), delete, send (now or at
``scheduled_at``), cancel, duplicate, preview, and the release of scheduled broadcasts (the
scheduler role). Every change of status is one guarded UPDATE (``mailsvc.store.broadcasts``).

The fan-out that sends queued broadcasts is a leased engine: ``mailsvc.broadcasting.fanout``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from twisted.logger import Logger

from mailsvc import timefmt
from mailsvc.app.emails import Schedules
from mailsvc.app.spam import SpamChecks
from mailsvc.domain import broadcasts as rules
from mailsvc.domain.broadcasts import Contact, Content, personalised
from mailsvc.domain.errors import Invalid, NotAllowed, NotFound
from mailsvc.domain.headers import parse_mailbox
from mailsvc.domain.htmltext import html_to_text
from mailsvc.domain.tenant import Tenant
from mailsvc.ids import parse_uuid, uuid7
from mailsvc.store import broadcasts as rows
from mailsvc.store.broadcasts import Broadcast, BroadcastItem
from mailsvc.store.database import Database

log = Logger()

KIND = "Broadcast"
#: Delivery statuses counted in ``stats`` (the keys always shown), from the delivery rows.
STATS = ("delivered", "bounced", "complained", "suppressed", "failed", "delivery_delayed")
_STAT_OF_STATUS = {"delivered": "delivered", "bounced": "bounced", "complained": "complained",
                   "suppressed": "suppressed", "failed": "failed", "deferred": "delivery_delayed"}


def _id(text: str) -> uuid.UUID:
    parsed = parse_uuid(text)
    if parsed is None:
        raise NotFound(KIND)
    return parsed


class Broadcasts:
    def __init__(self, clock, db: Database, schedules: Schedules,
                 sending_domain: Callable[[uuid.UUID, str], Awaitable[Any]], public_url: str = "",
                 spam: SpamChecks | None = None):
        self._clock = clock
        self._db = db
        self._schedules = schedules
        #: The account's domain of a name (with its status), as the accept path looks it up.
        self._sending_domain = sending_domain
        self._public_url = public_url.rstrip("/")
        #: The spam score: beside the preview, and at send over the operator's threshold.
        self._spam = spam

    def _now(self) -> datetime:
        return timefmt.from_seconds(self._clock.seconds())

    async def _check_segment(self, tenant_id: uuid.UUID, fields: dict) -> None:
        segment = fields.get("segment_id")
        if segment is not None and not await rows.segment_exists(self._db, tenant_id, segment):
            raise Invalid("segment_id", f"segment_id: no segment `{segment}` in this account")

    async def _check_domain(self, tenant_id: uuid.UUID, sender: str) -> None:
        """
        A broadcast is sent from a verified domain of the account: refused at send with the 403
        an e-mail gets, rather than accepted and failed once the fan-out meets the domain.
        """
        name = parse_mailbox("from", sender).domain
        domain = await self._sending_domain(tenant_id, name)
        if domain is None or domain.status != "verified":
            raise NotAllowed(f"The {name} domain is not verified. Please, add and verify your domain before sending"
                             " the broadcast.", reason="domain_not_verified")

    async def _row(self, tenant_id: uuid.UUID, broadcast_id: str) -> Broadcast:
        row = await rows.get(self._db, tenant_id, _id(broadcast_id))
        if row is None:
            raise NotFound(KIND)
        return row

    async def _refused(self, tenant_id: uuid.UUID, broadcast_id: uuid.UUID, refuse: Callable[[str], Exception]):
        """Why a guarded transition changed nothing: absent (404), or the state's 409."""
        status = await rows.status(self._db, tenant_id, broadcast_id)
        if status is None:
            return NotFound(KIND)
        return refuse(status)

    async def _when(self, value: Any, now: datetime) -> datetime | None:
        return await self._schedules.read("scheduled_at", value, now) if value not in (None, "") else None

    # The resource

    async def create(self, tenant: Tenant, body: dict, links_base: str) -> Broadcast:
        fields = rules.broadcast_fields(body, creating=True)
        send = body.get("send", False)
        if send is not None and not isinstance(send, bool):
            raise Invalid("send", "send must be a boolean")
        now = self._now()
        scheduled_at = await self._when(body.get("scheduled_at"), now)
        status = "scheduled" if scheduled_at is not None else "queued" if send else "draft"
        if status != "draft":
            rules.check_sendable(fields.get("html"), fields.get("text"))
        await self._check_segment(tenant.id, fields)
        if status != "draft":
            await self._check_domain(tenant.id, fields["sender"])
            await self._refuse_spammy(tenant.id, fields.get("segment_id"), fields["sender"], Content(
                fields["subject"], fields.get("html"), fields.get("text"), fields.get("preview_text")))
        row = await rows.insert(self._db, uuid7(self._clock.seconds()), tenant.id, fields, status, scheduled_at,
                                self._public_url or links_base, now)
        if status == "queued":
            await rows.wake_fanout(self._db)
        return row

    async def get(self, tenant_id: uuid.UUID, broadcast_id: str) -> dict:
        """The broadcast as ``GET /broadcasts/{id}`` shows it, with its counts."""
        row = await self._row(tenant_id, broadcast_id)
        counts = await rows.counts(self._db, row.id) if row.started_at else {}
        deliveries = await rows.delivery_counts(self._db, row.id) if counts.get("written") else {}
        return resource(row, counts, deliveries)

    async def list(self, tenant_id: uuid.UUID, page) -> tuple[list[dict], bool]:
        found, has_more = await rows.page(self._db, tenant_id, page)
        return [list_item(row) for row in found], has_more

    async def update(self, tenant_id: uuid.UUID, broadcast_id: str, body: dict) -> Broadcast:
        parsed = _id(broadcast_id)
        fields = rules.broadcast_fields(body, creating=False)
        await self._check_segment(tenant_id, fields)
        row = await rows.update_draft(self._db, tenant_id, parsed, fields, self._now())
        if row is None:
            raise await self._refused(tenant_id, parsed, rules.refuse_update)
        return row

    async def delete(self, tenant_id: uuid.UUID, broadcast_id: str) -> uuid.UUID:
        parsed = _id(broadcast_id)
        if not await rows.delete(self._db, tenant_id, parsed, rules.DELETABLE, rules.DELETABLE_WHEN_QUIET):
            raise await self._refused(tenant_id, parsed, rules.refuse_delete)
        return parsed

    async def send(self, tenant_id: uuid.UUID, broadcast_id: str, body: dict, links_base: str) -> Broadcast:
        """A draft sent now (queued) or at ``scheduled_at`` (scheduled)."""
        row = await self._row(tenant_id, broadcast_id)
        if row.status != "draft":
            raise rules.refuse_send(row.status)
        rules.check_sendable(row.html, row.text)
        if row.segment_id is None:
            raise Invalid("segment_id", "segment_id: the broadcast's segment was deleted; choose another")
        now = self._now()
        scheduled_at = await self._when((body or {}).get("scheduled_at"), now)
        await self._check_domain(tenant_id, row.sender)
        await self._refuse_spammy(tenant_id, row.segment_id, row.sender, content_of(row))
        after = "scheduled" if scheduled_at is not None else "queued"
        sent = await rows.transition(self._db, tenant_id, row.id, ("draft",), after, now,
                                     scheduled_at=scheduled_at, links_base=self._public_url or links_base)
        if sent is None:
            raise await self._refused(tenant_id, row.id, rules.refuse_send)
        if after == "queued":
            await rows.wake_fanout(self._db)
        return sent

    async def cancel(self, tenant_id: uuid.UUID, broadcast_id: str) -> Broadcast:
        """
        Scheduled: back to draft. Queued or sending: canceled, and no recipient not yet written
        will be (the chunk being written either commits first or sees the cancel).
        """
        parsed = _id(broadcast_id)
        now = self._now()
        row = await rows.transition(self._db, tenant_id, parsed, ("scheduled",), "draft", now, scheduled_at=None)
        if row is None:
            row = await rows.transition(self._db, tenant_id, parsed, ("queued", "sending"), "canceled", now,
                                        wait_reason=None, wait_until=None)
        if row is None:
            raise await self._refused(tenant_id, parsed, rules.refuse_cancel)
        return row

    async def duplicate(self, tenant_id: uuid.UUID, broadcast_id: str) -> Broadcast:
        """A new draft with the same segment, sender, subject, reply-to, preview and content."""
        original = await self._row(tenant_id, broadcast_id)
        fields = {"segment_id": original.segment_id, "sender": original.sender, "subject": original.subject,
                  "reply_to": original.reply_to, "preview_text": original.preview_text, "html": original.html,
                  "text": original.text, "name": rules.duplicate_name(original.name)}
        return await rows.insert(self._db, uuid7(self._clock.seconds()), tenant_id, fields, "draft", None,
                                 original.links_base, self._now())

    async def preview(self, tenant_id: uuid.UUID, broadcast_id: str, body: dict) -> dict:
        """``{subject, html, text}`` for the contact named (``contact_id``), else a member of the
        segment, else none (the fallbacks); the unsubscribe placeholders are left as written.
        With spamd configured, ``spam`` is the rendered message's score."""
        row = await self._row(tenant_id, broadcast_id)
        contact_id = None
        given = (body or {}).get("contact_id")
        if given not in (None, ""):
            contact_id = parse_uuid(given) if isinstance(given, str) else None
            if contact_id is None:
                raise Invalid("contact_id", "contact_id must be a contact id (UUID)")
        shown, contact = await self._rendered(tenant_id, row.segment_id, content_of(row), contact_id)
        if contact_id is not None and contact is None:
            raise Invalid("contact_id", f"contact_id: no contact `{given}` in this account")
        preview = {"object": "broadcast_preview", "subject": shown["subject"], "html": shown["html"],
                   "text": shown["text"], "contact_id": str(contact.id) if contact is not None else None}
        if self._spam is not None and self._spam.enabled:
            preview["spam"] = await self._spam.preview_score(shown, row.sender)
        return preview

    async def _rendered(self, tenant_id: uuid.UUID, segment_id: uuid.UUID | None, content: Content,
                        contact_id: uuid.UUID | None = None) -> tuple[dict, Contact | None]:
        """The broadcast's ``content`` as ``contact_id`` (else a member of its segment, else nobody) gets it."""
        contact = await rows.sample_contact(self._db, tenant_id, segment_id, contact_id)
        shown = personalised(content, contact)
        text = shown.text
        if text is None and shown.html:
            text = html_to_text(shown.html).strip() + "\n"
        return {"subject": shown.subject, "html": shown.html, "text": text}, contact

    async def _refuse_spammy(self, tenant_id: uuid.UUID, segment_id: uuid.UUID | None, sender: str,
                             content: Content) -> None:
        """
        At send (or a create that sends or schedules): with ``spam.broadcast_threshold`` > 0, the
        message rendered for a member of the segment is scored and a score at or over the
        threshold refused (403 ``validation_error`` naming it). spamd failing then refuses too
        (503 ``spam_check_unavailable``): the operator asked for the check. Never on plain sends.
        """
        if self._spam is None or self._spam.broadcast_threshold <= 0:
            return
        shown, _ = await self._rendered(tenant_id, segment_id, content)
        score = await self._spam.spam_check(self._spam.message(shown, sender))
        self._spam.refuse_over_threshold(score)

    async def release_due(self) -> int:
        """Scheduled broadcasts whose time has come are queued for the fan-out (the scheduler)."""
        released = await rows.release_due(self._db, self._now())
        if released:
            await rows.wake_fanout(self._db)
        return len(released)


def content_of(row: Broadcast) -> Content:
    return Content(row.subject, row.html, row.text, row.preview_text)


def resource(row: Broadcast, counts: dict[str, int], deliveries: dict[str, int]) -> dict:
    """The broadcast as ``GET /broadcasts/{id}`` shows it; its strings are never null (unset: ``""``)."""
    segment = str(row.segment_id) if row.segment_id else None
    stats = dict.fromkeys(STATS, 0)
    for status, n in deliveries.items():
        if status in _STAT_OF_STATUS:
            stats[_STAT_OF_STATUS[status]] += n
    total = row.total or 0
    return {
        "object": "broadcast",
        "id": str(row.id),
        "name": row.name,
        "audience_id": segment,
        "segment_id": segment,
        "from": row.sender,
        "subject": row.subject,
        "reply_to": list(row.reply_to),
        "preview_text": row.preview_text or "",
        "html": row.html or "",
        "text": row.text or "",
        "status": row.status,
        "created_at": timefmt.resource(row.created_at),
        "scheduled_at": timefmt.resource(row.scheduled_at),
        "sent_at": timefmt.resource(row.sent_at),
        "topic_id": None,
        # The contacts it was sent to: those written but suppressed (unsubscribed) got nothing.
        "recipients": counts.get("written", 0) - deliveries.get("suppressed", 0),
        "stats": stats,
        "progress": {"done": total - counts.get("pending", 0) if row.started_at else 0, "total": total},
        "wait_reason": row.wait_reason if row.status == "sending" else None,
        "wait_until": timefmt.resource(row.wait_until) if row.status == "sending" else None,
        "failure": row.failure if row.status == "failed" else None,
    }


def list_item(row: BroadcastItem) -> dict:
    segment = str(row.segment_id) if row.segment_id else None
    return {
        "id": str(row.id),
        "name": row.name,
        "audience_id": segment,
        "segment_id": segment,
        "status": row.status,
        "created_at": timefmt.resource(row.created_at),
        "scheduled_at": timefmt.resource(row.scheduled_at),
        "sent_at": timefmt.resource(row.sent_at),
        "topic_id": None,
    }
