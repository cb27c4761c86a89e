"""The one runner of background work: a step every interval, woken early on demand, whose
failures are logged and counted but never stop it. A loop is a service of the node's tree
(``mailsvc.service``), named by its ``desc``."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from twisted.application import service
from twisted.internet import defer
from twisted.logger import Logger

from mailsvc.deferreds import when_done

log = Logger()


class Loop(service.Service):
    def __init__(
        self,
        clock,
        desc: str,
        interval: float,
        step: Callable[[], Coroutine[Any, Any, object]],
        on_failure: Callable[[str], None] | None = None,
    ):
        self._clock = clock
        self.desc = desc
        self.name = desc
        self._interval = interval
        self._step = step
        self._on_failure = on_failure
        self._timer = None
        self._running: defer.Deferred | None = None
        #: Asked for during the run under way: the gathering time before the next (None: not asked).
        self._again: float | None = None
        self._stopped = True

    def start(self) -> None:
        self.running = 1
        self._stopped = False
        self._schedule(self._interval)

    def startService(self):  # noqa: N802 (Twisted's name)
        self.start()

    def stopService(self):  # noqa: N802
        return defer.ensureDeferred(self.stop())

    def wake(self, gather: float = 0) -> None:
        """
        Run the step within ``gather`` seconds (counted from the end of the run under way, if
        any), so that the wake-ups of a busy moment (a NOTIFY per request) make one step.
        """
        if self._stopped:
            return
        if self._running is not None:
            self._again = gather if self._again is None else min(self._again, gather)
            return
        if self._timer is not None and self._timer.active() and self._timer.getTime() <= self._clock.seconds() + gather:
            return
        self._schedule(gather)

    def _schedule(self, delay: float) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = self._clock.callLater(delay, self._run)

    def _run(self) -> None:
        self._timer = None
        self._running = defer.ensureDeferred(self._step())
        self._running.addErrback(self._failed)
        self._running.addBoth(self._finished)

    def _failed(self, failure) -> None:
        log.failure("background loop {desc} failed; it goes on", failure, desc=self.desc)
        if self._on_failure is not None:
            self._on_failure(self.desc)

    def _finished(self, _) -> None:
        self._running = None
        if self._stopped:
            return
        again, self._again = self._again, None
        self._schedule(self._interval if again is None else again)

    async def stop(self) -> None:
        """Stop scheduling and wait for a run under way."""
        self.running = 0
        self._stopped = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        await self.idle()

    async def idle(self) -> None:
        """Wait for the run under way, if any."""
        if self._running is not None:
            await when_done(self._running)
