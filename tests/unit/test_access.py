"""
Each access kind's strategy through the router and the daemon's Site, bytes in and bytes out
on a StringTransport: who is let in, who is refused and with which envelope, the CORS and
caching headers, the CSRF and same-site rules, and the request's context as the handler sees it.
"""

import json
from types import SimpleNamespace

from twisted.internet import task
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.logger import LogLevel, globalLogPublisher
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.test.requesthelper import DummyRequest

from mailsvc.app.apikeys import Caller
from mailsvc.app.audit import CONFIGURED_TOKEN_NAME
from mailsvc.http.access import (
    CONSOLE_SIGN_IN,
    FULL,
    OPERATOR,
    PUBLIC,
    SENDING,
    SESSION,
    SESSION_FRAME,
    SIGN_IN,
    access_kinds,
)
from mailsvc.http.baseurl import PublicUrl
from mailsvc.http.context import Operator, context_of
from mailsvc.http.router import Router, route
from mailsvc.http.site import Site
from mailsvc.metrics import Metrics
from tests.helpers.http import Responses

TENANT = SimpleNamespace(id="t1", api_rate_per_sec=10)


def caller(full_access=True, two_factor_pending=False):
    return Caller(TENANT, None, "full_access" if full_access else "sending_access", None,
                  two_factor_pending=two_factor_pending)


class Keys:
    """``full`` is a full-access key, ``send`` a sending-only one."""

    async def authenticate(self, text):
        return {"full": caller(), "send": caller(full_access=False)}.get(text)


class Limiter:
    """Counts what is taken; ``wait``: the seconds every take answers (None: let through)."""

    def __init__(self):
        self.taken = 0
        self.wait = None

    async def take(self, tenant_id, rate_per_sec):
        self.taken += 1
        return self.wait


class Sessions:
    """The session ``s1`` (``pending``: its account's second factor not enrolled), CSRF token ``c1``."""

    def __init__(self):
        self.pending = False

    async def authenticate(self, token):
        return caller(two_factor_pending=self.pending) if token == "s1" else None

    def csrf_matches(self, token, presented):
        return presented == "c1"


class Console:
    async def authenticate(self, token):
        return "op@example.test" if token == "o1" else None

    def csrf_matches(self, token, presented):
        return presented == "c1"


class NamedTokens:
    async def authenticate(self, token):
        return "deploy" if token == "named" else None


class Everything:
    """One route of each access kind, answering what the request's context holds."""

    def _seen(self, request, caller):
        context = context_of(request)
        assert context.caller is caller
        return {"route": context.route, "surface": context.surface,
                "operator": caller.name if isinstance(caller, Operator) else None,
                "tenant": context.tenant.id if context.tenant is not None else None}

    @route("GET", "/things", access=FULL, native=True)
    async def things(self, request, caller):
        return self._seen(request, caller)

    @route("POST", "/things", access=FULL, native=True)
    async def make_thing(self, request, caller):
        return self._seen(request, caller)

    @route("POST", "/send", access=SENDING)
    async def send(self, request, caller):
        return self._seen(request, caller)

    @route("GET", "/admin/thing", access=OPERATOR, native=True)
    async def admin(self, request, caller):
        return self._seen(request, caller)

    @route("POST", "/admin/thing", access=OPERATOR)
    async def admin_write(self, request, caller):
        return self._seen(request, caller)

    @route("GET", "/dashboard/frame", access=SESSION_FRAME)
    async def frame(self, request, caller):
        return self._seen(request, caller)

    @route("GET", "/dashboard/two-factor", access=SESSION)
    async def two_factor(self, request, caller):
        return self._seen(request, caller)

    @route("POST", "/auth/login", access=SIGN_IN)
    async def login(self, request, caller):
        return self._seen(request, caller)

    @route("POST", "/console/auth/login", access=CONSOLE_SIGN_IN)
    async def console_login(self, request, caller):
        return self._seen(request, caller)

    @route("GET", "/public/thing", access=PUBLIC)
    async def public(self, request, caller):
        return self._seen(request, caller)

    @route("GET", "/health", access=PUBLIC)
    async def health(self, request, caller):
        return self._seen(request, caller)


class AccessTests(SynchronousTestCase):
    def setUp(self):
        self.clock = task.Clock()
        self.limiter = Limiter()
        self.sessions = Sessions()
        kinds = access_kinds(keyring=Keys(), limiter=self.limiter, operator_token="op",
                             operator_tokens=NamedTokens(), sessions=self.sessions, console=Console(),
                             public_origins=("https://shop.test/",), dashboard_origins=("https://ui.test",))
        router = Router(self.clock, kinds)
        router.mount(Everything())
        self.channel = Site(router.resource(), self.clock, Metrics(), admit=router.admit).buildProtocol(None)
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 40000))
        self.channel.makeConnection(self.transport)

    def tearDown(self):
        self.channel.connectionLost(Failure(ConnectionDone()))

    def fetch(self, method: str, path: str, **headers: str) -> tuple[int, dict, dict | None]:
        """One request's status, headers and JSON body (``x_csrf_token=`` is ``X-Csrf-Token:``)."""
        self.transport.clear()
        lines = "".join(f"{name.replace('_', '-')}: {value}\r\n" for name, value in headers.items())
        self.channel.dataReceived(
            f"{method} {path} HTTP/1.1\r\nHost: api.test\r\n{lines}Content-Length: 0\r\n\r\n".encode())
        parser = Responses()
        parser.feed(self.transport.value())
        [(status, got, body)] = parser.responses
        return status, got, json.loads(body) if body else None

    # API keys

    def test_a_full_access_key_is_let_in_and_pays_the_account_rate(self):
        status, headers, body = self.fetch("GET", "/things", authorization="Bearer full")
        self.assertEqual((status, body), (200, {"route": "/things", "surface": "main", "operator": None,
                                               "tenant": "t1"}))
        self.assertEqual(self.limiter.taken, 1)
        self.assertNotIn("access-control-allow-origin", headers)
        self.assertNotIn("cache-control", headers)

    def test_api_key_refusals_and_their_envelopes(self):
        status, _, body = self.fetch("GET", "/things")
        self.assertEqual((status, body), (401, {"statusCode": 401, "name": "missing_api_key",
                                               "message": "Missing API key in the authorization header."}))
        status, _, body = self.fetch("GET", "/v1/things", authorization="Bearer nope")
        self.assertEqual((status, body["error"]["code"], body["error"]["message"]),
                         (403, "invalid_api_key", "API key is invalid"))
        status, _, body = self.fetch("GET", "/v1/things", authorization="Bearer send")
        self.assertEqual((status, body["error"]["code"]), (401, "insufficient_scope"))

    def test_a_sending_key_may_send(self):
        self.assertEqual(self.fetch("POST", "/send", authorization="Bearer send")[0], 200)

    def test_past_the_account_rate_a_key_is_told_when_to_retry(self):
        self.limiter.wait = 3
        status, headers, body = self.fetch("GET", "/things", authorization="Bearer full")
        self.assertEqual((status, headers["retry-after"], body["name"]), (429, "3", "rate_limit_exceeded"))

    # Operator token

    def test_the_configured_and_a_named_operator_token(self):
        self.assertEqual(self.fetch("GET", "/admin/thing", authorization="Bearer op")[2]["operator"],
                         CONFIGURED_TOKEN_NAME)
        self.assertEqual(self.fetch("GET", "/admin/thing", authorization="Bearer named")[2]["operator"], "deploy")
        self.assertEqual(self.limiter.taken, 0)

    def test_operator_refusals_take_the_routes_envelope(self):
        status, _, body = self.fetch("GET", "/v1/admin/thing")
        self.assertEqual((status, body["error"]["code"]), (401, "unauthorized"))
        status, _, body = self.fetch("GET", "/admin/thing", authorization="Bearer nope")
        self.assertEqual((status, body), (403, {"statusCode": 403, "name": "invalid_api_key",
                                               "message": "Operator token is invalid"}))

    # Dashboard session

    def test_a_session_is_served_every_api_key_route_under_dashboard(self):
        status, headers, body = self.fetch("GET", "/dashboard/things", cookie="mailsvc_session=s1",
                                           origin="https://ui.test")
        self.assertEqual((status, body["route"], body["tenant"]), (200, "/dashboard/things", "t1"))
        self.assertEqual((headers["access-control-allow-origin"], headers["access-control-allow-credentials"],
                          headers["cache-control"], headers["vary"]), ("https://ui.test", "true", "no-store", "Origin"))
        self.assertEqual(self.limiter.taken, 1)

    def test_a_session_refused_takes_the_dashboard_envelope(self):
        status, headers, body = self.fetch("GET", "/dashboard/things", origin="https://evil.test")
        self.assertEqual((status, body["name"]), (401, "session_required"))
        self.assertNotIn("access-control-allow-origin", headers)
        self.assertEqual(headers["cache-control"], "no-store")

    def test_a_sessions_write_needs_its_csrf_token_from_its_own_pages(self):
        cookie = "mailsvc_session=s1"
        self.assertEqual(self.fetch("POST", "/dashboard/things", cookie=cookie)[2]["name"], "invalid_csrf_token")
        self.assertEqual(self.fetch("POST", "/dashboard/things", cookie=cookie, x_csrf_token="c1")[0], 200)
        for origin, status in [("https://api.test", 200), ("https://ui.test", 200), ("http://api.test", 403),
                               ("https://evil.test", 403)]:
            got = self.fetch("POST", "/dashboard/things", cookie=cookie, x_csrf_token="c1", origin=origin)[0]
            self.assertEqual(got, status, origin)

    def test_a_frame_pays_no_rate(self):
        self.assertEqual(self.fetch("GET", "/dashboard/frame", cookie="mailsvc_session=s1")[0], 200)
        self.assertEqual(self.limiter.taken, 0)

    def test_a_session_pending_two_factor_may_only_enrol(self):
        self.sessions.pending = True
        status, _, body = self.fetch("GET", "/dashboard/things", cookie="mailsvc_session=s1")
        self.assertEqual((status, body["name"]), (403, "two_factor_enrolment_required"))
        self.assertEqual(self.fetch("GET", "/dashboard/two-factor", cookie="mailsvc_session=s1")[0], 200)

    def test_a_dashboard_preflight_answers_listed_origins_only(self):
        status, headers, _ = self.fetch("OPTIONS", "/dashboard/things", origin="https://ui.test")
        self.assertEqual((status, headers["access-control-allow-methods"], headers["access-control-allow-headers"],
                          headers["access-control-max-age"]),
                         (204, "GET, POST", "Content-Type, X-Request-Id, X-CSRF-Token", "600"))
        status, headers, _ = self.fetch("OPTIONS", "/dashboard/things", origin="https://evil.test")
        self.assertEqual(status, 204)
        self.assertNotIn("access-control-allow-methods", headers)

    # Sign-in

    def test_the_sign_in_is_refused_from_another_site(self):
        self.assertEqual(self.fetch("POST", "/auth/login")[0], 200)
        self.assertEqual(self.fetch("POST", "/auth/login", origin="https://ui.test")[0], 200)
        status, _, body = self.fetch("POST", "/auth/login", origin="https://evil.test")
        self.assertEqual((status, body["name"]), (403, "invalid_origin"))

    # Operator console

    def test_a_console_session_is_served_every_operator_route_under_console(self):
        status, headers, body = self.fetch("GET", "/console/admin/thing", cookie="mailsvc_operator=o1")
        self.assertEqual((status, body["operator"], headers["cache-control"]),
                         (200, "operator:op@example.test", "no-store"))
        self.assertNotIn("access-control-allow-origin", headers)
        # Never the dashboard's cookie; refused with the dashboard's envelope.
        status, _, body = self.fetch("GET", "/console/admin/thing", cookie="mailsvc_session=s1")
        self.assertEqual((status, body["name"]), (401, "session_required"))

    def test_a_console_write_comes_from_this_host_only(self):
        cookie = "mailsvc_operator=o1"
        self.assertEqual(self.fetch("POST", "/console/admin/thing", cookie=cookie, x_csrf_token="c1")[0], 200)
        self.assertEqual(self.fetch("POST", "/console/admin/thing", cookie=cookie)[0], 403)
        status, _, body = self.fetch("POST", "/console/admin/thing", cookie=cookie, x_csrf_token="c1",
                                     origin="https://ui.test")
        self.assertEqual((status, body["name"]), (403, "invalid_csrf_token"))

    def test_the_console_sign_in_is_refused_even_from_a_dashboard_origin(self):
        self.assertEqual(self.fetch("POST", "/console/auth/login")[1]["cache-control"], "no-store")
        status, _, body = self.fetch("POST", "/console/auth/login", origin="https://ui.test")
        self.assertEqual((status, body["name"]), (403, "invalid_origin"))

    # Public

    def test_public_routes_answer_cors_under_public_only(self):
        status, headers, body = self.fetch("GET", "/public/thing", origin="https://shop.test")
        self.assertEqual((status, body["tenant"], headers["access-control-allow-origin"]),
                         (200, None, "https://shop.test"))
        self.assertNotIn("access-control-allow-credentials", headers)
        status, headers, _ = self.fetch("OPTIONS", "/public/thing", origin="https://shop.test")
        self.assertEqual((status, headers["access-control-allow-headers"]), (204, "Content-Type, X-Request-Id"))
        headers = self.fetch("GET", "/health", origin="https://shop.test")[1]
        self.assertNotIn("access-control-allow-origin", headers)
        self.assertNotIn("vary", headers)

    def test_a_route_under_the_dashboards_paths_is_for_a_dashboard_kind(self):
        class Wrong:
            @route("GET", "/dashboard/wrong", access=FULL, dashboard=False)
            async def wrong(self, request, caller):
                return {}

        router = Router(self.clock, access_kinds(keyring=None, limiter=None, operator_token="op"))
        self.assertRaises(ValueError, router.mount, Wrong())

    def test_without_a_console_operator_routes_are_not_under_console(self):
        router = Router(self.clock, access_kinds(keyring=None, limiter=None, operator_token="op"))
        router.mount(Everything())
        self.assertFalse([m for m in router.mounted if m.path.startswith("/console/admin")])


class PublicUrlTests(SynchronousTestCase):
    def request(self, host=b"mail.test:8080", secure=False):
        request = DummyRequest([b""])
        request.requestHeaders.setRawHeaders(b"host", [host])
        request.isSecure = lambda: secure
        return request

    def test_the_configured_url_whatever_the_host(self):
        url = PublicUrl("https://mail.example.com/")
        self.assertEqual(url.of(self.request(b"evil.test")), "https://mail.example.com")
        self.assertEqual(url.or_else("https://fallback.test"), "https://mail.example.com")

    def test_unset_the_scheme_and_host_the_client_used(self):
        self.assertEqual(PublicUrl().of(self.request()), "http://mail.test:8080")
        self.assertEqual(PublicUrl("").of(self.request(secure=True)), "https://mail.test:8080")
        self.assertEqual(PublicUrl().or_else("http://127.0.0.1:8080"), "http://127.0.0.1:8080")

    def test_unset_on_a_listener_others_reach_is_warned_of(self):
        warnings: list[dict] = []

        def observe(event):
            if event.get("log_level") == LogLevel.warn:
                warnings.append(event)

        globalLogPublisher.addObserver(observe)
        self.addCleanup(globalLogPublisher.removeObserver, observe)
        PublicUrl().warn_if_unset("127.0.0.1")
        PublicUrl("https://mail.example.com").warn_if_unset("0.0.0.0")
        self.assertEqual(warnings, [])
        PublicUrl().warn_if_unset("0.0.0.0")
        self.assertEqual(len(warnings), 1)
