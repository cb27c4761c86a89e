"""
This service's public base URL: where every absolute link it makes points (set-password links,
unsubscribe links, logos, the builder's icons). ``http.public_url`` when it is set, whatever
the request's Host; otherwise, for development, the scheme and Host the client used.
"""

from __future__ import annotations

import ipaddress

import attrs
from twisted.logger import Logger

log = Logger()

_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def _without_trailing_slash(url: str) -> str:
    return url.rstrip("/")


@attrs.frozen
class PublicUrl:
    """``http.public_url`` (empty: not configured), and what a link is based on without it."""

    configured: str = attrs.field(default="", converter=_without_trailing_slash)

    def of(self, request) -> str:
        """The base of a link made while handling ``request``."""
        if self.configured:
            return self.configured
        scheme = "https" if request.isSecure() else "http"
        host = (request.getHeader(b"host") or b"localhost").decode("latin-1")
        return f"{scheme}://{host}"

    def or_else(self, fallback: str) -> str:
        """The base of a link made without a request (``fallback`` when none is configured)."""
        return self.configured or fallback

    def warn_if_unset(self, listening_host: str) -> None:
        """At start: links would follow each request's Host on a listener others can reach."""
        if self.configured or _is_loopback(listening_host):
            return
        log.warn("http.public_url is not set: links in e-mails and set-password links follow each "
                 "request's Host header (development only); set it to this service's https URL")


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


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


def browser_origin(request) -> str | None:
    """
    The origin of this site's pages as a browser sees them, from the request's Host (None
    without one): ``https`` (over TLS here, or through a TLS-terminating proxy, which is every
    other case: the cookie is ``Secure`` there too), ``http`` only in development
    (``plain_http_on_loopback``). What a same-site request's ``Origin`` header says.
    """
    host = request.getHeader(b"host")
    if host is None:
        return None
    scheme = "http" if plain_http_on_loopback(request) else "https"
    return f"{scheme}://{host.decode('latin-1')}"
