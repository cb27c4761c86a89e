"""
What the content pages of the dashboard need beyond the API (issue 21): each segment's size, and
previews of HTML (a builder render, a template or a broadcast preview) shown in a sandboxed frame.
A frame made from ``srcdoc`` or a ``blob:`` would inherit the dashboard's CSP (no inline styles)
and show the e-mail unstyled, so the page hands the HTML over once and the frame loads it from
here with the preview CSP of an e-mail. docs/decisions.md, "Web UI for content".
"""

from __future__ import annotations

import secrets

from mailsvc.app.apikeys import Caller
from mailsvc.domain.errors import Invalid, NotFound
from mailsvc.http.body import read_json
from mailsvc.http.dashboard.ui import PREVIEW_CSP
from mailsvc.http.router import SESSION, SESSION_FRAME, TEMPLATE_BODY_LIMIT, Reply, route
from mailsvc.ids import parse_uuid
from mailsvc.store import previews, segments, templates
from mailsvc.store.database import Database

#: A preview lives 10 minutes; at most this many are kept per account (oldest dropped first).
PREVIEW_SECONDS = 600
PREVIEWS_KEPT = 50
PREVIEW_BYTES = 5 * 1024 * 1024
#: Social icons and logos the renderer names are shown (http/https images); nothing else loads.
FRAME_CSP = PREVIEW_CSP.replace("img-src data:", "img-src data: https: http:")


class ContentReads:
    def __init__(self, db: Database):
        self._db = db

    @route("GET", "/dashboard/segment-sizes", access=SESSION)
    async def segment_sizes(self, request, caller: Caller):
        rows = await segments.sizes(self._db, caller.tenant.id)
        return {"object": "list", "has_more": False,
                "data": [{"id": str(r["id"]), "name": r["name"], "contacts": r["contacts"]} for r in rows]}

    @route("POST", "/dashboard/previews", access=SESSION, body_limit=TEMPLATE_BODY_LIMIT, multi_line=("html",))
    async def keep_preview(self, request, caller: Caller):
        body = read_json(request)
        html = body.get("html")
        if not isinstance(html, str):
            raise Invalid("html", "html: must be a string")
        data = html.encode("utf-8")
        if len(data) > PREVIEW_BYTES:
            raise Invalid("html", "html: too large")
        token = secrets.token_urlsafe(18)
        await previews.keep(self._db, token, caller.tenant.id, data, PREVIEW_SECONDS, PREVIEWS_KEPT)
        return {"object": "preview", "id": token, "url": f"/dashboard/previews/{token}"}

    @route("GET", "/dashboard/previews/<token>", access=SESSION_FRAME)
    async def preview(self, request, caller: Caller, token: str):
        html = await previews.get(self._db, token, caller.tenant.id)
        if html is None:
            raise NotFound("Preview")
        return Reply(200, html, b"text/html; charset=utf-8", {
            "Content-Security-Policy": FRAME_CSP, "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer", "X-Frame-Options": "SAMEORIGIN", "Cache-Control": "no-store",
        })

    @route("GET", "/dashboard/templates/<key>/published", access=SESSION)
    async def published(self, request, caller: Caller, key: str):
        """The published version's content, for the draft-against-published diff before a publish."""
        parsed = parse_uuid(key)
        row = await templates.published(self._db, caller.tenant.id, parsed or key)
        if row is None:
            raise NotFound("Template")
        if row["version_id"] is None:
            return {"object": "template_version", "id": None}
        return {"object": "template_version", "id": str(row["version_id"]), "from": row["sender"] or "",
                "subject": row["subject"] or "", "html": row["html"] or "", "text": row["text"] or ""}
