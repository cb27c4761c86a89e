"""
The outbound SMTP client protocol: one connection (opened by the caller), many transactions.
Twisted's ``SMTPClient`` is not used (docs/decisions.md, "Outbound SMTP client").

The whole message is CRLF-normalised and dot-stuffed before any byte is written, and goes out
in one write; replies are matched to commands through a FIFO, so with PIPELINING a
transaction's MAIL, RCPT and DATA go out in one write. On a plain TCP connection each write is
sent at once through the socket (``ITCPTransport.getHandle``) while the transport holds nothing
unsent, rather than on the reactor's next turn (docs/decisions.md, "Outbound SMTP client").
Timeouts and a transaction's deadline (``send(deadline=...)``) run on the injected clock. A
reply past MAX_REPLY_LINES / MAX_REPLY_BYTES, or a line past MAX_LENGTH, drops the connection
as a ConnectionFault (retried). With credentials (smarthost) the client authenticates after
(STARTTLS and) EHLO, only over TLS unless plain text is allowed.
"""

from __future__ import annotations

import base64
import re
import socket
from collections import deque
from collections.abc import Awaitable, Callable

import attrs
from twisted.internet import defer
from twisted.internet.interfaces import ISSLTransport, ITCPTransport, ITLSTransport
from twisted.logger import Logger
from twisted.protocols.basic import LineOnlyReceiver

log = Logger()

OPPORTUNISTIC = "opportunistic"
ENFORCED = "enforced"
TLS_POLICIES = (OPPORTUNISTIC, ENFORCED)

#: One reply (e.g. a multi-line EHLO answer) holds at most this many lines and bytes of text;
#: real servers send tens of lines, a hostile one could send them forever.
MAX_REPLY_LINES = 100
MAX_REPLY_BYTES = 64 * 1024

_REPLY_LINE = re.compile(rb"^(\d{3})([ -]?)(.*)$")
_ENHANCED = re.compile(r"^([245]\.\d{1,3}\.\d{1,3})(?:\s+|$)")
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
_ADDRESS_FORBIDDEN = re.compile(r"[\x00-\x20<>\x7f]")


@attrs.frozen
class Reply:
    """One SMTP reply: code, enhanced status code ("" when absent) and text."""

    code: int
    enhanced_code: str
    text: str

    @property
    def positive(self) -> bool:
        return 200 <= self.code < 400


@attrs.frozen
class RecipientResult:
    """What became of one recipient: ``outcome`` is delivered, deferred or bounced."""

    recipient: str
    outcome: str
    reply: Reply
    #: for a deferral: ``transient``, or ``blocked`` (TLS policy not met, or the smarthost
    #: refused or cannot take our credentials: the operator must act); None otherwise.
    deferral_class: str | None = None


@attrs.frozen
class TransactionResult:
    recipients: tuple[RecipientResult, ...]

    def by_outcome(self, outcome: str) -> list[str]:
        return [r.recipient for r in self.recipients if r.outcome == outcome]


class ConnectionFault(Exception):
    """The connection failed under a transaction; its outcome is unknown (retry it)."""


class SMTPTimeout(ConnectionFault):
    def __init__(self, waiting_for: str, seconds: float):
        super().__init__(f"no reply to {waiting_for} within {seconds:g} s; connection aborted")
        self.waiting_for, self.seconds = waiting_for, seconds


class DeadlinePassed(ConnectionFault):
    """The transaction's overall deadline passed (the connection, if any, was aborted)."""

    def __init__(self, where: str):
        super().__init__(f"the delivery deadline passed during {where}")


class DeadlinePassedUnsent(DeadlinePassed):
    """The deadline passed while ``may_send`` was still being awaited: no byte of DATA was sent."""


class SMTPConnectionLost(ConnectionFault):
    def __init__(self, reason):
        super().__init__(f"connection lost: {reason.getErrorMessage() if reason else 'closed'}")


class SMTPProtocolError(ConnectionFault):
    """The server sent something that is not an SMTP reply."""


class SessionDeferral(Exception):
    """The session ended before the transaction could finish: every recipient is deferred."""

    def __init__(self, reply: Reply, deferral_class: str = "transient"):
        super().__init__(f"{reply.code} {reply.text}")
        self.reply, self.deferral_class = reply, deferral_class


def outcome_of(reply: Reply) -> str:
    if reply.code < 400:
        return "delivered"
    return "deferred" if reply.code < 500 else "bounced"


def normalise_lines(message: bytes) -> bytes:
    """Every bare CR or LF becomes CRLF, and the message ends with CRLF (if not empty)."""
    normal = _LINE_BREAK.sub(b"\r\n", message)
    if normal and not normal.endswith(b"\r\n"):
        normal += b"\r\n"
    return normal


def data_payload(normalised: bytes) -> bytes:
    """Dot-stuffing on whole lines of the complete message, then the end-of-data line."""
    stuffed = normalised.replace(b"\r\n.", b"\r\n..")
    if stuffed.startswith(b"."):
        stuffed = b"." + stuffed
    return stuffed + b".\r\n"


def parse_extensions(lines: list[str]) -> dict[str, str]:
    """EHLO reply lines after the first → {KEYWORD: parameters}."""
    extensions = {}
    for line in lines[1:]:
        keyword, _, params = line.strip().partition(" ")
        if keyword:
            extensions[keyword.upper()] = params.strip()
    return extensions


def _auth_mechanisms(extensions: dict[str, str]) -> set[str]:
    """SASL mechanisms from ``AUTH a b`` and the pre-standard ``AUTH=a b``."""
    found = set()
    for keyword, params in extensions.items():
        if keyword == "AUTH":
            found.update(params.upper().split())
        elif keyword.startswith("AUTH="):
            found.update((keyword[5:] + " " + params).upper().split())
    return found


def _address(address: str) -> bytes:
    if _ADDRESS_FORBIDDEN.search(address):
        raise ValueError(f"address {address!r} contains a character not allowed in SMTP")
    return address.encode("utf-8")


@attrs.define
class _Job:
    result: defer.Deferred
    sender: str = ""
    recipients: tuple[str, ...] = ()
    message: bytes = b""
    quit: bool = False
    #: Awaited right before DATA is sent; an exception it raises fails the transaction
    #: unsent (the connection stays usable).
    may_send: Callable[[], Awaitable[None]] | None = None
    asking: bool = False  # ``may_send`` is being awaited

    def end(self, failure: Exception) -> None:
        if self.result.called:
            return
        if self.quit:
            self.result.callback(None)
        elif isinstance(failure, SessionDeferral):
            self.result.callback(TransactionResult(tuple(
                RecipientResult(r, "deferred", failure.reply, failure.deferral_class)
                for r in self.recipients)))
        else:
            self.result.errback(failure)


@attrs.define
class _Pending:
    result: defer.Deferred
    command: str
    timeout: float


class OutboundSMTP(LineOnlyReceiver):
    """
    Client side of one SMTP connection. Transactions queue up through ``send()`` and run one
    after another once the session (greeting, EHLO, STARTTLS) is ready.
    """

    delimiter = b"\n"
    MAX_LENGTH = 8192
    #: Set by makeConnection before anything here runs: TCP, and TLS once STARTTLS is done.
    transport: ITLSTransport

    def __init__(self, clock, helo_name: str, tls_policy: str = OPPORTUNISTIC,
                 tls_options=None, command_timeout: float = 300, data_timeout: float = 600,
                 auth: tuple[str, str] | None = None, allow_plaintext_auth: bool = False,
                 peer_policy=None):
        if tls_policy not in TLS_POLICIES:
            raise ValueError(f"tls_policy must be one of {TLS_POLICIES}")
        if tls_policy == ENFORCED and tls_options is None:
            raise ValueError("an enforced TLS policy needs tls_options")
        if auth is not None:
            if (len(auth) != 2 or not all(isinstance(part, str) for part in auth)
                    or any("\x00" in part or "\r" in part or "\n" in part for part in auth)):
                raise ValueError("auth must be (username, password): strings without NUL, CR or LF")
            if not auth[0]:
                raise ValueError("auth needs a username")
        #: (username, password); kept private and never logged or put into a reply or error.
        self._auth = None if auth is None else (auth[0], auth[1])
        self.allow_plaintext_auth = allow_plaintext_auth
        #: the SASL mechanism used once authenticated (PLAIN or LOGIN), None before.
        self.authenticated_with: str | None = None
        self.clock = clock
        self.helo_name = helo_name.encode("ascii")
        self.tls_policy = tls_policy
        self.tls_options = tls_options
        #: MTA-STS or DANE (``delivery.policy.PeerPolicy``): ``check()`` → why the server's
        #: certificate does not do (None: it does), ``enforce``, ``report(result)``.
        self.peer_policy = peer_policy
        self.command_timeout = command_timeout
        self.data_timeout = data_timeout
        self.extensions: dict[str, str] = {}
        self.encrypted = False
        self._lines: list[str] = []
        self._reply_bytes = 0
        self._aborted = False
        self._pending: deque[_Pending] = deque()
        self._timer = None
        self._jobs: deque[_Job] = deque()
        self._wakeup: defer.Deferred | None = None
        self._ended: Exception | None = None
        self._finished = False
        self._connected = False
        self._closed_waiters: list[defer.Deferred] = []
        #: The socket written to directly (``_write``); None once anything else may write.
        self._socket: socket.socket | None = None
        #: Within ``dataReceived``: the reply timer is set again once, after every line read
        #: (``_replied``: a reply was matched meanwhile).
        self._reading = False
        self._replied = False

    # -- public -------------------------------------------------------------------------

    def send(self, sender: str, recipients: list[str], message: bytes, deadline: float | None = None,
             may_send: Callable[[], Awaitable[None]] | None = None) -> defer.Deferred:
        """
        One transaction; fires with a TransactionResult, or fails with a ConnectionFault
        (DeadlinePassed when the clock reaches ``deadline`` first: the connection is aborted,
        so no byte of the transaction is sent after it), or with what ``may_send`` raised.
        """
        if not recipients:
            raise ValueError("send needs at least one recipient")
        for address in (sender, *recipients):
            _address(address)
        job = _Job(defer.Deferred(), sender, tuple(recipients), message, may_send=may_send)
        if deadline is not None:
            timer = self.clock.callLater(max(0.0, deadline - self.clock.seconds()), self._deadline_passed, job)
            job.result.addBoth(_cancelling, timer)
        self._enqueue(job)
        return job.result

    def quit(self) -> defer.Deferred:
        """QUIT after the queued transactions; fires once the connection is closed."""
        closed = self.when_closed()
        self._enqueue(_Job(defer.Deferred(), quit=True))
        return closed

    @property
    def is_open(self) -> bool:
        return self._connected

    @property
    def usable(self) -> bool:
        """Open, and its session has not ended (a failed one is closing): fit for reuse."""
        return self._connected and self._ended is None

    @property
    def unread(self) -> bytes:
        """What the server sent past the last line read (let go at once when the connection is aborted)."""
        return self._buffer

    def when_closed(self) -> defer.Deferred[None]:
        d: defer.Deferred[None] = defer.Deferred()
        if self._finished and not self._connected:
            d.callback(None)
        else:
            self._closed_waiters.append(d)
        return d

    # -- connection ---------------------------------------------------------------------

    def sendLine(self, line: bytes):  # noqa: N802
        """Replies are split on LF (tolerating bare-LF servers); commands always end in CRLF."""
        self._write(line + b"\r\n")

    def _write(self, data: bytes) -> None:
        """
        ``data`` sent now, in one system call, on a plain TCP connection whose transport holds
        nothing unsent: the kernel takes it whole in the common case. What the socket does not
        take (a full send buffer, an error the transport then finds and reports) goes to the
        transport, and from then on every write does, so that the bytes stay in order. Over TLS
        (the transport encrypts) and on any other transport, always the transport.
        """
        sock = self._socket
        if sock is not None:
            try:
                sent = sock.send(data)
            except OSError:
                sent = 0
            if sent == len(data):
                return
            data = data[sent:]
            self._socket = None
        self.transport.write(data)

    def _lose_connection(self) -> None:
        self._socket = None
        self.transport.loseConnection()

    def __repr__(self):
        user = f" user={self._auth[0]!r}" if self._auth else ""
        return f"<OutboundSMTP {self.helo_name.decode()}{user}>"

    def connectionMade(self):  # noqa: N802
        self._connected = True
        if ISSLTransport.providedBy(self.transport):
            self.encrypted = True  # implicit TLS (e.g. a smarthost on port 465): no STARTTLS
        no_delay = getattr(self.transport, "setTcpNoDelay", None)
        if no_delay is not None:
            no_delay(True)
        self._socket = _plain_socket(self.transport)
        defer.Deferred.fromCoroutine(self._run())

    def connectionLost(self, reason=None):  # noqa: N802
        self._socket = None
        self._cancel_timer()
        self._connected = False
        self._end(SMTPConnectionLost(reason))
        waiters, self._closed_waiters = self._closed_waiters, []
        for d in waiters:
            d.callback(None)

    def dataReceived(self, data: bytes):  # noqa: N802
        """Nothing more is read from a server whose connection is being dropped."""
        if self._aborted:
            return
        self._reading = True
        try:
            super().dataReceived(data)
        finally:
            self._reading = False
        if self._replied:  # the timer runs for the reply now next in line, from now
            self._replied = False
            self._cancel_timer()
            self._arm_timer()

    def lineLengthExceeded(self, line):  # noqa: N802
        self._abort(SMTPProtocolError(f"reply line longer than {self.MAX_LENGTH} bytes"))

    def lineReceived(self, line: bytes):  # noqa: N802
        if self._aborted:
            return
        match = _REPLY_LINE.match(line.rstrip(b"\r"))
        if match is None or (match.group(2) == b"" and match.group(3)):
            self._abort(SMTPProtocolError(f"not an SMTP reply: {line[:80]!r}"))
            return
        code = int(match.group(1))
        text = match.group(3).decode("utf-8", "replace")
        self._lines.append(text)
        self._reply_bytes += len(text)
        if len(self._lines) > MAX_REPLY_LINES or self._reply_bytes > MAX_REPLY_BYTES:
            self._abort(SMTPProtocolError(
                f"reply longer than {MAX_REPLY_LINES} lines or {MAX_REPLY_BYTES} bytes"))
            return
        if match.group(2) == b"-":
            return
        texts, self._lines, self._reply_bytes = self._lines, [], 0
        if code == 421:
            self._service_closing(texts)
            return
        if not self._pending:
            log.info("unexpected SMTP reply {code} {text}", code=code, text=texts[-1])
            return
        pending = self._pending.popleft()
        if self._reading:
            self._replied = True
            pending.result.callback((code, texts))
            return
        self._cancel_timer()
        pending.result.callback((code, texts))
        self._arm_timer()

    # -- replies and timers -------------------------------------------------------------

    def _expect(self, command: str, timeout: float | None = None) -> defer.Deferred:
        pending = _Pending(defer.Deferred(), command, timeout or self.command_timeout)
        if self._ended is not None:
            pending.result.callback(self._ended)
        else:
            self._pending.append(pending)
            self._arm_timer()
        return pending.result

    async def _reply(self, expected: defer.Deferred) -> Reply:
        return to_reply(*await self._raw(expected))

    async def _raw(self, expected: defer.Deferred) -> tuple[int, list[str]]:
        value = await expected
        if isinstance(value, Exception):
            raise value
        return value

    def _arm_timer(self):
        if self._pending and self._timer is None:
            head = self._pending[0]
            self._timer = self.clock.callLater(head.timeout, self._timed_out, head)

    def _cancel_timer(self):
        if self._timer is not None:
            if self._timer.active():
                self._timer.cancel()
            self._timer = None

    def _timed_out(self, head: _Pending):
        self._timer = None
        self._abort(SMTPTimeout(head.command, head.timeout))

    def _service_closing(self, texts: list[str]):
        self._end(SessionDeferral(to_reply(421, texts)))
        if self._connected:
            self._lose_connection()

    def _abort(self, failure: Exception):
        self._cancel_timer()
        self._end(failure)
        self._aborted = True
        self._buffer, self._lines = b"", []  # what a hostile server sent is let go at once
        if self._connected:
            self._socket = None
            self.transport.abortConnection()

    def _deadline_passed(self, job: _Job):
        """The job may be awaiting ``may_send`` rather than a reply: it is failed here too."""
        failure: DeadlinePassed
        if job.asking:
            failure = DeadlinePassedUnsent("the check before DATA; connection aborted")
        else:
            failure = DeadlinePassed("the SMTP session; connection aborted")
        self._abort(failure)
        job.end(failure)

    def _end(self, failure: Exception):
        """First cause wins: every reply still awaited resolves to it."""
        if self._ended is None:
            self._ended = failure
        pending, self._pending = self._pending, deque()
        for p in pending:
            p.result.callback(self._ended)
        self._wake()

    # -- job queue ----------------------------------------------------------------------

    def _enqueue(self, job: _Job):
        self._jobs.append(job)
        if self._finished:
            self._drain(self._ended or ConnectionFault("the SMTP session has ended"))
        else:
            self._wake()

    def _wake(self):
        wakeup, self._wakeup = self._wakeup, None
        if wakeup is not None:
            wakeup.callback(None)

    async def _next_job(self) -> _Job:
        while not self._jobs:
            if self._ended is not None:
                raise self._ended
            self._wakeup = defer.Deferred()
            await self._wakeup
        return self._jobs.popleft()

    def _drain(self, failure: Exception) -> None:
        jobs, self._jobs = self._jobs, deque()
        for job in jobs:
            job.end(failure)

    # -- the session --------------------------------------------------------------------

    async def _run(self):
        job = None
        try:
            await self._open()
            must_reset = False
            while True:
                job = await self._next_job()
                if job.quit:
                    self.sendLine(b"QUIT")
                    await self._raw(self._expect("QUIT"))
                    raise ConnectionFault("the connection was closed by quit()")
                completed = await self._transaction(job, must_reset)
                job, must_reset = None, not completed
        except (SessionDeferral, ConnectionFault) as failure:
            if self._ended is None:
                self._ended = failure
                if self._connected:
                    self._lose_connection()
        except Exception:
            log.failure("outbound SMTP session failed")
            self._abort(ConnectionFault("internal error in the SMTP client"))
        finally:
            self._finished = True
            if self._ended is not None:  # None only when the coroutine is garbage-collected
                if job is not None:
                    job.end(self._ended)
                self._drain(self._ended)

    async def _open(self):
        greeting = await self._reply(self._expect("the greeting"))
        if greeting.code != 220:
            self._quit_now()
            raise SessionDeferral(greeting)
        await self._hello()
        tls_refusal = None
        if "STARTTLS" in self.extensions and self.tls_options is not None and not self.encrypted:
            self.sendLine(b"STARTTLS")
            reply = await self._reply(self._expect("STARTTLS"))
            if reply.code == 220:
                self._socket = None  # from here the transport encrypts every byte
                self.transport.startTLS(self.tls_options)
                self.encrypted = True
                await self._hello()
            elif self.tls_policy == ENFORCED:
                self._quit_now()
                raise SessionDeferral(reply, "blocked")
            else:
                tls_refusal = reply
        if self.tls_policy == ENFORCED and not self.encrypted:
            if self.peer_policy is not None:
                self.peer_policy.report("starttls-not-supported")
            self._quit_now()
            raise SessionDeferral(Reply(450, "4.7.4", "TLS is required, but was not offered"), "blocked")
        if self.peer_policy is not None:
            self._check_peer()
        if self._auth is not None:
            await self._authenticate(self._auth, tls_refusal)

    def _check_peer(self):
        """
        The server's certificate under MTA-STS or DANE, once TLS is up and before any
        transaction: a failure is reported, and under an enforced policy the session ends
        (every recipient deferred ``blocked``; a policy failure never bounces).
        """
        policy = self.peer_policy
        if not self.encrypted:
            policy.report("starttls-not-supported")
            failure = "starttls-not-supported: the server offers no STARTTLS"
        else:
            try:
                failure = policy.check()
            except Exception as e:
                failure = f"validation-failure: {type(e).__name__}"
            policy.report(failure.partition(":")[0] if failure else None)
        if failure and policy.enforce:
            self._quit_now()
            raise SessionDeferral(Reply(450, "4.7.5", f"{policy.name} policy not met: {failure}"), "blocked")
        if failure:
            log.info("{policy} policy (testing) not met by {host}: {why}", policy=policy.name,
                     host=getattr(policy, "host", "?"), why=failure)

    async def _authenticate(self, auth: tuple[str, str], tls_refusal: Reply | None):
        """
        AUTH PLAIN (with an initial response) when offered, else AUTH LOGIN. Credentials go
        only over an encrypted connection unless ``allow_plaintext_auth``. Any failure ends
        the session: 4xx defers every recipient as ``transient``, anything else as
        ``blocked`` (the operator must fix the credentials or the smarthost's set-up).
        """
        if not self.encrypted and not self.allow_plaintext_auth:
            if tls_refusal is not None:
                why = f"smarthost refused STARTTLS ({tls_refusal.code} {tls_refusal.text})"
            elif "STARTTLS" in self.extensions:
                why = "no TLS options were given for the smarthost"
            else:
                why = "smarthost offers no TLS"
            self._quit_now()
            raise SessionDeferral(Reply(450, "4.7.0", f"{why}; credentials not sent"), "blocked")
        mechanisms = _auth_mechanisms(self.extensions)
        username, password = (part.encode("utf-8") for part in auth)
        if "PLAIN" in mechanisms:
            mechanism = "PLAIN"
            first = b"AUTH PLAIN " + base64.b64encode(b"\x00" + username + b"\x00" + password)
            responses = []
        elif "LOGIN" in mechanisms:
            mechanism = "LOGIN"
            first = b"AUTH LOGIN"
            responses = [base64.b64encode(username), base64.b64encode(password)]
        else:
            offered = " ".join(sorted(mechanisms)) or "none"
            self._quit_now()
            raise SessionDeferral(Reply(
                450, "4.7.0", f"smarthost offers no AUTH mechanism we support (offered: {offered}); "
                              "credentials not sent"), "blocked")
        self.sendLine(first)
        code, texts = await self._raw(self._expect("AUTH " + mechanism))
        for response in responses:
            if code != 334:
                break
            self.sendLine(response)
            code, texts = await self._raw(self._expect("AUTH " + mechanism))
        if code == 334:  # the server asks for more than the mechanism has: cancel
            self.sendLine(b"*")
            code, texts = await self._raw(self._expect("AUTH " + mechanism))
            if code < 400:
                code, texts = 535, ["5.7.0 unexpected challenge; authentication cancelled"]
        reply = to_reply(code, texts)
        if code == 235:
            self.authenticated_with = mechanism
            return
        log.warn("smarthost refused AUTH {mechanism} for {user}: {code} {text}",
                 mechanism=mechanism, user=auth[0], code=reply.code, text=reply.text)
        self._quit_now()
        raise SessionDeferral(reply, "transient" if 400 <= code < 500 else "blocked")

    async def _hello(self):
        self.sendLine(b"EHLO " + self.helo_name)
        code, texts = await self._raw(self._expect("EHLO"))
        if code == 250:
            self.extensions = parse_extensions(texts)
            return
        if code >= 500:
            self.sendLine(b"HELO " + self.helo_name)
            code, texts = await self._raw(self._expect("HELO"))
            if code == 250:
                self.extensions = {}
                return
        self._quit_now()
        raise SessionDeferral(to_reply(code, texts))

    def _quit_now(self):
        self.sendLine(b"QUIT")
        self._lose_connection()

    async def _transaction(self, job: _Job, must_reset: bool) -> bool:
        """Runs one transaction; True when it reached the end of data (no RSET needed)."""
        message = normalise_lines(job.message)
        limit = self.extensions.get("SIZE", "")
        if limit.isdigit() and 0 < int(limit) < len(message):
            refusal = Reply(552, "5.3.4", f"message size {len(message)} exceeds size limit {limit} of server")
            job.result.callback(TransactionResult(tuple(
                RecipientResult(r, "bounced", refusal) for r in job.recipients)))
            return not must_reset
        mail = b"MAIL FROM:<" + _address(job.sender) + b">"
        if "SIZE" in self.extensions:
            mail += b" SIZE=%d" % len(message)
        if "8BITMIME" in self.extensions and not message.isascii():
            mail += b" BODY=8BITMIME"
        rcpts = [b"RCPT TO:<" + _address(r) + b">" for r in job.recipients]

        if "PIPELINING" in self.extensions:
            if not await self._may_send(job):  # DATA goes out with MAIL and RCPT: ask first
                return not must_reset
            commands = ([b"RSET"] if must_reset else []) + [mail, *rcpts, b"DATA"]
            self.transport.write(b"".join(c + b"\r\n" for c in commands))
            names = (["RSET"] if must_reset else []) + ["MAIL FROM"] + ["RCPT TO"] * len(rcpts) + ["DATA"]
            expected = [self._expect(name) for name in names]
            replies = [await self._reply(d) for d in expected]
            if must_reset:
                reset = replies.pop(0)
                if reset.code != 250:
                    raise SessionDeferral(reset)
            mail_reply, rcpt_replies, data_reply = replies[0], replies[1:-1], replies[-1]
        else:
            if must_reset:
                self.sendLine(b"RSET")
                reset = await self._reply(self._expect("RSET"))
                if reset.code != 250:
                    raise SessionDeferral(reset)
            self.sendLine(mail)
            mail_reply = await self._reply(self._expect("MAIL FROM"))
            rcpt_replies, data_reply = [], None
            if mail_reply.code == 250:
                for rcpt in rcpts:
                    self.sendLine(rcpt)
                    rcpt_replies.append(await self._reply(self._expect("RCPT TO")))
                if any(r.positive for r in rcpt_replies):
                    if not await self._may_send(job):
                        return False  # the next transaction starts with RSET
                    self.sendLine(b"DATA")
                    data_reply = await self._reply(self._expect("DATA"))

        if mail_reply.code != 250:
            job.result.callback(_all(job.recipients, mail_reply))
            await self._close_empty_data(data_reply)
            return False
        accepted = [r for r, reply in zip(job.recipients, rcpt_replies, strict=True) if reply.positive]
        if not accepted:
            await self._close_empty_data(data_reply)
            job.result.callback(_per_recipient(job.recipients, rcpt_replies, None))
            return False
        if data_reply is None or data_reply.code != 354:
            job.result.callback(_per_recipient(job.recipients, rcpt_replies, data_reply))
            return False
        payload = data_payload(message)
        self._write(payload)
        final = await self._reply(self._expect("the end of data", self.data_timeout))
        job.result.callback(_per_recipient(job.recipients, rcpt_replies, final))
        return True

    async def _may_send(self, job: _Job) -> bool:
        """False when ``may_send`` refused: the job has failed with what it raised."""
        if job.may_send is None:
            return True
        job.asking = True
        try:
            await job.may_send()
        except Exception as refusal:
            if self._ended is not None:
                raise self._ended from None
            job.result.errback(refusal)
            return False
        finally:
            job.asking = False
        if self._ended is not None:  # e.g. the deadline passed meanwhile
            raise self._ended
        return True

    async def _close_empty_data(self, data_reply: Reply | None):
        """A 354 with nothing accepted (RFC 2920 §3.1): end the empty message at once."""
        if data_reply is not None and data_reply.code == 354:
            self.sendLine(b".")
            await self._reply(self._expect("the end of data"))


def to_reply(code: int, texts: list[str]) -> Reply:
    enhanced = ""
    first = _ENHANCED.match(texts[0]) if texts else None
    if first and first.group(1)[0] == str(code)[0]:
        enhanced = first.group(1)
        texts = [_ENHANCED.sub("", t, count=1) if t.startswith(enhanced) else t for t in texts]
    return Reply(code, enhanced, " ".join(t for t in texts if t))


def _all(recipients, reply: Reply) -> TransactionResult:
    return TransactionResult(tuple(RecipientResult(r, outcome_of(reply), reply, _class(reply))
                                   for r in recipients))


def _per_recipient(recipients, rcpt_replies, data_reply: Reply | None) -> TransactionResult:
    """A refused RCPT decides its recipient; the DATA outcome applies to every accepted one."""
    results = []
    for recipient, reply in zip(recipients, rcpt_replies, strict=True):
        decisive = data_reply if reply.positive and data_reply is not None else reply
        results.append(RecipientResult(recipient, outcome_of(decisive), decisive, _class(decisive)))
    return TransactionResult(tuple(results))


def _plain_socket(transport) -> socket.socket | None:
    """The socket of a plain TCP transport, or None (TLS, or a transport that is no socket's)."""
    if not ITCPTransport.providedBy(transport) or ISSLTransport.providedBy(transport):
        return None
    get_handle = getattr(transport, "getHandle", None)  # a fake may claim the interface only
    handle = get_handle() if get_handle is not None else None
    return handle if isinstance(handle, socket.socket) else None


def _cancelling(result, timer):
    if timer.active():
        timer.cancel()
    return result


def _class(reply: Reply) -> str | None:
    return "transient" if 400 <= reply.code < 500 else None
