"""
One Klein tree for every surface, and the one wrapper every endpoint goes through:
authentication, the account's rate limit, the request timeout, JSON replies and both error
envelopes. Credentials are checked as soon as the headers are in (``admit``), so a refused
request is answered before its body is read; the handler takes its caller from that check.

A resource's handlers (``async def handler(self, request, caller, **path_args)``, returning a
JSON-able dict or a ``Reply``) are marked with ``route`` and registered by ``Router.mount``,
once per surface they serve (``native=True`` also mounts under ``/v1``; the handler reads
``request.surface``). Every API-key handler is also served under ``/dashboard`` to a session
(cookie, CSRF token on state-changing methods, shared rate limit, main envelope).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_to_bytes

import attrs
from klein import Klein
from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound

from mailsvc import logs
from mailsvc.app.apikeys import Caller, KeyRing
from mailsvc.app.audit import CONFIGURED_TOKEN_NAME
from mailsvc.app.console import ACTOR_PREFIX as CONSOLE_ACTOR_PREFIX
from mailsvc.app.ratelimit import RateLimiter
from mailsvc.deferreds import shielded
from mailsvc.domain.errors import DomainError
from mailsvc.domain.text import MultiLine
from mailsvc.http import errors
from mailsvc.http.errors import BODY_TOO_LARGE, MAIN, NATIVE, ApiError
from mailsvc.http.site import DEFAULT_BODY_LIMIT, MIB

if TYPE_CHECKING:
    from mailsvc.http.operation import Operation

log = Logger()

PUBLIC = "public"
OPERATOR = "operator"
FULL = "full_access"
SENDING = "sending_access"
#: A dashboard session: its cookie, and its CSRF token on state-changing methods.
SESSION = "session"
#: A session's sandboxed frame loading what its page handed over (a preview): the session as for
#: ``SESSION`` but without the account's request rate, which the page's request that handed it
#: over has paid. A frame's load cannot wait out a 429 as the page's own fetch does, so a busy
#: page showed the 429's JSON in place of the e-mail.
SESSION_FRAME = "session_frame"
#: No credentials, but a dashboard route (``/auth/*``): dashboard CORS, refused cross-site.
SIGN_IN = "sign_in"
#: An operator console session (docs/decisions.md, "Operator console"): its own cookie, and its CSRF token on
#: state-changing methods. Every operator route is also served to it at ``/console`` + path.
OPERATOR_SESSION = "operator_session"
#: No credentials, but the console's sign-in (``/console/auth/*``): refused from any other site.
CONSOLE_SIGN_IN = "console_sign_in"

#: The session cookie and the header carrying its CSRF token (docs/decisions.md, "Dashboard").
SESSION_COOKIE = b"mailsvc_session"
CSRF_HEADER = b"x-csrf-token"
#: The operator console's session cookie: never the dashboard's (docs/decisions.md, "Operator console").
CONSOLE_COOKIE = b"mailsvc_operator"
#: Where the console's routes live: same-site only (no CORS), never cached.
CONSOLE_PREFIX = "/console/"
#: Methods that change nothing, and need no CSRF token.
SAFE_METHODS = frozenset({b"GET", b"HEAD", b"OPTIONS"})
#: Where the dashboard's routes live (and ``/me``): each answers CORS for ``dashboard.origins`` only.
DASHBOARD_PREFIXES = ("/auth/", "/dashboard/")


def is_dashboard_path(path: str) -> bool:
    return path == "/me" or path.startswith(DASHBOARD_PREFIXES)

JSON = b"application/json"

#: The largest bodies of these writes; every other route takes DEFAULT_BODY_LIMIT.
SEND_BODY_LIMIT = 50 * MIB  # POST /emails and /emails/batch
TEMPLATE_BODY_LIMIT = 5 * MIB  # template and broadcast writes (and the builder's, and previews)

#: Request paths (of at most so many bytes) whose route a router remembers (``Router._endpoint_of``).
ACCESS_CACHE_SIZE = 1024
ACCESS_CACHE_PATH_BYTES = 256

#: Seconds a browser may keep a ``/public/*`` preflight answer.
PREFLIGHT_MAX_AGE = b"600"


@attrs.frozen
class Reply:
    """A response other than ``200`` with a JSON object."""

    status: int
    body: Any = None  # dict → JSON; bytes → sent as is; None → empty
    content_type: bytes = JSON
    headers: dict[str, str] = attrs.Factory(dict)


@attrs.frozen
class Route:
    method: str
    path: str
    access: str
    surface: str
    native: bool
    dashboard: bool = True
    body_limit: int = DEFAULT_BODY_LIMIT
    multi_line: tuple[str, ...] = ()
    op: Operation | None = None


@attrs.frozen
class Mounted:
    """One (method, path) the router serves: what ``mailsvc.http.openapi`` documents."""

    method: str
    path: str  # Klein's form: /api-keys/<key_id>, /contacts/<path:key>
    access: str
    surface: str
    #: For a ``/dashboard`` copy of an API-key route (or a ``/console`` copy of an operator
    #: route): the path of the route it copies.
    mirror_of: str | None = None
    #: The largest body it takes, in bytes; a larger one is refused before it is read.
    body_limit: int = DEFAULT_BODY_LIMIT
    #: The paths of its body whose strings may hold lines (``mailsvc.domain.text.MultiLine``).
    multi_line: tuple[str, ...] = ()
    #: What the OpenAPI document says of it (its route's, on every copy).
    op: Operation | None = None


class Admission:
    """
    The check of a request's credentials for a route's ``access``, begun when its headers came
    in. The connection waits on it before taking the body (and answers at once if it fails);
    the handler takes its caller from it. Its failure is kept here, never left unhandled.
    """

    def __init__(self, access: str, check: defer.Deferred):
        self.access = access
        self.decided = False
        self._outcome: Caller | None | Failure = None
        self._waiting: list[defer.Deferred] = []
        check.addBoth(self._decide)

    def _decide(self, outcome) -> None:
        self.decided, self._outcome = True, outcome
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            d.callback(None)

    @property
    def refused(self) -> bool:
        return self.decided and isinstance(self._outcome, Failure)

    def when_decided(self) -> defer.Deferred:
        if self.decided:
            return defer.succeed(None)
        d: defer.Deferred = defer.Deferred()
        self._waiting.append(d)
        return d

    async def caller(self) -> Caller | None:
        """The caller, or the check's own error raised."""
        await self.when_decided()
        if isinstance(self._outcome, Failure):
            self._outcome.raiseException()
        return self._outcome


def route(method: str, path: str, *, access: str, surface: str = MAIN, native: bool = False,
          dashboard: bool = True, body_limit: int = DEFAULT_BODY_LIMIT, multi_line: tuple[str, ...] = (),
          op: Operation | None = None):
    """
    Mark a resource's handler for ``method path`` with the envelope of ``surface``; ``native``
    also serves it at ``/v1`` + ``path`` with the native envelope. ``access`` is who may call it.
    A route an API key may call is also served at ``/dashboard`` + ``path`` to a session,
    unless ``dashboard`` is False. ``body_limit``: the largest body it takes, on every copy;
    ``multi_line``: the paths of its body whose strings may hold line breaks (every other string
    of the body is one line, ``mailsvc.http.body``). ``op``: what the OpenAPI document says of it.
    """

    def mark(handler):
        handler.routes = (*getattr(handler, "routes", ()),
                          Route(method, path, access, surface, native, dashboard, body_limit,
                                tuple(multi_line), op))
        return handler

    return mark


@attrs.frozen
class Operator:
    """
    The caller of an operator route: the operator token's name, or ``operator:<email>`` for a
    console session (what the audit log says); ``email``: the console's operator.
    """

    name: str
    email: str | None = None


class Router:
    def __init__(
        self,
        clock,
        keyring: KeyRing,
        limiter: RateLimiter,
        operator_token: str,
        request_timeout: float = 60,
        public_origins: tuple[str, ...] = (),
        sessions=None,
        dashboard_origins: tuple[str, ...] = (),
        operator_tokens=None,
        console=None,
    ):
        self.app = Klein()
        self._clock = clock
        self._keyring = keyring
        self._limiter = limiter
        self._operator_token = operator_token.encode("utf-8")
        #: ``authenticate(token) -> name | None``: the named operator tokens
        #: (mailsvc.app.audit.OperatorTokens); None: the configured token only.
        self._operator_tokens = operator_tokens
        self._request_timeout = request_timeout
        self._public_origins = frozenset(origin.rstrip("/") for origin in public_origins)
        self._public_methods: dict[str, set[str]] = {}
        #: ``authenticate(token) -> Caller | None`` and ``csrf_matches(token, presented)``
        #: (mailsvc.app.dashboard.Dashboard); None: no dashboard.
        self._sessions = sessions
        self._dashboard_origins = frozenset(origin.rstrip("/") for origin in dashboard_origins)
        #: ``authenticate(token) -> email | None`` and ``csrf_matches(token, presented)``
        #: (mailsvc.app.console.Console); None: no operator console.
        self._console = console
        self._access: dict[str, str] = {}  # endpoint name → who may call it
        self._body_limits: dict[str, int] = {}  # endpoint name → the largest body it takes
        #: Every route served, in mount order (the OpenAPI document is generated from it).
        self.mounted: list[Mounted] = []
        #: ``_endpoint_of`` remembered per (method, path) as requested: the same few paths take
        #: most requests, and matching one against the map costs more than the rest of the
        #: admission. Emptied when a route is added, and when it holds ACCESS_CACHE_SIZE paths.
        self._endpoint_cache: dict[tuple[bytes, bytes], str | None] = {}
        self.app.handle_errors(NotFound)(self._route_not_found)
        self.app.handle_errors(MethodNotAllowed)(self._method_not_allowed)

    def resource(self):
        return self.app.resource()

    def mount(self, resource) -> None:
        """Register every handler of ``resource`` marked with ``route``."""
        for name in dir(type(resource)):
            for r in getattr(getattr(type(resource), name), "routes", ()):
                handler = getattr(resource, name)
                self._register(r.path, r.method, r.access, r.surface, handler, r.body_limit, r.multi_line, op=r.op)
                if r.native:
                    self._register("/v1" + r.path, r.method, r.access, NATIVE, handler, r.body_limit, r.multi_line,
                                   op=r.op)
                if r.dashboard and r.access in (FULL, SENDING):
                    # A route only the native API has (/v1/usage) is served at /dashboard/usage.
                    mirror = r.path[len("/v1"):] if r.path.startswith("/v1/") else r.path
                    self._register("/dashboard" + mirror, r.method, SESSION, MAIN, handler, r.body_limit,
                                   r.multi_line, mirror_of=r.path, op=r.op)
                if r.access == OPERATOR and self._console is not None:
                    self._register("/console" + r.path, r.method, OPERATOR_SESSION, r.surface, handler,
                                   r.body_limit, r.multi_line, mirror_of=r.path, op=r.op)

    def _register(self, path: str, method: str, access: str, surface: str,
                  handler: Callable[..., Awaitable[Any]], body_limit: int = DEFAULT_BODY_LIMIT,
                  multi_line: tuple[str, ...] = (), mirror_of: str | None = None,
                  op: Operation | None = None) -> None:
        cors = access == PUBLIC and path.startswith("/public/")
        lines = MultiLine(multi_line)
        dashboard = is_dashboard_path(path)
        console = path.startswith(CONSOLE_PREFIX) and access != PUBLIC
        error_surface = (errors.DASHBOARD if access in (SESSION, SESSION_FRAME, SIGN_IN, CONSOLE_SIGN_IN)
                         or (access == OPERATOR_SESSION and surface == MAIN) else surface)
        if dashboard and access not in (SESSION, SESSION_FRAME, SIGN_IN):
            raise ValueError(f"{path}: a dashboard route is for a session (or a sign-in), not {access}")

        def endpoint(request, **kwargs):
            request.route_name = path
            request.surface = surface
            request.multi_line = lines
            if cors:
                self._allow_origin(request)
            if dashboard:
                self._allow_dashboard_origin(request)
                # Nothing private stays in a cache, nor comes back with the back button.
                request.setHeader(b"Cache-Control", b"no-store")
            if console:
                request.setHeader(b"Cache-Control", b"no-store")
            d = defer.ensureDeferred(self._serve(request, handler, access, error_surface, kwargs))
            return shielded(d)

        self.app.route(path, methods=[method], endpoint=f"{method} {path}")(endpoint)
        self._access[f"{method} {path}"] = access
        self._body_limits[f"{method} {path}"] = body_limit
        self.mounted.append(Mounted(method, path, access, surface, mirror_of, body_limit, multi_line, op))
        self._endpoint_cache.clear()
        if cors:
            self._add_preflight(path, method)
        if dashboard:
            self._add_preflight(path, method, dashboard=True)

    def admit(self, request, method: bytes, path: bytes) -> Admission | None:
        """
        Start checking the credentials of a request whose headers are in and whose body is
        not yet read; None when its route needs none, or it has no route (404 or 405 later).
        """
        endpoint = self._endpoint_of(method, path)
        access = self._access.get(endpoint)
        if access is None or access == PUBLIC:
            return None
        request.endpoint_path = endpoint.split(" ", 1)[1]  # the route's path, before its handler runs
        return Admission(access, defer.ensureDeferred(self._authorize(request, access)))

    def body_limit(self, method: bytes, path: bytes) -> int:
        """The largest body the route ``method path`` leads to takes (no route: DEFAULT_BODY_LIMIT)."""
        return self._body_limits.get(self._endpoint_of(method, path), DEFAULT_BODY_LIMIT)

    def _endpoint_of(self, method: bytes, path: bytes) -> str | None:
        """The endpoint of the route ``method path`` leads to, matched as Klein will match it."""
        key = (method, path)
        try:
            return self._endpoint_cache[key]
        except KeyError:
            pass
        endpoint = self._match_endpoint(method, path)
        if len(path) > ACCESS_CACHE_PATH_BYTES:
            return endpoint
        if len(self._endpoint_cache) >= ACCESS_CACHE_SIZE:
            self._endpoint_cache.clear()
        self._endpoint_cache[key] = endpoint
        return endpoint

    def _match_endpoint(self, method: bytes, path: bytes) -> str | None:
        # twisted.web's split of the path into segments, which Klein joins again.
        segments = [unquote_to_bytes(s) for s in path.split(b"?", 1)[0][1:].split(b"/")]
        path_info = b"/".join(segments)
        if not path_info.startswith(b"/"):
            path_info = b"/" + path_info
        try:
            mapper = self.app.url_map.bind(
                "", path_info=path_info.decode("utf-8"), default_method=method.decode("latin-1")
            )
            rule, _ = mapper.match(return_rule=True)
        except (UnicodeDecodeError, HTTPException):
            return None
        return rule.endpoint

    def _add_preflight(self, path: str, method: str, dashboard: bool = False) -> None:
        """
        ``/public/*`` answers CORS preflight for its configured origins,
        the dashboard's routes for ``dashboard.origins`` (with credentials).
        """
        methods = self._public_methods.setdefault(path, set())
        if not methods:

            def preflight(request, **_):
                request.route_name = path
                request.setResponseCode(204)
                allowed = self._allow_dashboard_origin(request) if dashboard else self._allow_origin(request)
                if allowed:
                    request.setHeader(b"Access-Control-Allow-Methods", ", ".join(sorted(methods)).encode())
                    request.setHeader(
                        b"Access-Control-Allow-Headers",
                        b"Content-Type, X-Request-Id, X-CSRF-Token" if dashboard else b"Content-Type, X-Request-Id",
                    )
                    request.setHeader(b"Access-Control-Max-Age", PREFLIGHT_MAX_AGE)
                return b""

            self.app.route(path, methods=["OPTIONS"], endpoint=f"OPTIONS {path}")(preflight)
        methods.add(method)

    def _allow_origin(self, request) -> bool:
        """Let a configured origin's browser read this response; other origins get no CORS header."""
        request.setHeader(b"Vary", b"Origin")
        origin = request.getHeader(b"origin")
        if origin is None or origin.decode("latin-1") not in self._public_origins:
            return False
        request.setHeader(b"Access-Control-Allow-Origin", origin)
        request.setHeader(b"Access-Control-Expose-Headers", b"X-Request-Id")
        return True

    def _allow_dashboard_origin(self, request) -> bool:
        """Let a ``dashboard.origins`` page read this response, with its cookie; other origins get nothing."""
        request.setHeader(b"Vary", b"Origin")
        origin = request.getHeader(b"origin")
        if origin is None or origin.decode("latin-1") not in self._dashboard_origins:
            return False
        request.setHeader(b"Access-Control-Allow-Origin", origin)
        request.setHeader(b"Access-Control-Allow-Credentials", b"true")
        request.setHeader(b"Access-Control-Expose-Headers", b"X-Request-Id")
        return True

    def _same_site_or_listed(self, request, console: bool = False) -> bool:
        """
        A state-changing dashboard request comes from this host's pages or a listed origin (a
        console request from this host's pages only).
        """
        origin = request.getHeader(b"origin")
        if origin is None:
            return True  # not a browser's cross-origin request (browsers send Origin on those)
        text = origin.decode("latin-1")
        if not console and text in self._dashboard_origins:
            return True
        host = request.getHeader(b"host")
        return host is not None and text == f"{browser_scheme(request)}://{host.decode('latin-1')}"

    async def _serve(self, request, handler, access, surface, kwargs) -> bytes:
        context = {"request_id": request.request_id, "tenant": None}
        logs.REQUEST.set(context)
        try:
            admission = request.admission
            if admission is not None and admission.access == access:
                caller = await admission.caller()
            else:
                caller = await self._authorize(request, access)
            if isinstance(caller, Caller):
                context["tenant"] = str(caller.tenant.id)
            if request.body_too_large:
                raise BODY_TOO_LARGE
            running = defer.ensureDeferred(handler(request, caller, **kwargs))
            result = await shielded(running).addTimeout(self._request_timeout, self._clock)
        except ApiError as e:
            return self.error(request, surface, e)
        except DomainError as e:
            return self.error(request, surface, errors.from_domain(e))
        except defer.TimeoutError:
            return self.error(
                request, surface,
                ApiError(500, "application_error", "The request timed out; retry with backoff."),
            )
        except Exception:
            log.failure(
                "unhandled error in {method} {route} (request {request_id})",
                method=request.method.decode("latin-1"),
                route=request.route_name,
                request_id=request.request_id,
            )
            return self.error(request, surface, errors.INTERNAL)
        return self._reply(request, result)

    async def _authorize(self, request, access: str) -> Caller | Operator | None:
        if access == PUBLIC:
            return None
        if access in (SIGN_IN, CONSOLE_SIGN_IN):
            console = access == CONSOLE_SIGN_IN
            if request.method not in SAFE_METHODS and not self._same_site_or_listed(request, console):
                raise CROSS_SITE
            return None
        if access in (SESSION, SESSION_FRAME):
            return await self._session(request, metered=access == SESSION)
        if access == OPERATOR_SESSION:
            return await self._console_session(request)
        presented = _bearer(request)
        if access == OPERATOR:
            if presented is None:
                raise ApiError(401, "missing_api_key", "Missing operator token in the authorization header.",
                               native_code="unauthorized")
            if hmac.compare_digest(presented.encode("utf-8"), self._operator_token):
                return Operator(CONFIGURED_TOKEN_NAME)
            name = await self._operator_tokens.authenticate(presented) if self._operator_tokens else None
            if name is None:
                raise ApiError(403, "invalid_api_key", "Operator token is invalid", native_code="forbidden")
            return Operator(name)
        if presented is None:
            raise ApiError(401, "missing_api_key", "Missing API key in the authorization header.")
        caller = await self._keyring.authenticate(presented)
        if caller is None:
            raise ApiError(403, "invalid_api_key", "API key is invalid")
        if access == FULL and not caller.full_access:
            raise ApiError(401, "restricted_api_key", "This API key is restricted to only send emails.")
        await self._rate(caller)
        return caller

    async def _session(self, request, metered: bool = True) -> Caller:
        """The caller of a session cookie, checked for CSRF on state-changing methods (and the rate if ``metered``)."""
        token = session_token(request)
        if token is None or self._sessions is None:
            raise NO_SESSION
        caller = await self._sessions.authenticate(token)
        if caller is None:
            raise NO_SESSION
        route_path = getattr(request, "endpoint_path", None) or getattr(request, "route_name", None)
        if caller.two_factor_pending and route_path not in ENROLMENT_ROUTES:
            raise ENROL_FIRST
        if request.method not in SAFE_METHODS:
            presented = request.getHeader(CSRF_HEADER)
            if not self._same_site_or_listed(request) or not self._sessions.csrf_matches(
                    token, presented.decode("latin-1") if presented is not None else None):
                raise BAD_CSRF
        if metered:
            await self._rate(caller)
        return caller

    async def _console_session(self, request) -> Operator:
        """The operator of a console cookie (never the dashboard's), checked for CSRF on state-changing methods."""
        token = console_token(request)
        email = await self._console.authenticate(token) if token and self._console is not None else None
        if email is None:
            raise NO_SESSION
        if request.method not in SAFE_METHODS:
            presented = request.getHeader(CSRF_HEADER)
            if not self._same_site_or_listed(request, console=True) or not self._console.csrf_matches(
                    token, presented.decode("latin-1") if presented is not None else None):
                raise BAD_CSRF
        return Operator(CONSOLE_ACTOR_PREFIX + email, email)

    async def _rate(self, caller: Caller) -> None:
        """The account's shared API rate, for its keys and its sessions alike."""
        wait = await self._limiter.take(caller.tenant.id, caller.tenant.api_rate_per_sec)
        if wait is not None:
            raise ApiError(
                429, "rate_limit_exceeded",
                "Too many requests. You can only make a limited number of requests per second.",
                headers={"Retry-After": str(wait)},
            )

    def _reply(self, request, result) -> bytes:
        if not isinstance(result, Reply):
            result = Reply(200, result)
        request.setResponseCode(result.status)
        for name, value in result.headers.items():
            request.setHeader(name, value)
        if result.body is None:
            return b""
        request.setHeader(b"Content-Type", result.content_type)
        body = result.body if isinstance(result.body, bytes) else json.dumps(result.body, default=str).encode("utf-8")
        return _sized(request, body)

    def error(self, request, surface: str, e: ApiError) -> bytes:
        request.setResponseCode(e.status)
        request.setHeader(b"Content-Type", JSON)
        for name, value in e.headers.items():
            request.setHeader(name, value)
        return _sized(request, e.body(surface, request.request_id))

    def _route_not_found(self, request, failure):
        return self.error(request, errors.surface_of(request.path), errors.ROUTE_NOT_FOUND)

    def _method_not_allowed(self, request, failure):
        return self.error(request, errors.surface_of(request.path), errors.METHOD_NOT_ALLOWED)


def _sized(request, body: bytes) -> bytes:
    """``body`` with its ``Content-Length``: sent as it is, not in chunked framing."""
    request.setHeader(b"Content-Length", b"%d" % len(body))
    return body


NO_SESSION = ApiError(401, "session_required", "Sign in first: the session is missing, expired or revoked.")
BAD_CSRF = ApiError(403, "invalid_csrf_token", "The CSRF token is missing or does not match the session.")
CROSS_SITE = ApiError(403, "invalid_origin", "This request must come from the dashboard's own pages.")
ENROL_FIRST = ApiError(403, "two_factor_enrolment_required",
                       "This account requires two-factor sign-in: turn it on for yourself first.")
#: What a session may do while its account requires a second factor its user has not enrolled.
ENROLMENT_ROUTES = frozenset({"/me", "/auth/logout", "/dashboard/two-factor", "/dashboard/two-factor/begin",
                              "/dashboard/two-factor/confirm"})


_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def plain_http_on_loopback(request) -> bool:
    """Plain HTTP from a loopback peer to a loopback Host: development, the one case a browser uses ``http``."""
    if request.isSecure():
        return False
    host = (request.getHeader(b"host") or b"").decode("latin-1").lower()
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    peer = getattr(request.getClientAddress(), "host", None)
    try:
        peer_loopback = peer is not None and ipaddress.ip_address(peer).is_loopback
    except ValueError:
        peer_loopback = False
    return peer_loopback and (name in _LOOPBACK_NAMES or name.endswith(".localhost"))


def browser_scheme(request) -> str:
    """
    The scheme of this site's pages as a browser sees them: ``https`` (over TLS here, or through
    a TLS-terminating proxy, which is every other case: the cookie is ``Secure`` there too),
    ``http`` only in development (``plain_http_on_loopback``).
    """
    return "http" if plain_http_on_loopback(request) else "https"


def console_token(request) -> str | None:
    """The operator console's session cookie's token, if the request carries one."""
    value = request.received_cookies.get(CONSOLE_COOKIE)
    return value.decode("latin-1") if value else None


def session_token(request) -> str | None:
    """The dashboard session cookie's token, if the request carries one."""
    value = request.received_cookies.get(SESSION_COOKIE)
    return value.decode("latin-1") if value else None


def _bearer(request) -> str | None:
    header = request.getHeader(b"authorization")
    if header is None or not header.startswith(b"Bearer ") or len(header) <= len(b"Bearer "):
        return None
    return header[len(b"Bearer ") :].decode("latin-1")


__all__ = ["Router", "Operator", "Reply", "route", "PUBLIC", "OPERATOR", "FULL", "SENDING", "SESSION", "SESSION_FRAME",
           "SIGN_IN", "OPERATOR_SESSION", "CONSOLE_SIGN_IN", "MAIN", "NATIVE"]
