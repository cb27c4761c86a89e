"""
Log observers for twistd's ``--logger``: one JSON object per line (journald, collectors), and a
worker's (the parent's observer, without Twisted's start-up chatter).

Every event logged while a request is handled carries that request's ``request_id`` and, once
its credentials are checked, its ``tenant``: the router sets them in ``REQUEST`` (a context
variable; Twisted runs each coroutine, and so each request's handler, in a context of its own),
and the observer copies them into the event.
"""

from __future__ import annotations

import contextvars
import sys

from twisted.logger import (
    FilteringLogObserver,
    ILogFilterPredicate,
    LogLevel,
    PredicateResult,
    jsonFileLogObserver,
    textFileLogObserver,
)
from twisted.python.reflect import namedAny
from zope.interface import provider

#: {"request_id": ..., "tenant": ...} of the request being handled, where there is one.
REQUEST: contextvars.ContextVar[dict | None] = contextvars.ContextVar("mailsvc_request", default=None)


def with_request(observer):
    """``observer`` with the request id and tenant of the current context added to each event."""

    def observe(event: dict) -> None:
        current = REQUEST.get()
        if current:
            event = {**event, **{k: v for k, v in current.items() if v is not None and k not in event}}
        observer(event)

    return observe


def json_observer():
    """``twistd --logger=mailsvc.logs.json_observer``: JSON lines on standard output."""
    return with_request(jsonFileLogObserver(sys.stdout, recordSeparator=""))


#: The parent's ``--logger`` (a dotted name), handed to its workers (``twistd mailsvc
#: --parent-logger``) before their observer is made; empty: twistd's text on standard output.
PARENT_LOGGER = {"name": ""}


@provider(ILogFilterPredicate)
def _says_the_parents_part(event: dict) -> PredicateResult:
    """Twisted's own info lines (twistd starting up, factories starting, the resolver reading
    resolv.conf, shutting down) are the parent's to say, once for the node."""
    ours = event.get("log_namespace", "").startswith("mailsvc")
    if ours or event.get("log_level", LogLevel.info) >= LogLevel.warn:
        return PredicateResult.maybe
    return PredicateResult.no


def worker_observer():
    """A worker's ``--logger``: its parent's observer, with only mailsvc's events and warnings."""
    name = PARENT_LOGGER["name"]
    inner = namedAny(name)() if name else textFileLogObserver(sys.stdout)
    return FilteringLogObserver(inner, [_says_the_parents_part])
