"""
The node's root service. twistd starts services without waiting for them, so the node runs
its own start as one awaited sequence (store → migrations → loops → listeners): each part
registers how to stop it, and a stop undoes the parts in reverse order.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from twisted.application import service
from twisted.internet import defer
from twisted.logger import Logger

from mailsvc.deferreds import when_done

log = Logger()

Stopper = Callable[[], object]


class Node(service.Service):
    name = "mailsvc"

    def __init__(
        self,
        start: Callable[[Node], Coroutine[Any, Any, None]],
        on_failure: Callable[[str], None],
        expected_failures: tuple[type[BaseException], ...] = (OSError, ValueError),
    ):
        self._start = start
        self._on_failure = on_failure
        #: Start failures that explain themselves in one line; anything else also logs its traceback.
        self.expected_failures = expected_failures
        self._stoppers: list[tuple[str, Stopper]] = []
        self._starting: defer.Deferred | None = None
        self.parts: dict[str, object] = {}
        self.ready: defer.Deferred[Node] = defer.Deferred()

    def on_stop(self, desc: str, stopper: Stopper) -> None:
        """Register how to undo a part that just started (undone in reverse order)."""
        self._stoppers.append((desc, stopper))

    def startService(self):  # noqa: N802 (Twisted's name)
        super().startService()
        self._starting = defer.ensureDeferred(self._start(self))
        self._starting.addCallbacks(self._started, self._failed)

    def _started(self, _):
        self.ready.callback(self)

    def _failed(self, failure):
        lines = str(failure.value).strip().splitlines()
        reason = lines[0] if lines else failure.type.__name__
        if not failure.check(*self.expected_failures):
            log.failure("start failed", failure)
        self.ready.errback(failure)
        self.ready.addErrback(lambda _: None)
        self._on_failure(reason)

    def stopService(self):  # noqa: N802
        super().stopService()
        return defer.ensureDeferred(self._stop())

    async def _stop(self) -> None:
        if self._starting is not None and not self._starting.called:
            # Let a start under way reach a step boundary before undoing it.
            await when_done(self._starting)
        while self._stoppers:
            desc, stopper = self._stoppers.pop()
            try:
                await defer.maybeDeferred(stopper)
            except Exception:
                log.failure("stopping {desc} failed", desc=desc)
