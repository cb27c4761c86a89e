"""
The operator console's own routes (docs/decisions.md, "Operator console"):
operators' accounts over the operator API, and the console's sign-in, sign-out and ``/me``.
What the console shows and does is the operator API itself, served to a console session at
``/console/admin/v1/...`` by the same handlers (``Router.mount``).
"""

from __future__ import annotations

from mailsvc import timefmt
from mailsvc.app.audit import AuditLog
from mailsvc.app.console import Console
from mailsvc.app.signin import Challenge, SignedIn
from mailsvc.domain.clients import network_of
from mailsvc.http.body import read_json
from mailsvc.http.dashboard.auth import Cookies, base_url
from mailsvc.http.errors import NATIVE
from mailsvc.http.router import (
    CONSOLE_COOKIE,
    CONSOLE_SIGN_IN,
    OPERATOR,
    OPERATOR_SESSION,
    Operator,
    Reply,
    console_token,
    route,
)
from mailsvc.http.security import ConsoleSecurity, challenge_json

#: Where the console takes a set-password token (in the fragment: never sent to a server).
SET_PASSWORD_PATH = "/console/#/set-password/"
#: The audit log's action of an operator's set-password link.
LINK = "operator.link"


def operator_json(row: dict) -> dict:
    return {
        "object": "operator",
        "id": str(row["id"]),
        "email": row["email"],
        "name": row["name"],
        "status": "active" if row["password_hash"] else "invited",
        "two_factor": bool(row.get("two_factor")),
        "created_at": timefmt.resource(row["created_at"]),
    }


class ConsoleResource:
    def __init__(self, console: Console, public_url: str, audit_log: AuditLog):
        self._console = console
        self._public_url = public_url
        self._audit_log = audit_log
        self._cookies = Cookies(CONSOLE_COOKIE, console.settings.lifetime_seconds, same_site="Strict")
        #: Two-factor sign-in of operators: mounted beside this resource.
        self.security = ConsoleSecurity(console, self._signed_in, audit_log)

    def _signed_in(self, request, signed: SignedIn | Challenge) -> Reply:
        if isinstance(signed, Challenge):  # two-factor sign-in: no session until the code (``security``)
            return Reply(200, challenge_json(signed))
        return Reply(200, {**operator_json(signed.user), "csrf_token": self._console.csrf_token(signed.token)},
                     headers={"Set-Cookie": self._cookies.issue(request, signed.token)})

    def _link(self, request, row: dict, token: str) -> dict:
        """The reply carrying a set-password link (audited: it can take over the operator's account)."""
        link = base_url(request, self._public_url) + SET_PASSWORD_PATH + token
        return {**operator_json(row), "set_password_url": link}

    # Operators' accounts, over the operator API (and so the console)

    @route("POST", "/admin/v1/operators", access=OPERATOR, surface=NATIVE)
    async def create(self, request, operator: Operator):
        row, token = await self._console.create(read_json(request), self._audit_log.entry(operator.name, LINK))
        return Reply(201, self._link(request, row, token))

    @route("POST", "/admin/v1/operators/password-link", access=OPERATOR, surface=NATIVE)
    async def password_link(self, request, operator: Operator):
        """A new set-password link for an operator found by ``email`` (a forgotten password)."""
        row, token = await self._console.link(read_json(request))
        await self._audit_log.write(operator.name, LINK, operator_id=str(row["id"]), email=row["email"])
        return self._link(request, row, token)

    # The console's session

    @route("POST", "/console/auth/login", access=CONSOLE_SIGN_IN)
    async def login(self, request, _):
        client = network_of(getattr(request.getClientAddress(), "host", None))
        return self._signed_in(request, await self._console.login(read_json(request), client))

    @route("POST", "/console/auth/password", access=CONSOLE_SIGN_IN)
    async def set_password(self, request, _):
        return self._signed_in(request, await self._console.set_password(read_json(request)))

    @route("POST", "/console/auth/logout", access=OPERATOR_SESSION)
    async def logout(self, request, operator: Operator):
        await self._console.logout(_token_of(request))
        return Reply(200, {"object": "session", "deleted": True}, headers={"Set-Cookie": self._cookies.clear(request)})

    @route("GET", "/console/me", access=OPERATOR_SESSION)
    async def me(self, request, operator: Operator):
        if operator.email is None:
            raise AssertionError("an OPERATOR_SESSION route called without a console session")
        row = await self._console.operator(operator.email)
        return {**operator_json(row), "csrf_token": self._console.csrf_token(_token_of(request))}


def _token_of(request) -> str:
    """The console session's token (what an OPERATOR_SESSION route's request always carries)."""
    token = console_token(request)
    if token is None:
        raise AssertionError("an OPERATOR_SESSION route called without a console session")
    return token
