"""
The HTTP site: request ids, the caps and deadlines of the transport, in-flight tracking for
a draining shutdown, and request metrics.

A request is judged as soon as its headers are in, before a byte of its body is taken: the
router's admission (credentials, then the account's rate) runs with the connection paused,
and a request it refuses, like one whose body passes its path's limit, is answered at once
and its connection closed. The headers and the body each have a deadline of their own: the
idle timeout alone restarts on every byte, so a peer trickling bytes would hold a connection
for ever.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Callable
from http import HTTPStatus

from twisted.internet import defer
from twisted.internet.interfaces import IPushProducer, ITCPTransport, ITransport
from twisted.internet.protocol import connectionDone
from twisted.protocols import basic
from twisted.python.failure import Failure
from twisted.web import http, server
from twisted.web.http_headers import Headers

from mailsvc.http.context import RequestContext
from mailsvc.http.errors import ApiError, surface_of

MIB = 1024 * 1024

#: The largest body of a request whose route says nothing else (each route's own is in the
#: route table, ``mailsvc.http.router.route``).
DEFAULT_BODY_LIMIT = 1 * MIB

#: Seconds to receive a request's headers, from their first byte (``http.header_timeout``).
HEADER_TIMEOUT = 10
#: Seconds to receive a request's body, from the end of its headers (``http.body_timeout``).
BODY_TIMEOUT = 60
#: Seconds a connection the server closes keeps reading, and dropping, what the peer still
#: sends, so that unread bytes do not turn the close into a reset that loses the answer.
LINGER_SECONDS = 2
#: The longest header line, and all of a request's header lines together (Twisted's own caps).
MAX_HEADER_LINE = 16384
MAX_HEADERS_SIZE = 16384
#: Header lines of one request, at most.
MAX_HEADERS = 100

_REQUEST_ID = re.compile(rb"^[\x21-\x7e]{1,64}$")

#: Refusals of the transport itself, answered before any resource sees the request.
BAD_REQUEST = ApiError(400, "bad_request", "The request is not valid HTTP/1.1.")
HEADERS_TOO_LARGE = ApiError(
    431, "request_header_fields_too_large",
    f"The request's headers are too large (at most {MAX_HEADERS} lines, {MAX_HEADERS_SIZE} bytes).",
)
REQUEST_TIMEOUT = ApiError(408, "request_timeout", "The request was not received in time.")


def new_request_id() -> str:
    """``req_`` and 128 random bits in hex (a ``uuid4``'s object and version bits cost a send ~1 %)."""
    return "req_" + os.urandom(16).hex()


class Request(server.Request):
    """A request that refuses to buffer a body over its path's limit and carries an id."""

    body_too_large = False

    #: When the site was handed it (``Site.started``).
    started_at: float | None = None
    channel: Channel

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        #: Its id, route, surface, the check of its credentials and its caller.
        self.context = RequestContext()

    def gotLength(self, length):  # noqa: N802 (Twisted's name)
        # The request line has been parsed by now; the channel holds its method and path.
        self._body_limit = self.channel.site.body_limit(self.channel._command, self.channel._path)
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
            if self.content is not None:
                self.content.close()
            self.content = io.BytesIO()
            return
        super().handleContentChunk(data)

    def process(self):
        supplied = self.getHeader(b"x-request-id")
        if supplied is not None and _REQUEST_ID.match(supplied):
            self.context.request_id = supplied.decode("ascii")
        else:
            self.context.request_id = new_request_id()
        self.setHeader(b"X-Request-Id", self.context.request_id.encode("ascii"))
        self.channel.site.started(self)
        super().process()


class Channel(http.HTTPChannel):
    """
    An HTTP/1.1 connection that judges each request on its headers and bounds the time each
    phase of its arrival may take.

    The body phase stops at safe points (after the end of the headers, after each piece of
    body) to look at the request: while its admission is being decided the connection is
    paused and not a byte of the body is parsed; a refused request, or one whose body went
    over its limit, is handed to the site at once with its body unread, answered, and the
    connection closed (lingering, see ``loseConnection``). Built on ``twisted.web.http`` 26
    internals (``_path``, ``_version``, ``_handlingRequest``), which the tests exercise.
    """

    MAX_LENGTH = MAX_HEADER_LINE
    totalHeadersSize = MAX_HEADERS_SIZE
    maxHeaders = MAX_HEADERS
    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT

    _receiving: Request | None = None  # the request whose body is coming in
    _expects_continue = False  # its client waits for "100 Continue" before sending the body
    _deadline = None  # the delayed call ending the current phase
    _awaiting_first_byte = False  # a new connection that has sent nothing yet
    _waiting_for_admission = False
    _closing = False
    _linger = None
    _secure: bool | None = None
    #: Set by the site that builds it (``Site.buildProtocol``).
    site: Site
    #: Set by makeConnection before anything here runs.
    transport: ITransport

    def isSecure(self):  # noqa: N802 (Twisted's name)
        """Whether the transport is TLS, found once per connection (Twisted adapts on every call,
        and each request asks at least twice)."""
        if self._secure is None:
            self._secure = super().isSecure()
        return self._secure

    # Deadlines

    def connectionMade(self):  # noqa: N802
        super().connectionMade()
        # A new connection's first byte is due within the header deadline too (not the idle
        # timeout's 75 s); none came: closed without an answer, since nothing was asked.
        self._deadline = self.callLater(self.header_timeout, self.transport.loseConnection)
        self._awaiting_first_byte = True

    def dataReceived(self, data):  # noqa: N802
        if self._closing:
            return  # lingering: what the peer still sends is dropped
        if data and self._awaiting_first_byte:
            self._awaiting_first_byte = False
            self._cancel_deadline()  # the header deadline starts now
        if data and self._deadline is None and self._receiving is None and not self._handlingRequest:
            self._deadline = self.callLater(self.header_timeout, self._time_is_up)
        super().dataReceived(data)

    def _time_is_up(self) -> None:
        self._deadline = None
        self.answer_and_close(REQUEST_TIMEOUT)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            if self._deadline.active():
                self._deadline.cancel()
            self._deadline = None

    # Headers

    def lineReceived(self, line):  # noqa: N802
        if self._receivedHeaderSize + len(line) > self.totalHeadersSize:
            self.answer_and_close(HEADERS_TOO_LARGE)
            return
        super().lineReceived(line)
        if self._receiving is not None and not self.line_mode:
            self._settle()  # the headers ended and a body follows

    def lineLengthExceeded(self, line):  # noqa: N802
        self.answer_and_close(HEADERS_TOO_LARGE)

    def headerReceived(self, line):  # noqa: N802
        if self._receivedHeaderCount >= self.maxHeaders:
            self.answer_and_close(HEADERS_TOO_LARGE)
            return False
        return super().headerReceived(line)

    def allHeadersReceived(self):  # noqa: N802
        # As HTTPChannel's, but "100 Continue" waits for the admission, and the admission starts.
        self._cancel_deadline()
        request = self.requests[-1]
        request.parseCookies()
        self.persistent = self.checkPersistence(request, self._version)
        request.gotLength(self.length)
        expect = request.requestHeaders.getRawHeaders(b"expect")
        self._expects_continue = bool(expect) and expect[0].lower() == b"100-continue" and (
            self._version == b"HTTP/1.1")
        self._receiving = request
        if self.length != 0:
            self._deadline = self.callLater(self.body_timeout, self._time_is_up)
        # The method is known since the request line: the admission's CSRF rule reads it, and
        # a check answered at once (a cached credential) would otherwise see Twisted's placeholder.
        request.method = self._command
        request.context.admission = self.site.admit(request, self._command, self._path)

    # Body

    def rawDataReceived(self, data):  # noqa: N802
        super().rawDataReceived(data)
        self._settle()

    def allContentReceived(self):  # noqa: N802
        self._cancel_deadline()
        self._receiving = None
        super().allContentReceived()

    def _settle(self) -> None:
        """At a safe point of a body's arrival: wait for the admission, answer now, or read on."""
        request = self._receiving
        if request is None or self._closing:
            return
        admission = request.context.admission
        if admission is not None and not admission.decided:
            if not self._waiting_for_admission:
                self._waiting_for_admission = True
                self.paused = True  # LineReceiver parses nothing more, not even what is buffered
                self._networkProducer.pauseProducing()
                admission.when_decided().addCallback(lambda _: self._admission_decided())
            return
        if request.body_too_large or (admission is not None and admission.refused):
            self._answer_early(request)
            return
        if self._expects_continue:
            self._expects_continue = False
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _admission_decided(self) -> None:
        self._waiting_for_admission = False
        if self._closing:
            return
        self._settle()
        if self._receiving is not None and not self._closing:
            self.paused = False
            self._networkProducer.resumeProducing()
            basic.LineReceiver.dataReceived(self, b"")  # the body bytes that came with the headers

    def _answer_early(self, request: Request) -> None:
        """Hand the request to the site with its body unread; the connection closes after it."""
        self.persistent = False
        self.paused = True
        self._networkProducer.pauseProducing()
        request.setHeader(b"Connection", b"close")
        self.allContentReceived()

    # Answers of the transport, and closing

    def answer_and_close(self, error: ApiError) -> None:
        """Answer ``error`` for a request no resource has seen, then close."""
        if self._closing:
            return
        request_id = new_request_id()
        body = error.body(surface_of(getattr(self, "_path", b"") or b""), request_id)
        headers = Headers({
            b"Content-Type": [b"application/json"],
            b"Content-Length": [b"%d" % len(body)],
            b"X-Request-Id": [request_id.encode("ascii")],
            b"Connection": [b"close"],
        })
        reason = HTTPStatus(error.status).phrase.encode("ascii")
        self.writeHeaders(b"HTTP/1.1", b"%d" % error.status, reason, headers)
        self.transport.write(body)
        self.loseConnection()

    def _respondToBadRequestAndDisconnect(self):  # noqa: N802 (HTTPChannel's hook for malformed requests)
        self.answer_and_close(BAD_REQUEST)

    def loseConnection(self):  # noqa: N802
        """
        Close once what was written is sent, reading and dropping what the peer still sends
        for at most ``LINGER_SECONDS``: closing a socket with unread bytes resets it, and a
        reset can destroy the answer before the peer reads it.
        """
        if self._closing:
            return
        self._closing = True
        self.paused = True
        self._cancel_deadline()
        self.setTimeout(None)
        # HTTPChannel keeps the transport here adapted to IPushProducer; it is the consumer this
        # channel was registered with, which the attribute's annotation (the producer) omits.
        self._networkProducer.unregisterProducer()  # type: ignore[attr-defined]
        if self.isSecure() or not ITCPTransport.providedBy(self.transport):
            # TLS forwards a half-close to the socket beneath it, past its own buffer.
            self.transport.loseConnection()
            return
        self.transport.loseWriteConnection()
        IPushProducer(self.transport).resumeProducing()
        self._linger = self.callLater(LINGER_SECONDS, self.transport.abortConnection)

    def connectionLost(self, reason: Failure = connectionDone):  # noqa: N802
        self._cancel_deadline()
        if self._linger is not None and self._linger.active():
            self._linger.cancel()
        super().connectionLost(reason)


class Site(server.Site):
    """
    Tracks requests in flight so that a stop can drain them, and hands each finished
    request to the metrics. ``displayTracebacks`` is off: no traceback ever reaches a client.
    ``admit(request, method, path)`` is asked about each request as soon as its headers are in
    (the router's ``admit``), ``body_limit(method, path)`` for the largest body its route takes
    (the router's ``body_limit``; without it, DEFAULT_BODY_LIMIT).
    """

    requestFactory = Request
    # Plain HTTP/1.1 channels: HTTPFactory's annotation names the wrapper that would negotiate
    # HTTP/2, but buildProtocol takes any channel class.
    protocol = Channel  # type: ignore[assignment]
    displayTracebacks = False

    def __init__(
        self,
        resource,
        clock,
        metrics,
        timeout: float = 75,
        admit: Callable | None = None,
        body_limit: Callable[[bytes, bytes], int] | None = None,
        header_timeout: float = HEADER_TIMEOUT,
        body_timeout: float = BODY_TIMEOUT,
    ):
        # Bodies are JSON (or ignored), never forms: no parsing of POSTed forms into
        # ``args``, whose Content-Type check alone (the email package) was ~5 % of a send.
        super().__init__(resource, timeout=timeout, reactor=clock, parsePOSTFormSubmission=False)
        self._clock = clock
        self._metrics = metrics
        self._admit = admit
        self._body_limit = body_limit
        self._header_timeout = header_timeout
        self._body_timeout = body_timeout
        self._in_flight: set[Request] = set()
        self._drained: list[defer.Deferred] = []
        self.noisy = False

    def buildProtocol(self, addr):  # noqa: N802
        channel = super().buildProtocol(addr)
        channel.header_timeout = self._header_timeout
        channel.body_timeout = self._body_timeout
        return channel

    def admit(self, request: Request, method: bytes, path: bytes):
        return self._admit(request, method, path) if self._admit is not None else None

    def body_limit(self, method: bytes, path: bytes) -> int:
        return self._body_limit(method, path) if self._body_limit is not None else DEFAULT_BODY_LIMIT

    def started(self, request: Request) -> None:
        self._in_flight.add(request)
        request.started_at = self._clock.seconds()
        request.notifyFinish().addBoth(self._ended, request)

    def _ended(self, _, request: Request) -> None:
        self._in_flight.discard(request)
        if not self._in_flight:
            waiting, self._drained = self._drained, []
            for d in waiting:
                d.callback(None)

    def log(self, request):
        """Called by twisted.web when a response is finished: record it (no access-log line)."""
        started = getattr(request, "started_at", None)
        if started is not None:
            self._metrics.observe(
                request.context.route, request.method.decode("latin-1"), request.code,
                self._clock.seconds() - started,
            )

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def drained(self) -> defer.Deferred:
        """Fires once no request is in flight."""
        if not self._in_flight:
            return defer.succeed(None)
        d: defer.Deferred[None] = defer.Deferred()
        self._drained.append(d)
        return d
