"""
The one outbound HTTP client (webhook deliveries, attachment ``path`` fetches, brand import).

Every request goes to an address ``dns.public`` checked (the connection is pinned to it;
nothing resolves the name a second time), TLS certificates are verified against the URL's
host name, redirects are never followed, the response body is read up to a limit with an
idle timeout, and the whole exchange has a deadline. Connections are kept in a pool of its
own, closed by ``close()``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple
from urllib.parse import quote, urljoin, urlsplit

import attrs
from OpenSSL import SSL
from service_identity import VerificationError
from twisted.internet import defer, endpoints, error

# The interface a trust root provides is only exported from here; implementing it is the
# documented way to trust the system's roots plus extra ones.
from twisted.internet._sslverify import IOpenSSLTrustRoot
from twisted.internet.protocol import Protocol, connectionDone
from twisted.internet.ssl import TLSVersion, optionsForClientTLS
from twisted.python.failure import Failure
from twisted.web._newclient import ParseError
from twisted.web.client import (
    Agent,
    ContentDecoderAgent,
    GzipDecoder,
    HTTPConnectionPool,
    ResponseDone,
    ResponseFailed,
    ResponseNeverReceived,
)
from twisted.web.http import PotentialDataLoss
from twisted.web.http_headers import Headers
from twisted.web.iweb import IAgent, IAgentEndpointFactory, IBodyProducer
from zope.interface import implementer

from mailsvc import __version__
from mailsvc.outside.addresses import IPAddress, PublicAddresses, TargetRefused, Unresolvable, literal

USER_AGENT = f"mailsvc/{__version__}"
#: Idle pooled connections are closed before the common 5 s keep-alive of servers (Node's
#: default) can close them under a request that would then fail.
IDLE_CONNECTION_SECONDS = 4
#: Seconds without a byte of response body before the read is abandoned.
IDLE_READ_SECONDS = 10

__all__ = ["Fetcher", "Fetched", "FetchFailed", "TargetRefused"]


class FetchFailed(Exception):
    """
    The request did not produce a usable response. ``reason`` is one of ``dns``, ``connect``,
    ``tls``, ``timeout``, ``connection``, ``too_large``, ``redirect``.
    """

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


class Fetched(NamedTuple):
    status: int
    headers: dict[str, str]  # lower-case names; repeated headers joined with ", "
    body: bytes


@implementer(IOpenSSLTrustRoot)
class TrustRoots:
    """The platform's trust store, plus the certificates of ``security.ca_file`` if set."""

    def __init__(self, ca_file: str):
        self._ca_file = ca_file
        if ca_file:
            try:
                with open(ca_file, "rb") as f:
                    pem = f.read()
            except OSError as e:
                raise ValueError(f"security.ca_file: cannot read {ca_file}: {e.strerror}") from None
            if b"-----BEGIN CERTIFICATE-----" not in pem:
                raise ValueError(f"security.ca_file: {ca_file} holds no PEM certificate")

    def _addCACertsToContext(self, context):  # noqa: N802 (Twisted's name)
        context.set_default_verify_paths()
        if self._ca_file:
            context.load_verify_locations(self._ca_file)


@implementer(IAgentEndpointFactory)
class _Pinned:
    """Endpoints to one checked address, whatever host the URL names."""

    def __init__(self, reactor, address, tls, connect_timeout: float):
        self._reactor = reactor
        self._address = address
        self._tls = tls
        self._timeout = connect_timeout

    def endpointForURI(self, uri):  # noqa: N802
        kind = endpoints.TCP6ClientEndpoint if self._address.version == 6 else endpoints.TCP4ClientEndpoint
        tcp = kind(self._reactor, str(self._address), uri.port, timeout=self._timeout)
        if uri.scheme == b"https":
            return endpoints.wrapClientTLS(self._tls, tcp)
        return tcp


class _BoundedRead(Protocol):
    """Collects a response body up to ``limit`` bytes; beyond it, keeps the prefix
    (``truncate``) or fails, and drops the connection either way."""

    def __init__(self, reactor, limit: int, truncate: bool, idle_seconds: float):
        self._reactor = reactor
        self._limit = limit
        self._truncate = truncate
        self._idle_seconds = idle_seconds
        self._parts: list[bytes] = []
        self._size = 0
        self._idle = None
        self.finished: defer.Deferred = defer.Deferred(lambda _: self._abandon())

    def connectionMade(self):  # noqa: N802
        self._idle = self._reactor.callLater(self._idle_seconds, self._went_idle)

    def dataReceived(self, data: bytes):  # noqa: N802
        if self.finished.called:
            return
        room = self._limit - self._size
        self._size += len(data)
        if len(data) > room:
            if self._truncate:
                self._parts.append(data[:room])
                self._finish(None)
            else:
                self._finish(FetchFailed("too_large", f"the response exceeds {self._limit} bytes"))
            self._abandon()
            return
        self._parts.append(data)
        if self._idle is not None and self._idle.active():
            self._idle.reset(self._idle_seconds)

    def connectionLost(self, reason: Failure = connectionDone):  # noqa: N802
        if self.finished.called:
            return
        if reason.check(ResponseDone, PotentialDataLoss):
            self._finish(None)
        else:
            self._finish(FetchFailed("connection", "the response was cut off"))

    def _went_idle(self):
        self._idle = None
        if not self.finished.called:
            self._finish(FetchFailed("timeout", f"no response data for {self._idle_seconds:g} s"))
            self._abandon()

    def _finish(self, failure: FetchFailed | None):
        if self._idle is not None and self._idle.active():
            self._idle.cancel()
        self._idle = None
        if failure is None:
            self.finished.callback(b"".join(self._parts))
        else:
            self.finished.errback(failure)

    def _abandon(self):
        if self._idle is not None and self._idle.active():
            self._idle.cancel()
        if self.transport is not None:
            # A response body's transport is an IPushProducer (IResponse.deliverBody), which
            # Protocol's annotation (an ITransport) does not say.
            self.transport.stopProducing()  # type: ignore[attr-defined]


def _failure_reason(e: Exception) -> FetchFailed:
    reasons = getattr(e, "reasons", None) or []
    if any(r.check(SSL.Error, VerificationError) for r in reasons):
        return FetchFailed("tls", "TLS handshake or certificate verification failed")
    if isinstance(e, error.ConnectError):
        return FetchFailed("connect", f"could not connect: {e.__class__.__name__}")
    # The message never quotes what the peer sent: a parse error carries its bytes (a host
    # speaking SMTP would have its banner repeated to whoever named the URL).
    if isinstance(e, (ResponseNeverReceived, ResponseFailed)):
        if any(r.check(ParseError) for r in reasons):
            return FetchFailed("connection", "the URL did not answer with HTTP")
        if any(r.check(error.ConnectionDone, error.ConnectionLost) for r in reasons):
            return FetchFailed("connection", "the connection was closed before a complete response")
        return FetchFailed("connection", "the connection failed")
    return FetchFailed("connection", f"the request failed: {e.__class__.__name__}")


@implementer(IBodyProducer)
class _Body:
    """A request body written at once (it is in memory already): no cooperator, no reactor."""

    def __init__(self, body: bytes):
        self._body = body
        self.length = len(body)

    def startProducing(self, consumer):  # noqa: N802
        consumer.write(self._body)
        return defer.succeed(None)

    def pauseProducing(self):  # noqa: N802
        pass

    def resumeProducing(self):  # noqa: N802
        pass

    def stopProducing(self):  # noqa: N802
        pass


class Fetcher:
    """
    ``agent_for(address, tls, timeout)`` gives the agent of one request, connecting to the
    checked ``address`` whatever the URL names (by default through this fetcher's pool);
    tests give one that answers from a ``treq.testing.RequestSequence``.
    """

    def __init__(
        self,
        reactor,
        addresses: PublicAddresses,
        ca_file: str = "",
        idle_per_host: int = 32,
        agent_for: Callable[[IPAddress, object, float], IAgent] | None = None,
    ):
        self._reactor = reactor
        self._addresses = addresses
        self._agent_for = agent_for or self._pinned_agent
        self._trust = TrustRoots(ca_file)
        self._pool = HTTPConnectionPool(reactor, persistent=True)
        self._pool.maxPersistentPerHost = idle_per_host
        self._pool.cachedConnectionTimeout = IDLE_CONNECTION_SECONDS
        self._pool.retryAutomatically = False
        self._tls_options: dict[str, object] = {}

    async def address_of(self, url: str) -> IPAddress:
        """The checked address a ``post`` to ``url`` connects to (the same check, kept 30 s)."""
        target = _target(url, False, None)
        try:
            return await self._addresses.check(target.host)
        except Unresolvable as e:
            raise FetchFailed("dns", e.message) from None

    async def get(
        self, url: str, max_bytes: int, timeout: float, *, allow_http: bool = False,
        ports: tuple[int, ...] | None = None,
    ) -> Fetched:
        """GET ``url``; a redirect or a body over ``max_bytes`` is a FetchFailed."""
        fetched = await self.request(
            b"GET", url, max_bytes=max_bytes, timeout=timeout, allow_http=allow_http, ports=ports
        )
        if 300 <= fetched.status < 400:
            raise FetchFailed("redirect", f"the server redirected (HTTP {fetched.status}); redirects are not followed")
        return fetched

    async def post(
        self, url: str, body: bytes, headers: dict[str, str], max_bytes: int, timeout: float
    ) -> Fetched:
        """POST ``body`` to an https ``url``; only the first ``max_bytes`` of the reply are kept."""
        return await self.request(
            b"POST", url, headers=headers, body=body, max_bytes=max_bytes, timeout=timeout,
            truncate=True,
        )

    async def request(
        self,
        method: bytes,
        url: str,
        *,
        max_bytes: int,
        timeout: float,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        allow_http: bool = False,
        ports: tuple[int, ...] | None = None,
        truncate: bool = False,
        trusted: bool = False,
    ) -> Fetched:
        """One exchange within ``timeout`` seconds, from the address check to the last byte.
        ``trusted``: the operator configured this target (the AI provider); it is resolved,
        pinned and bounded alike, but private addresses are allowed."""

        def timed_out(result, seconds):
            # Whatever the cancelled exchange ended with, it ended because time ran out.
            return Failure(FetchFailed("timeout", f"no complete response within {seconds:g} s"))

        exchange = defer.ensureDeferred(
            self._exchange(method, url, max_bytes, timeout, headers or {}, body, allow_http, ports, truncate,
                           trusted)
        )
        exchange.addTimeout(timeout, self._reactor, onTimeoutCancel=timed_out)
        try:
            return await exchange
        except (TargetRefused, FetchFailed):
            raise
        except Exception as e:
            raise _failure_reason(e) from None

    async def follow(
        self, url: str, *, max_bytes: int, deadline: float, ports: tuple[int, ...], spend: Callable[[], None],
        max_hops: int = 10, truncate: bool = False,
    ) -> tuple[str, Fetched]:
        """
        GET ``url`` (http or https), following redirects: each hop is a request of its own, its
        target checked again (address, scheme, ``ports``) before anything is sent to it.
        ``spend()`` is called before every hop (it raises when the caller's budget of fetches is
        used); everything ends by ``deadline`` (the clock's seconds). → (final URL, response).
        """
        for _ in range(max_hops + 1):
            spend()
            left = deadline - self._reactor.seconds()
            if left <= 0:
                raise FetchFailed("timeout", "the time for fetching ran out")
            fetched = await self.request(b"GET", url, max_bytes=max_bytes, timeout=left, allow_http=True,
                                         ports=ports, truncate=truncate)
            location = fetched.headers.get("location")
            if fetched.status not in (301, 302, 303, 307, 308) or not location:
                return url, fetched
            url = urljoin(url, location.strip())
        raise FetchFailed("redirect", f"more than {max_hops} redirects")

    async def _exchange(self, method, url, max_bytes, timeout, headers, body, allow_http, ports, truncate,
                        trusted=False):
        target = _target(url, allow_http, ports)
        try:
            address = await self._addresses.check(target.host, trusted)
        except Unresolvable as e:
            raise FetchFailed("dns", e.message) from None
        # The agent itself, gzip accepted and decoded: what treq's client adds around it besides
        # (its URL parsed and written again, a cookie jar per request) was about a tenth of the
        # webhook dispatcher's CPU (docs/benchmarks.md, "Webhook latency").
        agent = ContentDecoderAgent(self._agent_for(address, self._tls_for(target.host), timeout),
                                    [(b"gzip", GzipDecoder)])
        sent = Headers({"User-Agent": [USER_AGENT]})
        for name, value in headers.items():
            sent.setRawHeaders(name, [value])
        response = await agent.request(method, target.uri, sent, None if body is None else _Body(body))
        reader = _BoundedRead(self._reactor, max_bytes, truncate, min(IDLE_READ_SECONDS, timeout))
        response.deliverBody(reader)
        content = await reader.finished
        received = {
            name.decode("latin-1").lower(): ", ".join(v.decode("latin-1") for v in values)
            for name, values in response.headers.getAllRawHeaders()
        }
        return Fetched(response.code, received, content)

    def _pinned_agent(self, address: IPAddress, tls, timeout: float) -> IAgent:
        return Agent.usingEndpointFactory(self._reactor, _Pinned(self._reactor, address, tls, timeout),
                                          pool=self._pool)

    def _tls_for(self, host: str):
        options = self._tls_options.get(host)
        if options is None:
            if len(self._tls_options) > 1000:
                self._tls_options.clear()
            # TLS 1.2 and newer, as crypto.tls.MINIMUM (a sibling module this one may not import).
            options = optionsForClientTLS(
                host, trustRoot=self._trust, extraCertificateOptions={"raiseMinimumTo": TLSVersion.TLSv1_2}
            )
            self._tls_options[host] = options
        return options

    async def close(self) -> None:
        await self._pool.closeCachedConnections()


@attrs.frozen
class _Target:
    host: str  # lower case; an IP literal without brackets, or an ASCII (IDNA) name
    uri: bytes  # what the Agent requests: ASCII, without credentials or fragment


_URL_SAFE = "/%:@!$&'()*+,;=-._~?"


@functools.lru_cache(maxsize=4096)
def _target(url: str, allow_http: bool, ports: tuple[int, ...] | None) -> _Target:
    """The URL in its ASCII form, if it is one we may fetch at all."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise TargetRefused(f"{url!r} is not a valid URL", "malformed") from None
    scheme = parts.scheme.lower()
    schemes = ("https", "http") if allow_http else ("https",)
    if scheme not in schemes:
        raise TargetRefused(f"only {' or '.join(schemes)} URLs are fetched", "scheme")
    if not parts.hostname:
        raise TargetRefused("the URL names no host", "malformed")
    if parts.username is not None or parts.password is not None:
        raise TargetRefused("URLs with credentials are not fetched", "malformed")
    if port == 0:
        raise TargetRefused("port 0 is not a valid port", "malformed")
    effective = port or (443 if scheme == "https" else 80)
    if ports is not None and effective not in ports:
        raise TargetRefused(f"port {effective} is not allowed", "port")
    host = parts.hostname.rstrip(".")
    address = literal(host)
    if address is None:
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise TargetRefused(f"{host} is not a valid host name", "malformed") from None
    netloc = f"[{host}]" if address is not None and address.version == 6 else host
    if port is not None:
        netloc += f":{port}"
    path = quote(parts.path or "/", safe=_URL_SAFE)
    query = "?" + quote(parts.query, safe=_URL_SAFE) if parts.query else ""
    return _Target(host, f"{scheme}://{netloc}{path}{query}".encode("ascii"))
