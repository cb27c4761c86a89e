"""Two ways of waiting on a Deferred without changing it, shared by every part that needs them."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

log = Logger()


def when_done(d: defer.Deferred[Any]) -> defer.Deferred[None]:
    """A Deferred firing (with None) when ``d`` fires, leaving ``d``'s result alone."""
    waiter: defer.Deferred[None] = defer.Deferred()

    def tell(result: object) -> object:
        waiter.callback(None)
        return result

    d.addBoth(tell)
    return waiter


def shielded(d: defer.Deferred) -> defer.Deferred:
    """
    A Deferred following ``d`` whose cancellation (a timeout, a client gone) does not reach
    ``d``: work already under way, such as a write, still finishes. A failure of ``d`` after
    its follower was given up is logged, since nobody else will see it.
    """
    outer: defer.Deferred = defer.Deferred()

    def forward(result):
        if not outer.called:
            outer.callback(result)
        elif isinstance(result, Failure):
            log.failure("work failed after its caller gave up on it", result)

    d.addBoth(forward)
    return outer
