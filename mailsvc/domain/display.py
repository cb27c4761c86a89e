"""
What a terminal or a page may show of a text it did not write: a remote MX's reply, a tenant's
name, a server's error. Each character that would act instead of being read is replaced by a
visible escape: the control characters (C0, TAB and line breaks included, since what is shown
is one field on one line; DEL; C1), which move the cursor, clear the screen or set the window's
title; the bidirectional embeddings, overrides and isolates and the zero-width characters,
which reorder or hide what is around them (Unicode Technical Report #36, "Bidirectional Text
Spoofing"); the line and paragraph separators; and lone surrogates, which no terminal encoding
can write. Everything else is left as it is, and the stored value is never changed: only what is
shown. mailsvc/web/display.js applies the same rule in the operator console.
"""

from __future__ import annotations

import re

#: Replaced by ``\\xNN`` (at most U+00FF) or ``\\uNNNN``.
NEUTRALISED = re.compile(
    "[\x00-\x1f\x7f-\x9f"          # C0 (TAB, CR, LF too), DEL, C1
    "\u061c"                       # ARABIC LETTER MARK
    "\u200b-\u200f"                # zero-width space, non-joiner, joiner; LRM, RLM
    "\u2028\u2029"                 # line and paragraph separators
    "\u202a-\u202e"                # LRE, RLE, PDF, LRO, RLO
    "\u2066-\u2069"                # LRI, RLI, FSI, PDI
    "\ufeff"                       # zero-width no-break space (BOM)
    "\ud800-\udfff]"               # lone surrogates
)


def _escape(match: re.Match) -> str:
    point = ord(match[0])
    return f"\\x{point:02x}" if point <= 0xFF else f"\\u{point:04x}"


def shown(value: object) -> str:
    """``value`` as text that can be shown on one line as it reads: every character above
    replaced by its escape (``\\x1b``, ``\\u202e``)."""
    return NEUTRALISED.sub(_escape, str(value))
