"""
SMTP submission (RFC 6409) on the project's ESMTP server (``mailsvc.smtp.server``): AUTH PLAIN
and LOGIN, offered only inside TLS, with the service label as user and an API key as password;
a finished message enters the same ``accept()`` path as ``POST /emails``. Guessing keys is
slowed by closing a connection (421) at its third failed AUTH, and by answering 421 to a client
address (IPv6 by /64) that failed too often in the last minute on any node, counted in
PostgreSQL before the credentials are checked (docs/decisions.md, "Sign-in and SMTP AUTH
throttles"). Twisted's ``ESMTP`` is not used (docs/contract/smtp.md).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from twisted.internet import protocol

from mailsvc.domain.clients import network_of
from mailsvc.smtp.server import ConnectionLimits, ESMTPServerProtocol

#: Largest message accepted (SIZE); the built message is bounded by the same 40 MiB.
MAX_MESSAGE_BYTES = 40 * 1024 * 1024
MAX_RECIPIENTS = 50
SERVICE_USERS = (b"mailsvc", b"resend")
#: Unknown or malformed commands before the connection is closed (as on the inbound listener).
MAX_ERRORS = 20
#: Failed AUTH exchanges (535, or 501 for an undecodable or aborted one) a connection may make:
#: the last is followed by 421 and the end of the connection.
MAX_AUTH_FAILURES = 3
#: Header fields, and bytes of the header section, of a message: far above what a client
#: writes, far below what would keep the reactor parsing for long.
MAX_HEADER_FIELDS = 1000
MAX_HEADER_BYTES = 1024 * 1024
#: Seconds a client has from its connection (TLS handshake included) to its first command; a
#: client says EHLO at once. Then the idle timeout (RFC 5321 §4.5.3.2's 5 minutes) applies.
FIRST_COMMAND_TIMEOUT = 30
#: Connections a process holds at once, in all and from one client (an address; IPv6 by /64):
#: each may hold a message of up to MAX_MESSAGE_BYTES in memory. A node's workers share out
#: ``smtp.submission_max_connections``; each allows ``..._per_client`` whole.
MAX_CONNECTIONS = 1000
MAX_CONNECTIONS_PER_CLIENT = 50
#: Seconds one command line may take from its first byte to its end: the idle timeout restarts
#: with every line, so a line trickled a byte at a time would otherwise hold the connection
#: (a message's lines after DATA have no such limit, only the session's).
COMMAND_LINE_TIMEOUT = 60
#: The longest session, however busy (a 40 MiB message needs some 23 KB/s to fit in it).
SESSION_TIMEOUT = 30 * 60

# A reverse-path with a control character (a NUL, ...) is malformed, not an address.
_MAIL = re.compile(rb"^FROM:\s*<([^<>\x00-\x1f\x7f]*)>(.*)$", re.I)
_RCPT = re.compile(rb"^TO:\s*<([^<>]+)>(.*)$", re.I)
_HEADER_FIELD_START = re.compile(rb"\r\n(?![ \t])")


class AuthFailures(Protocol):
    """Failed AUTH exchanges per client network (``mailsvc.app.throttle.SmtpAuthFailures``)."""

    async def reserve(self, client: str) -> int | None:
        """Count one exchange as failed before its key is checked; None, or the seconds to wait."""

    async def give_back(self, client: str) -> None:
        """The exchange succeeded."""


class Submission:
    """What the protocol needs from the service (wired in compose)."""

    def __init__(
        self,
        authenticate: Callable[[str], Awaitable[object | None]],
        accept_message: Callable[[Any, bytes, list[str], list[str]], Awaitable[str]],
        hostname: str,
        idle_timeout: float = 300,
        first_command_timeout: float = FIRST_COMMAND_TIMEOUT,
        *,
        auth_failures: AuthFailures,
        max_connections: int = MAX_CONNECTIONS,
        max_connections_per_client: int = MAX_CONNECTIONS_PER_CLIENT,
        command_line_timeout: float = COMMAND_LINE_TIMEOUT,
        session_timeout: float = SESSION_TIMEOUT,
    ):
        self.authenticate = authenticate
        self.accept_message = accept_message
        self.hostname = hostname.encode("idna")
        self.idle_timeout = idle_timeout
        self.first_command_timeout = first_command_timeout
        self.auth_failures = auth_failures
        #: Shared by every submission listener of the process.
        self.limits = ConnectionLimits(max_connections, max_connections_per_client)
        self.command_line_timeout = command_line_timeout
        self.session_timeout = session_timeout


class SubmissionProtocol(ESMTPServerProtocol):
    max_recipients = MAX_RECIPIENTS
    max_errors = MAX_ERRORS

    def __init__(self, service: Submission, tls_options, implicit_tls: bool, clock):
        super().__init__(service.hostname.decode(), tls_options, implicit_tls, service.idle_timeout,
                         MAX_MESSAGE_BYTES, service.first_command_timeout, limits=service.limits,
                         session_seconds=service.session_timeout,
                         command_line_seconds=service.command_line_timeout)
        self._service = service
        self._clock = clock
        self._caller: object | None = None
        #: Where an AUTH exchange is: the mechanism, and LOGIN's user once given.
        self._auth_state: tuple[str] | tuple[str, bytes] | None = None
        self._auth_failures = 0

    # Replies its clients have always seen, kept as they were.

    def timeoutConnection(self):  # noqa: N802
        self._close(421, "4.4.2", "Idle timeout, closing connection")

    def _client_key(self) -> str:
        return self._client()

    def _too_many_connections(self) -> None:
        self._close(421, "4.7.0", "Too many connections; try again later")

    def _session_over(self) -> None:
        self._session_ends = None
        self._close(421, "4.7.0", "Session too long, closing connection")

    def smtp_STARTTLS(self, rest: bytes):  # noqa: N802
        if self._encrypted or self._tls_options is None:
            return self._reply(454 if self._tls_options is None else 503, "5.5.1", "TLS not available")
        self._start_tls()

    # AUTH

    def _command(self, line: bytes) -> None:
        # While AUTH waits on the client, a line is its response, not a command.
        if self._auth_state is not None:
            return self._auth_line(line)
        super()._command(line)

    def _extensions(self) -> list[str]:
        ext = super()._extensions()
        if self._encrypted:
            ext.append("AUTH PLAIN LOGIN")
        return ext

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

    def callLater(self, period, func):  # noqa: N802 (TimeoutMixin's name)
        """TimeoutMixin's timer and the session's deadlines, on the listener's clock."""
        return self._clock.callLater(period, func)

    def _auth_line(self, line: bytes) -> None:
        state, self._auth_state = self._auth_state, None
        assert state is not None  # lines come here only during an AUTH exchange
        if line.strip() == b"*":
            return self._auth_failed(501, "5.0.0", "Authentication aborted")
        if state[0] == "PLAIN":
            return self._auth_plain(line.strip())
        if len(state) == 1:
            self._auth_state = ("LOGIN", line.strip())
            return self._reply(334, None, base64.b64encode(b"Password:").decode())
        try:
            user = base64.b64decode(state[1], validate=True)
            password = base64.b64decode(line.strip(), validate=True)
        except (binascii.Error, ValueError):
            return self._auth_failed(501, "5.5.2", "Cannot decode response")
        self._login(user, password)

    def _auth_plain(self, encoded: bytes) -> None:
        try:
            parts = base64.b64decode(encoded, validate=True).split(b"\0")
        except (binascii.Error, ValueError):
            return self._auth_failed(501, "5.5.2", "Cannot decode response")
        if len(parts) != 3:
            return self._auth_failed(501, "5.5.2", "Malformed AUTH PLAIN response")
        _, user, password = parts
        self._login(user, password)

    def _login(self, user: bytes, password: bytes) -> None:
        async def check():
            if not await self._counted():
                return
            caller = None
            if user in SERVICE_USERS:
                caller = await self._service.authenticate(password.decode("utf-8", "replace"))
            if caller is None:
                return self._failed(535, "5.7.8", "Authentication credentials invalid")
            await self._service.auth_failures.give_back(self._client())
            self._caller = caller
            self._reply(235, "2.7.0", "Authentication successful")

        self._pending(check(), "authentication")

    async def _counted(self) -> bool:
        """Count the exchange as failed for the client's address; False (answered 421) when it is over its limit."""
        if await self._service.auth_failures.reserve(self._client()) is None:
            return True
        self._close(421, "4.7.0", "Too many failed authentications from your address; try again later")
        return False

    def _auth_failed(self, code: int, enhanced: str, text: str) -> None:
        """An exchange that failed before any key was checked: counted for the client's address too."""

        async def refuse():
            if await self._counted():
                self._failed(code, enhanced, text)

        self._pending(refuse(), "authentication")

    def _failed(self, code: int, enhanced: str, text: str) -> None:
        """A failed AUTH exchange (counted for the address already): answered, and counted for the connection."""
        self._auth_failures += 1
        self._reply(code, enhanced, text)
        if self._auth_failures >= MAX_AUTH_FAILURES:
            self._close(421, "4.7.0", "Too many failed authentications, closing connection")

    def _client(self) -> str:
        return network_of(super()._client_key())  # the peer's address

    # The transaction: only after AUTH; the message goes to accept().

    def smtp_MAIL(self, rest: bytes):  # noqa: N802
        if self._caller is None:
            return self._reply(530, "5.7.0", "Authentication required")
        super().smtp_MAIL(rest)

    def _mail_from(self, rest: bytes) -> tuple[str, bytes] | None:
        match = _MAIL.match(rest)
        return None if match is None else (match.group(1).decode("utf-8", "replace"), match.group(2))

    def _rcpt_to(self, rest: bytes) -> bytes | None:
        match = _RCPT.match(rest)
        return None if match is None else match.group(1)

    def _recipient_address(self, path: bytes) -> str | None:
        from mailsvc.domain.errors import Invalid
        from mailsvc.domain.headers import parse_mailbox

        try:
            return parse_mailbox("to", path.decode("utf-8")).address
        except (Invalid, UnicodeDecodeError):
            return None

    def _message_received(self, sender: str, recipients: list[str], message: bytes) -> None:
        # NUL is no text (RFC 5321 §4.5.2 and 8BITMIME; BINARYMIME is not offered).
        if b"\0" in message:
            return self._reply(550, "5.6.0", "Message contains NUL characters")
        end = 0 if message.startswith(b"\r\n") else message.find(b"\r\n\r\n")
        head = message if end < 0 else message[:end]
        if len(head) > MAX_HEADER_BYTES:
            return self._reply(550, "5.6.0", f"Message header exceeds {MAX_HEADER_BYTES} bytes")
        if len(_HEADER_FIELD_START.findall(head)) >= MAX_HEADER_FIELDS:
            return self._reply(550, "5.6.0", f"Message has more than {MAX_HEADER_FIELDS} header fields")
        if any(len(line) > 998 for line in message.split(b"\r\n")):
            return self._reply(550, "5.6.0", "Message has lines longer than 998 characters")
        self._pending(self._accept(message, recipients), "accept")

    async def _accept(self, message: bytes, recipients: list[str]) -> None:
        email_id = await self._service.accept_message(self._caller, message, recipients, [])
        self._reply(250, "2.0.0", f"OK: queued as {email_id}")


class SubmissionFactory(protocol.Factory):
    noisy = False  # the listener is told once, by the node

    def __init__(self, clock, service: Submission, tls_options, implicit_tls: bool):
        self._clock = clock
        self._service = service
        self._tls_options = tls_options
        self._implicit_tls = implicit_tls

    def buildProtocol(self, addr):  # noqa: N802
        p = SubmissionProtocol(self._service, self._tls_options, self._implicit_tls, self._clock)
        p.factory = self
        return p
