"""``POST /emails/check``: a message scored by SpamAssassin, nothing sent."""

from __future__ import annotations

from mailsvc.app.apikeys import Caller
from mailsvc.app.spam import SpamChecks
from mailsvc.http.body import read_json
from mailsvc.http.router import FULL, route


class SpamResource:
    def __init__(self, spam: SpamChecks):
        self._spam = spam

    @route("POST", "/emails/check", access=FULL, native=True, multi_line=("html", "text"))
    async def check(self, request, caller: Caller):
        return await self._spam.check(read_json(request))
