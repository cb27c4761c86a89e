"""
A spam score before sending: the rendered message goes to SpamAssassin's ``spamd`` (Debian's
``spamd`` package with its packaged rules, never ``sa-update``; network tests off with
``spamd --local``) over the SPAMC/1.5 protocol (``REPORT``), and the score, the threshold and
the rules that hit come back. Only previews and ``POST /emails/check`` score: the plain send
path never does.
"""

from __future__ import annotations

import email.policy
import re
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid

import attrs
from twisted.internet import defer, endpoints, protocol
from twisted.internet.interfaces import ITCPTransport

from mailsvc.dns.resolver import parse_server

MAX_MESSAGE_BYTES = 2 * 1024 * 1024
MAX_REPLY_BYTES = 256 * 1024
_SPAM_LINE = re.compile(rb"^Spam:\s*(True|False|Yes|No)\s*;\s*(-?[\d.]+)\s*/\s*(-?[\d.]+)",
                        re.IGNORECASE | re.MULTILINE)
_RULE_LINE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s+([A-Z0-9_]+)\s+(.*)$")


class SpamCheckFailed(Exception):
    """spamd could not be asked, or answered something else than a report."""


@attrs.frozen
class SpamRule:
    name: str
    score: float
    description: str


@attrs.frozen
class SpamScore:
    score: float
    threshold: float
    is_spam: bool
    rules: tuple[SpamRule, ...]

    def as_dict(self) -> dict:
        return {"object": "spam_score", "score": self.score, "threshold": self.threshold, "is_spam": self.is_spam,
                "rules": [{"name": r.name, "score": r.score, "description": r.description} for r in self.rules]}


def parse_report(reply: bytes) -> SpamScore:
    head, _, body = reply.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0]
    if not head.startswith(b"SPAMD/") or b" 0 EX_OK" not in status:
        raise SpamCheckFailed(f"spamd answered {status[:80]!r}")
    found = _SPAM_LINE.search(head)
    if found is None:
        raise SpamCheckFailed("spamd's answer has no Spam: line")
    rules, in_table = [], False
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith("----"):
            in_table = True
            continue
        if not in_table:
            continue
        match = _RULE_LINE.match(line)
        if match:
            rules.append(SpamRule(match.group(2), float(match.group(1)), match.group(3).strip()))
        elif line.startswith(" " * 20) and rules:  # a description continued on the next line
            last = rules[-1]
            rules[-1] = attrs.evolve(last, description=f"{last.description} {line.strip()}")
    return SpamScore(float(found.group(2)), float(found.group(3)), found.group(1).lower() in (b"true", b"yes"),
                     tuple(rules))


def scoring_message(sender: str, to: list[str], subject: str, html: str | None, text: str | None,
                    hostname: str) -> bytes:
    """The message as it would leave (headers a send has; no DKIM: it is added at delivery)."""
    message = EmailMessage(policy=email.policy.SMTP)
    message["From"] = sender
    message["To"] = ", ".join(to) if to else f"preview@{hostname}"
    message["Subject"] = subject or ""
    message["Date"] = format_datetime(datetime.now(UTC))
    message["Message-ID"] = make_msgid(domain=hostname)
    message["MIME-Version"] = "1.0"
    if text:
        message.set_content(text)
    if html:
        if text:
            message.add_alternative(html, subtype="html")
        else:
            message.set_content(html, subtype="html")
    if not text and not html:
        message.set_content("")
    return message.as_bytes()


class _Exchange(protocol.Protocol):
    #: Set by makeConnection before anything here runs.
    transport: ITCPTransport

    def __init__(self, request: bytes):
        self._request = request
        self._reply = bytearray()
        self.done: defer.Deferred[bytes] = defer.Deferred()

    def connectionMade(self):  # noqa: N802
        self.transport.write(self._request)
        self.transport.loseWriteConnection()

    def dataReceived(self, data: bytes):  # noqa: N802
        self._reply += data
        if len(self._reply) > MAX_REPLY_BYTES:
            self.transport.abortConnection()

    def connectionLost(self, reason=None):  # noqa: N802
        if not self.done.called:
            self.done.callback(bytes(self._reply))


class SpamAssassin:
    def __init__(self, reactor, address: str, timeout: float = 15):
        self._reactor = reactor
        self._host, self._port = parse_server(address)
        if self._port == 53:  # no port given: spamd's
            self._port = 783
        self._timeout = timeout

    async def score(self, message: bytes) -> SpamScore:
        if len(message) > MAX_MESSAGE_BYTES:
            raise SpamCheckFailed(f"the message is over {MAX_MESSAGE_BYTES} bytes")
        request = b"REPORT SPAMC/1.5\r\nContent-length: %d\r\n\r\n" % len(message) + message
        exchange = _Exchange(request)
        endpoint = endpoints.TCP4ClientEndpoint(self._reactor, self._host, self._port, timeout=self._timeout)

        async def run() -> bytes:
            await endpoints.connectProtocol(endpoint, exchange)
            return await exchange.done

        work = defer.ensureDeferred(run())
        work.addTimeout(self._timeout, self._reactor)
        try:
            reply = await work
        except Exception as e:
            if exchange.transport is not None:
                exchange.transport.abortConnection()
            raise SpamCheckFailed(f"spamd at {self._host}:{self._port} could not be asked: {type(e).__name__}") \
                from None
        return parse_report(reply)
