"""
The shape the leased engines share (delivery, webhook dispatch, broadcast fan-out): a ``Loop``
whose step leases due rows in PostgreSQL (a token and an expiry of the engine's own, so any
number of instances, on one node or many, take disjoint rows) and starts their work; a NOTIFY
on the engine's channel wakes it; work still running between steps is tracked until it lands;
a stop claims no more, waits a while for that work and hands what is left to the engine to give
back. Each engine's own claims, renewals and outcomes sit on top, with their SQL in ``store/``.
An engine is a service of the node's tree (``mailsvc.service``), started after the LISTEN
that wakes it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from twisted.application import service
from twisted.internet import defer

from mailsvc.deferreds import when_done
from mailsvc.loop import Loop


class LeasedEngine(service.Service):
    #: What the node log and the loop-failure metric call it.
    desc: str
    #: The node role that runs it (``node.roles``); each process given the role runs its own.
    role: str
    #: The NOTIFY channel that wakes it.
    channel: str
    #: Seconds a NOTIFY waits for the others close to it, so that they make one step.
    notify_gather: float = 0
    #: Seconds the step that work landing asks for waits for the other work landing close to it.
    landed_gather: float = 0
    #: Whether ``start`` steps at once (work may have waited while no node ran) or after the interval.
    step_at_start: bool = True

    def __init__(self, clock, loop_desc: str, interval: float, on_failure: Callable[[str], None] | None = None):
        self._clock = clock
        self.name = self.desc
        self._loop = Loop(clock, loop_desc, interval, self.step, on_failure)
        #: Work started by a step and not landed yet: its Deferred and what it holds (leased rows).
        self._in_flight: dict[Hashable, tuple[defer.Deferred, Any]] = {}
        self._stopping = False
        self._wake_timer = None

    async def step(self) -> object:
        raise NotImplementedError

    def start(self) -> None:
        self.running = 1
        self._stopping = False
        self._loop.start()
        if self.step_at_start:
            self._loop.wake()

    async def stop(self) -> None:
        raise NotImplementedError

    def startService(self):  # noqa: N802 (Twisted's name)
        self.start()

    def stopService(self):  # noqa: N802
        return defer.ensureDeferred(self.stop())

    def wake(self, *_: object) -> None:
        """A step now (after the one under way): work landed, or more is due."""
        self._loop.wake()

    def notified(self, *_: object) -> None:
        """A NOTIFY on ``channel``: a step soon, shared with the NOTIFYs close to it."""
        self._loop.wake(self.notify_gather)

    # Work in flight between steps

    def _track(self, key: Hashable, d: defer.Deferred, held: Any = None, wake: bool = False) -> None:
        """Keep ``d`` as in flight until it fires (then, if ``wake``, step again)."""
        self._in_flight[key] = (d, held)
        d.addBoth(self._landed, key, wake)

    def _landed(self, _, key: Hashable, wake: bool) -> None:
        """The work is over (it logs its own failures)."""
        del self._in_flight[key]
        if wake:
            self._loop.wake(self.landed_gather)

    def _held(self) -> list:
        return [held for _, held in self._in_flight.values()]

    async def _all_landed(self) -> None:
        """Wait for every piece of work started so far, including any it led to."""
        while self._in_flight:
            await defer.DeferredList([when_done(d) for d, _ in self._in_flight.values()])

    # The next due time

    def _wake_at(self, at: float | None) -> None:
        """Step at ``at`` (seconds; at once if past) instead of any time planned before; None:
        none planned. Nothing is planned while stopping."""
        if self._wake_timer is not None and self._wake_timer.active():
            self._wake_timer.cancel()
        self._wake_timer = None
        if at is not None and not self._stopping:
            self._wake_timer = self._clock.callLater(max(0, at - self._clock.seconds()), self.wake)

    def _wake_planned(self) -> float | None:
        """When the planned step comes, or None."""
        if self._wake_timer is not None and self._wake_timer.active():
            return self._wake_timer.getTime()
        return None

    # Stopping

    async def _stop_claiming(self) -> None:
        """No more steps or claims: the loop stopped (after its step under way), no step planned."""
        self.running = 0
        self._stopping = True
        await self._loop.stop()
        self._wake_at(None)

    async def _drain(self, seconds: float, cancel: bool) -> list:
        """
        Wait up to ``seconds`` for the work in flight. When the time is up, either cancel it and
        wait for it to end (``cancel``: each gives itself back), or stop waiting and return what
        the work still running holds, for the engine to give back.
        """
        if not self._in_flight:
            return []
        # Cancelling the wait fails each of its waiters, not the work: nothing to report.
        waiting = defer.DeferredList([when_done(d) for d, _ in self._in_flight.values()], consumeErrors=True)
        if cancel:
            timer = self._clock.callLater(seconds, self._cancel_in_flight)
        else:
            timer = self._clock.callLater(seconds, waiting.cancel)
        try:
            await waiting
        except defer.CancelledError:
            pass
        if timer.active():
            timer.cancel()
        return self._held()

    def _cancel_in_flight(self) -> None:
        for d, _ in list(self._in_flight.values()):
            d.cancel()
