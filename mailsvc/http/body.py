"""Reading request bodies the way the official SDKs send them (COMPAT.md §15)."""

from __future__ import annotations

import json

from mailsvc.http.errors import BODY_TOO_LARGE, validation

_BODYLESS = (b"GET", b"DELETE", b"HEAD", b"OPTIONS")


def read_json_value(request, empty=None):
    """Any JSON value in the body; ``empty`` when there is none (or the method has none)."""
    if request.body_too_large:
        raise BODY_TOO_LARGE
    if request.method in _BODYLESS:
        return empty
    request.content.seek(0)
    raw = request.content.read()
    if not raw.strip():
        return empty
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise validation("body: the request body is not valid JSON") from None


def read_json(request) -> dict:
    """
    The JSON object in the body. GET and DELETE bodies (the Python SDK sends ``{}``) are
    ignored; an empty body is an empty object (the Node SDK's POST without an entity);
    unknown keys are left for the handler to ignore.
    """
    value = read_json_value(request, empty={})
    if not isinstance(value, dict):
        raise validation("body: the request body must be a JSON object")
    return value
