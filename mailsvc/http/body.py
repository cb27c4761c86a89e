"""Reading request bodies the way the official SDKs send them (COMPAT.md §15)."""

from __future__ import annotations

import json
import re

from mailsvc.http.errors import BODY_TOO_LARGE, validation

_BODYLESS = (b"GET", b"DELETE", b"HEAD", b"OPTIONS")
#: Deep enough for any body of the API; deeper ones only cost recursion to whoever reads them.
MAX_JSON_DEPTH = 64
#: An escaped UTF-16 surrogate: the only way a lone one gets into a parsed body (raw UTF-8
#: cannot hold one); a lone one cannot be stored or encoded.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _not_json(constant: str):
    raise ValueError(f"{constant} is not JSON")


def _path(parent: str, step: str | int) -> str:
    if isinstance(step, int):
        return f"{parent}[{step}]"
    return f"{parent}.{step}" if parent else step


def _check_value(value, check_depth: bool, check_strings: bool) -> None:
    """
    Refuse a value nested deeper than MAX_JSON_DEPTH, or holding a lone surrogate in a key or a
    string (naming where). Walks containers only, and strings only when ``check_strings``.
    """
    stack = [(value, "", 1)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, str):
            if not node.isascii():
                try:
                    node.encode("utf-8")
                except UnicodeEncodeError:
                    raise validation(f"{path or 'body'}: the text holds a lone surrogate",
                                     field=path or "body") from None
            continue
        if not isinstance(node, (dict, list)):
            continue
        if check_depth and depth > MAX_JSON_DEPTH:
            raise validation(f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels", field="body")
        steps = node.items() if isinstance(node, dict) else enumerate(node)
        for step, child in steps:
            if check_strings and isinstance(step, str):
                stack.append((step, path, depth))
            if isinstance(child, (dict, list)) or (check_strings and isinstance(child, str)):
                stack.append((child, _path(path, step), depth + 1))


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
        value = json.loads(raw, parse_constant=_not_json)
    except RecursionError:
        raise validation(f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels", field="body") from None
    except (ValueError, UnicodeDecodeError):
        raise validation("body: the request body is not valid JSON") from None
    # Neither walk is needed by most bodies: too few brackets to nest deeply, no escaped surrogate.
    check_depth = raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH
    check_strings = _SURROGATE_ESCAPE.search(raw) is not None
    if check_depth or check_strings:
        _check_value(value, check_depth, check_strings)
    return value


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
