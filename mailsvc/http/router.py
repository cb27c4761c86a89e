"""
One Klein tree for every surface, and the one wrapper every endpoint goes through:
authentication, the account's rate limit, the request timeout, JSON replies and both error
envelopes. Credentials are checked as soon as the headers are in (``admit``), so a refused
request is answered before its body is read; the handler takes its caller from that check.

A resource's handlers (``async def handler(self, request, caller, **path_args)``, returning a
JSON-able dict or a ``Reply``) are marked with ``route`` and registered by ``Router.mount``,
once per surface they serve (``native=True`` also mounts under ``/v1``; the handler reads the
surface in its ``RequestContext``). Every API-key handler is also served under ``/dashboard`` to
a session (cookie, CSRF token on state-changing methods, shared rate limit, main envelope).
Who may call a route, and how that is checked, is its access kind's (``mailsvc.http.access``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_to_bytes

import attrs
from klein import Klein
from twisted.internet import defer
from twisted.logger import Logger
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound

from mailsvc import logs
from mailsvc.deferreds import shielded
from mailsvc.domain.errors import DomainError
from mailsvc.domain.text import MultiLine
from mailsvc.http import errors
from mailsvc.http.access import (
    CONSOLE_SIGN_IN,
    FULL,
    OPERATOR,
    OPERATOR_SESSION,
    PUBLIC,
    SENDING,
    SESSION,
    SESSION_FRAME,
    SIGN_IN,
    Access,
)
from mailsvc.http.access.base import Cors
from mailsvc.http.context import Admission, Operator, context_of
from mailsvc.http.errors import BODY_TOO_LARGE, MAIN, NATIVE, ApiError
from mailsvc.http.rulemap import RouterApp
from mailsvc.http.site import DEFAULT_BODY_LIMIT, MIB

if TYPE_CHECKING:
    from mailsvc.http.operation import Operation

log = Logger()

JSON = b"application/json"

#: What a write of these takes; every other route takes DEFAULT_BODY_LIMIT (docs/decisions.md, "Body limits per route").
SEND_BODY_LIMIT = 50 * MIB  # POST /emails and /emails/batch
TEMPLATE_BODY_LIMIT = 5 * MIB  # template and broadcast writes (and the builder's, and previews)

#: Request paths (of at most so many bytes) whose route a router remembers (``Endpoints``).
ACCESS_CACHE_SIZE = 1024
ACCESS_CACHE_PATH_BYTES = 256


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


class Endpoints:
    """
    The endpoint a request's method and path lead to, matched as Klein will match them, before
    Klein does: the credentials are checked (and the body limit chosen) when the headers are
    in. Remembered per (method, path): the same few paths take most requests, and matching one
    against the map costs more than the rest of the admission. Emptied when a route is added,
    and when it holds ACCESS_CACHE_SIZE paths.
    """

    def __init__(self, app: Klein):
        self._app = app
        self._cache: dict[tuple[bytes, bytes], str | None] = {}

    def changed(self) -> None:
        self._cache.clear()

    def of(self, method: bytes, path: bytes) -> str | None:
        key = (method, path)
        try:
            return self._cache[key]
        except KeyError:
            pass
        endpoint = self._match(method, path)
        if len(path) > ACCESS_CACHE_PATH_BYTES:
            return endpoint
        if len(self._cache) >= ACCESS_CACHE_SIZE:
            self._cache.clear()
        self._cache[key] = endpoint
        return endpoint

    def _match(self, method: bytes, path: bytes) -> str | None:
        # twisted.web's split of the path into segments, which Klein joins again.
        segments = [unquote_to_bytes(s) for s in path.split(b"?", 1)[0][1:].split(b"/")]
        path_info = b"/".join(segments)
        if not path_info.startswith(b"/"):
            path_info = b"/" + path_info
        try:
            mapper = self._app.url_map.bind(
                "", path_info=path_info.decode("utf-8"), default_method=method.decode("latin-1")
            )
            rule, _ = mapper.match(return_rule=True)
        except (UnicodeDecodeError, HTTPException):
            return None
        return rule.endpoint


class Router:
    """Registers the routes of resources, and serves each request through its route's access kind."""

    def __init__(self, clock, kinds: dict[str, Access], request_timeout: float = 60):
        #: Klein on a map whose rules share their compiled URL builders (``mailsvc.http.rulemap``).
        self.app: Klein = RouterApp()
        self._clock = clock
        #: Each access kind's strategy, by the name a route gives (``mailsvc.http.access.access_kinds``).
        self._kinds = kinds
        self._request_timeout = request_timeout
        self._preflight_methods: dict[str, set[str]] = {}
        self._access: dict[str, Access] = {}  # endpoint name → who may call it
        self._body_limits: dict[str, int] = {}  # endpoint name → the largest body it takes
        #: Every route served, in mount order (the OpenAPI document is generated from it).
        self.mounted: list[Mounted] = []
        self._endpoints = Endpoints(self.app)
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
                if r.access == OPERATOR and OPERATOR_SESSION in self._kinds:
                    self._register("/console" + r.path, r.method, OPERATOR_SESSION, r.surface, handler,
                                   r.body_limit, r.multi_line, mirror_of=r.path, op=r.op)

    def _register(self, path: str, method: str, access: str, surface: str,
                  handler: Callable[..., Awaitable[Any]], body_limit: int = DEFAULT_BODY_LIMIT,
                  multi_line: tuple[str, ...] = (), mirror_of: str | None = None,
                  op: Operation | None = None) -> None:
        strategy = self._kinds.get(access)
        if strategy is None:
            raise ValueError(f"{path}: no access kind {access!r} is configured")
        rules = strategy.rules(path)
        envelope = strategy.envelope(surface)
        lines = MultiLine(multi_line)

        def endpoint(request, **kwargs):
            context = context_of(request)
            context.route, context.surface, context.multi_line = path, surface, lines
            rules.apply(request)
            return shielded(defer.ensureDeferred(self._serve(request, handler, strategy, envelope, kwargs)))

        self.app.route(path, methods=[method], endpoint=f"{method} {path}")(endpoint)
        self._access[f"{method} {path}"] = strategy
        self._body_limits[f"{method} {path}"] = body_limit
        self.mounted.append(Mounted(method, path, access, surface, mirror_of, body_limit, multi_line, op))
        self._endpoints.changed()
        if rules.cors is not None:
            self._add_preflight(path, method, rules.cors)

    def _add_preflight(self, path: str, method: str, cors: Cors) -> None:
        """A path whose responses a listed origin may read answers its CORS preflight."""
        methods = self._preflight_methods.setdefault(path, set())
        if not methods:

            def preflight(request, **_):
                context_of(request).route = path
                return cors.preflight(request, methods)

            self.app.route(path, methods=["OPTIONS"], endpoint=f"OPTIONS {path}")(preflight)
        methods.add(method)

    def admit(self, request, method: bytes, path: bytes) -> Admission | None:
        """
        Start checking the credentials of a request whose headers are in and whose body is
        not yet read; None when its route needs none, or it has no route (404 or 405 later).
        """
        endpoint = self._endpoints.of(method, path)
        access = self._access.get(endpoint) if endpoint is not None else None
        if endpoint is None or access is None or not access.checks_credentials:
            return None
        context_of(request).route = endpoint.split(" ", 1)[1]  # the route's path, before its handler runs
        return Admission(access, defer.ensureDeferred(access.caller(request)))

    def body_limit(self, method: bytes, path: bytes) -> int:
        """The largest body the route ``method path`` leads to takes (no route: DEFAULT_BODY_LIMIT)."""
        endpoint = self._endpoints.of(method, path)
        return self._body_limits.get(endpoint, DEFAULT_BODY_LIMIT) if endpoint is not None else DEFAULT_BODY_LIMIT

    async def _serve(self, request, handler, access: Access, envelope: str, kwargs) -> bytes:
        context = context_of(request)
        logged = {"request_id": context.request_id, "tenant": None}
        logs.REQUEST.set(logged)
        try:
            admission = context.admission
            if admission is not None and admission.access is access:
                context.caller = await admission.caller()
            else:
                context.caller = await access.caller(request)
            if context.tenant is not None:
                logged["tenant"] = str(context.tenant.id)
            if request.body_too_large:
                raise BODY_TOO_LARGE
            running = defer.ensureDeferred(handler(request, context.caller, **kwargs))
            result = await shielded(running).addTimeout(self._request_timeout, self._clock)
        except ApiError as e:
            return self.error(request, envelope, e)
        except DomainError as e:
            return self.error(request, envelope, errors.from_domain(e))
        except defer.TimeoutError:
            return self.error(
                request, envelope,
                ApiError(500, "application_error", "The request timed out; retry with backoff."),
            )
        except Exception:
            log.failure(
                "unhandled error in {method} {route} (request {request_id})",
                method=request.method.decode("latin-1"),
                route=context.route,
                request_id=context.request_id,
            )
            return self.error(request, envelope, errors.INTERNAL)
        return self._reply(request, result)

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
        return _sized(request, e.body(surface, context_of(request).request_id))

    def _route_not_found(self, request, failure):
        return self.error(request, errors.surface_of(request.path), errors.ROUTE_NOT_FOUND)

    def _method_not_allowed(self, request, failure):
        return self.error(request, errors.surface_of(request.path), errors.METHOD_NOT_ALLOWED)

def _sized(request, body: bytes) -> bytes:
    """``body`` with its ``Content-Length``: sent as it is, not in chunked framing."""
    request.setHeader(b"Content-Length", b"%d" % len(body))
    return body


__all__ = ["Router", "Operator", "Reply", "route", "PUBLIC", "OPERATOR", "FULL", "SENDING", "SESSION", "SESSION_FRAME",
           "SIGN_IN", "OPERATOR_SESSION", "CONSOLE_SIGN_IN", "MAIN", "NATIVE"]
