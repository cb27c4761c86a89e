"""
Group commit: at most ``concurrent`` statements of one kind run at once, and the requests that
arrive meanwhile are written together by the next one, so that under load the commits, the
NOTIFYs and the parsing are shared by many requests.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import attrs
import psycopg2
from twisted.internet import defer
from twisted.python.failure import Failure

from mailsvc.domain.errors import DomainError

Request = TypeVar("Request")
Outcome = TypeVar("Outcome")


def refused(error: Exception) -> bool:
    """
    Whether a statement surely did not commit: PostgreSQL refused it (an error with a SQLSTATE,
    but for the connection and operator-intervention classes, where the server may end the
    session around a commit), or a refusal read from one (a domain error).
    """
    if isinstance(error, DomainError):
        return True
    code = getattr(error, "pgcode", None) if isinstance(error, psycopg2.Error) else None
    return code is not None and not code.startswith(("08", "57"))


def unsent(error: Exception) -> bool:
    """
    Whether a statement never reached the server: psycopg2 refused a value while composing it
    (a ValueError: a NUL in a text, a lone surrogate), or a value did not fit (a TypeError).
    Errors of the connection, of a deadline, of the server are none of these.
    """
    return isinstance(error, (ValueError, TypeError))


@attrs.frozen
class _Waiting(Generic[Request]):
    request: Request
    size: int
    done: defer.Deferred


class GroupCommit(Generic[Request, Outcome]):
    """
    ``write(requests)`` writes requests in one statement and returns their outcomes in order.
    A group whose statement was refused, or never sent for a value one of its requests holds,
    is written again one request at a time, so each gets its own outcome and the others are
    written; a group whose connection was lost is not (it may have committed, and writing again
    could store it twice): each of its requests gets the error.
    """

    def __init__(self, write: Callable[[list[Request]], Awaitable[list[Outcome]]], concurrent: int,
                 max_requests: int, max_bytes: int):
        self._write = write
        self._concurrent = concurrent
        self._max_requests = max_requests
        self._max_bytes = max_bytes
        self._queue: deque[_Waiting] = deque()
        self._writing = 0

    @property
    def waiting(self) -> int:
        """Requests queued behind the statements that run."""
        return len(self._queue)

    async def add(self, request: Request, size: int) -> Outcome:
        """Write ``request`` (of ``size`` bytes) with the others that wait; its outcome."""
        waiting = _Waiting(request, size, defer.Deferred())
        self._queue.append(waiting)
        if self._writing < self._concurrent:
            self._write_next()
        return await waiting.done

    def _write_next(self) -> None:
        group: list[_Waiting] = []
        size = 0
        while (self._queue and len(group) < self._max_requests
               and (not group or size + self._queue[0].size <= self._max_bytes)):
            size += self._queue[0].size
            group.append(self._queue.popleft())
        self._writing += 1
        defer.ensureDeferred(self._write_group(group)).addBoth(self._written)

    def _written(self, _) -> None:
        self._writing -= 1
        if self._queue:
            self._write_next()

    async def _write_group(self, group: list[_Waiting]) -> None:
        try:
            outcomes = await self._write([one.request for one in group])
        except Exception as e:
            if len(group) == 1 or not (refused(e) or unsent(e)):
                failure = Failure()
                for one in group:
                    one.done.errback(failure)
                return
            for one in group:
                try:
                    (outcome,) = await self._write([one.request])
                except Exception:
                    one.done.errback()
                else:
                    one.done.callback(outcome)
            return
        for one, outcome in zip(group, outcomes, strict=True):
            one.done.callback(outcome)
