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
from collections.abc import Callable, Iterator

import attrs

OPEN = "{{{"
CLOSE = "}}}"
#: A key: letters, digits, underscores, and one dotted part (``contact.first_name``).
KEY = re.compile(r"[A-Za-z0-9_]{1,50}(?:\.[A-Za-z0-9_]{1,50})?\Z")
#: Longest text between the braces read as a placeholder (a key, ``|``, a fallback).
MAX_BODY = 2200

#: What a placeholder is filled with, given its key and its own fallback (None: it has none);
#: None leaves the placeholder as written.
ValueOf = Callable[[str, "str | None"], "str | None"]


def _placeholders(text: str) -> Iterator[tuple[int, int, str, str | None]]:
    """
    The scan: ``(start, end, key, fallback)`` of each placeholder of ``text`` in order,
    ``text[start:end]`` being the placeholder as written. What can never be one (a key of
    another shape, a body longer than MAX_BODY) is not yielded: it stays part of the text.
    """
    done = 0
    n = len(text)
    while done < n:
        start = text.find(OPEN, done)
        if start < 0:
            return
        end = text.find(CLOSE, start + 3)
        if end < 0:
            return
        start = text.rfind(OPEN, start, end)  # the innermost opening before this close
        done = end + 3
        if end - start - 3 > MAX_BODY:
            continue
        key, bar, fallback = text[start + 3:end].partition("|")
        key = key.strip()
        if KEY.match(key):
            yield start, done, key, (fallback if bar else None)


def fill(text: str, value_of: ValueOf, escape: Callable[[str], str] | None = None) -> str:
    """``text`` with each placeholder replaced by ``value_of(key, fallback)`` (``escape``d)."""
    if OPEN not in text:
        return text
    out: list[str] = []
    done = 0  # text[:done] is in out
    for start, end, key, fallback in _placeholders(text):
        value = value_of(key, fallback)
        if value is not None:
            out.append(text[done:start])
            out.append(escape(value) if escape is not None else value)
            done = end
    out.append(text[done:])
    return "".join(out)


@attrs.frozen
class Scanned:
    """
    A text cut at its placeholders once (``scan``), to be filled many times (``fill_scanned``,
    the same result as ``fill`` on the text): ``keys`` are the distinct (key, fallback) pairs
    in the order of their first use, ``pieces`` (the text before, the index of its pair in
    ``keys``, the placeholder as written), ``tail`` the text after the last.
    """

    keys: tuple[tuple[str, str | None], ...]
    pieces: tuple[tuple[str, int, str], ...]
    tail: str


def scan(text: str) -> Scanned:
    """``text`` cut at its placeholders (the scan of ``fill``, linear in its length)."""
    keys: dict[tuple[str, str | None], int] = {}
    pieces = []
    done = 0
    for start, end, key, fallback in _placeholders(text) if OPEN in text else ():
        index = keys.setdefault((key, fallback), len(keys))
        pieces.append((text[done:start], index, text[start:end]))
        done = end
    return Scanned(tuple(keys), tuple(pieces), text[done:])


def fill_scanned(scanned: Scanned, value_of: ValueOf, escape: Callable[[str], str] | None = None) -> str:
    """
    ``fill`` of the text ``scanned`` was made from, for a ``value_of`` that always gives the
    same for the same (key, fallback): it is asked once per pair, in the order of first use
    (so the first refusal it raises is the one ``fill`` would raise).
    """
    if not scanned.pieces:
        return scanned.tail
    values = []
    for key, fallback in scanned.keys:
        value = value_of(key, fallback)
        values.append(escape(value) if value is not None and escape is not None else value)
    out: list[str] = []
    for before, index, written in scanned.pieces:
        value = values[index]
        out.append(before)
        out.append(written if value is None else value)
    out.append(scanned.tail)
    return "".join(out)


def keys_in(text: str) -> list[tuple[str, str | None]]:
    """Every (key, fallback) placeholder of ``text``, in order (the scan of ``fill``)."""
    found: list[tuple[str, str | None]] = []

    def record(key: str, fallback: str | None) -> None:
        found.append((key, fallback))

    fill(text, lambda key, fallback: record(key, fallback))
    return found
