"""
The dashboard's callers: a session (its cookie, and its CSRF token on state-changing methods),
a session's sandboxed frame, and the sign-in. Their routes answer CORS for
``dashboard.origins`` (with credentials) and are never cached; their errors take the
dashboard's envelope.
"""

from __future__ import annotations

from mailsvc.app.apikeys import Caller
from mailsvc.http.access.base import (
    NO_SESSION,
    Access,
    AccountRate,
    Cors,
    ResponseRules,
    SameSite,
    SignInAccess,
    check_csrf,
    is_dashboard_path,
)
from mailsvc.http.context import context_of
from mailsvc.http.errors import DASHBOARD, ApiError

#: The session cookie (docs/decisions.md, "Dashboard").
SESSION_COOKIE = b"mailsvc_session"

ENROL_FIRST = ApiError(403, "two_factor_enrolment_required",
                       "This account requires two-factor sign-in: turn it on for yourself first.")
#: What a session may do while its account requires a second factor its user has not enrolled.
ENROLMENT_ROUTES = frozenset({"/me", "/auth/logout", "/dashboard/two-factor", "/dashboard/two-factor/begin",
                              "/dashboard/two-factor/confirm"})


def dashboard_cors(origins: frozenset[str]) -> Cors:
    return Cors(origins, credentials=True, request_headers=b"Content-Type, X-Request-Id, X-CSRF-Token")


def session_token(request) -> str | None:
    """The dashboard session cookie's token, if the request carries one."""
    value = request.received_cookies.get(SESSION_COOKIE)
    return value.decode("latin-1") if value else None


def dashboard_rules(access: Access, path: str, cors: Cors) -> ResponseRules:
    """A dashboard path's rules: its CORS, never cached (another path: the common rules)."""
    if is_dashboard_path(path):
        return ResponseRules(cors=cors, no_store=True)
    return Access.rules(access, path)


class SessionAccess(Access):
    """
    A dashboard session. ``metered``: it pays the account's request rate; a session's sandboxed
    frame loading what its page handed over (a preview) does not, as the page's request that
    handed it over has paid: a frame's load cannot wait out a 429 as the page's own fetch does.
    """

    serves_dashboard = True

    def __init__(self, kind: str, sessions, cors: Cors, same_site: SameSite, rate: AccountRate | None):
        self.kind = kind
        #: ``authenticate(token) -> Caller | None`` and ``csrf_matches(token, presented)``
        #: (mailsvc.app.dashboard.Dashboard); None: no dashboard.
        self._sessions = sessions
        self._cors = cors
        self._same_site = same_site
        self._rate = rate

    def rules(self, path: str) -> ResponseRules:
        return dashboard_rules(self, path, self._cors)

    def envelope(self, surface: str) -> str:
        return DASHBOARD

    async def caller(self, request) -> Caller:
        token = session_token(request)
        if token is None or self._sessions is None:
            raise NO_SESSION
        caller = await self._sessions.authenticate(token)
        if caller is None:
            raise NO_SESSION
        if caller.two_factor_pending and context_of(request).route not in ENROLMENT_ROUTES:
            raise ENROL_FIRST
        check_csrf(request, self._same_site, token, self._sessions.csrf_matches)
        if self._rate is not None:
            await self._rate.take(caller)
        return caller


class DashboardSignIn(SignInAccess):
    """The dashboard's sign-in (``/auth/*``): no credentials, dashboard CORS, refused cross-site."""

    serves_dashboard = True

    def __init__(self, kind: str, cors: Cors, same_site: SameSite):
        super().__init__(kind, same_site)
        self._cors = cors

    def rules(self, path: str) -> ResponseRules:
        return dashboard_rules(self, path, self._cors)
