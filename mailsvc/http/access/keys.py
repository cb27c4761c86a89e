"""The API's callers: an API key with full access, or one restricted to sending (``Bearer`` key)."""

from __future__ import annotations

from mailsvc.app.apikeys import Caller, KeyRing
from mailsvc.http.access.base import Access, AccountRate, bearer
from mailsvc.http.errors import ApiError


class ApiKeyAccess(Access):
    """An API key in ``Authorization: Bearer``, then the account's rate; ``full``: no sending-only key."""

    def __init__(self, kind: str, keyring: KeyRing, rate: AccountRate, full: bool):
        self.kind = kind
        self._keyring = keyring
        self._rate = rate
        self._full = full

    async def caller(self, request) -> Caller:
        presented = bearer(request)
        if presented is None:
            raise ApiError(401, "missing_api_key", "Missing API key in the authorization header.")
        caller = await self._keyring.authenticate(presented)
        if caller is None:
            raise ApiError(403, "invalid_api_key", "API key is invalid")
        if self._full and not caller.full_access:
            raise ApiError(401, "restricted_api_key", "This API key is restricted to only send emails.")
        await self._rate.take(caller)
        return caller
