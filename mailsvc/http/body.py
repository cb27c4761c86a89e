"""
Reading request bodies the way the official SDKs send them (docs/contract/main-api.md,
"Request bodies"), every key and
string of them through the one check of stored text (``mailsvc.domain.text``), with the
multi-line paths of the request's route (its ``RequestContext``, set by the router).
"""

from __future__ import annotations

import json
import re

from mailsvc.domain.text import check_texts
from mailsvc.http.context import context_of
from mailsvc.http.errors import BODY_TOO_LARGE, validation

_BODYLESS = (b"GET", b"DELETE", b"HEAD", b"OPTIONS")
#: Deep enough for any body of the API; deeper ones only cost recursion to whoever reads them.
MAX_JSON_DEPTH = 64
#: What in a body's bytes may stand for a control character other than TAB, CR and LF, or a
#: lone surrogate: its escape (``\u0000``-``\u001f``, ``\u007f``-``\u009f``, ``\ud800``-``\udfff``,
#: ``\b``, ``\f``), DEL, or a C1 control in UTF-8 (raw C0 controls are not JSON).
_MAY_HOLD_CONTROLS = re.compile(rb"\\u00[0189][0-9a-fA-F]|\\u007[fF]|\\u[dD][89a-fA-F]|\\[bf]|\x7f|\xc2[\x80-\x9f]")
#: An escaped line break: refused in a single-line field.
_MAY_HOLD_BREAKS = re.compile(rb"\\[nr]")


def _not_json(constant: str):
    raise ValueError(f"{constant} is not JSON")


def _check_depth(value) -> None:
    """Refuse a value nested deeper than MAX_JSON_DEPTH (walking its containers only)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise validation(f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels", field="body")
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


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
    # Neither walk is needed by most bodies: too few brackets to nest deeply, nothing to refuse.
    if isinstance(value, (dict, list)) and raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH:
        _check_depth(value)
    if _MAY_HOLD_CONTROLS.search(raw) is not None:
        check_texts(value, context_of(request).multi_line)
    elif _MAY_HOLD_BREAKS.search(raw) is not None:
        check_texts(value, context_of(request).multi_line, breaks_only=True)
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
