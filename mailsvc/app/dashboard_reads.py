"""
What the dashboard shows beyond the API's own resources (docs/decisions.md, "Dashboard" and
"Web UI for content"): an e-mail's timeline and HTML, the search of e-mails, a webhook's
deliveries, each segment's size, a template's published version, and the previews of HTML the
content pages hand over once and frame from the server. Every read is of the caller's account.
"""

from __future__ import annotations

import secrets
import uuid

from mailsvc.app import messages
from mailsvc.domain.errors import Invalid, NotFound
from mailsvc.domain.paging import Page
from mailsvc.store import dashboard as reads
from mailsvc.store import emails, previews, segments, templates
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


class DashboardReads:
    def __init__(self, db: Database):
        self._db = db

    async def email_timeline(self, tenant_id: uuid.UUID, email_id: uuid.UUID) -> tuple[list[dict], list[dict]]:
        """The e-mail's events, oldest first, and its deliveries (one per recipient)."""
        events = await reads.email_timeline(self._db, tenant_id, email_id)
        if events is None:
            raise NotFound("Email")
        return events, await reads.email_deliveries(self._db, tenant_id, email_id)

    async def email_html(self, tenant_id: uuid.UUID, email_id: uuid.UUID | None) -> str:
        """The e-mail's HTML ('' when it has none)."""
        row = await reads.email_html(self._db, tenant_id, email_id) if email_id is not None else None
        if row is None or email_id is None:
            raise NotFound("Email")
        if row["broadcast_id"] is not None:
            # As its recipient got it (``app/messages``); none once the broadcast is deleted.
            content = await emails.broadcast_content(self._db, row["broadcast_id"], email_id)
            return (messages.broadcast_content(content, content).html or "") if content is not None else ""
        return row["html"] or ""

    async def search_emails(self, tenant_id: uuid.UUID, text: str, status: str | None,
                            page: Page) -> tuple[list[dict], bool]:
        """A page of the e-mails, newest first, whose subject, sender or recipients hold ``text``
        (or whose id it is; "" for any), whose last event is ``status`` (None for any)."""
        if status is not None and status not in EMAIL_FILTERS:
            raise Invalid("status", f"status must be one of {', '.join(EMAIL_FILTERS)}")
        return await reads.search_emails(self._db, tenant_id, text, status, page)

    async def webhook_deliveries(self, tenant_id: uuid.UUID, webhook_id: uuid.UUID) -> list[dict]:
        return await reads.webhook_deliveries(self._db, tenant_id, webhook_id, DELIVERIES_MOST)

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
