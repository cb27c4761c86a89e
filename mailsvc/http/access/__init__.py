"""
Who may call a route: one strategy per access kind, owning how its caller is authenticated,
its CORS and caching, its CSRF rule and its error envelope. A route names its kind
(``@route(..., access=FULL)``); ``access_kinds`` maps each name to its strategy, and the router
dispatches a request to its route's.

- ``keys``: an API key with full access (``FULL``), or one restricted to sending (``SENDING``).
- ``dashboard``: a session (``SESSION``), a session's sandboxed frame (``SESSION_FRAME``), the
  sign-in (``SIGN_IN``).
- ``operator``: an operator token (``OPERATOR``), a console session (``OPERATOR_SESSION``), the
  console's sign-in (``CONSOLE_SIGN_IN``).
- ``public``: no credentials (``PUBLIC``).
"""

from __future__ import annotations

from collections.abc import Iterable

from mailsvc.app.apikeys import KeyRing
from mailsvc.app.ratelimit import RateLimiter
from mailsvc.http.access.base import Access, AccountRate, SameSite, SignInAccess, origins_of
from mailsvc.http.access.dashboard import DashboardSignIn, SessionAccess, dashboard_cors
from mailsvc.http.access.keys import ApiKeyAccess
from mailsvc.http.access.operator import ConsoleSessionAccess, OperatorTokenAccess
from mailsvc.http.access.public import PublicAccess

PUBLIC = "public"
OPERATOR = "operator"
FULL = "full_access"
SENDING = "sending_access"
#: A dashboard session: its cookie, and its CSRF token on state-changing methods.
SESSION = "session"
#: A session's sandboxed frame loading what its page handed over (a preview): the session
#: without the account's request rate (``SessionAccess``).
SESSION_FRAME = "session_frame"
#: No credentials, but a dashboard route (``/auth/*``): dashboard CORS, refused cross-site.
SIGN_IN = "sign_in"
#: An operator console session: its own cookie, and its CSRF token on state-changing methods.
#: Every operator route is also served to it at ``/console`` + path.
OPERATOR_SESSION = "operator_session"
#: No credentials, but the console's sign-in (``/console/auth/*``): refused from any other site.
CONSOLE_SIGN_IN = "console_sign_in"


def access_kinds(*, keyring: KeyRing, limiter: RateLimiter, operator_token: str,
                 operator_tokens=None, sessions=None, console=None, public_origins: Iterable[str] = (),
                 dashboard_origins: Iterable[str] = ()) -> dict[str, Access]:
    """
    Every access kind's strategy. ``sessions``: the dashboard's (None: every session is
    refused); ``console``: the operator console's (None: no ``OPERATOR_SESSION``, and the
    operator routes are not served under ``/console``).
    """
    rate = AccountRate(limiter)
    listed = origins_of(dashboard_origins)
    cors, same_site = dashboard_cors(listed), SameSite(listed)
    kinds: list[Access] = [
        PublicAccess(PUBLIC, origins_of(public_origins)),
        ApiKeyAccess(FULL, keyring, rate, full=True),
        ApiKeyAccess(SENDING, keyring, rate, full=False),
        SessionAccess(SESSION, sessions, cors, same_site, rate),
        SessionAccess(SESSION_FRAME, sessions, cors, same_site, rate=None),
        DashboardSignIn(SIGN_IN, cors, same_site),
        OperatorTokenAccess(OPERATOR, operator_token, operator_tokens),
        SignInAccess(CONSOLE_SIGN_IN, SameSite()),
    ]
    if console is not None:
        kinds.append(ConsoleSessionAccess(OPERATOR_SESSION, console))
    return {access.kind: access for access in kinds}


__all__ = ["Access", "access_kinds", "PUBLIC", "OPERATOR", "FULL", "SENDING", "SESSION", "SESSION_FRAME",
           "SIGN_IN", "OPERATOR_SESSION", "CONSOLE_SIGN_IN"]
