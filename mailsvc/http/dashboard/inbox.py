"""
The development inbox of the dashboard (issue 30): ``GET /dashboard/inbox`` (newest first,
paginated as the API's lists), ``GET /dashboard/inbox/{id}`` (the message read and checked)
and its HTML for the sandboxed preview frame, under the e-mail preview policy (``?scheme=dark``:
with the message's dark-mode rules applied).
"""

from __future__ import annotations

from mailsvc.app.apikeys import Caller
from mailsvc.app.inbox import Inbox
from mailsvc.http.dashboard.ui import PREVIEW_CSP
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import SESSION, SESSION_FRAME, Reply, route
from mailsvc.ids import parse_uuid


class InboxResource:
    def __init__(self, inbox: Inbox):
        self._inbox = inbox

    @route("GET", "/dashboard/inbox", access=SESSION)
    async def listing(self, request, caller: Caller):
        data, more = await self._inbox.page(caller.tenant.id, page_of(request.args, 20))
        return envelope(data, more)

    @route("GET", "/dashboard/inbox/<inbox_id>", access=SESSION)
    async def message(self, request, caller: Caller, inbox_id: str):
        return await self._inbox.message(caller.tenant.id, parse_uuid(inbox_id))

    @route("GET", "/dashboard/inbox/<inbox_id>/html", access=SESSION_FRAME)
    async def html(self, request, caller: Caller, inbox_id: str):
        # ?scheme=dark: as a client in dark mode shows it (the preview's toggle).
        dark = request.args.get(b"scheme") == [b"dark"]
        html = await self._inbox.html(caller.tenant.id, parse_uuid(inbox_id), dark)
        return Reply(200, html.encode("utf-8"), b"text/html; charset=utf-8", {
            "Content-Security-Policy": PREVIEW_CSP, "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer", "X-Frame-Options": "SAMEORIGIN", "Cache-Control": "no-store",
        })
