"""
What the dashboard shows beyond the API's own resources (docs/decisions.md, "Dashboard" and
"Web UI for content"): an e-mail's timeline and HTML, the search of e-mails, a webhook's
deliveries, each segment's size, a template's published version, and the previews of HTML the
content pages hand over once and frame from the server. Every read is of the caller's account.
"""

from __future__ import annotations

import re
import secrets
import uuid
from datetime import datetime, timedelta

from mailsvc import timefmt
from mailsvc.app import messages
from mailsvc.domain.audit import ActivityFilter, activity_actor
from mailsvc.domain.errors import Invalid, NotFound
from mailsvc.domain.paging import Page
from mailsvc.domain.webhooks import payload
from mailsvc.mail.inspection import as_dark
from mailsvc.store import audit, emails, previews, segments, templates
from mailsvc.store import dashboard as reads
from mailsvc.store.database import Database

#: A preview lives 10 minutes; at most this many are kept per account (oldest dropped first).
PREVIEW_SECONDS = 600
PREVIEWS_KEPT = 50
PREVIEW_BYTES = 5 * 1024 * 1024
#: The e-mails a search shows, and the deliveries of a webhook shown (newest first).
SEARCH_MOST = 50
#: The statuses the dashboard's e-mail list is filtered by (an e-mail's last event).
EMAIL_FILTERS = ("delivered", "bounced", "complained", "failed", "delivery_delayed", "scheduled", "suppressed",
                 "sent", "queued", "canceled")
DELIVERIES_MOST = 50
#: The entries of an account's activity shown at once.
ACTIVITY_MOST = 50
#: What an activity entry's detail keeps to itself: the account (it is the caller's); and where
#: a sign-in came from (an owner's to see).
_UNSHOWN = ("tenant_id",)
_OWNERS_ONLY = ("client", "user_agent")


_DOMAIN = re.compile(r"[A-Za-z0-9.-]{1,253}")


def _instant(name: str, value: str | None) -> datetime | None:
    """An ISO 8601 instant with its offset (the browser's local midnight, as UTC), or None."""
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise Invalid(name, f"{name} must be an ISO 8601 time with its offset, such as 2026-12-01T00:00:00Z")
    return when


class DashboardReads:
    def __init__(self, db: Database, clock):
        self._db = db
        self._clock = clock

    def seconds(self) -> float:
        """Now, on the reads' clock."""
        return self._clock.seconds()

    async def email_timeline(self, tenant_id: uuid.UUID, email_id: uuid.UUID) -> tuple[list[dict], list[dict]]:
        """The e-mail's events, oldest first, and its deliveries (one per recipient)."""
        events = await reads.email_timeline(self._db, tenant_id, email_id)
        if events is None:
            raise NotFound("Email")
        return events, await reads.email_deliveries(self._db, tenant_id, email_id)

    async def email_html(self, tenant_id: uuid.UUID, email_id: uuid.UUID | None, dark: bool = False) -> str:
        """The e-mail's HTML ('' when it has none); ``dark``: as a mail client in dark mode shows it
        (its ``prefers-color-scheme: dark`` rules applied, ``mail/inspection.as_dark``)."""
        html = await self._email_html(tenant_id, email_id)
        return as_dark(html) if dark else html

    async def _email_html(self, tenant_id: uuid.UUID, email_id: uuid.UUID | None) -> str:
        row = await reads.email_html(self._db, tenant_id, email_id) if email_id is not None else None
        if row is None or email_id is None:
            raise NotFound("Email")
        if row["broadcast_id"] is not None:
            # As its recipient got it (``app/messages``); none once the broadcast is deleted.
            content = await emails.broadcast_content(self._db, row["broadcast_id"], email_id)
            return (messages.broadcast_content(*content).html or "") if content is not None else ""
        return row["html"] or ""

    async def email_particulars(self, tenant_id: uuid.UUID, email_id: uuid.UUID | None) -> dict:
        """
        An e-mail's Message-ID, idempotency key (None once it expired, or without one), its Inbox
        copy's id, and its source: the Inbox copy's as signed, or the message as submitted over
        SMTP; None for any other (built and signed again at each delivery, not kept).
        """
        row = await reads.email_particulars(self._db, tenant_id, email_id) if email_id is not None else None
        if row is None:
            raise NotFound("Email")
        kept = row["inbox_message"] if row["inbox_message"] is not None else row["message"]
        return {"message_id": row["message_id"], "idempotency_key": row["idempotency_key"],
                "inbox_id": str(row["inbox_id"]) if row["inbox_id"] is not None else None,
                "source": bytes(kept).decode("utf-8", "replace") if kept is not None else None,
                "source_signed": row["inbox_message"] is not None}

    async def search_emails(self, tenant_id: uuid.UUID, text: str, status: str | None, page: Page,
                            since: str | None = None, until: str | None = None,
                            domain: str | None = None) -> tuple[list[dict], bool]:
        """A page of the e-mails, newest first, whose subject, sender or recipients hold ``text``
        (or whose id it is; "" for any), whose last event is ``status`` (None for any), made at
        ``since`` or later and before ``until`` (ISO 8601 instants), sent from ``domain``."""
        if status is not None and status not in EMAIL_FILTERS:
            raise Invalid("status", f"status must be one of {', '.join(EMAIL_FILTERS)}")
        window = (_instant("since", since), _instant("until", until))
        if domain is not None and not _DOMAIN.fullmatch(domain):
            raise Invalid("domain", "domain must be a domain name, such as example.com")
        return await reads.search_emails(self._db, tenant_id, text, status, page, window,
                                         domain.lower() if domain else None)

    async def webhook_deliveries(self, tenant_id: uuid.UUID, webhook_id: uuid.UUID,
                                 page: Page) -> tuple[list[dict], bool, dict]:
        """A page of the webhook's deliveries, newest first, each with its ``payload`` as sent and
        its attempts (``attempts_made``); whether more lie beyond it; and of the past 24 hours:
        of the deliveries last attempted then, how many were delivered and attempted, and of the
        attempts made then, how many succeeded and how many were made."""
        now = timefmt.from_seconds(self._clock.seconds())
        rows, more = await reads.webhook_deliveries(self._db, tenant_id, webhook_id, page)
        shown = [{**r, "payload": payload({"type": r["type"], "naming": r["naming"],
                                           "created_at": r["event_created_at"], "data": r["data"]})} for r in rows]
        day = await reads.webhook_outcomes(self._db, tenant_id, webhook_id, now - timedelta(hours=24))
        return shown, more, {name: int(day[name]) for name in ("delivered", "attempted", "succeeded", "made")}

    async def activity(self, tenant_id: uuid.UUID, page: Page, found: ActivityFilter,
                       owner: bool) -> tuple[list[dict], bool]:
        """
        A page of the account's activity, newest first (``store.audit.activity``): each entry's
        id, time, action, who acted (``activity_actor``) and its detail as the log keeps it
        (where a sign-in came from only for an ``owner``).
        """
        rows, more = await audit.activity(self._db, tenant_id, page, found)
        hidden = _UNSHOWN if owner else (*_UNSHOWN, *_OWNERS_ONLY)
        return [{
            "id": row["id"], "at": row["at"], "action": row["action"],
            "actor": activity_actor(row["actor"], row["actor_email"], row["actor_key"]),
            "detail": {k: v for k, v in row["detail"].items() if k not in hidden},
        } for row in rows], more

    async def segment_sizes(self, tenant_id: uuid.UUID) -> list[dict]:
        return await segments.sizes(self._db, tenant_id)

    async def published_template(self, tenant_id: uuid.UUID, key: uuid.UUID | str) -> dict:
        """The template's published version (``version_id`` None when it was never published)."""
        row = await templates.published(self._db, tenant_id, key)
        if row is None:
            raise NotFound("Template")
        return row

    async def keep_preview(self, tenant_id: uuid.UUID, html: object) -> str:
        """Keep the HTML for a frame to load (every process of every node serves it); its token."""
        if not isinstance(html, str):
            raise Invalid("html", "html: must be a string")
        data = html.encode("utf-8")
        if len(data) > PREVIEW_BYTES:
            raise Invalid("html", "html: too large")
        token = secrets.token_urlsafe(18)
        await previews.keep(self._db, token, tenant_id, data, PREVIEW_SECONDS, PREVIEWS_KEPT)
        return token

    async def preview(self, tenant_id: uuid.UUID, token: str) -> bytes:
        html = await previews.get(self._db, token, tenant_id)
        if html is None:
            raise NotFound("Preview")
        return html
