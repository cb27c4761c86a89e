"""
What every access kind shares: its response rules (CORS, caching), the same-site check and
CSRF rule of a browser's state-changing request, the account's request rate, and the refusals
they answer with.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable

import attrs

from mailsvc.app.apikeys import Caller
from mailsvc.app.ratelimit import RateLimiter
from mailsvc.http.baseurl import browser_origin
from mailsvc.http.context import Operator
from mailsvc.http.errors import DASHBOARD, ApiError

#: Methods that change nothing, and need no CSRF token.
SAFE_METHODS = frozenset({b"GET", b"HEAD", b"OPTIONS"})
#: The header carrying a session's CSRF token (docs/decisions.md, "Dashboard").
CSRF_HEADER = b"x-csrf-token"
#: Where the console's routes live: same-site only (no CORS), never cached.
CONSOLE_PREFIX = "/console/"
#: Where the dashboard's routes live (and ``/me``): each answers CORS for ``dashboard.origins`` only.
DASHBOARD_PREFIXES = ("/auth/", "/dashboard/")
#: Seconds a browser may keep a preflight answer.
PREFLIGHT_MAX_AGE = b"600"

NO_SESSION = ApiError(401, "session_required", "Sign in first: the session is missing, expired or revoked.")
BAD_CSRF = ApiError(403, "invalid_csrf_token", "The CSRF token is missing or does not match the session.")
CROSS_SITE = ApiError(403, "invalid_origin", "This request must come from the dashboard's own pages.")


def is_dashboard_path(path: str) -> bool:
    return path == "/me" or path.startswith(DASHBOARD_PREFIXES)


def origins_of(urls: Iterable[str]) -> frozenset[str]:
    """Configured origins as a browser's ``Origin`` header spells them (no trailing slash)."""
    return frozenset(url.rstrip("/") for url in urls)


class Cors:
    """Which origins' browsers may read a route's responses, and what its preflight answers."""

    def __init__(self, origins: frozenset[str], credentials: bool, request_headers: bytes):
        self._origins = origins
        self._credentials = credentials
        self._request_headers = request_headers

    def allow(self, request) -> bool:
        """Let a listed origin's browser read this response; other origins get no CORS header."""
        request.setHeader(b"Vary", b"Origin")
        origin = request.getHeader(b"origin")
        if origin is None or origin.decode("latin-1") not in self._origins:
            return False
        request.setHeader(b"Access-Control-Allow-Origin", origin)
        if self._credentials:
            request.setHeader(b"Access-Control-Allow-Credentials", b"true")
        request.setHeader(b"Access-Control-Expose-Headers", b"X-Request-Id")
        return True

    def preflight(self, request, methods: Iterable[str]) -> bytes:
        """The answer to a preflight of a path served for ``methods``."""
        request.setResponseCode(204)
        if self.allow(request):
            request.setHeader(b"Access-Control-Allow-Methods", ", ".join(sorted(methods)).encode())
            request.setHeader(b"Access-Control-Allow-Headers", self._request_headers)
            request.setHeader(b"Access-Control-Max-Age", PREFLIGHT_MAX_AGE)
        return b""


@attrs.frozen
class ResponseRules:
    """What every response of one route carries beside its body."""

    cors: Cors | None = None
    #: Nothing private stays in a cache, nor comes back with the back button.
    no_store: bool = False

    def apply(self, request) -> None:
        if self.cors is not None:
            self.cors.allow(request)
        if self.no_store:
            request.setHeader(b"Cache-Control", b"no-store")


class SameSite:
    """Whether a browser's request comes from this host's pages (or one of ``listed``)."""

    def __init__(self, listed: frozenset[str] = frozenset()):
        self._listed = listed

    def allows(self, request) -> bool:
        origin = request.getHeader(b"origin")
        if origin is None:
            return True  # not a browser's cross-origin request (browsers send Origin on those)
        text = origin.decode("latin-1")
        return text in self._listed or text == browser_origin(request)


def check_csrf(request, same_site: SameSite, token: str, csrf_matches: Callable[[str, str | None], bool]) -> None:
    """A state-changing request comes from the session's own pages, with the session's CSRF token."""
    if request.method in SAFE_METHODS:
        return
    presented = request.getHeader(CSRF_HEADER)
    if not same_site.allows(request) or not csrf_matches(
            token, presented.decode("latin-1") if presented is not None else None):
        raise BAD_CSRF


class AccountRate:
    """The account's shared API rate, for its keys and its sessions alike."""

    def __init__(self, limiter: RateLimiter):
        self._limiter = limiter

    async def take(self, caller: Caller) -> None:
        wait = await self._limiter.take(caller.tenant.id, caller.tenant.api_rate_per_sec)
        if wait is not None:
            raise ApiError(
                429, "rate_limit_exceeded",
                "Too many requests. You can only make a limited number of requests per second.",
                headers={"Retry-After": str(wait)},
            )


class Access(ABC):
    """
    One kind of route's caller: how it is authenticated (``caller``, raising the refusal), the
    envelope its errors take, and the rules of its responses. A route under the dashboard's
    paths is for a dashboard kind only.
    """

    #: The name a route's ``access=`` gives (``mailsvc.http.access.PUBLIC``, ...).
    kind = ""
    #: False: the route needs no credentials, and no admission is begun for it.
    checks_credentials = True
    #: May serve the dashboard's paths (``is_dashboard_path``).
    serves_dashboard = False

    def rules(self, path: str) -> ResponseRules:
        if is_dashboard_path(path) and not self.serves_dashboard:
            raise ValueError(f"{path}: a dashboard route is for a session (or a sign-in), not {self.kind}")
        return ResponseRules(no_store=path.startswith(CONSOLE_PREFIX))

    def envelope(self, surface: str) -> str:
        """The envelope of a route's errors, given the surface it is mounted on."""
        return surface

    @abstractmethod
    async def caller(self, request) -> Caller | Operator | None:
        """Who calls, or the refusal raised (an ``ApiError``)."""


class SignInAccess(Access):
    """No credentials, but a browser's sign-in: a state-changing request from another site is refused."""

    def __init__(self, kind: str, same_site: SameSite):
        self.kind = kind
        self._same_site = same_site

    def envelope(self, surface: str) -> str:
        return DASHBOARD

    async def caller(self, request) -> None:
        if request.method not in SAFE_METHODS and not self._same_site.allows(request):
            raise CROSS_SITE
        return None


def bearer(request) -> str | None:
    """The token of an ``Authorization: Bearer`` header, if the request carries one."""
    header = request.getHeader(b"authorization")
    if header is None or not header.startswith(b"Bearer ") or len(header) <= len(b"Bearer "):
        return None
    return header[len(b"Bearer ") :].decode("latin-1")
