"""
The development inbox of the dashboard: ``GET /dashboard/inbox`` (newest first,
paginated as the API's lists), ``GET /dashboard/inbox/{id}`` (the message read and checked)
and its HTML for the sandboxed preview frame, under the e-mail preview policy (``?scheme=dark``:
with the message's dark-mode rules applied).
"""

from __future__ import annotations

from mailsvc.app.apikeys import Caller
from mailsvc.app.inbox import Inbox
from mailsvc.http.dashboard.ui import PREVIEW_CSP
from mailsvc.http.operation import PAGE, Operation, listing
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import SESSION, SESSION_FRAME, Reply, route
from mailsvc.http.schemas import INBOX_ITEM, INBOX_MESSAGE
from mailsvc.ids import parse_uuid


class InboxResource:
    def __init__(self, inbox: Inbox):
        self._inbox = inbox

    @route("GET", "/dashboard/inbox", access=SESSION,
           op=Operation("The development inbox: mail stopped at the door (test addresses, capture mode),"
                        " newest first", responses={200: listing(INBOX_ITEM)}, query=PAGE))
    async def listing(self, request, caller: Caller):
        data, more = await self._inbox.page(caller.tenant.id, page_of(request.args, 20))
        return envelope(data, more)

    @route("GET", "/dashboard/inbox/<inbox_id>", access=SESSION,
           op=Operation("A message of the development inbox as signed, with a receiver's checks",
                        responses={200: INBOX_MESSAGE}))
    async def message(self, request, caller: Caller, inbox_id: str):
        return await self._inbox.message(caller.tenant.id, parse_uuid(inbox_id))

    @route("GET", "/dashboard/inbox/<inbox_id>/html", access=SESSION_FRAME,
           op=Operation("An inbox message's HTML for a sandboxed preview (scheme=dark: as a"
                        " client in dark mode shows it)", responses={200: None},
                        content_type="text/html", query=(("scheme", {"enum": ["dark"]}),)))
    async def html(self, request, caller: Caller, inbox_id: str):
        # ?scheme=dark: as a client in dark mode shows it (the preview's toggle).
        dark = request.args.get(b"scheme") == [b"dark"]
        html = await self._inbox.html(caller.tenant.id, parse_uuid(inbox_id), dark)
        return Reply(200, html.encode("utf-8"), b"text/html; charset=utf-8", {
            "Content-Security-Policy": PREVIEW_CSP, "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer", "X-Frame-Options": "SAMEORIGIN", "Cache-Control": "no-store",
        })
