"""
Waiting for something observable instead of sleeping a fixed time: ``until`` blocks its thread
(subprocess and browser tests), ``async_until`` lets the reactor run between looks (tests under
pytest-twisted). Both have a limit and fail naming what was awaited.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

from twisted.internet import reactor, task


def _told(what: str | Callable[[], str]) -> str:
    return what() if callable(what) else what


def until(condition: Callable[[], Any], timeout: float, what: str | Callable[[], str], *,
          interval: float = 0.1, pause: Callable[[float], Any] = time.sleep) -> Any:
    """``condition()``'s first true value, looked at every ``interval`` s; AssertionError
    naming ``what`` (a text, or a function giving one: a log's tail) after ``timeout`` s.
    ``pause`` waits between looks (a Playwright page's ``wait_for_timeout`` lets its events in)."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout} s: {_told(what)}")
        pause(interval)


async def async_until(condition: Callable[[], Any], timeout: float, what: str | Callable[[], str], *,
                      interval: float = 0.05) -> Any:
    """As ``until``, the reactor running meanwhile; ``condition`` (and ``what``, when a function)
    may return an awaitable (a coroutine, a Deferred) whose result is looked at."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if inspect.isawaitable(found):
            found = await found
        if found:
            return found
        if time.monotonic() >= deadline:
            told = _told(what)
            if inspect.isawaitable(told):
                told = await told
            raise AssertionError(f"not within {timeout} s: {told}")
        await task.deferLater(reactor, interval, lambda: None)
