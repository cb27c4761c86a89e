"""
How much MIME structure a message may hold (docs/operations.md, "Security", "Limits on a
message's structure"): its parts, how deep they nest, its header fields and header bytes, of
every part together. ``exceeded`` finds the first limit a message passes in one linear scan of
its bytes, with no parse by the ``email`` package (whose parser recurses, and whose reads of a
message of 20,000 parts took 20 s): what is over a limit is refused at submission and shown as
its source in the development inbox, never parsed.

The scan follows the ``email`` package's reading closely enough to count what it would build:
a header section ends at an empty line or at the first line that is neither a field nor a
continuation; a ``multipart/*`` entity with a boundary holds the parts between its boundary
lines (an enclosing part's boundary ends every part inside it); a ``message/*`` entity holds
one message (a ``multipart/digest``'s parts are ``message/rfc822`` by default). Nesting is
kept in a list, not by recursion, so a message nested 1,200 levels deep is refused like one
nested 51.
"""

from __future__ import annotations

import re

import attrs


@attrs.frozen
class MimeLimits:
    """The limits, each with the setting that sets it (``mail.<setting>``)."""

    parts: int = 500
    depth: int = 50
    header_fields: int = 1000
    header_bytes: int = 1024 * 1024

    @classmethod
    def of(cls, mail_config) -> MimeLimits:
        return cls(mail_config.max_mime_parts, mail_config.max_mime_depth, mail_config.max_header_fields,
                   mail_config.max_header_bytes)


@attrs.frozen
class Exceeded:
    """The limit a message passes: its setting's name, its value, and a sentence that says so."""

    setting: str
    limit: int
    message: str


#: One header field with its continuation lines (the ``email`` package's header line: a name of
#: printable ASCII but the colon, then the colon; a Unix ``From `` line; or white space first).
_FIELD = re.compile(rb"(?:[\x21-\x39\x3b-\x7e]*:|From |[ \t])[^\r\n]*(?:\r\n|\r|\n|\Z)"
                    rb"(?:[ \t][^\r\n]*(?:\r\n|\r|\n|\Z))*")
_BARE_CR = re.compile(rb"\r(?!\n)")
_NAME = re.compile(rb"([\x21-\x39\x3b-\x7e]*):")
_BOUNDARY = re.compile(rb"""(?:^|;)\s*boundary\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]+))""", re.I)


def _exceeded(setting: str, limit: int, what: str) -> Exceeded:
    return Exceeded(setting, limit, f"the message has {what} (mail.{setting} is {limit})")


def exceeded(raw: bytes, limits: MimeLimits) -> Exceeded | None:
    """The first limit ``raw`` passes, or None: linear in its size, no recursion."""
    data = raw
    end = len(data)
    bare_cr = _BARE_CR.search(data) is not None
    # Each open container: the boundary of a multipart (its parts end at it), None for a
    # message/* entity (whose one message ends with the part that holds it).
    stack: list[bytes | None] = []
    digest: list[bool] = []  # for each container: a multipart/digest, whose parts default to message/rfc822
    parts = fields = header_bytes = 0
    searches: dict[tuple, tuple] = {}  # the boundary lines of each set of open containers, and their search
    pos = 0
    # Read one entity at a time: its header section at ``pos``, then what its type says.
    while True:
        parts += 1
        if parts > limits.parts:
            return _exceeded("max_mime_parts", limits.parts, f"more than {limits.parts} MIME parts")
        if len(stack) + 1 > limits.depth:
            return _exceeded("max_mime_depth", limits.depth, f"MIME parts nested more than {limits.depth} deep")
        content_type = None
        while pos < end:
            if data[pos] in b"\r\n":  # the empty line that ends the header section
                step = 2 if data.startswith(b"\r\n", pos) else 1
                pos += step
                header_bytes += step
                break
            field = _FIELD.match(data, pos)
            if field is None:
                break  # a line that is no field: the body starts here
            fields += 1
            header_bytes += field.end() - pos
            if fields > limits.header_fields:
                return _exceeded("max_header_fields", limits.header_fields,
                                 f"more than {limits.header_fields} header fields")
            if header_bytes > limits.header_bytes:
                break
            if content_type is None:
                name = _NAME.match(data, pos)
                if name is not None and name.group(1).lower() == b"content-type":
                    content_type = data[name.end():field.end()]
            pos = field.end()
        if header_bytes > limits.header_bytes:
            return _exceeded("max_header_bytes", limits.header_bytes,
                             f"more than {limits.header_bytes} bytes of header sections")
        if content_type is not None:
            value = content_type.replace(b"\r", b"").replace(b"\n", b"")  # unfolded
            kind = value.split(b";", 1)[0].strip().lower()
        else:
            value, kind = b"", b"message/rfc822" if digest and digest[-1] and stack[-1] is not None else b"text/plain"
        if kind.startswith(b"multipart/"):
            found = _BOUNDARY.search(value)
            if found is not None:
                boundary = found.group(1) if found.group(1) is not None else found.group(2)
                stack.append(re.sub(rb"\\(.)", rb"\1", boundary).rstrip())
                digest.append(kind == b"multipart/digest")
                # The preamble: read on to the first boundary line below.
        elif kind.startswith(b"message/") and kind != b"message/delivery-status":
            stack.append(None)
            digest.append(False)
            continue  # the message it holds starts right here
        # A body: read on to the next boundary line of an open multipart.
        while True:
            open_boundaries = tuple(stack)
            if open_boundaries not in searches:
                boundaries = {b: i for i, b in enumerate(stack) if b is not None}
                # A boundary line: after a line end (LF, or CR in a message that ends lines with
                # CR alone, searched for only then: a literal LF is found many times faster).
                searches[open_boundaries] = boundaries, boundaries and re.compile(
                    (rb"[\r\n]" if bare_cr else rb"\n") + rb"--(" + b"|".join(map(re.escape, boundaries))
                    + rb")(--)?[ \t]*(?=[\r\n]|\Z)")
            boundaries, line = searches[open_boundaries]
            if not boundaries or pos >= end:
                return None
            found = line.search(data, pos - 1)  # pos > 0 here, just after a line end
            if found is None:
                return None
            index = boundaries[found.group(1)]
            del stack[index + 1:], digest[index + 1:]
            pos = found.end() + (2 if data.startswith(b"\r\n", found.end()) else 1)
            if found.group(2) is None:
                break  # a part starts after the boundary line
            stack.pop()  # the closing boundary: the epilogue, then on to an enclosing boundary
            digest.pop()
