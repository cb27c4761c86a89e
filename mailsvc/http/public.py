"""
Public routes behind signed links (no authentication, not rate limited): RFC 8058 one-click
unsubscribe. ``GET`` only shows a page (link scanners prefetch links); ``POST`` unsubscribes.
"""

from __future__ import annotations

from mailsvc.app.unsubscribe import HTML, PAGE_HEADERS, Unsubscribes
from mailsvc.http.operation import Operation
from mailsvc.http.router import PUBLIC, Reply, route


class UnsubscribeResource:
    def __init__(self, unsubscribes: Unsubscribes):
        self._unsubscribes = unsubscribes

    @route("GET", "/public/unsubscribe/<token>", access=PUBLIC,
           op=Operation("The unsubscribe page", responses={200: None}, content_type="text/html",
                        errors=(403,)))
    async def unsubscribe_page(self, request, caller, token: str):
        return Reply(200, await self._unsubscribes.page(token), HTML, dict(PAGE_HEADERS))

    @route("POST", "/public/unsubscribe/<token>", access=PUBLIC,
           op=Operation("Unsubscribe (RFC 8058 one-click or the page's form)", responses={200: None},
                        content_type="text/html", errors=(403,)))
    async def unsubscribe(self, request, caller, token: str):
        # Any body is accepted: mailbox providers send ``List-Unsubscribe=One-Click`` (RFC 8058
        # §3.2), the page's button sends the same; the token alone says who and where.
        return Reply(200, await self._unsubscribes.unsubscribe(token), HTML, dict(PAGE_HEADERS))
