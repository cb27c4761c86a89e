"""
What the content pages of the dashboard need beyond the API: each segment's size, and
previews of HTML (a builder render, a template or a broadcast preview) shown in a sandboxed frame.
A frame made from ``srcdoc`` or a ``blob:`` would inherit the dashboard's CSP (no inline styles)
and show the e-mail unstyled, so the page hands the HTML over once and the frame loads it from
here with the preview CSP of an e-mail. docs/decisions.md, "Web UI for content".
"""

from __future__ import annotations

from mailsvc.app.apikeys import Caller
from mailsvc.app.dashboard_reads import DashboardReads
from mailsvc.http.body import read_json
from mailsvc.http.dashboard.ui import PREVIEW_CSP
from mailsvc.http.operation import INT, LIST_ONLY, STR, UUID, Operation, obj
from mailsvc.http.router import SESSION, SESSION_FRAME, TEMPLATE_BODY_LIMIT, Reply, route
from mailsvc.ids import parse_uuid

#: Social icons and logos the renderer names are shown (http/https images); nothing else loads.
FRAME_CSP = PREVIEW_CSP.replace("img-src data:", "img-src data: https: http:")


class ContentReads:
    def __init__(self, reads: DashboardReads):
        self._reads = reads

    @route("GET", "/dashboard/segment-sizes", access=SESSION,
           op=Operation("The account's segments with their number of contacts", responses={200: {
               **LIST_ONLY, "properties": {**LIST_ONLY["properties"], "data": {"type": "array", "items": obj(
                   ("id", "name", "contacts"), id=UUID, name=STR, contacts=INT)}}}}))
    async def segment_sizes(self, request, caller: Caller):
        rows = await self._reads.segment_sizes(caller.tenant.id)
        return {"object": "list", "has_more": False,
                "data": [{"id": str(r["id"]), "name": r["name"], "contacts": r["contacts"]} for r in rows]}

    @route("POST", "/dashboard/previews", access=SESSION, body_limit=TEMPLATE_BODY_LIMIT, multi_line=("html",),
           op=Operation("Keep HTML for a sandboxed preview frame (10 minutes)",
                        obj(("html",), html=STR),
                        {200: obj(("object", "id", "url"), object={"const": "preview"}, id=STR, url=STR)}))
    async def keep_preview(self, request, caller: Caller):
        token = await self._reads.keep_preview(caller.tenant.id, read_json(request).get("html"))
        return {"object": "preview", "id": token, "url": f"/dashboard/previews/{token}"}

    @route("GET", "/dashboard/previews/<token>", access=SESSION_FRAME,
           op=Operation("A kept preview's HTML, under the e-mail preview policy", responses={200: None},
                        content_type="text/html"))
    async def preview(self, request, caller: Caller, token: str):
        html = await self._reads.preview(caller.tenant.id, token)
        return Reply(200, html, b"text/html; charset=utf-8", {
            "Content-Security-Policy": FRAME_CSP, "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer", "X-Frame-Options": "SAMEORIGIN", "Cache-Control": "no-store",
        })

    @route("GET", "/dashboard/templates/<key>/published", access=SESSION,
           op=Operation(
               "A template's published version (for the draft-against-published diff)", responses={200: obj(
                   ("object", "id"), object={"const": "template_version"}, id={"type": ["string", "null"]},
                   **{"from": STR}, subject=STR, html=STR, text=STR)}))
    async def published(self, request, caller: Caller, key: str):
        """The published version's content, for the draft-against-published diff before a publish."""
        parsed = parse_uuid(key)
        row = await self._reads.published_template(caller.tenant.id, parsed or key)
        if row["version_id"] is None:
            return {"object": "template_version", "id": None}
        return {"object": "template_version", "id": str(row["version_id"]), "from": row["sender"] or "",
                "subject": row["subject"] or "", "html": row["html"] or "", "text": row["text"] or ""}
