"""
The router as compose builds it, driven with StubTreq and a Clock: one handler on both
surfaces, each with its envelope, and the request timeout; and the transport under it, bytes
in and bytes out: refusals before the body, body limits, header and body deadlines.
"""

import json
from types import SimpleNamespace

from twisted.internet import defer, task
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from mailsvc.domain.errors import Invalid
from mailsvc.http.access import access_kinds
from mailsvc.http.context import context_of
from mailsvc.http.router import FULL, PUBLIC, Reply, Router, route
from mailsvc.http.site import Site
from mailsvc.metrics import Metrics
from tests.helpers.http import Responses


class Things:
    """A resource whose handlers wait on ``pending`` or refuse, per surface."""

    def __init__(self):
        self.pending: defer.Deferred = defer.Deferred()

    @route("GET", "/things", access=PUBLIC, native=True)
    async def list(self, request, caller):
        return {"surface": context_of(request).surface}

    @route("POST", "/things", access=PUBLIC, native=True)
    async def create(self, request, caller):
        raise Invalid("name", "name: is required")

    @route("GET", "/slow", access=PUBLIC)
    async def slow(self, request, caller):
        await self.pending
        return Reply(204)


class RouterTests(SynchronousTestCase):
    def setUp(self):
        self.clock = task.Clock()
        self.things = Things()
        router = Router(self.clock, access_kinds(keyring=None, limiter=None, operator_token="op"), request_timeout=60)
        router.mount(self.things)
        # Served by the daemon's own Site (request ids, body limits) on the test's clock, bytes in and out.
        self.channel = Site(router.resource(), self.clock, Metrics()).buildProtocol(None)
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 40000))
        self.channel.makeConnection(self.transport)

    def tearDown(self):
        self.channel.connectionLost(Failure(ConnectionDone()))

    def ask(self, method: str, path: str) -> None:
        self.transport.clear()
        self.channel.dataReceived(f"{method} {path} HTTP/1.1\r\nHost: api.test\r\nContent-Length: 0\r\n\r\n".encode())

    def answers(self) -> list[tuple[int, dict | None]]:
        """The responses written since the request: status and JSON body."""
        parser = Responses()
        parser.feed(self.transport.value())
        return [(status, json.loads(body) if body else None) for status, _, body in parser.responses]

    def fetch(self, method: str, path: str) -> tuple[int, dict]:
        self.ask(method, path)
        [answer] = self.answers()
        return answer

    def test_one_handler_serves_both_surfaces(self):
        self.assertEqual(self.fetch("GET", "/things"), (200, {"surface": "main"}))
        self.assertEqual(self.fetch("GET", "/v1/things"), (200, {"surface": "native"}))

    def test_each_surface_has_its_error_envelope(self):
        code, main = self.fetch("POST", "/things")
        self.assertEqual((code, main), (422, {"statusCode": 422, "name": "validation_error",
                                              "message": "name: is required"}))
        code, native = self.fetch("POST", "/v1/things")
        self.assertEqual(code, 422)
        self.assertEqual({k: v for k, v in native["error"].items() if k != "request_id"},
                         {"code": "validation_error", "message": "name: is required", "field": "name"})
        self.assertTrue(native["error"]["request_id"].startswith("req_"))

    def test_a_route_not_marked_native_is_not_served_there(self):
        code, body = self.fetch("GET", "/v1/slow")
        self.assertEqual((code, body["error"]["code"]), (404, "not_found"))

    def test_a_request_past_its_timeout_is_answered_and_its_work_runs_on(self):
        self.ask("GET", "/slow")
        self.assertEqual(self.answers(), [])
        self.clock.advance(59.9)
        self.assertEqual(self.answers(), [])
        self.clock.advance(0.1)
        [(code, body)] = self.answers()
        self.assertEqual((code, body["name"]), (500, "application_error"))
        self.assertIn("timed out", body["message"])
        # The handler was not cancelled: it runs to its end, and a late failure is logged.
        self.assertFalse(self.things.pending.called)
        self.things.pending.errback(RuntimeError("late"))
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)


class Keyed:
    """A resource whose handler needs a full-access key and reads the body."""

    @route("POST", "/keyed", access=FULL, native=True)
    async def create(self, request, caller):
        return {"tenant": caller.tenant.id, "bytes": len(request.content.read())}


class PendingKeys:
    """A key ring whose every check waits until the test decides it (a cache miss)."""

    def __init__(self):
        self.checks: list[tuple[str, defer.Deferred]] = []

    def authenticate(self, text: str) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        self.checks.append((text, d))
        return d


class NoLimit:
    async def take(self, tenant_id, rate_per_sec):
        return None


CALLER = SimpleNamespace(tenant=SimpleNamespace(id="t1", api_rate_per_sec=10), full_access=True)


class TransportTests(SynchronousTestCase):
    """
    The daemon's Site and Router, bytes in and bytes out on a StringTransport with a Clock: what
    is answered before a body is read, the body limits, and the deadlines of each phase.
    """

    def setUp(self):
        self.clock = task.Clock()
        self.keys = PendingKeys()
        router = Router(self.clock, access_kinds(keyring=self.keys, limiter=NoLimit(), operator_token="op"))
        router.mount(Keyed())
        router.mount(Things())
        self.site = Site(router.resource(), self.clock, Metrics(), admit=router.admit,
                         header_timeout=10, body_timeout=60)
        self.channel = self.site.buildProtocol(None)
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 40000))
        self.channel.makeConnection(self.transport)

    def tearDown(self):
        self.channel.connectionLost(Failure(ConnectionDone()))

    def send(self, data: bytes) -> None:
        self.channel.dataReceived(data)

    def answers(self) -> list[tuple[int, dict, dict]]:
        """Every response written so far: status, lower-cased headers, JSON body."""
        out = []
        parser = Responses()
        parser.feed(self.transport.value())
        for status, headers, body in parser.responses:
            out.append((status, headers, json.loads(body) if body else None))
        return out

    def test_no_key_is_refused_before_the_body(self):
        self.send(b"POST /keyed HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n")
        [(status, headers, body)] = self.answers()
        self.assertEqual((status, body["name"]), (401, "missing_api_key"))
        self.assertEqual(headers["connection"], "close")
        self.assertTrue(self.transport.disconnecting)
        self.assertEqual(self.keys.checks, [])

    def test_the_native_surface_keeps_its_envelope(self):
        self.send(b"POST /v1/keyed HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
        [(status, _, body)] = self.answers()
        self.assertEqual((status, body["error"]["code"]), (401, "missing_api_key"))

    def test_an_unknown_key_is_refused_once_checked_with_the_body_unread(self):
        self.send(b"POST /keyed HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer re_nope\r\n"
                  b"Content-Length: 50000000\r\n\r\n" + b"x" * 1000)
        # While the key is checked nothing is answered, the body is not parsed and the
        # connection is paused.
        self.assertEqual(self.answers(), [])
        self.assertEqual(self.transport.producerState, "paused")
        self.assertEqual(self.channel.requests[0].content.tell(), 0)
        [(presented, check)] = self.keys.checks
        self.assertEqual(presented, "re_nope")
        check.callback(None)
        [(status, headers, body)] = self.answers()
        self.assertEqual((status, body["name"]), (403, "invalid_api_key"))
        self.assertTrue(self.transport.disconnecting)

    def test_a_known_key_reads_the_body_then_keeps_the_connection(self):
        self.send(b"POST /keyed HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer re_ok\r\n"
                  b"Content-Length: 6\r\n\r\nabc")
        self.keys.checks[0][1].callback(CALLER)
        self.assertEqual(self.answers(), [])  # half of the body: waiting for the rest
        self.assertEqual(self.transport.producerState, "producing")
        self.send(b"def")
        [(status, _, body)] = self.answers()
        self.assertEqual((status, body), (200, {"tenant": "t1", "bytes": 6}))
        self.assertFalse(self.transport.disconnecting)

    def test_100_continue_waits_for_the_key(self):
        self.send(b"POST /keyed HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer re_ok\r\n"
                  b"Expect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        self.assertEqual(self.transport.value(), b"")
        self.keys.checks[0][1].callback(CALLER)
        self.assertEqual(self.transport.value(), b"HTTP/1.1 100 Continue\r\n\r\n")

    def test_a_declared_length_over_the_limit_is_refused_at_once(self):
        self.send(b"POST /things HTTP/1.1\r\nHost: x\r\nContent-Length: 1048577\r\n\r\n")
        [(status, _, body)] = self.answers()
        self.assertEqual((status, body["message"]), (422, "request body too large"))
        self.assertTrue(self.transport.disconnecting)

    def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_limit(self):
        self.send(b"POST /things HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (64 * 1024, b"a" * 64 * 1024)
        for _ in range(16):  # exactly 1 MiB: still within the limit
            self.send(chunk)
        self.assertEqual(self.answers(), [])
        self.send(b"1\r\na\r\n")
        [(status, _, body)] = self.answers()
        self.assertEqual((status, body["message"]), (422, "request body too large"))
        self.assertTrue(self.transport.disconnecting)

    def test_headers_have_a_deadline_that_bytes_do_not_move(self):
        self.send(b"GET /things HTTP/1.1\r\n")
        for _ in range(9):
            self.clock.advance(1)
            self.send(b"X-Slow: 1\r\n")
        self.clock.advance(0.9)
        self.assertEqual(self.answers(), [])
        self.clock.advance(0.1)
        [(status, headers, body)] = self.answers()
        self.assertEqual((status, body["name"]), (408, "request_timeout"))
        self.assertEqual(headers["connection"], "close")
        self.assertTrue(self.transport.disconnecting)

    def test_the_body_has_a_deadline(self):
        self.send(b"POST /v1/things HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        self.clock.advance(59)
        self.assertEqual(self.answers(), [])
        self.clock.advance(1)
        [(status, _, body)] = self.answers()
        self.assertEqual((status, body["error"]["code"]), (408, "request_timeout"))
        self.assertTrue(self.transport.disconnecting)

    def test_an_idle_connection_is_not_given_a_408(self):
        self.send(b"GET /things HTTP/1.1\r\nHost: x\r\n\r\n")
        [(status, _, _)] = self.answers()
        self.clock.advance(30)
        self.assertEqual(len(self.answers()), 1)
        self.assertFalse(self.transport.disconnecting)
        # The next request has its own deadline, from its first byte.
        self.send(b"GET /thin")
        self.clock.advance(10)
        self.assertEqual([a[0] for a in self.answers()], [200, 408])

    def test_header_caps(self):
        for request in (
            b"GET /things HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n",
            b"GET /things HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(101)) + b"\r\n",
            b"GET /things HTTP/1.1\r\n" + b"X-Many: " + b"b" * 8000 + b"\r\nX-More: " + b"c" * 8400 + b"\r\n\r\n",
        ):
            self.setUp()
            self.send(request)
            [(status, _, body)] = self.answers()
            self.assertEqual((status, body["name"]), (431, "request_header_fields_too_large"))
            self.assertTrue(self.transport.disconnecting)

    def test_malformed_requests_get_a_400_envelope(self):
        for request in (
            b"POST /things HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST /things HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"POST /things HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            b"NOT A REQUEST LINE\r\n\r\n",
        ):
            self.setUp()
            self.send(request)
            [(status, _, body)] = self.answers()
            self.assertEqual((status, body["name"]), (400, "bad_request"), request)
            self.assertTrue(self.transport.disconnecting)


