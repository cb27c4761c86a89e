"""
Outbound SMTP connections, kept per destination and reused: a transaction takes an idle
connection to its destination or opens one, at most ``per_destination`` at once; a
connection left idle longer than ``idle_seconds`` is closed with QUIT. A transaction's
deadline covers all of it: the wait for a connection, connecting, and the session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import attrs
from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from mailsvc.crypto.peers import Tlsa
from mailsvc.delivery.shaping import TooLateForSlot
from mailsvc.delivery.turns import Turns
from mailsvc.smtp.outbound import OutboundSMTP
from mailsvc.smtp.replies import TransactionResult

log = Logger()


@attrs.frozen
class Authentication:
    """How a destination's certificate is checked; part of the pooled connection's key."""

    kind: str  # "dane" | "sts"
    enforce: bool
    host: str
    domain: str  # the recipient (policy) domain
    tlsa: tuple[Tlsa, ...] = ()
    policy_text: str = ""

    @property
    def report_type(self) -> str:
        return "tlsa" if self.kind == "dane" else "sts"


@attrs.frozen
class Destination:
    host: str
    port: int
    tls_policy: str
    #: The configured smarthost (relay mode) rather than a recipient's MX.
    relay: bool = False
    #: How the MX host's certificate is authenticated (``Authentication``:
    #: DANE or MTA-STS); None: not at all.
    auth: Authentication | None = None


class ConnectFailed(Exception):
    """No SMTP session could be opened to the destination (try another host)."""


class TooLate(Exception):
    """The deadline came before a session to the destination was had: nothing was sent."""


@attrs.define
class _Slot:
    destination: Destination
    limit: Turns
    idle: list = attrs.Factory(list)  # [(protocol, idle timer)]


class Connections:
    def __init__(
        self,
        clock,
        connect: Callable[[Destination], Coroutine[Any, Any, OutboundSMTP]],
        per_destination: int,
        idle_seconds: float = 5,
        shaper=None,
    ):
        self._clock = clock
        #: Adaptive shaping (``delivery.shaping.Shaper``): a slot of the MX host's destination
        #: (concurrency and rate shared by every host of one provider) before anything else.
        self._shaper = shaper
        self._connect = connect
        self._per_destination = per_destination
        self._idle_seconds = idle_seconds
        self._slots: dict[Destination, _Slot] = {}
        self._open: set[OutboundSMTP] = set()

    @property
    def open_count(self) -> int:
        return len(self._open)

    async def send(self, destination: Destination, sender: str, recipients: list[str], message: bytes,
                   deadline: float, may_send: Callable[[], Awaitable[None]] | None = None,
                   ahead: bool = False) -> TransactionResult:
        """
        One transaction to ``destination``, over by ``deadline`` (clock time). Raises
        ConnectFailed when no session could be opened, TooLate when the deadline came before
        one was had (a free connection, or a new one), the protocol's ConnectionFault when the
        session failed under it (DeadlinePassed when the deadline came first), or what
        ``may_send`` raised (the protocol awaits it right before DATA). A transaction ``ahead``
        (transactional mail) waits for a connection or a shaped slot ahead of those that are not.
        """
        if self._clock.seconds() >= deadline:
            raise TooLate()
        if self._shaper is None or destination.relay:
            return await self._send(destination, sender, recipients, message, deadline, may_send, ahead)
        try:
            await self._shaper.acquire(destination.host, deadline, ahead)
        except TooLateForSlot:
            raise TooLate() from None
        try:
            return await self._send(destination, sender, recipients, message, deadline, may_send, ahead)
        finally:
            self._shaper.release(destination.host)

    async def _send(self, destination: Destination, sender: str, recipients: list[str], message: bytes,
                    deadline: float, may_send, ahead: bool) -> TransactionResult:
        slot = self._slots.get(destination)
        if slot is None:
            slot = self._slots[destination] = _Slot(destination, Turns(self._per_destination))
        try:
            await self._by(deadline, slot.limit.acquire(ahead))
        except TooLate:
            self._forget_if_unused(slot)
            raise
        protocol = None
        try:
            protocol = self._take_idle(slot)
            if protocol is None:
                try:
                    protocol = await self._by(deadline, defer.ensureDeferred(self._connect(destination)))
                except TooLate:
                    raise
                except Exception as e:
                    raise ConnectFailed(_describe(e)) from None
                self._open.add(protocol)
                protocol.when_closed().addCallback(lambda _, p=protocol: self._open.discard(p))
            return await protocol.send(sender, recipients, message, deadline, may_send)
        finally:
            if protocol is not None and protocol.usable:
                timer = self._clock.callLater(self._idle_seconds, self._expire, slot, protocol)
                slot.idle.append((protocol, timer))
            slot.limit.release()
            self._forget_if_unused(slot)

    async def _by(self, deadline: float, waiting: defer.Deferred):
        """
        ``waiting``'s result, or TooLate (and ``waiting`` cancelled) at ``deadline``, whatever
        the cancelled work ended with (a cancelled connection attempt fails with its own
        error, not CancelledError).
        """

        def too_late(result, timeout):
            return Failure(TooLate())

        waiting.addTimeout(max(0.0, deadline - self._clock.seconds()), self._clock, onTimeoutCancel=too_late)
        return await waiting

    def _take_idle(self, slot: _Slot) -> OutboundSMTP | None:
        while slot.idle:
            protocol, timer = slot.idle.pop()
            if timer.active():
                timer.cancel()
            if protocol.usable:
                return protocol
        return None

    def _expire(self, slot: _Slot, protocol: OutboundSMTP) -> None:
        slot.idle[:] = [(p, t) for p, t in slot.idle if p is not protocol]
        protocol.quit()
        self._forget_if_unused(slot)

    def _forget_if_unused(self, slot: _Slot) -> None:
        """Nothing idle, in use or waiting: the destination is forgotten (destinations are many)."""
        if not slot.idle and slot.limit.tokens == self._per_destination and not slot.limit.waiting:
            if self._slots.get(slot.destination) is slot:
                del self._slots[slot.destination]

    async def close(self) -> None:
        """QUIT every idle connection and wait until every connection is closed."""
        for slot in self._slots.values():
            while slot.idle:
                protocol, timer = slot.idle.pop()
                if timer.active():
                    timer.cancel()
                protocol.quit()
        waiting = [p.when_closed() for p in self._open]
        if waiting:
            await defer.DeferredList(waiting)


def _describe(e: Exception) -> str:
    message = getattr(e, "message", None) or str(e) or type(e).__name__
    return message.strip().splitlines()[0] if message.strip() else type(e).__name__
