"""
The ESMTP server both SMTP listeners are made of (submission and the return path): our own
protocol on Twisted's LineReceiver, not ``twisted.mail.smtp.ESMTP``, which offers AUTH before
TLS and answers pipelined commands out of order when a step is asynchronous
(docs/contract/smtp.md). Every command is answered strictly in order: while a reply waits on an
asynchronous step, reading pauses, so PIPELINING is safe to offer.

A listener subclasses ``ESMTPServerProtocol`` and supplies what differs: the grammar of
``MAIL FROM:`` and ``RCPT TO:`` (``_mail_from``, ``_rcpt_to``, ``_recipient_address``), whether
a recipient is taken (``_admit``), and what becomes of a finished message (``_message_received``).

Both listeners are open to the network, so both bound what a client can hold: connections at
once, in all and per client (``ConnectionLimits``, shared by every listener of a kind), the
length of a session, and (submission) the time one command line may take from its first byte,
which trickling a line never ends cannot reset as it resets the idle timeout.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Coroutine
from typing import Any

from twisted.internet import defer, protocol
from twisted.internet.interfaces import ITLSTransport
from twisted.logger import Logger
from twisted.protocols.basic import LineReceiver
from twisted.protocols.policies import TimeoutMixin

_SIZE = re.compile(rb"(?:^|\s)SIZE=(\d+)", re.I)
#: A CR or LF left inside a DATA line by the delimiter: a bare one.
_BARE_LINE_END = re.compile(rb"[\r\n]")


class Refusal(Exception):
    """An SMTP reply that ends a step: code, enhanced code and text."""

    def __init__(self, code: int, enhanced: str, text: str):
        super().__init__(text)
        self.code, self.enhanced, self.text = code, enhanced, text


class ConnectionLimits:
    """
    Connections open at once through one or more listeners, in all and per client (whatever
    key the listener counts a client by: its address, or an IPv6 /64). A connection over
    either limit is refused and never counted.
    """

    def __init__(self, max_connections: int, max_per_client: int):
        self.max_connections = max_connections
        self.max_per_client = max_per_client
        self.open = 0
        self._by_client: Counter[str] = Counter()

    def opened(self, client: str) -> bool:
        """Counts a new connection from ``client``; False (and not counted) when over a limit."""
        if self.open >= self.max_connections or self._by_client[client] >= self.max_per_client:
            return False
        self.open += 1
        self._by_client[client] += 1
        return True

    def closed(self, client: str) -> None:
        self.open -= 1
        self._by_client[client] -= 1
        if not self._by_client[client]:
            del self._by_client[client]


def _closing(transport: object) -> bool:
    """Whether the connection is being closed: Twisted's connections say so in ``disconnecting``,
    which none of its interfaces declares."""
    return bool(getattr(transport, "disconnecting", False))


class ESMTPServerProtocol(LineReceiver, TimeoutMixin):
    delimiter = b"\r\n"
    #: Longest line read at all; a longer one ends the connection. DATA lines may exceed 998
    #: octets here: whether that is acceptable is the listener's to decide.
    MAX_LENGTH = 64 * 1024
    #: Refused commands tolerated before the connection is closed; ``None``: no limit.
    max_errors: int | None = None
    #: Recipients one transaction may name; each listener sets its own.
    max_recipients: int
    #: TCP (TLS once STARTTLS is done); None until makeConnection.
    transport: ITLSTransport | None

    log = Logger()  # its namespace is the listener's class

    def __init__(self, hostname: str, tls_options, encrypted: bool, idle_timeout: float,
                 max_message_bytes: int, first_command_timeout: float | None = None, *,
                 limits: ConnectionLimits | None = None, session_seconds: float | None = None,
                 command_line_seconds: float | None = None):
        self._hostname = hostname
        self._tls_options = tls_options
        self._encrypted = encrypted
        self._idle_timeout = idle_timeout
        #: Seconds from the connection (and its TLS handshake) to the first command line; then
        #: ``idle_timeout`` between lines. None: ``idle_timeout`` from the start.
        self._first_command_timeout = first_command_timeout
        self._max_message_bytes = max_message_bytes
        #: Counted in ``limits`` while open (None: no caps); the client it was counted for.
        self._limits = limits
        self._counted_as: str | None = None
        #: The longest session, and the longest a command line may take from its first byte
        #: (a DATA line has none: the message is bounded by its size, the idle timeout and
        #: the session). None: no such limit.
        self._session_seconds = session_seconds
        self._command_line_seconds = command_line_seconds
        self._session_ends = None
        self._line_ends = None
        self._helo: bytes | None = None
        self._errors = 0
        self._reset()

    # Connection

    def connectionMade(self):  # noqa: N802
        if self._limits is not None:
            client = self._client_key()
            if not self._limits.opened(client):
                return self._too_many_connections()
            self._counted_as = client
        if self._session_seconds is not None:
            self._session_ends = self.callLater(self._session_seconds, self._session_over)
        self.setTimeout(self._first_command_timeout or self._idle_timeout)
        self._reply(220, None, f"{self._hostname} ESMTP mailsvc")

    def timeoutConnection(self):  # noqa: N802
        self._close(421, "4.4.2", f"{self._hostname} Idle timeout, closing connection")

    def connectionLost(self, reason=protocol.connectionDone):  # noqa: N802
        self.setTimeout(None)
        for call in (self._session_ends, self._line_ends):
            if call is not None and call.active():
                call.cancel()
        self._session_ends = self._line_ends = None
        if self._counted_as is not None and self._limits is not None:
            self._limits.closed(self._counted_as)
            self._counted_as = None

    def _client_key(self) -> str:
        """What the connection caps count a client by: its address."""
        assert self.transport is not None  # connectionMade runs once it is set
        peer = self.transport.getPeer()
        return getattr(peer, "host", str(peer))

    def _too_many_connections(self) -> None:
        self._close(421, "4.7.0", f"{self._hostname} Too many connections; try again later")

    def _session_over(self) -> None:
        self._session_ends = None
        self._close(421, "4.4.2", f"{self._hostname} Session too long, closing connection")

    def _command_line_over(self) -> None:
        self._close(421, "4.7.0", "Command line too slow, closing connection")

    def _reply(self, code: int, enhanced: str | None, text: str | list[str]) -> None:
        """One reply, multi-line when ``text`` is a list, each line with the enhanced code."""
        if self.transport is None:
            return
        lines = text if isinstance(text, list) else [text]
        for i, line in enumerate(lines):
            sep = "-" if i < len(lines) - 1 else " "
            body = f"{enhanced} {line}" if enhanced else line
            self.transport.write(f"{code}{sep}{body}\r\n".encode("utf-8", "replace"))

    def _close(self, code: int, enhanced: str, text: str) -> None:
        if self.transport is None or _closing(self.transport):
            return
        self._reply(code, enhanced, text)
        self.transport.loseConnection()

    def _error(self, code: int, enhanced: str, text: str) -> None:
        """A refused command: counted, so a client that only probes or misbehaves is let go."""
        self._errors += 1
        if self.max_errors is not None and self._errors > self.max_errors:
            return self._close(421, "4.7.0", "Too many errors, closing connection")
        self._reply(code, enhanced, text)

    def _reset(self) -> None:
        self._sender: str | None = None
        self._recipients: list[str] = []
        self._data: list[bytes] | None = None
        self._data_size = 0

    def _pending(self, work: Coroutine[Any, Any, object], what: str) -> None:
        """Run an asynchronous step; no further line is read until it has answered."""
        self.pauseProducing()
        d: defer.Deferred[object] = defer.ensureDeferred(work)

        def failed(failure):
            if failure.check(Refusal):
                e = failure.value
                self._reply(e.code, e.enhanced, e.text)
            else:
                self.log.failure("SMTP {what} failed", failure, what=what)
                self._reply(451, "4.3.0", "Local error in processing; try again later")

        d.addErrback(failed)
        d.addBoth(lambda _: self._resume())

    def _resume(self) -> None:
        if self.transport is not None and not _closing(self.transport):
            self.resumeProducing()

    # Lines

    def dataReceived(self, data: bytes):  # noqa: N802
        super().dataReceived(data)
        # Bytes of a command line not yet ended: its deadline runs from the first of them (it
        # is not restarted by more of them, only stopped by the line's end).
        if (self._command_line_seconds is not None and self._line_ends is None and self._data is None
                and self._buffer and self.transport is not None and not _closing(self.transport)):
            self._line_ends = self.callLater(self._command_line_seconds, self._line_deadline)

    def _line_deadline(self) -> None:
        self._line_ends = None
        if self.paused:  # the lines are whole and wait on us (an asynchronous step): not late
            self._line_ends = self.callLater(self._command_line_seconds, self._line_deadline)
            return
        self._command_line_over()

    def lineReceived(self, line: bytes):  # noqa: N802
        if self._line_ends is not None:
            if self._line_ends.active():
                self._line_ends.cancel()
            self._line_ends = None
        if self._first_command_timeout is not None:
            self._first_command_timeout = None
            self.setTimeout(self._idle_timeout)
        else:
            self.resetTimeout()
        if self._data is not None:
            return self._data_line(line)
        self._command(line)

    def _command(self, line: bytes) -> None:
        verb, _, rest = line.strip().partition(b" ")
        handler = getattr(self, "smtp_" + verb.decode("ascii", "replace").upper(), None)
        if handler is None or not verb.isalpha():
            return self._error(500, "5.5.2", "Command not recognized")
        handler(rest.strip())

    def lineLengthExceeded(self, line):  # noqa: N802
        self._close(500, "5.5.2", "Line too long")

    # Commands

    def _extensions(self) -> list[str]:
        ext = [f"SIZE {self._max_message_bytes}", "8BITMIME", "PIPELINING", "ENHANCEDSTATUSCODES"]
        if not self._encrypted and self._tls_options is not None:
            ext.append("STARTTLS")
        return ext

    def smtp_EHLO(self, rest: bytes):  # noqa: N802
        if not rest:
            return self._error(501, "5.5.4", "EHLO needs a domain")
        self._helo = rest
        self._reset()
        self._reply(250, None, [self._hostname, *self._extensions()])

    def smtp_HELO(self, rest: bytes):  # noqa: N802
        if not rest:
            return self._error(501, "5.5.4", "HELO needs a domain")
        self._helo = rest
        self._reset()
        self._reply(250, None, self._hostname)

    def smtp_STARTTLS(self, rest: bytes):  # noqa: N802
        if self._tls_options is None:
            return self._error(502, "5.5.1", "TLS not available")
        if self._encrypted:
            return self._error(503, "5.5.1", "TLS already active")
        self._start_tls()

    def _start_tls(self) -> None:
        # Anything the client pipelined after STARTTLS was sent in clear: drop it (RFC 3207 §6).
        self.clearLineBuffer()
        self._reply(220, "2.0.0", "Ready to start TLS")
        assert self.transport is not None  # a command came over it
        self.transport.startTLS(self._tls_options)
        self._encrypted = True
        self._helo = None
        self._reset()

    def smtp_MAIL(self, rest: bytes):  # noqa: N802
        if self._sender is not None:
            return self._error(503, "5.5.1", "Sender already given")
        parsed = self._mail_from(rest)
        if parsed is None:
            return self._error(501, "5.5.4", "Syntax: MAIL FROM:<address>")
        sender, parameters = parsed
        size = _SIZE.search(parameters)
        # A number too long to be a size is not read (int() refuses over 4,300 digits).
        if size and (len(size.group(1)) > 20 or int(size.group(1)) > self._max_message_bytes):
            return self._reply(552, "5.3.4", "Message size exceeds fixed maximum message size")
        self._sender = sender
        self._reply(250, "2.1.0", "Sender OK")

    def _mail_from(self, rest: bytes) -> tuple[str, bytes] | None:
        """The reverse-path and the parameters of ``MAIL FROM:``, or None when malformed."""
        raise NotImplementedError

    def smtp_RCPT(self, rest: bytes):  # noqa: N802
        if self._sender is None:
            return self._error(503, "5.5.1", "Need MAIL before RCPT")
        path = self._rcpt_to(rest)
        if path is None:
            return self._error(501, "5.5.4", "Syntax: RCPT TO:<address>")
        address = self._recipient_address(path)
        if address is None:
            return self._reply(553, "5.1.3", "Bad recipient address syntax")
        if address.lower() in (r.lower() for r in self._recipients):
            return self._reply(250, "2.1.5", "Recipient OK")
        if len(self._recipients) >= self.max_recipients:
            return self._reply(452, "4.5.3", f"Too many recipients (at most {self.max_recipients})")
        self._admit(address)

    def _rcpt_to(self, rest: bytes) -> bytes | None:
        """The forward-path of ``RCPT TO:``, or None when malformed."""
        raise NotImplementedError

    def _recipient_address(self, path: bytes) -> str | None:
        """The address a forward-path names, or None when it is no address."""
        raise NotImplementedError

    def _admit(self, address: str) -> None:
        """A new, well-formed recipient within the limit: taken."""
        self._recipients.append(address)
        self._reply(250, "2.1.5", "Recipient OK")

    def smtp_DATA(self, rest: bytes):  # noqa: N802
        if self._sender is None or not self._recipients:
            return self._error(503, "5.5.1", "Need MAIL and RCPT before DATA")
        self._data = []
        self._data_size = 0
        self._reply(354, None, "End data with <CR><LF>.<CR><LF>")

    def _data_line(self, line: bytes) -> None:
        # Lines are read as data between DATA, after MAIL FROM, and the lone period.
        assert self._data is not None and self._sender is not None
        if line == b".":
            lines, sender, recipients = self._data, self._sender, self._recipients
            too_big = self._data_size > self._max_message_bytes
            self._reset()
            if too_big:
                return self._reply(552, "5.3.4", "Message size exceeds fixed maximum message size")
            message = b"".join(piece + b"\r\n" for piece in lines)
            return self._message_received(sender, recipients, message)
        if line.startswith(b"."):
            line = line[1:]
        if b"\r" in line or b"\n" in line:
            # Each bare CR or LF ends a line (RFC 6376 §5.3), before anything reads or signs
            # the message, so that a relay that does the same on the way breaks no signature.
            line = _BARE_LINE_END.sub(b"\r\n", line)
        self._data_size += len(line) + 2
        if self._data_size <= self._max_message_bytes:
            self._data.append(line)
        else:
            self._data = []  # keep reading to the end, keep nothing

    def _message_received(self, sender: str, recipients: list[str], message: bytes) -> None:
        """
        A finished message within the size limit: dot-unstuffed, every line ending in CRLF (a
        bare CR or LF became one).
        """
        raise NotImplementedError

    def smtp_RSET(self, rest: bytes):  # noqa: N802
        self._reset()
        self._reply(250, "2.0.0", "OK")

    def smtp_NOOP(self, rest: bytes):  # noqa: N802
        self._reply(250, "2.0.0", "OK")

    def smtp_VRFY(self, rest: bytes):  # noqa: N802
        self._reply(252, "2.5.0", "Cannot VRFY user")

    def smtp_QUIT(self, rest: bytes):  # noqa: N802
        self._close(221, "2.0.0", "Bye")
