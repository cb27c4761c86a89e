"""
The HTTP site: request ids, body limits enforced while the body streams in, in-flight
tracking for a draining shutdown, and request metrics.
"""

from __future__ import annotations

import io
import re
import uuid

from twisted.internet import defer
from twisted.web import server

MIB = 1024 * 1024

#: SPEC §Limits "Body size": (path prefixes, limit). Anything else: 1 MiB.
BODY_LIMITS: tuple[tuple[tuple[bytes, ...], int], ...] = (
    ((b"/emails", b"/v1/emails"), 50 * MIB),
    ((b"/templates", b"/broadcasts"), 5 * MIB),
)
DEFAULT_BODY_LIMIT = 1 * MIB

_REQUEST_ID = re.compile(rb"^[\x21-\x7e]{1,64}$")


def body_limit(path: bytes) -> int:
    path = path.split(b"?", 1)[0]
    for prefixes, limit in BODY_LIMITS:
        for prefix in prefixes:
            if path == prefix or path.startswith(prefix + b"/"):
                return limit
    return DEFAULT_BODY_LIMIT


class Request(server.Request):
    """A request that refuses to buffer a body over its path's limit and carries an id."""

    body_too_large = False
    request_id = ""
    route_name = "unmatched"

    def gotLength(self, length):  # noqa: N802 (Twisted's name)
        # The request line has been parsed by now; the channel holds its path.
        self._body_limit = body_limit(getattr(self.channel, "_path", b"") or b"")
        self._body_seen = 0
        if length is not None and length > self._body_limit:
            self.body_too_large = True
            self.content = io.BytesIO()
        else:
            super().gotLength(length)

    def handleContentChunk(self, data):  # noqa: N802
        if self.body_too_large:
            return
        self._body_seen += len(data)
        if self._body_seen > self._body_limit:
            self.body_too_large = True
            self.content.close()
            self.content = io.BytesIO()
            return
        super().handleContentChunk(data)

    def process(self):
        supplied = self.getHeader(b"x-request-id")
        if supplied is not None and _REQUEST_ID.match(supplied):
            self.request_id = supplied.decode("ascii")
        else:
            self.request_id = "req_" + uuid.uuid4().hex
        self.setHeader(b"X-Request-Id", self.request_id.encode("ascii"))
        self.channel.site.started(self)
        super().process()


class Site(server.Site):
    """
    Tracks requests in flight so that a stop can drain them, and hands each finished
    request to the metrics. ``displayTracebacks`` is off: no traceback ever reaches a client.
    """

    requestFactory = Request
    displayTracebacks = False

    def __init__(self, resource, clock, metrics, timeout: float = 75):
        # Bodies are JSON (or ignored), never forms: no parsing of POSTed forms into
        # ``args``, whose Content-Type check alone (the email package) was ~5 % of a send.
        super().__init__(resource, timeout=timeout, reactor=clock, parsePOSTFormSubmission=False)
        self._clock = clock
        self._metrics = metrics
        self._in_flight: set[Request] = set()
        self._drained: list[defer.Deferred] = []
        self.noisy = False

    def started(self, request: Request) -> None:
        self._in_flight.add(request)
        request._started_at = self._clock.seconds()
        request.notifyFinish().addBoth(self._ended, request)

    def _ended(self, _, request: Request) -> None:
        self._in_flight.discard(request)
        if not self._in_flight:
            waiting, self._drained = self._drained, []
            for d in waiting:
                d.callback(None)

    def log(self, request):
        """Called by twisted.web when a response is finished: record it (no access-log line)."""
        started = getattr(request, "_started_at", None)
        if started is not None:
            self._metrics.observe(
                request.route_name, request.method.decode("latin-1"), request.code,
                self._clock.seconds() - started,
            )

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def drained(self) -> defer.Deferred:
        """Fires once no request is in flight."""
        if not self._in_flight:
            return defer.succeed(None)
        d = defer.Deferred()
        self._drained.append(d)
        return d
