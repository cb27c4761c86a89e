"""
Two-factor sign-in and one's own sessions, for the dashboard (``/auth/login/two-factor``,
``/dashboard/two-factor/*``, ``/dashboard/sessions``) and the operator console (the same under
``/console/``); docs/operations.md, "Security".
"""

from __future__ import annotations

import uuid

from mailsvc import timefmt
from mailsvc.app.apikeys import Caller
from mailsvc.app.audit import AuditLog
from mailsvc.app.console import Console
from mailsvc.app.dashboard import Dashboard
from mailsvc.app.signin import Challenge, PasswordSignIn
from mailsvc.domain.clients import network_of
from mailsvc.domain.errors import NotFound
from mailsvc.http.body import read_json
from mailsvc.http.errors import NATIVE
from mailsvc.http.operation import BOOL, DELETED, INT, LIST_ONLY, NULLABLE_STR, STR, UUID, Operation, obj
from mailsvc.http.router import (
    CONSOLE_SIGN_IN,
    OPERATOR,
    OPERATOR_SESSION,
    SESSION,
    SIGN_IN,
    Operator,
    route,
)
from mailsvc.http.schemas import OPERATOR_SIGNED_IN, SIGNED_IN
from mailsvc.ids import parse_uuid

SECOND_STEP = obj(("challenge",), challenge=STR, code=STR, recovery_code=STR)
TWO_FACTOR = obj(("object", "enabled", "recovery_codes_left"), object={"const": "two_factor"}, enabled=BOOL,
                 enabled_at=NULLABLE_STR, recovery_codes_left=INT, required_by_account=BOOL)
ENROLMENT = obj(("object", "secret", "otpauth_uri"), object={"const": "two_factor_enrolment"}, secret=STR,
                otpauth_uri=STR, digits=INT, period=INT, algorithm=STR)
ENROLLED = obj(("object", "enabled", "recovery_codes"), object={"const": "two_factor"}, enabled={"const": True},
               recovery_codes={"type": "array", "items": STR})
CODE = obj(("code",), code=STR)
RESET = obj(("object", "email", "enabled"), object={"const": "two_factor"}, email=STR, enabled={"const": False})
TURN_OFF = obj(("password",), password=STR, code=STR, recovery_code=STR)
TURNED_OFF = obj(("object", "enabled"), object={"const": "two_factor"}, enabled={"const": False})
SESSION_ROW = obj(("object", "id", "created_at", "last_seen_at", "expires_at", "current"), object={"const": "session"},
                  id=UUID, created_at=STR, last_seen_at=STR, expires_at=STR, user_agent=NULLABLE_STR,
                  client=NULLABLE_STR, current=BOOL)


def client_of(request) -> str:
    return network_of(getattr(request.getClientAddress(), "host", None))


def user_agent_of(request) -> str | None:
    value = request.getHeader(b"user-agent")
    return value.decode("latin-1")[:300] if value else None


def challenge_json(challenge: Challenge) -> dict:
    """A right password of someone with two-factor sign-in: no session yet, a code to send with ``challenge``."""
    return {"object": "two_factor_challenge", "challenge": challenge.token, "email": challenge.user["email"],
            "methods": ["totp", "recovery_code"]}


def session_json(row: dict, current) -> dict:
    return {"object": "session", "id": str(row["id"]), "created_at": timefmt.resource(row["created_at"]),
            "last_seen_at": timefmt.resource(row["last_seen_at"]), "expires_at": timefmt.resource(row["expires_at"]),
            "user_agent": row["user_agent"], "client": row["client"], "current": row["id"] == current}


def _enrolment(sign_in: PasswordSignIn):
    if sign_in.two_factor is None:
        raise NotFound("Two-factor sign-in")
    return sign_in.two_factor


class DashboardSecurity:
    def __init__(self, dashboard: Dashboard, signed_in, audit_log: AuditLog):
        self._dashboard = dashboard
        #: ``signed_in(request, SignedIn) -> Reply``: the sign-in's reply with its cookie (AuthResource's).
        self._signed_in = signed_in
        self._audit_log = audit_log

    @route("POST", "/admin/v1/users/two-factor/reset", access=OPERATOR, surface=NATIVE,
           op=Operation(
               "Turn off a dashboard user's two-factor sign-in, found by e-mail address (a lost device; audited)",
               obj(("email",), email={"type": "string", "format": "email"}), {200: RESET}, errors=(404,)))
    async def reset(self, request, operator: Operator):
        """The operator turns off a user's two-factor sign-in (found by ``email``): a lost device. Audited."""
        row = await self._dashboard.reset_two_factor(read_json(request).get("email"), "User",
                                                     self._audit_log.entry(operator.name, "user.two_factor_reset"))
        return {"object": "two_factor", "email": row["email"], "enabled": False}

    @route("POST", "/auth/login/two-factor", access=SIGN_IN,
           op=Operation("A code (or recovery code) completes a sign-in: sets the session cookie",
                        SECOND_STEP, {200: SIGNED_IN}, errors=(401, 429)))
    async def second_step(self, request, _):
        """A challenge's ``code`` (or ``recovery_code``) completes the sign-in its password began."""
        signed = await self._dashboard.second_step(read_json(request), client_of(request), user_agent_of(request))
        return self._signed_in(request, signed)

    @route("GET", "/dashboard/two-factor", access=SESSION,
           op=Operation("Whether the user has two-factor sign-in, and whether the account requires it",
                        responses={200: TWO_FACTOR}))
    async def status(self, request, caller: Caller):
        return {**await _enrolment(self._dashboard).status(caller.user_id),
                "required_by_account": await self._dashboard.two_factor_required(caller.tenant.id)}

    @route("POST", "/dashboard/two-factor/begin", access=SESSION,
           op=Operation("Begin enrolling an authenticator: its secret", responses={200: ENROLMENT},
                        errors=(409,)))
    async def begin(self, request, caller: Caller):
        return await _enrolment(self._dashboard).begin(caller.user_id)

    @route("POST", "/dashboard/two-factor/confirm", access=SESSION,
           op=Operation("Turn two-factor sign-in on with a code: the recovery codes, shown once",
                        CODE, {200: ENROLLED}, errors=(409, 422, 429)))
    async def confirm(self, request, caller: Caller):
        codes = await _enrolment(self._dashboard).confirm(caller.user_id, read_json(request).get("code"),
                                                          client_of(request))
        return {"object": "two_factor", "enabled": True, "recovery_codes": codes}

    @route("POST", "/dashboard/two-factor/disable", access=SESSION,
           op=Operation("Turn two-factor sign-in off (the password and a code)", TURN_OFF,
                        {200: TURNED_OFF}, errors=(422, 429)))
    async def disable(self, request, caller: Caller):
        """With the ``password`` and a ``code`` (or a ``recovery_code``)."""
        await self._dashboard.disable_two_factor(_user_of(caller), read_json(request), client_of(request))
        return {"object": "two_factor", "enabled": False}

    @route("PATCH", "/dashboard/security", access=SESSION,
           op=Operation("Require two-factor sign-in of every member (owners only, enrolled first)",
                        obj(("require_two_factor",), require_two_factor=BOOL),
                        {200: obj(("object", "require_two_factor"), object={"const": "security"},
                                  require_two_factor=BOOL)}, errors=(422,)))
    async def require(self, request, caller: Caller):
        """An owner's ``require_two_factor``: every member must enrol before doing anything else."""
        required = read_json(request).get("require_two_factor")
        await self._dashboard.require_two_factor(caller, required)
        return {"object": "security", "require_two_factor": required}

    @route("GET", "/dashboard/sessions", access=SESSION,
           op=Operation("The user's live sessions, newest first (`current`: this one)",
                        responses={200: {**LIST_ONLY, "properties": {**LIST_ONLY["properties"], "data": {
                            "type": "array", "items": SESSION_ROW}}}}))
    async def sessions(self, request, caller: Caller):
        rows = await self._dashboard.sessions(_user_of(caller))
        return {"object": "list", "has_more": False, "data": [session_json(r, caller.session_id) for r in rows]}

    @route("DELETE", "/dashboard/sessions/<session_id>", access=SESSION,
           op=Operation("End one of the user's sessions", responses={200: DELETED}))
    async def revoke(self, request, caller: Caller, session_id: str):
        await self._dashboard.revoke_own_session(_user_of(caller), parse_uuid(session_id))
        return {"object": "session", "id": session_id, "deleted": True}

    @route("POST", "/dashboard/sessions/sign-out-others", access=SESSION,
           op=Operation("Sign out everywhere but this session", responses={200: obj(
               ("object", "revoked"), object={"const": "list"}, revoked=INT)}))
    async def sign_out_others(self, request, caller: Caller):
        """Sign out everywhere but this session."""
        ended = await self._dashboard.revoke_other_sessions(_user_of(caller), _session_of(caller))
        return {"object": "list", "revoked": ended}


class ConsoleSecurity:
    def __init__(self, console: Console, signed_in, audit_log: AuditLog):
        self._console = console
        self._signed_in = signed_in
        self._audit_log = audit_log

    @route("POST", "/admin/v1/operators/two-factor/reset", access=OPERATOR, surface=NATIVE,
           op=Operation(
               "Turn off an operator's two-factor sign-in, found by e-mail address (a lost device; audited)",
               obj(("email",), email={"type": "string", "format": "email"}), {200: RESET}, errors=(404,)))
    async def reset(self, request, operator: Operator):
        """The operator API turns off an operator's two-factor sign-in (found by ``email``). Audited."""
        row = await self._console.reset_two_factor(read_json(request).get("email"), "Operator",
                                                   self._audit_log.entry(operator.name, "operator.two_factor_reset"))
        return {"object": "two_factor", "email": row["email"], "enabled": False}

    @route("POST", "/console/auth/login/two-factor", access=CONSOLE_SIGN_IN,
           op=Operation("An operator's code (or recovery code) completes a sign-in",
                        SECOND_STEP, {200: OPERATOR_SIGNED_IN}, errors=(401, 429)))
    async def second_step(self, request, _):
        signed = await self._console.second_step(read_json(request), client_of(request))
        return self._signed_in(request, signed)

    @route("GET", "/console/two-factor", access=OPERATOR_SESSION,
           op=Operation("Whether the operator has two-factor sign-in", responses={200: TWO_FACTOR}))
    async def status(self, request, operator: Operator):
        return await _enrolment(self._console).status(await self._console.operator_id(operator.email))

    @route("POST", "/console/two-factor/begin", access=OPERATOR_SESSION,
           op=Operation("Begin enrolling an authenticator: its secret", responses={200: ENROLMENT},
                        errors=(409,)))
    async def begin(self, request, operator: Operator):
        return await _enrolment(self._console).begin(await self._console.operator_id(operator.email))

    @route("POST", "/console/two-factor/confirm", access=OPERATOR_SESSION,
           op=Operation("Turn two-factor sign-in on with a code: the recovery codes, shown once",
                        CODE, {200: ENROLLED}, errors=(409, 422, 429)))
    async def confirm(self, request, operator: Operator):
        codes = await _enrolment(self._console).confirm(await self._console.operator_id(operator.email),
                                                        read_json(request).get("code"), client_of(request))
        return {"object": "two_factor", "enabled": True, "recovery_codes": codes}

    @route("POST", "/console/two-factor/disable", access=OPERATOR_SESSION,
           op=Operation("Turn two-factor sign-in off (the password and a code)", TURN_OFF,
                        {200: TURNED_OFF}, errors=(422, 429)))
    async def disable(self, request, operator: Operator):
        await self._console.disable_two_factor(await self._console.operator_id(operator.email), read_json(request),
                                               client_of(request))
        return {"object": "two_factor", "enabled": False}


def _user_of(caller: Caller) -> uuid.UUID:
    """The user of a dashboard session (what a SESSION route's caller always is)."""
    if caller.user_id is None:
        raise AssertionError("a SESSION route called without a dashboard session")
    return caller.user_id


def _session_of(caller: Caller) -> uuid.UUID:
    if caller.session_id is None:
        raise AssertionError("a SESSION route called without a dashboard session")
    return caller.session_id
