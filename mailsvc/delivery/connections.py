"""
Outbound SMTP connections, kept per destination and reused: a transaction takes an idle
connection to its destination or opens one, at most ``per_destination`` at once; a
connection left idle longer than ``idle_seconds`` is closed with QUIT.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
from twisted.internet import defer
from twisted.logger import Logger

from mailsvc.smtp.outbound import OutboundSMTP, TransactionResult

log = Logger()


@attrs.frozen
class Destination:
    host: str
    port: int
    tls_policy: str
    #: The configured smarthost (relay mode) rather than a recipient's MX.
    relay: bool = False


class ConnectFailed(Exception):
    """No SMTP session could be opened to the destination (try another host)."""


@attrs.define
class _Slot:
    destination: Destination
    limit: defer.DeferredSemaphore
    idle: list = attrs.Factory(list)  # [(protocol, idle timer)]


class Connections:
    def __init__(
        self,
        clock,
        connect: Callable[[Destination], Awaitable[OutboundSMTP]],
        per_destination: int,
        idle_seconds: float = 5,
    ):
        self._clock = clock
        self._connect = connect
        self._per_destination = per_destination
        self._idle_seconds = idle_seconds
        self._slots: dict[Destination, _Slot] = {}
        self._open: set[OutboundSMTP] = set()

    @property
    def open_count(self) -> int:
        return len(self._open)

    async def send(self, destination: Destination, sender: str, recipients: list[str],
                   message: bytes) -> TransactionResult:
        """
        One transaction to ``destination``. Raises ConnectFailed when no session could be
        opened, or the protocol's ConnectionFault when the session failed under it.
        """
        slot = self._slots.get(destination)
        if slot is None:
            slot = self._slots[destination] = _Slot(destination, defer.DeferredSemaphore(self._per_destination))
        await slot.limit.acquire()
        try:
            protocol = self._take_idle(slot)
            if protocol is None:
                try:
                    protocol = await self._connect(destination)
                except Exception as e:
                    raise ConnectFailed(_describe(e)) from None
                self._open.add(protocol)
                protocol.when_closed().addCallback(lambda _, p=protocol: self._open.discard(p))
            result = await protocol.send(sender, recipients, message)
            if protocol.is_open:
                timer = self._clock.callLater(self._idle_seconds, self._expire, slot, protocol)
                slot.idle.append((protocol, timer))
            return result
        finally:
            slot.limit.release()
            self._forget_if_unused(slot)

    def _take_idle(self, slot: _Slot) -> OutboundSMTP | None:
        while slot.idle:
            protocol, timer = slot.idle.pop()
            if timer.active():
                timer.cancel()
            if protocol.is_open:
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
