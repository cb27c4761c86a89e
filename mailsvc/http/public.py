"""
Public routes behind signed links (no authentication, not rate limited): RFC 8058 one-click
unsubscribe. ``GET`` only shows a page (link scanners prefetch links); ``POST`` unsubscribes.
"""

from __future__ import annotations

from mailsvc.app.unsubscribe import HTML, PAGE_HEADERS, Unsubscribes
from mailsvc.http.router import PUBLIC, Reply, Router


def install(router: Router, unsubscribes: Unsubscribes) -> None:
    @router.route("/public/unsubscribe/<token>", "GET", access=PUBLIC)
    async def unsubscribe_page(request, caller, token: str):
        return Reply(200, await unsubscribes.page(token), HTML, dict(PAGE_HEADERS))

    @router.route("/public/unsubscribe/<token>", "POST", access=PUBLIC)
    async def unsubscribe(request, caller, token: str):
        # Any body is accepted: mailbox providers send ``List-Unsubscribe=One-Click`` (RFC 8058
        # §3.2), the page's button sends the same; the token alone says who and where.
        return Reply(200, await unsubscribes.unsubscribe(token), HTML, dict(PAGE_HEADERS))
