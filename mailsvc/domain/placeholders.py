"""
The one placeholder scanner: ``{{{KEY}}}`` and ``{{{KEY|fallback}}}`` in a template's html,
text and subject (and, for broadcasts, ``{{{contact.first_name|there}}}`` and the unsubscribe
placeholders). Pure: what a key is worth is asked of the caller.

Linear in the length of the text, whatever it holds: each character is looked at a bounded
number of times. The scan finds the next ``{{{``, then the first ``}}}`` after it; the
placeholder is the LAST ``{{{`` before that ``}}}`` (so ``{{{ {{{A}}}`` fills ``A``), found by
searching back over a stretch the scan then leaves behind. A ``{{{`` with no ``}}}`` after it
ends the scan: nothing later can close it. A body longer than MAX_BODY, a key of another
shape, or a key the caller does not know is left exactly as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable

OPEN = "{{{"
CLOSE = "}}}"
#: A key: letters, digits, underscores, and one dotted part (``contact.first_name``).
KEY = re.compile(r"[A-Za-z0-9_]{1,50}(?:\.[A-Za-z0-9_]{1,50})?\Z")
#: Longest text between the braces read as a placeholder (a key, ``|``, a fallback).
MAX_BODY = 2200

#: What a placeholder is filled with, given its key and its own fallback (None: it has none);
#: None leaves the placeholder as written.
ValueOf = Callable[[str, "str | None"], "str | None"]


def fill(text: str, value_of: ValueOf, escape: Callable[[str], str] | None = None) -> str:
    """``text`` with each placeholder replaced by ``value_of(key, fallback)`` (``escape``d)."""
    if OPEN not in text:
        return text
    out: list[str] = []
    done = 0  # text[:done] is in out
    n = len(text)
    while done < n:
        start = text.find(OPEN, done)
        if start < 0:
            break
        end = text.find(CLOSE, start + 3)
        if end < 0:
            break
        start = text.rfind(OPEN, start, end)  # the innermost opening before this close
        body = text[start + 3:end] if end - start - 3 <= MAX_BODY else None
        value = _value(body, value_of) if body is not None else None
        if value is None:
            out.append(text[done:end + 3])
        else:
            out.append(text[done:start])
            out.append(escape(value) if escape is not None else value)
        done = end + 3
    out.append(text[done:])
    return "".join(out)


def _value(body: str, value_of: ValueOf) -> str | None:
    key, bar, fallback = body.partition("|")
    key = key.strip()
    if not KEY.match(key):
        return None
    return value_of(key, fallback if bar else None)


def keys_in(text: str) -> list[tuple[str, str | None]]:
    """Every (key, fallback) placeholder of ``text``, in order (the scan of ``fill``)."""
    found: list[tuple[str, str | None]] = []

    def record(key: str, fallback: str | None) -> None:
        found.append((key, fallback))

    fill(text, lambda key, fallback: record(key, fallback))
    return found
