"""
SMTP submission (RFC 6409): a small ESMTP server of our own on Twisted's LineReceiver.

Why not ``twisted.mail.smtp.ESMTP``: it offers AUTH before TLS, dies on a malformed AUTH PLAIN,
answers pipelined commands out of order when validation is asynchronous, and hands one message
object per recipient (DESIGN.md, Known traps). Here every command is answered strictly in
order: while a reply waits on the database, reading pauses, so PIPELINING is safe to offer.
A finished message enters the same ``accept()`` path as ``POST /emails``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Awaitable, Callable

from twisted.internet import defer, protocol
from twisted.logger import Logger
from twisted.protocols.basic import LineReceiver
from twisted.protocols.policies import TimeoutMixin

log = Logger()

#: Largest message accepted (SIZE); the built message is bounded by the same 40 MiB.
MAX_MESSAGE_BYTES = 40 * 1024 * 1024
MAX_RECIPIENTS = 50
SERVICE_USERS = (b"mailsvc", b"resend")

_MAIL = re.compile(rb"^FROM:\s*<([^<>]*)>(.*)$", re.I)
_RCPT = re.compile(rb"^TO:\s*<([^<>]+)>(.*)$", re.I)
_SIZE = re.compile(rb"(?:^|\s)SIZE=(\d+)", re.I)


class Refusal(Exception):
    """An SMTP reply that ends a step: code, enhanced code and text."""

    def __init__(self, code: int, enhanced: str, text: str):
        super().__init__(text)
        self.code, self.enhanced, self.text = code, enhanced, text


class Submission:
    """What the protocol needs from the service (wired in compose)."""

    def __init__(
        self,
        authenticate: Callable[[str], Awaitable[object | None]],
        accept_message: Callable[[object, bytes, list[str], list[str]], Awaitable[str]],
        hostname: str,
        idle_timeout: float = 300,
    ):
        self.authenticate = authenticate
        self.accept_message = accept_message
        self.hostname = hostname.encode("idna")
        self.idle_timeout = idle_timeout


class SubmissionProtocol(LineReceiver, TimeoutMixin):
    delimiter = b"\r\n"
    MAX_LENGTH = 64 * 1024  # longer lines are refused at the end of DATA, not here

    def __init__(self, service: Submission, tls_options, implicit_tls: bool):
        self._service = service
        self._tls_options = tls_options
        self._encrypted = implicit_tls
        self._caller = None
        self._helo: bytes | None = None
        self._data: list[bytes] | None = None
        self._data_size = 0
        self._reset()

    # Connection

    def connectionMade(self):  # noqa: N802
        self.setTimeout(self._service.idle_timeout)
        self._reply(220, None, self._service.hostname.decode() + " ESMTP mailsvc")

    def timeoutConnection(self):  # noqa: N802
        self._reply(421, "4.4.2", "Idle timeout, closing connection")
        self.transport.loseConnection()

    def connectionLost(self, reason=protocol.connectionDone):  # noqa: N802
        self.setTimeout(None)

    def _reply(self, code: int, enhanced: str | None, text: str | list[str]) -> None:
        lines = text if isinstance(text, list) else [text]
        for i, line in enumerate(lines):
            sep = "-" if i < len(lines) - 1 else " "
            body = f"{enhanced} {line}" if enhanced else line
            self.transport.write(f"{code}{sep}{body}\r\n".encode("utf-8", "replace"))

    def _reset(self) -> None:
        self._sender: bytes | None = None
        self._recipients: list[str] = []
        self._data = None
        self._data_size = 0

    def _pending(self, work: Awaitable) -> None:
        """Run an asynchronous step; no further line is read until it has answered."""
        self.pauseProducing()
        d = defer.ensureDeferred(work)

        def failed(failure):
            if failure.check(Refusal):
                e = failure.value
                self._reply(e.code, e.enhanced, e.text)
            else:
                log.failure("SMTP submission step failed", failure)
                self._reply(451, "4.3.0", "Local error in processing; try again later")

        d.addErrback(failed)
        d.addBoth(lambda _: self._resume())

    def _resume(self) -> None:
        if self.transport is not None and not self.transport.disconnecting:
            self.resumeProducing()

    # Lines

    def lineReceived(self, line: bytes):  # noqa: N802
        self.resetTimeout()
        if self._data is not None:
            return self._data_line(line)
        if self._auth_state is not None:
            return self._auth_line(line)
        verb, _, rest = line.strip().partition(b" ")
        handler = getattr(self, "smtp_" + verb.decode("ascii", "replace").upper(), None)
        if handler is None:
            return self._reply(500, "5.5.2", "Command not recognized")
        handler(rest.strip())

    def lineLengthExceeded(self, line):  # noqa: N802
        self._reply(500, "5.5.2", "Line too long")
        self.transport.loseConnection()

    _auth_state = None

    # Commands

    def _extensions(self) -> list[str]:
        ext = [f"SIZE {MAX_MESSAGE_BYTES}", "8BITMIME", "PIPELINING", "ENHANCEDSTATUSCODES"]
        if not self._encrypted and self._tls_options is not None:
            ext.append("STARTTLS")
        if self._encrypted:
            ext.append("AUTH PLAIN LOGIN")
        return ext

    def smtp_EHLO(self, rest: bytes):  # noqa: N802
        if not rest:
            return self._reply(501, "5.5.4", "EHLO needs a domain")
        self._helo = rest
        self._reset()
        self._reply(250, None, [self._service.hostname.decode(), *self._extensions()])

    def smtp_HELO(self, rest: bytes):  # noqa: N802
        if not rest:
            return self._reply(501, "5.5.4", "HELO needs a domain")
        self._helo = rest
        self._reset()
        self._reply(250, None, self._service.hostname.decode())

    def smtp_STARTTLS(self, rest: bytes):  # noqa: N802
        if self._encrypted or self._tls_options is None:
            return self._reply(454 if self._tls_options is None else 503, "5.5.1", "TLS not available")
        # Anything the client pipelined after STARTTLS was sent in clear: drop it (RFC 3207 §6).
        self.clearLineBuffer()
        self._reply(220, "2.0.0", "Ready to start TLS")
        self.transport.startTLS(self._tls_options)
        self._encrypted = True
        self._helo = None
        self._caller = None
        self._reset()

    def smtp_AUTH(self, rest: bytes):  # noqa: N802
        if not self._encrypted:
            return self._reply(538, "5.7.11", "Encryption required for requested authentication mechanism")
        if self._helo is None:
            return self._reply(503, "5.5.1", "Send EHLO first")
        if self._caller is not None:
            return self._reply(503, "5.5.1", "Already authenticated")
        mechanism, _, initial = rest.partition(b" ")
        mechanism = mechanism.upper()
        if mechanism == b"PLAIN":
            if initial:
                return self._auth_plain(initial)
            self._auth_state = ("PLAIN",)
            return self._reply(334, None, "")
        if mechanism == b"LOGIN":
            if initial:
                self._auth_state = ("LOGIN", initial)
                return self._reply(334, None, base64.b64encode(b"Password:").decode())
            self._auth_state = ("LOGIN",)
            return self._reply(334, None, base64.b64encode(b"Username:").decode())
        self._reply(504, "5.5.4", "Unrecognized authentication mechanism")

    def _auth_line(self, line: bytes) -> None:
        state, self._auth_state = self._auth_state, None
        if line.strip() == b"*":
            return self._reply(501, "5.0.0", "Authentication aborted")
        if state[0] == "PLAIN":
            return self._auth_plain(line.strip())
        if len(state) == 1:
            self._auth_state = ("LOGIN", line.strip())
            return self._reply(334, None, base64.b64encode(b"Password:").decode())
        try:
            user = base64.b64decode(state[1], validate=True)
            password = base64.b64decode(line.strip(), validate=True)
        except (binascii.Error, ValueError):
            return self._reply(501, "5.5.2", "Cannot decode response")
        self._login(user, password)

    def _auth_plain(self, encoded: bytes) -> None:
        try:
            parts = base64.b64decode(encoded, validate=True).split(b"\0")
        except (binascii.Error, ValueError):
            return self._reply(501, "5.5.2", "Cannot decode response")
        if len(parts) != 3:
            return self._reply(501, "5.5.2", "Malformed AUTH PLAIN response")
        _, user, password = parts
        self._login(user, password)

    def _login(self, user: bytes, password: bytes) -> None:
        async def check():
            caller = None
            if user in SERVICE_USERS:
                caller = await self._service.authenticate(password.decode("utf-8", "replace"))
            if caller is None:
                raise Refusal(535, "5.7.8", "Authentication credentials invalid")
            self._caller = caller
            self._reply(235, "2.7.0", "Authentication successful")

        self._pending(check())

    def smtp_MAIL(self, rest: bytes):  # noqa: N802
        if self._caller is None:
            return self._reply(530, "5.7.0", "Authentication required")
        if self._sender is not None:
            return self._reply(503, "5.5.1", "Sender already given")
        match = _MAIL.match(rest)
        if not match:
            return self._reply(501, "5.5.4", "Syntax: MAIL FROM:<address>")
        size = _SIZE.search(match.group(2))
        if size and int(size.group(1)) > MAX_MESSAGE_BYTES:
            return self._reply(552, "5.3.4", "Message size exceeds fixed maximum message size")
        self._sender = match.group(1)
        self._reply(250, "2.1.0", "Sender OK")

    def smtp_RCPT(self, rest: bytes):  # noqa: N802
        if self._sender is None:
            return self._reply(503, "5.5.1", "Need MAIL before RCPT")
        match = _RCPT.match(rest)
        if not match:
            return self._reply(501, "5.5.4", "Syntax: RCPT TO:<address>")
        from mailsvc.domain.email import parse_mailbox
        from mailsvc.domain.errors import Invalid

        try:
            address = parse_mailbox("to", match.group(1).decode("utf-8")).address
        except (Invalid, UnicodeDecodeError):
            return self._reply(553, "5.1.3", "Bad recipient address syntax")
        known = {r.lower() for r in self._recipients}
        if address.lower() not in known and len(known) >= MAX_RECIPIENTS:
            return self._reply(452, "4.5.3", f"Too many recipients (at most {MAX_RECIPIENTS})")
        if address.lower() not in known:
            self._recipients.append(address)
        self._reply(250, "2.1.5", "Recipient OK")

    def smtp_DATA(self, rest: bytes):  # noqa: N802
        if self._sender is None or not self._recipients:
            return self._reply(503, "5.5.1", "Need MAIL and RCPT before DATA")
        self._data = []
        self._data_size = 0
        self._reply(354, None, "End data with <CR><LF>.<CR><LF>")

    def _data_line(self, line: bytes) -> None:
        if line == b".":
            lines, self._data = self._data, None
            too_big = self._data_size > MAX_MESSAGE_BYTES
            recipients, self._recipients = self._recipients, []
            self._sender = None
            if too_big:
                return self._reply(552, "5.3.4", "Message size exceeds fixed maximum message size")
            if any(len(piece) > 998 for piece in lines):
                return self._reply(550, "5.6.0", "Message has lines longer than 998 characters")
            message = b"\r\n".join(lines) + b"\r\n"
            self._pending(self._accept(message, recipients))
            return
        if line.startswith(b"."):
            line = line[1:]
        self._data_size += len(line) + 2
        if self._data_size <= MAX_MESSAGE_BYTES:
            self._data.append(line)

    async def _accept(self, message: bytes, recipients: list[str]) -> None:
        email_id = await self._service.accept_message(self._caller, message, recipients, [])
        self._reply(250, "2.0.0", f"OK: queued as {email_id}")

    def smtp_RSET(self, rest: bytes):  # noqa: N802
        self._reset()
        self._reply(250, "2.0.0", "OK")

    def smtp_NOOP(self, rest: bytes):  # noqa: N802
        self._reply(250, "2.0.0", "OK")

    def smtp_VRFY(self, rest: bytes):  # noqa: N802
        self._reply(252, "2.5.0", "Cannot VRFY user")

    def smtp_QUIT(self, rest: bytes):  # noqa: N802
        self._reply(221, "2.0.0", "Bye")
        self.transport.loseConnection()


class SubmissionFactory(protocol.Factory):
    def __init__(self, clock, service: Submission, tls_options, implicit_tls: bool):
        self._clock = clock
        self._service = service
        self._tls_options = tls_options
        self._implicit_tls = implicit_tls

    def buildProtocol(self, addr):  # noqa: N802
        p = SubmissionProtocol(self._service, self._tls_options, self._implicit_tls)
        p.callLater = self._clock.callLater  # TimeoutMixin's timer runs on our clock
        p.factory = self
        return p
