"""
Log observers for twistd's ``--logger``: one JSON object per line (journald, collectors).

Every event logged while a request is handled carries that request's ``request_id`` and, once
its credentials are checked, its ``tenant``: the router sets them in ``REQUEST`` (a context
variable; Twisted runs each coroutine, and so each request's handler, in a context of its own),
and the observer copies them into the event.
"""

from __future__ import annotations

import contextvars
import sys

from twisted.logger import jsonFileLogObserver

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
