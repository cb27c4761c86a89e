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
from mailsvc.http.access.operator import CONSOLE_COOKIE, console_token
from mailsvc.http.baseurl import PublicUrl
from mailsvc.http.body import read_json
from mailsvc.http.dashboard.auth import Cookies
from mailsvc.http.errors import NATIVE
from mailsvc.http.operation import STR, Operation, obj
from mailsvc.http.router import CONSOLE_SIGN_IN, OPERATOR, OPERATOR_SESSION, Operator, Reply, route
from mailsvc.http.schemas import OPERATOR_LINK, OPERATOR_SIGNED_IN, OPERATOR_SIGNED_IN_OR_CHALLENGE, PASSWORD
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
        self._public_url = PublicUrl(public_url)
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
        link = self._public_url.of(request) + SET_PASSWORD_PATH + token
        return {**operator_json(row), "set_password_url": link}

    # Operators' accounts, over the operator API (and so the console)

    @route("POST", "/admin/v1/operators", access=OPERATOR, surface=NATIVE,
           op=Operation("Create an operator's console account and its set-password link (audited)",
                        obj(("email",), email={"type": "string", "format": "email"}, name=STR),
                        {201: OPERATOR_LINK}, errors=(409,)))
    async def create(self, request, operator: Operator):
        row, token = await self._console.create(read_json(request), self._audit_log.entry(operator.name, LINK))
        return Reply(201, self._link(request, row, token))

    @route("POST", "/admin/v1/operators/password-link", access=OPERATOR, surface=NATIVE,
           op=Operation(
               "A new set-password link for an operator, found by e-mail address (audited)",
               obj(("email",), email={"type": "string", "format": "email"}), {200: OPERATOR_LINK}, errors=(404,)))
    async def password_link(self, request, operator: Operator):
        """A new set-password link for an operator found by ``email`` (a forgotten password)."""
        row, token = await self._console.link(read_json(request))
        await self._audit_log.write(operator.name, LINK, operator_id=str(row["id"]), email=row["email"])
        return self._link(request, row, token)

    # The console's session

    @route("POST", "/console/auth/login", access=CONSOLE_SIGN_IN,
           op=Operation("An operator signs in: sets the console's cookie",
                        obj(("email", "password"), email=STR, password=STR),
                        {200: OPERATOR_SIGNED_IN_OR_CHALLENGE}, errors=(401, 429)))
    async def login(self, request, _):
        client = network_of(getattr(request.getClientAddress(), "host", None))
        return self._signed_in(request, await self._console.login(read_json(request), client))

    @route("POST", "/console/auth/password", access=CONSOLE_SIGN_IN,
           op=Operation("Set an operator's password with a set-password link's token; signs in",
                        obj(("token", "password"), token=STR, password=PASSWORD),
                        {200: OPERATOR_SIGNED_IN_OR_CHALLENGE}, errors=(401,)))
    async def set_password(self, request, _):
        return self._signed_in(request, await self._console.set_password(read_json(request)))

    @route("POST", "/console/auth/logout", access=OPERATOR_SESSION,
           op=Operation("Sign out of the console: ends the session, clears the cookie",
                        responses={200: obj(("object", "deleted"), object={"const": "session"},
                                     deleted={"const": True})}))
    async def logout(self, request, operator: Operator):
        await self._console.logout(_token_of(request))
        return Reply(200, {"object": "session", "deleted": True}, headers={"Set-Cookie": self._cookies.clear(request)})

    @route("GET", "/console/me", access=OPERATOR_SESSION,
           op=Operation("The signed-in operator and the session's CSRF token", responses={200: OPERATOR_SIGNED_IN}))
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
