"""The check of a request's credentials, begun as soon as its headers are in."""

from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.internet import defer
from twisted.python.failure import Failure

from mailsvc.app.apikeys import Caller
from mailsvc.http.context import Operator

if TYPE_CHECKING:
    from mailsvc.http.access.base import Access


class Admission:
    """
    The check of a request's credentials for a route's ``access``, begun when its headers came
    in. The connection waits on it before taking the body (and answers at once if it fails);
    the handler takes its caller from it. Its failure is kept here, never left unhandled.
    """

    def __init__(self, access: Access, check: defer.Deferred):
        self.access = access
        self.decided = False
        self._outcome: Caller | Operator | None | Failure = None
        self._waiting: list[defer.Deferred] = []
        check.addBoth(self._decide)

    def _decide(self, outcome) -> None:
        self.decided, self._outcome = True, outcome
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            d.callback(None)

    @property
    def refused(self) -> bool:
        return self.decided and isinstance(self._outcome, Failure)

    def when_decided(self) -> defer.Deferred:
        if self.decided:
            return defer.succeed(None)
        d: defer.Deferred = defer.Deferred()
        self._waiting.append(d)
        return d

    async def caller(self) -> Caller | Operator | None:
        """The caller, or the check's own error raised."""
        await self.when_decided()
        if isinstance(self._outcome, Failure):
            self._outcome.raiseException()
        return self._outcome
