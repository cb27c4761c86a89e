"""
What an SMTP server answers the outbound client (``smtp/outbound.py``) and what the answers
decide: a reply, a recipient's outcome (2xx delivered, 4xx deferred, 5xx bounced), the session
ending early (``SessionDeferral``) and the faults that leave a transaction's outcome unknown.
Also what the session's steps (``smtp/outbound_tls.py``, ``smtp/outbound_auth.py``) see of the
client.
"""

from __future__ import annotations

import re
from typing import Protocol

import attrs

#: One reply (e.g. a multi-line EHLO answer) holds at most this many lines and bytes of text;
#: real servers send tens of lines, a hostile one could send them forever.
MAX_REPLY_LINES = 100
MAX_REPLY_BYTES = 64 * 1024

_REPLY_LINE = re.compile(rb"^(\d{3})([ -]?)(.*)$")
_ENHANCED = re.compile(r"^([245]\.\d{1,3}\.\d{1,3})(?:\s+|$)")


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


class ReplyLines:
    """The lines of the reply being read, up to its last."""

    def __init__(self) -> None:
        self._texts: list[str] = []
        self._bytes = 0

    def add(self, line: bytes) -> tuple[int, list[str]] | None:
        """
        The reply's code and texts once ``line`` is its last (None before); SMTPProtocolError
        for a line that is no reply's, or a reply past MAX_REPLY_LINES or MAX_REPLY_BYTES.
        """
        match = _REPLY_LINE.match(line.rstrip(b"\r"))
        if match is None or (match.group(2) == b"" and match.group(3)):
            raise SMTPProtocolError(f"not an SMTP reply: {line[:80]!r}")
        text = match.group(3).decode("utf-8", "replace")
        self._texts.append(text)
        self._bytes += len(text)
        if len(self._texts) > MAX_REPLY_LINES or self._bytes > MAX_REPLY_BYTES:
            raise SMTPProtocolError(f"reply longer than {MAX_REPLY_LINES} lines or {MAX_REPLY_BYTES} bytes")
        if match.group(2) == b"-":
            return None
        texts, self._texts, self._bytes = self._texts, [], 0
        return int(match.group(1)), texts

    def clear(self) -> None:
        self._texts, self._bytes = [], 0


def outcome_of(reply: Reply) -> str:
    if reply.code < 400:
        return "delivered"
    return "deferred" if reply.code < 500 else "bounced"


def to_reply(code: int, texts: list[str]) -> Reply:
    enhanced = ""
    first = _ENHANCED.match(texts[0]) if texts else None
    if first and first.group(1)[0] == str(code)[0]:
        enhanced = first.group(1)
        texts = [_ENHANCED.sub("", t, count=1) if t.startswith(enhanced) else t for t in texts]
    return Reply(code, enhanced, " ".join(t for t in texts if t))


def parse_extensions(lines: list[str]) -> dict[str, str]:
    """EHLO reply lines after the first → {KEYWORD: parameters}."""
    extensions = {}
    for line in lines[1:]:
        keyword, _, params = line.strip().partition(" ")
        if keyword:
            extensions[keyword.upper()] = params.strip()
    return extensions


def decided_all(recipients, reply: Reply) -> TransactionResult:
    return TransactionResult(tuple(RecipientResult(r, outcome_of(reply), reply, _class(reply))
                                   for r in recipients))


def decided_each(recipients, rcpt_replies, data_reply: Reply | None) -> TransactionResult:
    """A refused RCPT decides its recipient; the DATA outcome applies to every accepted one."""
    results = []
    for recipient, reply in zip(recipients, rcpt_replies, strict=True):
        decisive = data_reply if reply.positive and data_reply is not None else reply
        results.append(RecipientResult(recipient, outcome_of(decisive), decisive, _class(decisive)))
    return TransactionResult(tuple(results))


def _class(reply: Reply) -> str | None:
    return "transient" if 400 <= reply.code < 500 else None


class Session(Protocol):
    """The client as its session's steps see it: its commands, and what it knows of the server."""

    #: the EHLO reply's extensions (``parse_extensions``), {} after HELO.
    extensions: dict[str, str]
    encrypted: bool

    async def ask(self, line: bytes, command: str) -> Reply:
        """Sends ``line`` and awaits its reply (``command`` names it in a timeout)."""

    def quit_now(self) -> None:
        """QUIT without awaiting its reply, and close: the session ends here."""
