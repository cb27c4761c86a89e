"""
The operator's callers: an operator token (``Bearer``: the configured one, or a named one), and
a console session (its own cookie, never the dashboard's, and its CSRF token on state-changing
methods; docs/decisions.md, "Operator console"), whose sign-in is refused from any other site.
The console's routes are same-site only (no CORS) and never cached.
"""

from __future__ import annotations

import hmac

from mailsvc.app.audit import CONFIGURED_TOKEN_NAME
from mailsvc.app.console import ACTOR_PREFIX as CONSOLE_ACTOR_PREFIX
from mailsvc.http.access.base import NO_SESSION, Access, SameSite, bearer, check_csrf
from mailsvc.http.context import Operator
from mailsvc.http.errors import DASHBOARD, MAIN, ApiError

#: The operator console's session cookie: never the dashboard's.
CONSOLE_COOKIE = b"mailsvc_operator"


def console_token(request) -> str | None:
    """The operator console's session cookie's token, if the request carries one."""
    value = request.received_cookies.get(CONSOLE_COOKIE)
    return value.decode("latin-1") if value else None


class OperatorTokenAccess(Access):
    """The configured operator token, or one of the named ones; its errors take the route's envelope."""

    def __init__(self, kind: str, token: str, named_tokens=None):
        self.kind = kind
        self._token = token.encode("utf-8")
        #: ``authenticate(token) -> name | None``: the named operator tokens
        #: (mailsvc.app.audit.OperatorTokens); None: the configured token only.
        self._named_tokens = named_tokens

    async def caller(self, request) -> Operator:
        presented = bearer(request)
        if presented is None:
            raise ApiError(401, "missing_api_key", "Missing operator token in the authorization header.",
                           native_code="unauthorized")
        if hmac.compare_digest(presented.encode("utf-8"), self._token):
            return Operator(CONFIGURED_TOKEN_NAME)
        name = await self._named_tokens.authenticate(presented) if self._named_tokens else None
        if name is None:
            raise ApiError(403, "invalid_api_key", "Operator token is invalid", native_code="forbidden")
        return Operator(name)


class ConsoleSessionAccess(Access):
    """A console session: the operator of its cookie; a main-surface route's errors take the dashboard's envelope."""

    def __init__(self, kind: str, console):
        self.kind = kind
        #: ``authenticate(token) -> email | None`` and ``csrf_matches(token, presented)``
        #: (mailsvc.app.console.Console).
        self._console = console
        self._same_site = SameSite()

    def envelope(self, surface: str) -> str:
        return DASHBOARD if surface == MAIN else surface

    async def caller(self, request) -> Operator:
        token = console_token(request)
        email = await self._console.authenticate(token) if token else None
        if token is None or email is None:
            raise NO_SESSION
        check_csrf(request, self._same_site, token, self._console.csrf_matches)
        return Operator(CONSOLE_ACTOR_PREFIX + email, email)
