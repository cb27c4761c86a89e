"""``POST /emails/check``: a message scored by SpamAssassin, nothing sent."""

from __future__ import annotations

from mailsvc.app.apikeys import Caller
from mailsvc.app.spam import SpamChecks
from mailsvc.http.body import read_json
from mailsvc.http.operation import STR, STR_OR_LIST, Operation, obj
from mailsvc.http.router import FULL, route
from mailsvc.http.schemas import SPAM_SCORE


class SpamResource:
    def __init__(self, spam: SpamChecks):
        self._spam = spam

    @route("POST", "/emails/check", access=FULL, native=True, multi_line=("html", "text"),
           op=Operation("Score a message with SpamAssassin; nothing is sent (503 without spam.spamd)",
                        obj(("from", "subject"), **{"from": STR}, to=STR_OR_LIST, subject=STR, html=STR,
                            text=STR),
                        {200: SPAM_SCORE}, errors=(503,)))
    async def check(self, request, caller: Caller):
        return await self._spam.check(read_json(request))
