"""
The return-path listener (``smtp.inbound``, default ``tcp:25``): an ESMTP server that takes
delivery status notifications and feedback reports addressed to the return-path hosts.

Like submission, it is our own protocol on Twisted's LineReceiver, not
``twisted.mail.smtp.ESMTP`` (DESIGN.md, Known traps): every command is answered strictly in
order, and while a reply waits on an asynchronous step (``accepts`` for RCPT, ``deliver`` after
DATA) reading pauses, so PIPELINING is safe to offer. There is no AUTH: nobody submits mail
here. A recipient is accepted only when the injected ``accepts(address)`` says so (valid VERP
addresses and the postmaster/abuse/fbl mailboxes of return-path hosts); everything else is
refused, so this is never an open relay. The finished message goes, byte for byte as
received (dot-unstuffed, lines ending in CRLF), to ``deliver(mail_from, recipients, message)``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable

from twisted.internet import defer, endpoints, protocol
from twisted.logger import Logger
from twisted.protocols.basic import LineReceiver
from twisted.protocols.policies import TimeoutMixin

log = Logger()

#: Largest message accepted (SIZE): reports are small, a returned original may not be.
MAX_MESSAGE_BYTES = 10 * 1024 * 1024
#: A bounce names one recipient (one VERP address per delivery); a few more are tolerated.
MAX_RECIPIENTS = 100
#: Longest command line (RFC 5321 §4.5.3.1.4 says 512; extensions make them longer).
MAX_COMMAND_BYTES = 2048
#: Unknown or malformed commands before the connection is closed.
MAX_ERRORS = 20

_MAIL = re.compile(rb"^FROM:\s*(?:<([^<>]*)>|([^\s<>]+))(.*)$", re.I)
_RCPT = re.compile(rb"^TO:\s*(?:<([^<>]*)>|([^\s<>]+))(.*)$", re.I)
_SIZE = re.compile(rb"(?:^|\s)SIZE=(\d+)", re.I)

Accepts = Callable[[str], "bool | Awaitable[bool]"]
Deliver = Callable[[str, list[str], bytes], Awaitable[None]]


class InboundProtocol(LineReceiver, TimeoutMixin):
    # Lines end in CRLF; a bare LF is tolerated (the CR, when there is one, is stripped).
    delimiter = b"\n"
    #: Longest line read at all (a DATA line may exceed 998 octets: returned originals do).
    MAX_LENGTH = 64 * 1024

    def __init__(self, factory: InboundFactory):
        self._factory = factory
        self._encrypted = False
        self._helo: bytes | None = None
        self._errors = 0
        self._reset()

    # Connection

    def connectionMade(self):  # noqa: N802
        self.setTimeout(self._factory.idle_timeout)
        self._reply(220, None, f"{self._factory.hostname} ESMTP mailsvc")

    def timeoutConnection(self):  # noqa: N802
        self._reply(421, "4.4.2", f"{self._factory.hostname} Idle timeout, closing connection")
        self.transport.loseConnection()

    def connectionLost(self, reason=protocol.connectionDone):  # noqa: N802
        self.setTimeout(None)

    def _reply(self, code: int, enhanced: str | None, text: str | list[str]) -> None:
        if self.transport is None:
            return
        lines = text if isinstance(text, list) else [text]
        for i, line in enumerate(lines):
            sep = "-" if i < len(lines) - 1 else " "
            body = f"{enhanced} {line}" if enhanced else line
            self.transport.write(f"{code}{sep}{body}\r\n".encode("utf-8", "replace"))

    def _reset(self) -> None:
        self._sender: str | None = None
        self._recipients: list[str] = []
        self._data: list[bytes] | None = None
        self._data_size = 0

    def _pending(self, work: Awaitable, what: str) -> None:
        """Run an asynchronous step; no further line is read until it has answered."""
        self.pauseProducing()
        d = defer.ensureDeferred(work)

        def failed(failure):
            log.failure("inbound SMTP: {what} failed", failure, what=what)
            self._reply(451, "4.3.0", "Local error in processing; try again later")

        d.addErrback(failed)
        d.addBoth(lambda _: self._resume())

    def _resume(self) -> None:
        if self.transport is not None and not self.transport.disconnecting:
            self.resumeProducing()

    # Lines

    def lineReceived(self, line: bytes):  # noqa: N802
        self.resetTimeout()
        if line.endswith(b"\r"):
            line = line[:-1]
        if self._data is not None:
            return self._data_line(line)
        if len(line) > MAX_COMMAND_BYTES:
            return self._error(500, "5.5.2", "Line too long")
        verb, _, rest = line.strip().partition(b" ")
        handler = getattr(self, "smtp_" + verb.decode("ascii", "replace").upper(), None)
        if handler is None or not verb.isalpha():
            return self._error(500, "5.5.2", "Command not recognized")
        handler(rest.strip())

    def lineLengthExceeded(self, line):  # noqa: N802
        self._reply(500, "5.5.2", "Line too long")
        self.transport.loseConnection()

    def _error(self, code: int, enhanced: str, text: str) -> None:
        self._errors += 1
        if self._errors > MAX_ERRORS:
            self._reply(421, "4.7.0", "Too many errors, closing connection")
            self.transport.loseConnection()
            return
        self._reply(code, enhanced, text)

    # Commands

    def _extensions(self) -> list[str]:
        ext = [f"SIZE {self._factory.max_message_bytes}", "8BITMIME", "PIPELINING", "ENHANCEDSTATUSCODES"]
        if not self._encrypted and self._factory.tls_options is not None:
            ext.append("STARTTLS")
        return ext

    def smtp_EHLO(self, rest: bytes):  # noqa: N802
        if not rest:
            return self._error(501, "5.5.4", "EHLO needs a domain")
        self._helo = rest
        self._reset()
        self._reply(250, None, [self._factory.hostname, *self._extensions()])

    def smtp_HELO(self, rest: bytes):  # noqa: N802
        if not rest:
            return self._error(501, "5.5.4", "HELO needs a domain")
        self._helo = rest
        self._reset()
        self._reply(250, None, self._factory.hostname)

    def smtp_STARTTLS(self, rest: bytes):  # noqa: N802
        if self._factory.tls_options is None:
            return self._error(502, "5.5.1", "TLS not available")
        if self._encrypted:
            return self._error(503, "5.5.1", "TLS already active")
        # Anything the client pipelined after STARTTLS was sent in clear: drop it (RFC 3207 §6).
        self.clearLineBuffer()
        self._reply(220, "2.0.0", "Ready to start TLS")
        self.transport.startTLS(self._factory.tls_options)
        self._encrypted = True
        self._helo = None
        self._reset()

    def smtp_MAIL(self, rest: bytes):  # noqa: N802
        if self._helo is None:
            return self._error(503, "5.5.1", "Send EHLO first")
        if self._sender is not None:
            return self._error(503, "5.5.1", "Sender already given")
        match = _MAIL.match(rest)
        if not match:
            return self._error(501, "5.5.4", "Syntax: MAIL FROM:<address>")
        size = _SIZE.search(match.group(3))
        if size and int(size.group(1)) > self._factory.max_message_bytes:
            return self._reply(552, "5.3.4", "Message size exceeds fixed maximum message size")
        address = match.group(1) if match.group(1) is not None else match.group(2)
        # <> is the null reverse-path every DSN is sent with.
        self._sender = _strip_route(address).decode("utf-8", "replace")
        self._reply(250, "2.1.0", "Sender OK")

    def smtp_RCPT(self, rest: bytes):  # noqa: N802
        if self._sender is None:
            return self._error(503, "5.5.1", "Need MAIL before RCPT")
        match = _RCPT.match(rest)
        if not match:
            return self._error(501, "5.5.4", "Syntax: RCPT TO:<address>")
        raw = _strip_route(match.group(1) if match.group(1) is not None else match.group(2))
        try:
            address = raw.decode("utf-8")
        except UnicodeDecodeError:
            return self._reply(553, "5.1.3", "Bad recipient address syntax")
        if not address or any(c.isspace() for c in address):
            return self._reply(553, "5.1.3", "Bad recipient address syntax")
        if address.lower() in (r.lower() for r in self._recipients):
            return self._reply(250, "2.1.5", "Recipient OK")
        if len(self._recipients) >= MAX_RECIPIENTS:
            return self._reply(452, "4.5.3", f"Too many recipients (at most {MAX_RECIPIENTS})")
        try:
            verdict = self._factory.accepts(address)
        except Exception:
            log.failure("inbound SMTP: accepts({address}) failed", address=address)
            return self._reply(451, "4.3.0", "Local error in processing; try again later")
        if inspect.isawaitable(verdict):
            return self._pending(self._rcpt_async(address, verdict), "accepts")
        self._rcpt_verdict(address, bool(verdict))

    async def _rcpt_async(self, address: str, verdict: Awaitable[bool]) -> None:
        self._rcpt_verdict(address, bool(await verdict))

    def _rcpt_verdict(self, address: str, accepted: bool) -> None:
        if not accepted:  # counts as an error: an MTA returning reports never probes addresses
            return self._error(550, "5.7.1", "Relay not permitted")
        self._recipients.append(address)
        self._reply(250, "2.1.5", "Recipient OK")

    def smtp_DATA(self, rest: bytes):  # noqa: N802
        if self._sender is None or not self._recipients:
            return self._error(503, "5.5.1", "Need MAIL and RCPT before DATA")
        self._data = []
        self._data_size = 0
        self._reply(354, None, "End data with <CR><LF>.<CR><LF>")

    def _data_line(self, line: bytes) -> None:
        if line == b".":
            lines, self._data = self._data, None
            too_big = self._data_size > self._factory.max_message_bytes
            sender, recipients = self._sender, self._recipients
            self._reset()
            if too_big:
                return self._reply(552, "5.3.4", "Message size exceeds fixed maximum message size")
            message = b"".join(piece + b"\r\n" for piece in lines)
            self._pending(self._deliver(sender, recipients, message), "deliver")
            return
        if line.startswith(b"."):
            line = line[1:]
        self._data_size += len(line) + 2
        if self._data_size <= self._factory.max_message_bytes:
            self._data.append(line)
        else:
            self._data = []  # keep reading to the end, keep nothing

    async def _deliver(self, sender: str, recipients: list[str], message: bytes) -> None:
        await self._factory.deliver(sender, recipients, message)
        self._reply(250, "2.0.0", "OK: message accepted")

    def smtp_RSET(self, rest: bytes):  # noqa: N802
        self._reset()
        self._reply(250, "2.0.0", "OK")

    def smtp_NOOP(self, rest: bytes):  # noqa: N802
        self._reply(250, "2.0.0", "OK")

    def smtp_HELP(self, rest: bytes):  # noqa: N802
        self._reply(214, "2.0.0", "This server takes delivery reports for its return paths")

    def smtp_VRFY(self, rest: bytes):  # noqa: N802
        self._reply(252, "2.5.0", "Cannot VRFY user")

    def smtp_EXPN(self, rest: bytes):  # noqa: N802
        self._error(502, "5.5.1", "EXPN not available")

    def smtp_QUIT(self, rest: bytes):  # noqa: N802
        self._reply(221, "2.0.0", "Bye")
        self.transport.loseConnection()


def _strip_route(address: bytes) -> bytes:
    """``@relay1,@relay2:user@host`` (an obsolete source route) is ``user@host``."""
    address = address.strip()
    if address.startswith(b"@") and b":" in address:
        return address.split(b":", 1)[1]
    return address


class InboundFactory(protocol.Factory):
    """
    ``accepts(address)`` answers (or resolves to) whether a recipient is one of ours;
    ``deliver(mail_from, recipients, message)`` takes a finished message: 250 once it has
    completed, 451 4.3.0 when it raised. ``tls_options`` (e.g. from ``mailsvc.tls.server_options``)
    enables STARTTLS. The idle timeout runs on ``clock``.
    """

    protocol = InboundProtocol

    def __init__(
        self,
        clock,
        hostname: str,
        accepts: Accepts,
        deliver: Deliver,
        tls_options=None,
        idle_timeout: float = 300,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ):
        self.clock = clock
        self.hostname = hostname.encode("idna").decode("ascii")
        self.accepts = accepts
        self.deliver = deliver
        self.tls_options = tls_options
        self.idle_timeout = idle_timeout
        self.max_message_bytes = max_message_bytes

    def buildProtocol(self, addr):  # noqa: N802
        p = InboundProtocol(self)
        p.callLater = self.clock.callLater  # TimeoutMixin's timer runs on our clock
        p.factory = self
        return p


async def listen(reactor, description: str, factory: InboundFactory):
    """Listen on a Twisted endpoint description (``tcp:25``); answers the listening port."""
    return await endpoints.serverFromString(reactor, description).listen(factory)
