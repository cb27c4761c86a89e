"""
The email resource after acceptance: reading it back, rescheduling and cancelling scheduled
mail, attachments behind signed links, and releasing scheduled mail when its time comes.
"""

from __future__ import annotations

import builtins
import struct
import uuid
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote

from mailsvc import timefmt
from mailsvc.app import messages
from mailsvc.crypto.links import link_payload, signed_link
from mailsvc.domain.delivery import first_event, first_last_event, first_status, first_times, sent_event
from mailsvc.domain.email import SchedulePhrase, parse_schedule, read_phrase, schedule_within
from mailsvc.domain.errors import LinkRefused, NotCancelable, NotFound, NotReschedulable
from mailsvc.domain.paging import Page
from mailsvc.store import emails as rows
from mailsvc.store import events
from mailsvc.store.accept import DELIVERIES
from mailsvc.store.database import Database, Transaction

DOWNLOAD_LINK_LIFETIME = 3600
RELEASE_BATCH = 200


class Schedules:
    """
    Reads ``scheduled_at``: ISO 8601 at once, a natural-language phrase in a thread
    (``run_blocking``). dateparser takes milliseconds a phrase even in English only (up to 3 ms
    for 256 characters, measured), which a batch of 100 would keep the reactor for.
    """

    def __init__(self, run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]], languages: tuple[str, ...]):
        self._run_blocking = run_blocking
        self._languages = languages

    async def read(self, field: str, value: object, now: datetime) -> datetime | None:
        when = parse_schedule(field, value, now)
        return await self.phrase(when, now) if isinstance(when, SchedulePhrase) else when

    async def phrase(self, phrase: SchedulePhrase, now: datetime) -> datetime:
        """The date of ``phrase``, checked against the window."""
        parsed = await self._run_blocking(lambda: read_phrase(phrase, now, self._languages))
        return schedule_within(phrase.field, parsed, now)


class Emails:
    def __init__(
        self,
        clock,
        db: Database,
        link_key: bytes,
        suppressed_for: Callable[[Transaction, Mapping[uuid.UUID, set[str]]],
                                 Awaitable[dict[uuid.UUID, dict[str, str]]]],
        schedules: Schedules,
    ):
        self._clock = clock
        self.db = db
        self._link_key = link_key
        self._suppressed_for = suppressed_for
        self._schedules = schedules

    def _now(self):
        return timefmt.from_seconds(self._clock.seconds())

    # Reading

    async def get(self, tenant_id: uuid.UUID, email_id: uuid.UUID, domain_id: uuid.UUID | None = None) -> dict:
        """
        The email, or NotFound. A key restricted to a domain passes its ``domain_id``: an email
        sent from another domain of the account is absent to it, like another account's.
        """
        row = await rows.get(self.db, tenant_id, email_id, domain_id)
        if row is None:
            raise NotFound("Email")
        if row["broadcast_id"] is not None:
            # Its body is the broadcast's, as its recipient got it (``app/messages``); none
            # once the broadcast is deleted.
            content = await rows.broadcast_content(self.db, row["broadcast_id"], email_id)
            if content is not None:
                shown = messages.broadcast_content(*content)
                row = {**row, "html": shown.html, "text": shown.text}
        return row

    async def list(self, tenant_id: uuid.UUID, page: Page) -> tuple[builtins.list[dict], bool]:
        return await rows.page(self.db, tenant_id, page)

    async def deliveries(self, tenant_id: uuid.UUID, email_id: uuid.UUID) -> builtins.list[dict]:
        return [
            {"id": str(r["id"]), "recipient": r["recipient"], "status": r["status"], "attempts": r["attempts"],
             "last_response": r["last_response"], "updated_at": timefmt.resource(r["updated_at"])}
            for r in await rows.deliveries(self.db, tenant_id, email_id)
        ]

    @staticmethod
    def list_item(row: dict) -> dict:
        recipients = row["recipients"]
        return {
            "id": str(row["id"]),
            "message_id": row["message_id"],
            "to": recipients["to"],
            "from": row["sender"],
            "created_at": timefmt.resource(row["created_at"]),
            "subject": row["subject"],
            "bcc": recipients["bcc"] or None,
            "cc": recipients["cc"] or None,
            "reply_to": recipients["reply_to"] or None,
            "last_event": row["last_event"],
            "scheduled_at": timefmt.resource(row["scheduled_at"]),
        }

    @staticmethod
    def resource(row: dict) -> dict:
        """The retrieved email: the list item's fields with bodies, tags and empty lists kept."""
        recipients = row["recipients"]
        return {
            "object": "email",
            **Emails.list_item(row),
            "html": row["html"],
            "text": row["text"],
            "bcc": recipients["bcc"],
            "cc": recipients["cc"],
            "reply_to": recipients["reply_to"],
            "tags": row["tags"],
        }

    # Scheduled mail

    async def reschedule(self, tenant_id: uuid.UUID, email_id: uuid.UUID, when: object) -> None:
        scheduled_at = await self._schedules.read("scheduled_at", when, self._now())
        if not await rows.reschedule(self.db, tenant_id, email_id, scheduled_at):
            await self.get(tenant_id, email_id)  # 404 when absent
            raise NotReschedulable("Only scheduled emails can be rescheduled.")

    async def cancel(self, tenant_id: uuid.UUID, email_id: uuid.UUID) -> None:
        if not await self.db.run("cancel_email", rows.cancel, tenant_id, email_id, self._now()):
            await self.get(tenant_id, email_id)
            raise NotCancelable("Only scheduled emails can be canceled.")

    async def release_due(self) -> int:
        """Release scheduled emails whose time has come; each is claimed by exactly one node."""
        return await self.db.run("release_scheduled", self._release)

    async def _release(self, txn: Transaction) -> int:
        """
        A batch of due emails in one transaction and a fixed number of statements: their
        deliveries, one suppression lookup, their events, the deliveries' and the emails' new
        states.
        """
        now = self._now()
        due = await rows.claim_due(txn, now, RELEASE_BATCH)
        if not due:
            return 0
        deliveries: dict[uuid.UUID, builtins.list[dict]] = {email["id"]: [] for email in due}
        for d in await rows.scheduled_deliveries(txn, [email["id"] for email in due]):
            deliveries[d["email_id"]].append(d)
        recipients: dict[uuid.UUID, set[str]] = {}
        for email in due:
            recipients.setdefault(email["tenant_id"], set()).update(d["recipient"] for d in deliveries[email["id"]])
        suppressed_by_tenant = await self._suppressed_for(txn, recipients)
        entries: builtins.list[tuple[uuid.UUID, str, dict]] = []
        delivery_states: builtins.list[rows.ReleasedDelivery] = []
        email_states: builtins.list[rows.ReleasedEmail] = []
        for email in due:
            tenant_id = email["tenant_id"]
            suppressed = {a.lower(): origin for a, origin in suppressed_by_tenant.get(tenant_id, {}).items()}
            live = [d["recipient"] for d in deliveries[email["id"]] if d["recipient"].lower() not in suppressed]
            base = {"email_id": str(email["id"]), "created_at": timefmt.iso(now), "to": live}
            if live:
                entries.append((tenant_id, "email.sent", sent_event(
                    email["id"], email["sender"], email["subject"], email["tags"], email["scheduled_at"], live, now)))
            for d in deliveries[email["id"]]:
                origin = suppressed.get(d["recipient"].lower())
                status = first_status(origin, False)
                due_at, retry_until = first_times(status, now)
                delivery_states.append(rows.ReleasedDelivery(d["id"], status, due_at, retry_until))
                event = first_event(status, base, str(d["id"]), d["recipient"], origin)
                if event is not None:
                    entries.append((tenant_id, *event))
            email_states.append(rows.ReleasedEmail(email["id"], first_last_event(bool(live), False)))
        await events.record_many(txn, self._clock, entries)
        await rows.release(txn, now, delivery_states, email_states)
        txn.notify(DELIVERIES)
        return len(due)

    # Attachments

    async def attachments(self, tenant_id: uuid.UUID, email_id: uuid.UUID,
                          page: Page) -> tuple[builtins.list[dict], bool]:
        await self.get(tenant_id, email_id)
        return await rows.attachments(self.db, tenant_id, email_id, page)

    async def attachment(self, tenant_id: uuid.UUID, email_id: uuid.UUID, attachment_id: uuid.UUID) -> dict:
        row = await rows.attachment(self.db, tenant_id, email_id, attachment_id)
        if row is None:
            raise NotFound("Attachment")
        return row

    def attachment_item(self, row: dict, base_url: str) -> dict:
        expires = int(self._clock.seconds()) + DOWNLOAD_LINK_LIFETIME
        return {
            "id": str(row["id"]),
            "filename": row["filename"],
            "size": row["size"],
            "content_type": row["content_type"],
            "content_disposition": row["content_disposition"],
            "content_id": row["content_id"],
            "download_url": f"{base_url}/public/attachments/{self._link(row['id'], expires)}",
            "expires_at": timefmt.from_seconds(expires).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

    def _link(self, attachment_id: uuid.UUID, expires: int) -> str:
        return signed_link(self._link_key, attachment_id.bytes + struct.pack(">Q", expires))

    async def download(self, token: str) -> dict:
        payload = link_payload(self._link_key, token)
        if payload is None or len(payload) != 24:
            raise LinkRefused("This download link is invalid.")
        attachment_id = uuid.UUID(bytes=payload[:16])
        (expires,) = struct.unpack(">Q", payload[16:])
        if self._clock.seconds() > expires:
            raise LinkRefused("This download link has expired.")
        row = await rows.attachment_content(self.db, attachment_id)
        if row is None:
            raise NotFound("Attachment")
        return row

    @staticmethod
    def download_disposition(row: dict) -> str:
        filename = row["filename"] or "attachment"
        return f"attachment; filename*=UTF-8''{quote(filename)}"
