"""
The router as compose builds it, driven with StubTreq and a Clock: one handler on both
surfaces, each with its envelope, and the request timeout.
"""

import json

from treq.testing import StubTreq
from twisted.internet import defer, task
from twisted.trial.unittest import SynchronousTestCase

from mailsvc.domain.errors import Invalid
from mailsvc.http.router import PUBLIC, Reply, Router, route
from mailsvc.http.site import Site
from mailsvc.metrics import Metrics


class Things:
    """A resource whose handlers wait on ``pending`` or refuse, per surface."""

    def __init__(self):
        self.pending: defer.Deferred = defer.Deferred()

    @route("GET", "/things", access=PUBLIC, native=True)
    async def list(self, request, caller):
        return {"surface": request.surface}

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
        router = Router(self.clock, keyring=None, limiter=None, operator_token="op", request_timeout=60)
        router.mount(self.things)
        self.http = StubTreq(router.resource())
        # Served by the daemon's own Site (request ids, body limits), on the test's clock.
        self.http._agent._serverFactory = Site(router.resource(), self.clock, Metrics())

    def fetch(self, method: str, path: str) -> tuple[int, dict]:
        response = self.successResultOf(self.http.request(method, "http://api.test" + path))
        return response.code, json.loads(self.successResultOf(response.content()) or b"null")

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
        answered = self.http.request("GET", "http://api.test/slow")
        self.assertNoResult(answered)
        self.clock.advance(59.9)
        self.assertNoResult(answered)
        self.clock.advance(0.1)
        self.http.flush()
        response = self.successResultOf(answered)
        body = json.loads(self.successResultOf(response.content()))
        self.assertEqual((response.code, body["name"]), (500, "application_error"))
        self.assertIn("timed out", body["message"])
        # The handler was not cancelled: it runs to its end, and a late failure is logged.
        self.assertFalse(self.things.pending.called)
        self.things.pending.errback(RuntimeError("late"))
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
