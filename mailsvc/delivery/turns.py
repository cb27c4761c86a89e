"""
Whose turn is next where transactions wait for a destination (a connection of its own, a
shaped provider's slot): transactional mail goes ahead of the broadcast stream's waiting there,
each in the order it came. The claim takes an account's transactional mail first; without
this, what it claimed would still queue behind the broadcast a worker already holds
(docs/decisions.md, "A fair claim").
"""

from __future__ import annotations

from collections import deque

from twisted.internet import defer


class Waiters:
    """Deferreds waiting their turn, those ``ahead`` (transactional mail) first."""

    def __init__(self) -> None:
        self._ahead: deque[defer.Deferred] = deque()
        self._behind: deque[defer.Deferred] = deque()

    def append(self, waiting: defer.Deferred, ahead: bool) -> None:
        (self._ahead if ahead else self._behind).append(waiting)

    def remove(self, waiting: defer.Deferred) -> None:
        """``waiting`` gone from its place, if it still waits."""
        for queue in (self._ahead, self._behind):
            if waiting in queue:
                queue.remove(waiting)
                return

    def popleft(self) -> defer.Deferred:
        return self._ahead.popleft() if self._ahead else self._behind.popleft()

    def __contains__(self, waiting: object) -> bool:
        return waiting in self._ahead or waiting in self._behind

    def __len__(self) -> int:
        return len(self._ahead) + len(self._behind)


class Turns:
    """
    A semaphore of ``tokens`` (Twisted's ``DeferredSemaphore``'s contract) whose waiters take
    their turn from ``Waiters``. A waiting acquire that is cancelled (its deadline) leaves its place.
    """

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens
        self.waiting = Waiters()

    def acquire(self, ahead: bool = False) -> defer.Deferred[Turns]:
        if self.tokens > 0:
            self.tokens -= 1
            return defer.succeed(self)
        waiting: defer.Deferred[Turns] = defer.Deferred(canceller=self.waiting.remove)
        self.waiting.append(waiting, ahead)
        return waiting

    def release(self) -> None:
        self.tokens += 1
        if self.waiting and self.tokens > 0:
            self.tokens -= 1
            self.waiting.popleft().callback(self)
