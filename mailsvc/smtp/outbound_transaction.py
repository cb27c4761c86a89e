"""
One outbound transaction as it waits in the connection's queue and how it ends, and what it
writes (docs/decisions.md, "Outbound SMTP client"): MAIL FROM, with ``SIZE=`` and
``BODY=8BITMIME`` when the server offers them, RCPT TO, and the message, its line ends made
CRLF and dot-stuffed whole before any byte of it is written.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

import attrs
from twisted.internet import defer

from mailsvc.smtp.replies import RecipientResult, Reply, SessionDeferral, TransactionResult

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
_ADDRESS_FORBIDDEN = re.compile(r"[\x00-\x20<>\x7f]")


@attrs.define
class Job:
    """A transaction queued on the connection (or its QUIT): ``result`` fires once it ends."""

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


def checked_address(address: str) -> bytes:
    """The address as it goes between angle brackets; ValueError when SMTP cannot carry it."""
    if _ADDRESS_FORBIDDEN.search(address):
        raise ValueError(f"address {address!r} contains a character not allowed in SMTP")
    return address.encode("utf-8")


def over_size(normalised: bytes, extensions: dict[str, str]) -> Reply | None:
    """The local refusal of a message over the server's SIZE (it is never sent); None when it fits."""
    limit = extensions.get("SIZE", "")
    if limit.isdigit() and 0 < int(limit) < len(normalised):
        return Reply(552, "5.3.4", f"message size {len(normalised)} exceeds size limit {limit} of server")
    return None


def mail_from(sender: str, normalised: bytes, extensions: dict[str, str]) -> bytes:
    mail = b"MAIL FROM:<" + checked_address(sender) + b">"
    if "SIZE" in extensions:
        mail += b" SIZE=%d" % len(normalised)
    if "8BITMIME" in extensions and not normalised.isascii():
        mail += b" BODY=8BITMIME"
    return mail


def rcpt_to(recipient: str) -> bytes:
    return b"RCPT TO:<" + checked_address(recipient) + b">"
