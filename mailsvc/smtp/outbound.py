"""
The outbound SMTP client protocol: one connection (opened by the caller), many transactions.
Twisted's ``SMTPClient`` is not used (docs/decisions.md, "Outbound SMTP client").

The whole message is CRLF-normalised and dot-stuffed before any byte is written, and goes out
in one write; replies are matched to commands through a FIFO, so with PIPELINING a
transaction's MAIL, RCPT and DATA go out in one write. On a plain TCP connection each write is
sent at once through the socket (``smtp/direct_writes.py``). Timeouts and a transaction's
deadline (``send(deadline=...)``) run on the injected clock. A reply past MAX_REPLY_LINES /
MAX_REPLY_BYTES, or a line past MAX_LENGTH, drops the connection as a ConnectionFault
(retried). The session's steps after EHLO have their own modules: STARTTLS and the peer's
policy (``smtp/outbound_tls.py``), then with credentials (smarthost) AUTH
(``smtp/outbound_auth.py``); what the replies decide is ``smtp/replies.py``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

import attrs
from twisted.internet import defer
from twisted.internet.interfaces import ISSLTransport, ITLSTransport
from twisted.logger import Logger
from twisted.protocols.basic import LineOnlyReceiver

from mailsvc.smtp.direct_writes import DirectWrites
from mailsvc.smtp.outbound_auth import Credentials
from mailsvc.smtp.outbound_tls import OPPORTUNISTIC, StartTLS
from mailsvc.smtp.outbound_transaction import (
    Job,
    checked_address,
    data_payload,
    mail_from,
    normalise_lines,
    over_size,
    rcpt_to,
)
from mailsvc.smtp.replies import (
    ConnectionFault,
    DeadlinePassed,
    DeadlinePassedUnsent,
    RecipientResult,
    Reply,
    ReplyLines,
    SessionDeferral,
    SMTPConnectionLost,
    SMTPProtocolError,
    SMTPTimeout,
    TransactionResult,
    decided_all,
    decided_each,
    parse_extensions,
    to_reply,
)

log = Logger()


@attrs.define
class _Pending:
    result: defer.Deferred
    command: str
    timeout: float


class OutboundSMTP(LineOnlyReceiver):
    """
    Client side of one SMTP connection. Transactions queue up through ``send()`` and run one
    after another once the session (greeting, EHLO, STARTTLS, AUTH) is ready.
    """

    delimiter = b"\n"
    MAX_LENGTH = 8192
    #: Set by makeConnection before anything here runs: TCP, and TLS once STARTTLS is done.
    transport: ITLSTransport

    def __init__(self, clock, helo_name: str, tls_policy: str = OPPORTUNISTIC,
                 tls_options=None, command_timeout: float = 300, data_timeout: float = 600,
                 auth: tuple[str, str] | None = None, allow_plaintext_auth: bool = False,
                 peer_policy=None):
        self._tls = StartTLS(tls_policy, tls_options, peer_policy)
        self._credentials = Credentials.checked(auth, allow_plaintext_auth)
        #: the SASL mechanism used once authenticated (PLAIN or LOGIN), None before.
        self.authenticated_with: str | None = None
        self.clock = clock
        self.helo_name = helo_name.encode("ascii")
        self.command_timeout = command_timeout
        self.data_timeout = data_timeout
        self.extensions: dict[str, str] = {}
        self.encrypted = False
        self._reply_lines = ReplyLines()
        self._aborted = False
        self._pending: deque[_Pending] = deque()
        self._timer = None
        self._jobs: deque[Job] = deque()
        self._wakeup: defer.Deferred | None = None
        self._ended: Exception | None = None
        self._finished = False
        self._connected = False
        self._closed_waiters: list[defer.Deferred] = []
        self._direct = DirectWrites()
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
            checked_address(address)
        job = Job(defer.Deferred(), sender, tuple(recipients), message, may_send=may_send)
        if deadline is not None:
            timer = self.clock.callLater(max(0.0, deadline - self.clock.seconds()), self._deadline_passed, job)
            job.result.addBoth(_cancelling, timer)
        self._enqueue(job)
        return job.result

    def quit(self) -> defer.Deferred:
        """QUIT after the queued transactions; fires once the connection is closed."""
        closed = self.when_closed()
        self._enqueue(Job(defer.Deferred(), quit=True))
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
        """Straight to the socket while it may (``smtp/direct_writes.py``), else through the transport."""
        rest = self._direct.send(data)
        if rest:
            self.transport.write(rest)

    def _lose_connection(self) -> None:
        self._direct.close()
        self.transport.loseConnection()

    def __repr__(self):
        user = f" user={self._credentials.username!r}" if self._credentials else ""
        return f"<OutboundSMTP {self.helo_name.decode()}{user}>"

    def connectionMade(self):  # noqa: N802
        self._connected = True
        if ISSLTransport.providedBy(self.transport):
            self.encrypted = True  # implicit TLS (e.g. a smarthost on port 465): no STARTTLS
        no_delay = getattr(self.transport, "setTcpNoDelay", None)
        if no_delay is not None:
            no_delay(True)
        self._direct.open(self.transport)
        defer.Deferred.fromCoroutine(self._run())

    def connectionLost(self, reason=None):  # noqa: N802
        self._direct.close()
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
        try:
            reply = self._reply_lines.add(line)
        except SMTPProtocolError as failure:
            self._abort(failure)
            return
        if reply is None:
            return
        code, texts = reply
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
        self._buffer = b""  # what a hostile server sent is let go at once
        self._reply_lines.clear()
        if self._connected:
            self._direct.close()
            self.transport.abortConnection()

    def _deadline_passed(self, job: Job):
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

    def _enqueue(self, job: Job):
        self._jobs.append(job)
        if self._finished:
            self._drain(self._ended or ConnectionFault("the SMTP session has ended"))
        else:
            self._wake()

    def _wake(self):
        wakeup, self._wakeup = self._wakeup, None
        if wakeup is not None:
            wakeup.callback(None)

    async def _next_job(self) -> Job:
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
            self.quit_now()
            raise SessionDeferral(greeting)
        await self.hello()
        tls_refusal = await self._tls.start(self)
        if self._credentials is not None:
            self.authenticated_with = await self._credentials.authenticate(self, tls_refusal)

    # -- what the session's steps see of it (``replies.Session``, ``outbound_tls.Securing``) --

    async def ask(self, line: bytes, command: str) -> Reply:
        self.sendLine(line)
        return await self._reply(self._expect(command))

    def quit_now(self) -> None:
        self.sendLine(b"QUIT")
        self._lose_connection()

    def start_tls(self, options) -> None:
        self._direct.close()  # from here the transport encrypts every byte
        self.transport.startTLS(options)
        self.encrypted = True

    async def hello(self) -> None:
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
        self.quit_now()
        raise SessionDeferral(to_reply(code, texts))

    async def _transaction(self, job: Job, must_reset: bool) -> bool:
        """Runs one transaction; True when it reached the end of data (no RSET needed)."""
        message = normalise_lines(job.message)
        refusal = over_size(message, self.extensions)
        if refusal is not None:
            job.result.callback(TransactionResult(tuple(
                RecipientResult(r, "bounced", refusal) for r in job.recipients)))
            return not must_reset
        mail = mail_from(job.sender, message, self.extensions)
        rcpts = [rcpt_to(r) for r in job.recipients]

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
                reset = await self.ask(b"RSET", "RSET")
                if reset.code != 250:
                    raise SessionDeferral(reset)
            mail_reply = await self.ask(mail, "MAIL FROM")
            rcpt_replies, data_reply = [], None
            if mail_reply.code == 250:
                rcpt_replies = [await self.ask(rcpt, "RCPT TO") for rcpt in rcpts]
                if any(r.positive for r in rcpt_replies):
                    if not await self._may_send(job):
                        return False  # the next transaction starts with RSET
                    data_reply = await self.ask(b"DATA", "DATA")
        return await self._decided(job, message, mail_reply, rcpt_replies, data_reply)

    async def _decided(self, job: Job, message: bytes, mail_reply: Reply, rcpt_replies: list[Reply],
                       data_reply: Reply | None) -> bool:
        """What the replies decide: the message goes out once DATA is accepted; True when it did."""
        if mail_reply.code != 250:
            job.result.callback(decided_all(job.recipients, mail_reply))
            await self._close_empty_data(data_reply)
            return False
        accepted = [r for r, reply in zip(job.recipients, rcpt_replies, strict=True) if reply.positive]
        if not accepted:
            await self._close_empty_data(data_reply)
            job.result.callback(decided_each(job.recipients, rcpt_replies, None))
            return False
        if data_reply is None or data_reply.code != 354:
            job.result.callback(decided_each(job.recipients, rcpt_replies, data_reply))
            return False
        payload = data_payload(message)
        self._write(payload)
        final = await self._reply(self._expect("the end of data", self.data_timeout))
        job.result.callback(decided_each(job.recipients, rcpt_replies, final))
        return True

    async def _may_send(self, job: Job) -> bool:
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


def _cancelling(result, timer):
    if timer.active():
        timer.cancel()
    return result

