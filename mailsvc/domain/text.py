"""
The one check of what a stored text may hold, for every string a request brings.

NUL (PostgreSQL text cannot hold it) and lone surrogates (UTF-8 cannot encode them) are refused
in every text, as are the other control characters (C0, DEL, C1), but for what a text of
lines keeps: TAB, CR and LF in a multi-line field (an HTML or text body), TAB alone in a
single line (a name, an address, a subject, a header value: a line break there would start a
line of its own), where the line and paragraph separators U+2028 and U+2029 are refused too
(like NEL, U+0085, a C1 control: a reader splitting lines as ``str.splitlines`` does breaks
there). ``check_texts`` applies it to each key and string of a request's body, all of them
single lines but at the paths its route names multi-line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from mailsvc.domain.errors import Invalid

#: Refused in a multi-line text: all controls but TAB, CR and LF, and lone surrogates.
_MULTI_LINE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
#: Refused in a single line: CR and LF too, and the Unicode line and paragraph separators.
_SINGLE_LINE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
#: What a reader may take for a line break, named as such in the refusal.
_BREAKS = "\x85\u2028\u2029"


def holds_control(text: str, line: bool = False) -> bool:
    """Whether ``refuse_control`` would refuse ``text``: for a field that words its own refusal."""
    return (_SINGLE_LINE if line else _MULTI_LINE).search(text) is not None


def refuse_control(field: str, text: str, line: bool = False) -> None:
    """Refuse in ``text`` what no text may hold, and in a single ``line`` CR and LF too."""
    found = (_SINGLE_LINE if line else _MULTI_LINE).search(text)
    if found is None:
        return
    if "\ud800" <= found.group() <= "\udfff":
        raise Invalid(field, f"{field} must not contain a lone surrogate")
    if found.group() in _BREAKS:
        raise Invalid(field, f"{field} must not contain line breaks (U+{ord(found.group()):04X})")
    raise Invalid(field, f"{field} must not contain control characters")


def checked_string(field: str, value: Any, max_chars: int | None = None, *, line: bool = False) -> str:
    """``value`` if it is a string of at most ``max_chars`` that ``refuse_control`` lets pass,
    else Invalid naming ``field``."""
    if not isinstance(value, str):
        raise Invalid(field, f"{field} must be a string")
    if max_chars is not None and len(value) > max_chars:
        raise Invalid(field, f"{field} must be at most {max_chars} characters")
    refuse_control(field, value, line=line)
    return value


class MultiLine:
    """
    The paths of a body whose strings are texts of lines: ``html``, ``attachments[].content``
    (``[]`` any item), ``template.variables.*`` (``*`` any key), ``document.**`` (anything
    below).
    """

    def __init__(self, patterns: Iterable[str] = ()):
        self.patterns = tuple(patterns)
        self._match = None
        if self.patterns:
            alternatives = (re.escape(p).replace(r"\*\*", ".*").replace(r"\*", r"[^.\[]*") for p in self.patterns)
            self._match = re.compile("|".join(f"(?:{a})" for a in alternatives)).fullmatch

    def __contains__(self, shape: str) -> bool:
        return self._match is not None and self._match(shape) is not None


def check_texts(value: Any, multi_line: MultiLine = MultiLine(), breaks_only: bool = False) -> None:
    """
    ``refuse_control`` on every key and string of a parsed JSON ``value``, naming where
    (``contacts[2].first_name``): a single line unless its path is in ``multi_line``.
    ``breaks_only``: the value is known to hold no control character but TAB, CR and LF, so
    that multi-line strings (an attachment's megabytes) need no look.
    """
    stack: list[tuple[Any, str, str]] = [(value, "", "")]
    while stack:
        node, path, shape = stack.pop()
        if isinstance(node, str):
            line = shape not in multi_line
            if line or not breaks_only:
                refuse_control(path or "body", node, line=line)
        elif isinstance(node, dict):
            for key, child in node.items():
                refuse_control(path or "body", key, line=True)
                child_path = f"{path}.{key}" if path else key
                stack.append((child, child_path, f"{shape}.{key}" if shape else key))
        elif isinstance(node, list):
            for index, child in enumerate(node):
                stack.append((child, f"{path}[{index}]", f"{shape}[]"))
