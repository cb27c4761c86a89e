"""
The return-path listener (``smtp.inbound``, default ``tcp:25``): the project's ESMTP server
(``mailsvc.smtp.server``) without AUTH, taking DSNs, feedback reports and DMARC aggregate
reports for the return-path hosts. A recipient is accepted only when the injected
``accepts(address)`` says so, so this is never an open relay; the finished message goes, as
received (dot-unstuffed, CRLF lines), to ``deliver(mail_from, recipients, message)``. The port
is open to anyone, so message size, recipients, line length, refused commands, connections
(in all and per peer) and session length are bounded.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable

from twisted.internet import endpoints, protocol

from mailsvc.smtp.server import ConnectionLimits, ESMTPServerProtocol

#: Largest message accepted (SIZE): reports are small, a returned original may not be (an
#: Exchange NDR encloses it whole); only a head of it is read (``mail.reports.MAX_REPORT_BYTES``).
MAX_MESSAGE_BYTES = 10 * 1024 * 1024
#: A report goes to one address (a VERP address or postmaster/abuse/fbl); each RCPT costs a
#: database look-up, so a few more are tolerated and no more.
MAX_RECIPIENTS = 10
#: Longest command line (RFC 5321 §4.5.3.1.4 says 512; extensions make them longer).
MAX_COMMAND_BYTES = 2048
#: Unknown or malformed commands before the connection is closed.
MAX_ERRORS = 20
#: Connections at once, in all and from one peer address: each may hold a message of up to
#: MAX_MESSAGE_BYTES in memory. A peer over the limit gets 421 and tries again later, as MTAs do.
MAX_CONNECTIONS = 50
MAX_CONNECTIONS_PER_PEER = 5
#: The longest session: the idle timeout restarts with every line, so a peer trickling lines
#: would otherwise hold its connection forever (RFC 5321 §4.5.3.2 allows 10 minutes for DATA).
MAX_SESSION_SECONDS = 15 * 60

_MAIL = re.compile(rb"^FROM:\s*(?:<([^<>]*)>|([^\s<>]+))(.*)$", re.I)
_RCPT = re.compile(rb"^TO:\s*(?:<([^<>]*)>|([^\s<>]+))(.*)$", re.I)

Accepts = Callable[[str], "bool | Awaitable[bool]"]
Deliver = Callable[[str, list[str], bytes], Awaitable[None]]


class InboundProtocol(ESMTPServerProtocol):
    # Lines end in CRLF; a bare LF is tolerated (the CR, when there is one, is stripped).
    delimiter = b"\n"
    max_errors = MAX_ERRORS
    max_recipients = MAX_RECIPIENTS

    def __init__(self, factory: InboundFactory):
        super().__init__(factory.hostname, factory.tls_options, False, factory.idle_timeout,
                         factory.max_message_bytes, limits=factory.limits,
                         session_seconds=factory.max_session_seconds)
        self._factory = factory

    def callLater(self, period, func):  # noqa: N802 (TimeoutMixin's name)
        """TimeoutMixin's timer and the session's deadlines, on the listener's clock."""
        return self._factory.clock.callLater(period, func)

    def lineReceived(self, line: bytes):  # noqa: N802
        super().lineReceived(line.removesuffix(b"\r"))

    def _command(self, line: bytes) -> None:
        if len(line) > MAX_COMMAND_BYTES:
            return self._error(500, "5.5.2", "Line too long")
        super()._command(line)

    def smtp_MAIL(self, rest: bytes):  # noqa: N802
        if self._helo is None:
            return self._error(503, "5.5.1", "Send EHLO first")
        super().smtp_MAIL(rest)

    def _mail_from(self, rest: bytes) -> tuple[str, bytes] | None:
        match = _MAIL.match(rest)
        if match is None:
            return None
        # <> is the null reverse-path every DSN is sent with.
        return _path(match).decode("utf-8", "replace"), match.group(3)

    def _rcpt_to(self, rest: bytes) -> bytes | None:
        match = _RCPT.match(rest)
        return None if match is None else _path(match)

    def _recipient_address(self, path: bytes) -> str | None:
        try:
            address = path.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if not address or any(c.isspace() for c in address):
            return None
        return address

    def _admit(self, address: str) -> None:
        try:
            verdict = self._factory.accepts(address)
        except Exception:
            self.log.failure("SMTP accepts({address}) failed", address=address)
            return self._reply(451, "4.3.0", "Local error in processing; try again later")
        if inspect.isawaitable(verdict):
            return self._pending(self._rcpt_async(address, verdict), "accepts")
        self._rcpt_verdict(address, bool(verdict))

    async def _rcpt_async(self, address: str, verdict: Awaitable[bool]) -> None:
        self._rcpt_verdict(address, bool(await verdict))

    def _rcpt_verdict(self, address: str, accepted: bool) -> None:
        if not accepted:  # counts as an error: an MTA returning reports never probes addresses
            return self._error(550, "5.7.1", "Relay not permitted")
        super()._admit(address)

    def _message_received(self, sender: str, recipients: list[str], message: bytes) -> None:
        self._pending(self._deliver(sender, recipients, message), "deliver")

    async def _deliver(self, sender: str, recipients: list[str], message: bytes) -> None:
        await self._factory.deliver(sender, recipients, message)
        self._reply(250, "2.0.0", "OK: message accepted")

    def smtp_HELP(self, rest: bytes):  # noqa: N802
        self._reply(214, "2.0.0", "This server takes delivery reports for its return paths")

    def smtp_EXPN(self, rest: bytes):  # noqa: N802
        self._error(502, "5.5.1", "EXPN not available")


def _path(match: re.Match) -> bytes:
    """The address of ``<path>`` or of a bare path; ``@relay1,@relay2:user@host`` (an obsolete
    source route) is ``user@host``."""
    address = (match.group(1) if match.group(1) is not None else match.group(2)).strip()
    if address.startswith(b"@") and b":" in address:
        return address.split(b":", 1)[1]
    return address


class InboundFactory(protocol.Factory):
    """
    ``accepts(address)`` answers (or resolves to) whether a recipient is one of ours;
    ``deliver(mail_from, recipients, message)`` takes a finished message: 250 once it has
    completed, 451 4.3.0 when it raised. ``tls_options`` (e.g. from ``mailsvc.crypto.tls.server_options``)
    enables STARTTLS. The idle timeout and the session limit run on ``clock``; the factory
    counts the open connections.
    """

    protocol = InboundProtocol
    noisy = False  # the listener is told once, by the node

    def __init__(
        self,
        clock,
        hostname: str,
        accepts: Accepts,
        deliver: Deliver,
        tls_options=None,
        idle_timeout: float = 300,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_connections: int = MAX_CONNECTIONS,
        max_connections_per_peer: int = MAX_CONNECTIONS_PER_PEER,
        max_session_seconds: float = MAX_SESSION_SECONDS,
    ):
        self.clock = clock
        self.hostname = hostname.encode("idna").decode("ascii")
        self.accepts = accepts
        self.deliver = deliver
        self.tls_options = tls_options
        self.idle_timeout = idle_timeout
        self.max_message_bytes = max_message_bytes
        self.max_session_seconds = max_session_seconds
        self.limits = ConnectionLimits(max_connections, max_connections_per_peer)

    def buildProtocol(self, addr):  # noqa: N802
        p = InboundProtocol(self)
        p.factory = self
        return p


async def listen(reactor, description: str, factory: InboundFactory):
    """Listen on a Twisted endpoint description (``tcp:25``); answers the listening port."""
    return await endpoints.serverFromString(reactor, description).listen(factory)
