"""
What one HTTP request carries beside its bytes, in one typed value on the request: its id, the
route it matched and that route's surface and multi-line body paths, the check of its
credentials begun when its headers came in (``Admission``), and the caller that check found.
"""

from __future__ import annotations

import attrs
from twisted.internet import defer
from twisted.python.failure import Failure

from mailsvc.app.apikeys import Caller
from mailsvc.domain.tenant import Tenant
from mailsvc.domain.text import MultiLine
from mailsvc.http.errors import MAIN

#: A route's body with no multi-line path: every string of it is one line.
SINGLE_LINES = MultiLine()


@attrs.frozen
class Operator:
    """
    The caller of an operator route: the operator token's name, or ``operator:<email>`` for a
    console session (what the audit log says); ``email``: the console's operator.
    """

    name: str
    email: str | None = None


class Admission:
    """
    The check of a request's credentials for a route's ``access``, begun when its headers came
    in. The connection waits on it before taking the body (and answers at once if it fails);
    the handler takes its caller from it. Its failure is kept here, never left unhandled.
    """

    def __init__(self, access: object, check: defer.Deferred):
        #: The route's access strategy, which the router compares by identity only.
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


@attrs.define
class RequestContext:
    """Filled in as the request goes: the transport sets the id, the router the rest."""

    request_id: str = ""
    #: The path of the route matched, as mounted (``/api-keys/<key_id>``): the metrics' label.
    route: str = "unmatched"
    surface: str = MAIN
    #: The paths of the body whose strings may hold lines (``mailsvc.http.body``).
    multi_line: MultiLine = SINGLE_LINES
    #: The check of the credentials, begun when the headers came in (None: the route needs
    #: none, or there is no route).
    admission: Admission | None = None
    caller: Caller | Operator | None = None

    @property
    def tenant(self) -> Tenant | None:
        """The caller's account, for an API key or a dashboard session (else None)."""
        return self.caller.tenant if isinstance(self.caller, Caller) else None


def context_of(request) -> RequestContext:
    """The request's context (made on first use for a request the site did not make)."""
    context = getattr(request, "context", None)
    if context is None:
        context = request.context = RequestContext()
    return context
