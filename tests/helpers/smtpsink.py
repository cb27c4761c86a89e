"""
A scriptable SMTP sink on 127.0.0.1 for the MTA tests: a real server on Twisted's
``LineReceiver`` (not ``twisted.mail``'s ESMTP, see docs/contract/smtp.md) that records every
accepted message and answers as told.

Commands are handled strictly in order, one at a time: while a reply waits (``delay``) what
the client sends is kept unread, so pipelined commands are never answered out of order, and
bytes a client pipelines after DATA or STARTTLS are read in the right mode (after STARTTLS
they are discarded, as RFC 3207 requires). The message body is read in raw mode (fast for large
messages) and dot-unstuffed as a whole.

Use the ``smtp_sink`` fixture (import it into a conftest or test module)::

    async def test_x(smtp_sink):
        smtp_sink.rcpt_replies["gone@y.test"] = b"550 5.1.1 no such user"
        ...send to 127.0.0.1:smtp_sink.port...
        await smtp_sink.wait_for(1)
        assert smtp_sink.messages[0].rcpt_to == ["ok@y.test"]
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

import attrs
import pytest_twisted
from twisted.internet import defer, protocol, reactor, ssl, task
from twisted.internet.interfaces import ISSLTransport
from twisted.protocols.basic import LineReceiver

from mailsvc.crypto import tls as tls_files

#: advertised SIZE (bytes); messages up to this size are taken (40 MiB messages must pass).
MAX_SIZE = 64 * 1024 * 1024
_PATH = re.compile(rb"^(MAIL FROM|RCPT TO):\s*<([^<>]*)>(.*)$", re.IGNORECASE)
_END_OF_DATA = b"\r\n.\r\n"

_certificate: tuple[bytes, bytes] | None = None


def localhost_certificate() -> tuple[bytes, bytes]:
    """A self-signed (certificate PEM, key PEM) for localhost and 127.0.0.1, made once per run."""
    global _certificate
    if _certificate is None:
        _certificate = tls_files.self_signed("localhost")
    return _certificate


@attrs.frozen
class Received:
    """One accepted message; addresses as given in the commands, without angle brackets."""

    mail_from: str
    rcpt_to: list[str]  # the accepted recipients, in order
    data: bytes  # dot-unstuffed, CRLF line ends, without the final "."
    tls: bool
    helo: str
    auth_user: str | None = None


class Sink:
    """The knobs, the record, and the listening port; ``reset()`` restores the defaults."""

    def __init__(self):
        self.port = 0
        self.cert_pem, self._key_pem = localhost_certificate()
        self._listener = None
        self._open: set[SinkProtocol] = set()
        self._waiting: list[tuple[Callable[[], bool], defer.Deferred]] = []
        self._served = 0  # messages accepted since start: the <n> of "queued as <n>"
        self.reset()

    def reset(self) -> None:
        """Knobs back to their defaults; messages and counters cleared."""
        self.messages: list[Received] = []
        #: Messages whose end of data got a refusal (``data_reply``): what a retry sends again.
        self.refused: list[Received] = []
        self.connections = 0
        self.data_ends = 0  # messages whose end of data arrived, whatever their reply
        self.max_concurrent = len(self._open)
        self.starttls = True
        self.pipelining = True
        self.require_auth = False  # offer AUTH PLAIN LOGIN, accept any credentials, refuse MAIL before AUTH
        self.rcpt_replies: dict[str, bytes] = {}
        self.data_reply: bytes | None = None
        self.greeting: bytes | None = None
        self.close_after_mail = False
        self.delay = 0.0
        #: Seconds the final reply of the next messages waits (one entry per end of data, in
        #: order; none left: ``delay``). A connection lost meanwhile gets no reply.
        self.final_delays: list[float] = []
        #: Take a message at its end of data, before its reply is sent (as an MTA that commits
        #: first may: RFC 1047), rather than once a 2xx reply went out.
        self.commit_at_end_of_data = False
        #: When set, a new connection's greeting waits until this Deferred fires.
        self.greeting_gate: defer.Deferred | None = None
        #: Server TLS options presented at STARTTLS (None: the self-signed localhost pair).
        self.certificate = None

    # -- life cycle ---------------------------------------------------------------------

    def start(self) -> None:
        factory = protocol.Factory.forProtocol(SinkProtocol)
        factory.sink = self
        self._listener = reactor.listenTCP(0, factory, interface="127.0.0.1")
        self.port = self._listener.getHost().port

    async def stop(self) -> None:
        """Stop listening, abort every open connection and wait until each is gone."""
        if self._listener is not None:
            await self._listener.stopListening()
            self._listener = None
        gone = [p.gone for p in self._open]
        for p in list(self._open):
            p.cancel_reply()
            p.transport.abortConnection()
        await defer.gatherResults(gone)
        for _, d in self._waiting:
            d.cancel()
        self._waiting = []
        await task.deferLater(reactor, 0, lambda: None)

    def tls_options(self):
        if self.certificate is not None:
            return self.certificate
        return ssl.PrivateCertificate.loadPEM(self.cert_pem + b"\n" + self._key_pem).options()

    # -- record -------------------------------------------------------------------------

    async def wait_for(self, count: int, timeout: float = 10) -> None:
        """Until at least ``count`` messages were accepted; defer.TimeoutError after ``timeout``."""
        await self.until(lambda: len(self.messages) >= count, timeout)

    async def wait_for_data_ends(self, count: int, timeout: float = 10) -> None:
        """Until the end of data of at least ``count`` messages arrived (replied to or not)."""
        await self.until(lambda: self.data_ends >= count, timeout)

    async def wait_for_connections(self, count: int, timeout: float = 10) -> None:
        """Until at least ``count`` connections were made since the last reset."""
        await self.until(lambda: self.connections >= count, timeout)

    @property
    def replies_waiting(self) -> int:
        """Connections whose reply is being held back (``delay``, ``final_delays``)."""
        return sum(1 for p in self._open if p.reply_pending)

    async def until(self, condition: Callable[[], bool], timeout: float = 10) -> None:
        """Until ``condition()`` holds, looked at whenever a connection, an end of data or an
        accepted message comes or a connection goes; defer.TimeoutError after ``timeout``."""
        if condition():
            return
        d = defer.Deferred()
        entry = (condition, d)
        self._waiting.append(entry)
        d.addTimeout(timeout, reactor)
        try:
            await d
        finally:
            if entry in self._waiting:
                self._waiting.remove(entry)

    @property
    def open_connections(self) -> int:
        return len(self._open)

    @property
    def open_peer_ports(self) -> list[int]:
        """The clients' ports of the connections open now (to tell which process holds each)."""
        return [p.transport.getPeer().port for p in self._open]

    def _changed(self) -> None:
        for condition, d in list(self._waiting):
            if condition():
                self._waiting.remove((condition, d))
                d.callback(None)

    def _connected(self, proto: SinkProtocol) -> None:
        self._open.add(proto)
        self.connections += 1
        self.max_concurrent = max(self.max_concurrent, len(self._open))
        self._changed()

    def _disconnected(self, proto: SinkProtocol) -> None:
        self._open.discard(proto)
        self._changed()

    def _accepted(self, message: Received) -> None:
        self.messages.append(message)
        self._changed()

    def _data_ended(self) -> float | None:
        """Counts an end of data; the extra delay of its final reply, if one was set."""
        self.data_ends += 1
        self._changed()
        return self.final_delays.pop(0) if self.final_delays else None


class SinkProtocol(LineReceiver):
    delimiter = b"\r\n"
    MAX_LENGTH = 4096

    def connectionMade(self):  # noqa: N802
        self.sink: Sink = self.factory.sink
        self.gone = defer.Deferred()
        self.sink._connected(self)
        self.helo = ""
        self.auth_user: str | None = None
        self._auth_step = None  # a continuation of AUTH waiting for a client line
        self._timer = None
        self._closing = False
        self._reset_transaction()
        greeting = self.sink.greeting or b"220 sink ESMTP"
        then = None if greeting.startswith(b"220") else self._close
        if self.sink.greeting_gate is None:
            self._reply(greeting, then=then)
        else:
            self._hold()
            self.sink.greeting_gate.addCallback(lambda _: self._send(greeting + b"\r\n", then, True))

    def connectionLost(self, reason=None):  # noqa: N802
        self.cancel_reply()
        self.sink._disconnected(self)
        self.gone.callback(None)

    def _reset_transaction(self):
        self.mail_from: str | None = None
        self.rcpt_to: list[str] = []
        self._data: bytearray | None = None

    @property
    def tls(self) -> bool:
        return ISSLTransport.providedBy(self.transport)

    @property
    def reply_pending(self) -> bool:
        return self._timer is not None and self._timer.active()

    # -- replies, in order, optionally late ---------------------------------------------

    def _reply(self, line: bytes, then=None, delay: float | None = None):
        """Send one reply (a multi-line one as lines joined by \\n) after ``delay`` (default: the
        sink's), then run ``then``."""
        lines = line.split(b"\n")
        data = b"".join(
            (text[:3] + (b"-" if i < len(lines) - 1 else b" ") + text[4:] if len(text) > 3 else text) + b"\r\n"
            for i, text in enumerate(lines))
        delay = self.sink.delay if delay is None else delay
        if delay > 0:
            self._hold()
            self._timer = reactor.callLater(delay, self._send, data, then, True)
        else:
            self._send(data, then, False)

    def _hold(self):
        """Commands wait (``resumeProducing`` goes on), but reading does not stop: a client
        that goes away meanwhile is noticed, and its held reply is never sent."""
        self.paused = True

    def _send(self, data: bytes, then, resume: bool):
        self._timer = None
        if self.transport.disconnecting or self._closing:
            return
        self.transport.write(data)
        if then is not None:
            then()
        if resume and not self._closing:
            self.resumeProducing()

    def cancel_reply(self):
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _close(self):
        self._closing = True
        self.transport.loseConnection()

    # -- commands -----------------------------------------------------------------------

    def lineReceived(self, line: bytes):  # noqa: N802
        if self._closing:
            return
        if self._auth_step is not None:
            step, self._auth_step = self._auth_step, None
            step(line)
            return
        verb, _, rest = line.partition(b" ")
        handler = getattr(self, "smtp_" + verb.decode("ascii", "replace").upper(), None)
        if handler is None:
            self._reply(b"500 5.5.2 command not recognised")
        else:
            handler(rest.strip())

    def lineLengthExceeded(self, line):  # noqa: N802
        self._reply(b"500 5.5.2 line too long", then=self._close)

    def _extensions(self) -> list[bytes]:
        offered = [b"SIZE %d" % MAX_SIZE, b"8BITMIME", b"ENHANCEDSTATUSCODES"]
        if self.sink.pipelining:
            offered.append(b"PIPELINING")
        if self.sink.starttls and not self.tls:
            offered.append(b"STARTTLS")
        if self.sink.require_auth:
            offered.append(b"AUTH PLAIN LOGIN")
        return offered

    def smtp_EHLO(self, rest):  # noqa: N802
        if not rest:
            return self._reply(b"501 5.5.4 EHLO needs a domain")
        self.helo = rest.decode("utf-8", "replace")
        self._reset_transaction()
        self._reply(b"\n".join([b"250 sink greets " + rest, *(b"250 " + e for e in self._extensions())]))

    def smtp_HELO(self, rest):  # noqa: N802
        if not rest:
            return self._reply(b"501 5.5.4 HELO needs a domain")
        self.helo = rest.decode("utf-8", "replace")
        self._reset_transaction()
        self._reply(b"250 sink greets " + rest)

    def smtp_NOOP(self, rest):  # noqa: N802
        self._reply(b"250 2.0.0 ok")

    def smtp_RSET(self, rest):  # noqa: N802
        self._reset_transaction()
        self._reply(b"250 2.0.0 reset")

    def smtp_QUIT(self, rest):  # noqa: N802
        self._reply(b"221 2.0.0 bye", then=self._close)

    def smtp_STARTTLS(self, rest):  # noqa: N802
        if not self.sink.starttls or self.tls:
            return self._reply(b"454 4.7.0 TLS not available")

        def start():
            self.clearLineBuffer()  # anything pipelined after STARTTLS is discarded (RFC 3207)
            self.transport.startTLS(self.sink.tls_options())
            self.helo, self.auth_user = "", None
            self._reset_transaction()

        self._reply(b"220 2.0.0 ready to start TLS", then=start)

    def smtp_AUTH(self, rest):  # noqa: N802
        if not self.sink.require_auth:
            return self._reply(b"502 5.5.1 AUTH not offered")
        if self.auth_user is not None or self.mail_from is not None:
            return self._reply(b"503 5.5.1 AUTH not allowed now")
        mechanism, _, initial = rest.partition(b" ")
        mechanism = mechanism.upper()
        if mechanism == b"PLAIN":
            if initial:
                self._auth_plain(initial.strip())
            else:
                self._auth_step = self._auth_plain
                self._reply(b"334 ")
        elif mechanism == b"LOGIN":
            if initial:
                self._auth_login_user(initial.strip())
            else:
                self._auth_step = self._auth_login_user
                self._reply(b"334 " + base64.b64encode(b"Username:"))
        else:
            self._reply(b"504 5.5.4 mechanism not supported")

    def _decode(self, line: bytes) -> bytes | None:
        if line == b"*":
            self._reply(b"501 5.0.0 authentication cancelled")
            return None
        try:
            return base64.b64decode(line, validate=True)
        except (binascii.Error, ValueError):
            self._reply(b"501 5.5.2 cannot decode the response")
            return None

    def _auth_plain(self, line: bytes):
        decoded = self._decode(line)
        if decoded is None:
            return
        parts = decoded.split(b"\x00")
        if len(parts) != 3 or not parts[1]:
            return self._reply(b"501 5.5.2 malformed PLAIN response")
        self._authenticated(parts[1])

    def _auth_login_user(self, line: bytes):
        user = self._decode(line)
        if user is None:
            return
        self._auth_step = lambda answer: self._auth_login_password(user, answer)
        self._reply(b"334 " + base64.b64encode(b"Password:"))

    def _auth_login_password(self, user: bytes, line: bytes):
        if self._decode(line) is not None:
            self._authenticated(user)

    def _authenticated(self, user: bytes):
        self.auth_user = user.decode("utf-8", "replace")
        self._reply(b"235 2.7.0 authenticated")

    def smtp_MAIL(self, rest):  # noqa: N802
        path = _PATH.match(b"MAIL " + rest)
        if not self.helo:
            return self._reply(b"503 5.5.1 EHLO or HELO first")
        if self.mail_from is not None:
            return self._reply(b"503 5.5.1 nested MAIL command")
        if path is None or path.group(1).upper() != b"MAIL FROM":
            return self._reply(b"501 5.5.4 syntax: MAIL FROM:<address>")
        if self.sink.require_auth and self.auth_user is None:
            return self._reply(b"530 5.7.0 authentication required")
        if self.sink.close_after_mail:
            return self._reply(b"421 4.3.2 sink closing the connection", then=self._close)
        self.mail_from = path.group(2).decode("utf-8", "replace")
        self._reply(b"250 2.1.0 sender ok")

    def smtp_RCPT(self, rest):  # noqa: N802
        path = _PATH.match(b"RCPT " + rest)
        if self.mail_from is None:
            return self._reply(b"503 5.5.1 MAIL first")
        if path is None or path.group(1).upper() != b"RCPT TO" or not path.group(2):
            return self._reply(b"501 5.5.4 syntax: RCPT TO:<address>")
        address = path.group(2).decode("utf-8", "replace")
        answer = self.sink.rcpt_replies.get(address.lower(), b"250 2.1.5 recipient ok")
        if answer.startswith(b"2"):
            self.rcpt_to.append(address)
        self._reply(answer, then=self._close if answer.startswith(b"421") else None)

    def smtp_DATA(self, rest):  # noqa: N802
        if self.mail_from is None:
            return self._reply(b"503 5.5.1 MAIL first")
        if not self.rcpt_to:
            return self._reply(b"554 5.5.1 no valid recipients")
        self._data = bytearray(b"\r\n")  # so that an empty message's "." is found as "\r\n.\r\n"
        self._reply(b"354 end data with <CR><LF>.<CR><LF>", then=self.setRawMode)

    # -- the message --------------------------------------------------------------------

    def rawDataReceived(self, data: bytes):  # noqa: N802
        if self._closing or self._data is None:
            return
        start = max(0, len(self._data) - len(_END_OF_DATA) + 1)
        self._data += data
        end = self._data.find(_END_OF_DATA, start)
        if end < 0:
            if len(self._data) > MAX_SIZE + 1024 * 1024:
                self._data = None
                self._reply(b"552 5.3.4 message too big", then=self._close)
            return
        extra = bytes(self._data[end + len(_END_OF_DATA):])
        body = bytes(self._data[:end + 2]).replace(b"\r\n.", b"\r\n")[2:]
        self._data = None
        message = Received(self.mail_from, list(self.rcpt_to), body, self.tls, self.helo, self.auth_user)
        self._reset_transaction()
        self.sink._served += 1
        answer = self.sink.data_reply or b"250 2.0.0 queued as %d" % self.sink._served
        committed = self.sink.commit_at_end_of_data and answer.startswith(b"2")
        if committed:
            self.sink._accepted(message)

        def done():
            if answer.startswith(b"2") and not committed:
                self.sink._accepted(message)
            elif not answer.startswith(b"2"):
                self.sink.refused.append(message)
            if answer.startswith(b"421"):
                self._close()

        delay = self.sink._data_ended()
        self.setLineMode()
        self._reply(answer, then=done, delay=delay)
        if extra:
            self.setLineMode(extra)  # queued for the line loop, which honours a paused reply


@pytest_twisted.async_yield_fixture
async def smtp_sink():
    """A running Sink on 127.0.0.1 (random port), stopped after the test."""
    sink = Sink()
    sink.start()
    yield sink
    await sink.stop()
