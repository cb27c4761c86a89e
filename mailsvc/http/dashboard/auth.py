"""
The dashboard's own routes: sign-in (``/auth/*``), ``/me``, the account's users and
invitations; docs/decisions.md, "Dashboard". What a dashboard shows beyond the API is in
``reads``; the resources of the main API are served under ``/dashboard`` by their own
handlers (``Router.mount``).
"""

from __future__ import annotations

from twisted.logger import Logger

from mailsvc import timefmt
from mailsvc.app.apikeys import Caller
from mailsvc.app.audit import AuditLog
from mailsvc.app.dashboard import Dashboard, link_detail
from mailsvc.app.signin import Challenge, SignedIn
from mailsvc.domain.audit import ACTOR_PREFIXES
from mailsvc.domain.clients import network_of
from mailsvc.domain.errors import Invalid, NotFound
from mailsvc.http.access.dashboard import SESSION_COOKIE, session_token
from mailsvc.http.baseurl import PublicUrl, plain_http_on_loopback
from mailsvc.http.body import read_json
from mailsvc.http.errors import NATIVE
from mailsvc.http.operation import BOOL, LIST_ONLY, STR, UUID, Operation, obj
from mailsvc.http.router import OPERATOR, SESSION, SIGN_IN, Operator, Reply, route
from mailsvc.http.schemas import (
    ACCOUNT,
    DASHBOARD_USAGE,
    PASSWORD,
    SIGNED_IN,
    SIGNED_IN_OR_CHALLENGE,
    USER,
    USER_BODY,
    USER_FIELDS,
    USER_LINK,
    USER_REQUIRED,
)
from mailsvc.http.security import DashboardSecurity, challenge_json, user_agent_of
from mailsvc.ids import parse_uuid

log = Logger()

#: Where the web UI takes a set-password token (in the fragment: never sent to a server).
SET_PASSWORD_PATH = "/ui/#/set-password/"
#: The audit log's action of a user's set-password link.
LINK = "user.link"


def set_password_link(base: str, token: str) -> str:
    return base + SET_PASSWORD_PATH + token


class Cookies:
    """
    A session cookie: ``HttpOnly; Secure; SameSite=...; Path=/``, ``Secure`` dropped only for
    plain HTTP on loopback (development), with a warning. The dashboard's is ``SameSite=Lax``
    (its links open signed in), the console's ``Strict``.
    """

    def __init__(self, name: bytes, lifetime_seconds: int, same_site: str = "Lax"):
        self._name = name.decode()
        self._lifetime = lifetime_seconds
        self._same_site = same_site
        self._warned = False

    def _secure(self, request) -> str:
        if not plain_http_on_loopback(request):
            return "; Secure"
        if not self._warned:
            self._warned = True
            log.warn("{name} cookie sent without Secure: plain HTTP on loopback (development only)", name=self._name)
        return ""

    def issue(self, request, token: str) -> str:
        return self._cookie(request, token, self._lifetime)

    def clear(self, request) -> str:
        return self._cookie(request, "", 0)

    def _cookie(self, request, value: str, max_age: int) -> str:
        return (f"{self._name}={value}; Max-Age={max_age}; Path=/; HttpOnly{self._secure(request)};"
                f" SameSite={self._same_site}")


def user_json(row: dict) -> dict:
    return {
        "object": "user",
        "id": str(row["id"]),
        "email": row["email"],
        "role": row["role"],
        "status": "active" if row["password_hash"] else "invited",
        "two_factor": bool(row.get("two_factor")),
        "created_at": timefmt.resource(row["created_at"]),
    }


def tenant_summary(tenant) -> dict:
    return {
        "object": "account", "id": str(tenant.id), "name": tenant.name, "plan": tenant.plan,
        "status": tenant.status, "sandbox": tenant.sandbox, "daily_quota": tenant.daily_quota,
        "monthly_quota": tenant.monthly_quota, "max_domains": tenant.max_domains,
        "send_rate_per_sec": tenant.send_rate_per_sec, "api_rate_per_sec": tenant.api_rate_per_sec,
    }


def user_actor(caller: Caller) -> str:
    """The audit log's name of a dashboard user."""
    return ACTOR_PREFIXES["user"] + str(caller.user_id)


def id_or_not_found(text: str, kind: str):
    """The id in a path, or ``NotFound`` of ``kind``: a malformed id names nothing."""
    parsed = parse_uuid(text)
    if parsed is None:
        raise NotFound(kind)
    return parsed


class AuthResource:
    def __init__(self, dashboard: Dashboard, public_url: str, audit_log: AuditLog):
        self._dashboard = dashboard
        self._public_url = PublicUrl(public_url)
        #: Every set-password link issued is audited (it can take over an account).
        self._audit_log = audit_log
        self._cookies = Cookies(SESSION_COOKIE, dashboard.settings.lifetime_seconds)
        #: Two-factor sign-in and one's sessions: mounted beside this resource.
        self.security = DashboardSecurity(dashboard, self._signed_in, audit_log)

    async def _link_issued(self, actor: str, row: dict) -> None:
        await self._audit_log.write(actor, LINK, **link_detail(row))

    def _signed_in(self, request, signed: SignedIn | Challenge) -> Reply:
        if isinstance(signed, Challenge):  # two-factor sign-in: no session until the code (``security``)
            return Reply(200, challenge_json(signed))
        return Reply(200, {**user_json(signed.user), "csrf_token": self._dashboard.csrf_token(signed.token)},
                     headers={"Set-Cookie": self._cookies.issue(request, signed.token)})

    @route("POST", "/auth/login", access=SIGN_IN,
           op=Operation("Sign in: sets the session cookie (or, with two-factor sign-in, a challenge)",
                        obj(("email", "password"), email=STR, password=STR),
                        {200: SIGNED_IN_OR_CHALLENGE}, errors=(401, 429)))
    async def login(self, request, _):
        client = network_of(getattr(request.getClientAddress(), "host", None))
        return self._signed_in(request, await self._dashboard.login(read_json(request), client,
                                                                    user_agent_of(request)))

    @route("POST", "/auth/logout", access=SESSION,
           op=Operation("Sign out: ends the session, clears the cookie",
                        responses={200: obj(("object", "deleted"), object={"const": "session"},
                                            deleted={"const": True})}))
    async def logout(self, request, caller: Caller):
        token = session_token(request)
        assert token is not None  # a SESSION route's caller was found by this cookie
        await self._dashboard.logout(token)
        return Reply(200, {"object": "session", "deleted": True},
                     headers={"Set-Cookie": self._cookies.clear(request)})

    @route("POST", "/auth/password", access=SIGN_IN,
           op=Operation("Set a password with a set-password link's token; signs in",
                        obj(("token", "password"), token=STR, password=PASSWORD),
                        {200: SIGNED_IN_OR_CHALLENGE}, errors=(401,)))
    async def set_password(self, request, _):
        """With a link's ``token``; signed in, ``POST /dashboard/password`` with the current one."""
        return self._signed_in(request, await self._dashboard.set_password(read_json(request)))

    @route("POST", "/dashboard/password", access=SESSION,
           op=Operation("Change the signed-in user's password; every other session ends",
                        obj(("password", "current_password"), password=PASSWORD, current_password=STR),
                        {200: SIGNED_IN}))
    async def change_password(self, request, caller: Caller):
        return self._signed_in(request, await self._dashboard.set_password(read_json(request), caller))

    @route("GET", "/me", access=SESSION,
           op=Operation("The signed-in user, the account, its usage today and this month, the CSRF token",
                        responses={200: obj((*USER_REQUIRED, "account", "usage", "csrf_token"), **USER_FIELDS,
                                            account=ACCOUNT, two_factor_enrolment_required=BOOL,
                                            usage=DASHBOARD_USAGE, csrf_token=STR)}))
    async def me(self, request, caller: Caller):
        user = await self._dashboard.tenant_user(caller.tenant.id, caller.user_id)
        token = session_token(request)
        assert token is not None  # a SESSION route's caller was found by this cookie
        return {
            **user_json(user),
            "two_factor_enrolment_required": caller.two_factor_pending,
            "account": tenant_summary(caller.tenant),
            "usage": await self._dashboard.usage(caller.tenant),
            "csrf_token": self._dashboard.csrf_token(token),
        }

    # Users and invitations

    @route("GET", "/dashboard/users", access=SESSION,
           op=Operation("List the account's users", responses={200: {**LIST_ONLY, "properties": {
               **LIST_ONLY["properties"], "data": {"type": "array", "items": USER}}}}))
    async def users(self, request, caller: Caller):
        return {"object": "list", "has_more": False,
                "data": [user_json(row) for row in await self._dashboard.users(caller.tenant.id)]}

    @route("POST", "/dashboard/users", access=SESSION,
           op=Operation("Invite a user (owners only)", USER_BODY, {201: USER_LINK}, errors=(409,)))
    async def invite(self, request, caller: Caller):
        row, token = await self._dashboard.invite(caller, read_json(request),
                                                  self._audit_log.entry(user_actor(caller), LINK, invited=True))
        link = set_password_link(self._public_url.of(request), token)
        return Reply(201, {**user_json(row), "set_password_url": link})

    @route("POST", "/dashboard/users/<user_id>/password-link", access=SESSION,
           op=Operation("A new set-password link for a user (owners only)",
                        responses={200: USER_LINK}))
    async def reset_link(self, request, caller: Caller, user_id: str):
        row, token = await self._dashboard.reset_link(caller, parse_uuid(user_id))
        await self._link_issued(user_actor(caller), row)
        return {**user_json(row), "set_password_url": set_password_link(self._public_url.of(request), token)}

    @route("DELETE", "/dashboard/users/<user_id>", access=SESSION,
           op=Operation(
               "Remove a user (owners only; not oneself); `revoke_keys=true` also revokes the API keys they made",
               responses={200: obj(("object", "id", "deleted"), object=STR, id=STR, deleted={"const": True},
                            revoked_keys={"type": "array", "items": UUID})},
               query=(("revoke_keys", {"enum": ["true", "false"]}),), errors=(422,)))
    async def remove(self, request, caller: Caller, user_id: str):
        """``?revoke_keys=true`` also revokes the API keys the user made."""
        revoke = (request.args.get(b"revoke_keys") or [b"false"])[0]
        if revoke not in (b"true", b"false"):
            raise Invalid("revoke_keys", "revoke_keys must be `true` or `false`")
        revoked = await self._dashboard.remove_user(caller, parse_uuid(user_id), revoke == b"true")
        return {"object": "user", "id": user_id, "deleted": True,
                "revoked_keys": [str(row["id"]) for row in revoked]}

    # The operator creates an account's first user

    @route("POST", "/admin/v1/tenants/<tenant_id>/users", access=OPERATOR, surface=NATIVE,
           op=Operation("Create a dashboard user of a tenant (an owner unless `role`"
                        " says otherwise) and its set-password link", USER_BODY,
                        {201: {**USER_LINK, "required": [*USER_LINK["required"],
                                                         "tenant_id"]}}, errors=(409,)))
    async def create_user(self, request, operator: Operator, tenant_id: str):
        body = read_json(request)
        row = await self._dashboard.create_user(id_or_not_found(tenant_id, "Tenant"), {"role": "owner", **body},
                                                audit=self._audit_log.entry(operator.name, LINK))
        link = set_password_link(self._public_url.of(request), self._dashboard.password_token(row))
        return Reply(201, {**user_json(row), "tenant_id": str(row["tenant_id"]), "set_password_url": link})

    @route("POST", "/admin/v1/users/password-link", access=OPERATOR, surface=NATIVE,
           op=Operation(
               "A new set-password link for an existing user, found by e-mail address (it can take over the account)",
               obj(("email",), email={"type": "string", "format": "email"}),
               {200: {**USER_LINK, "required": [*USER_LINK["required"], "tenant_id"]}}, errors=(404,)))
    async def operator_link(self, request, operator: Operator):
        """A new set-password link for an existing user found by ``email`` (``mailsvc user link``)."""
        row, token = await self._dashboard.operator_link(read_json(request))
        link = set_password_link(self._public_url.of(request), token)
        await self._link_issued(operator.name, row)
        return {**user_json(row), "tenant_id": str(row["tenant_id"]), "set_password_url": link}
