"""The tenant's own usage against its quotas (``GET /v1/usage``, any full-access key)."""

from __future__ import annotations

from mailsvc.app.accounts import Accounts
from mailsvc.http.errors import NATIVE
from mailsvc.http.operation import Operation
from mailsvc.http.router import FULL, route
from mailsvc.http.schemas import USAGE


class UsageResource:
    def __init__(self, accounts: Accounts):
        self._accounts = accounts

    @route("GET", "/v1/usage", access=FULL, surface=NATIVE,
           op=Operation("The account's sends and recipients today and this month against its quotas",
                        responses={200: USAGE}))
    async def usage(self, request, caller):
        return await self._accounts.usage(caller.tenant)
