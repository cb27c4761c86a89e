"""
Builder documents (docs/contract/dashboard.md, "Builder document"): ``{version: 1, preview_text, theme, blocks[]}``
checked into attrs values. Every refusal is an ``Invalid`` whose message starts with the path
of the offending field (``blocks[3].style.font_size``, prefixed with where the document sits in
the request: ``builder.``, ``document.``). Unknown fields are refused (a typo would otherwise
vanish silently); every block field is accepted on every block type and checked there,
and each type's required fields are checked. Sizes: at most 200 blocks in all, columns nested
at most 3 deep (a top-level block is at depth 1), 5 MiB of JSON. Pure: no I/O.

Rendering is ``mailsvc.domain.emailhtml``'s.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import attrs

from mailsvc.domain import themes
from mailsvc.domain.errors import Invalid
from mailsvc.domain.themes import boolean, choice, color, integer, string, url

BLOCK_TYPES = ("heading", "text", "button", "image", "divider", "spacer", "columns", "list", "quote", "code",
               "social", "footer")
BLOCK_FIELDS = ("type", "id", "style", "level", "text", "runs", "label", "href", "full_width", "src", "alt", "width",
                "height", "thickness", "columns", "ordered", "items", "links", "unsubscribe", "unsubscribe_label",
                "unsubscribe_url")
STYLE_FIELDS = ("align", "color", "background", "font_size", "padding")
PADDING_SIDES = ("top", "right", "bottom", "left")
RUN_FIELDS = ("text", "bold", "italic", "href")
DOCUMENT_FIELDS = ("version", "preview_text", "theme", "blocks")

MAX_BLOCKS = 200
MAX_DEPTH = 3
MAX_BYTES = 5 * 1024 * 1024
MAX_COLUMNS = 4
MAX_TEXT = 20_000
MAX_LABEL = 200
MAX_RUNS = 500
MAX_ITEMS = 200
MAX_PREVIEW = 500
FONT_SIZE = (10, 64)
PADDING = (0, 200)
IMAGE_WIDTH = (1, 800)
IMAGE_HEIGHT = (1, 4000)
THICKNESS = (1, 20)
SPACER_HEIGHT = (1, 400)
#: The per-recipient unsubscribe link a footer uses unless given one (filled by the broadcast
#: stream; an API send passes it as a variable), named as the official SDKs name it.
UNSUBSCRIBE_PLACEHOLDER = "{{{RESEND_UNSUBSCRIBE_URL}}}"
LINK_SCHEMES = ("https", "http", "mailto")


@attrs.frozen
class Padding:
    top: int
    right: int
    bottom: int
    left: int


@attrs.frozen
class Style:
    align: str | None = None
    color: str | None = None
    background: str | None = None
    font_size: int | None = None
    padding: Padding | None = None


@attrs.frozen
class Run:
    text: str
    bold: bool = False
    italic: bool = False
    href: str | None = None


@attrs.frozen
class Column:
    blocks: tuple[Block, ...]


@attrs.frozen
class Block:
    type: str
    id: str | None = None
    style: Style = Style()
    level: int = 1
    text: str = ""
    runs: tuple[Run, ...] | None = None
    label: str = ""
    href: str = ""
    full_width: bool = False
    src: str = ""
    alt: str = ""
    width: int | None = None
    height: int | None = None
    thickness: int = 1
    columns: tuple[Column, ...] = ()
    ordered: bool = False
    items: tuple[tuple[Run, ...], ...] = ()
    links: tuple[themes.Social, ...] = ()
    unsubscribe: bool = False
    unsubscribe_label: str = "Unsubscribe"
    unsubscribe_url: str = UNSUBSCRIBE_PLACEHOLDER

    def content(self) -> tuple[Run, ...]:
        """The block's text as runs: its ``runs``, else its ``text`` as one plain run."""
        if self.runs is not None:
            return self.runs
        return (Run(self.text),) if self.text else ()


@attrs.frozen
class Document:
    version: int
    preview_text: str
    theme: dict[str, Any]  # the fields given (themes.theme_fields), over the account's theme
    blocks: tuple[Block, ...]


class _Count:
    def __init__(self) -> None:
        self.blocks = 0


def _object(path: str, value: Any, known: tuple[str, ...]) -> dict:
    if not isinstance(value, dict):
        raise Invalid(path, f"{path} must be an object")
    for key in value:
        if key not in known:
            raise Invalid(path, f"{path}.{key} is not a field (known: {', '.join(known)})")
    return value


def _array(path: str, value: Any, most: int, what: str) -> list:
    if not isinstance(value, list):
        raise Invalid(path, f"{path} must be an array of {what}")
    if len(value) > most:
        raise Invalid(path, f"{path}: at most {most} {what}")
    return value


def _style(path: str, value: Any) -> Style:
    given = _object(path, value, STYLE_FIELDS)
    fields: dict[str, Any] = {}
    for name, item in given.items():
        where = f"{path}.{name}"
        if item is None:
            continue
        if name == "align":
            fields[name] = choice(where, item, themes.ALIGNS)
        elif name in ("color", "background"):
            fields[name] = color(where, item)
        elif name == "font_size":
            fields[name] = integer(where, item, *FONT_SIZE)
        elif name == "padding":
            sides = _object(where, item, PADDING_SIDES)
            fields[name] = Padding(*(integer(f"{where}.{side}", sides.get(side, 0), *PADDING)
                                     for side in PADDING_SIDES))
    return Style(**fields)


def _href(path: str, value: Any) -> str:
    return url(path, value, schemes=LINK_SCHEMES)


def _runs(path: str, value: Any) -> tuple[Run, ...]:
    runs = []
    for i, item in enumerate(_array(path, value, MAX_RUNS, "runs")):
        where = f"{path}[{i}]"
        run = _object(where, item, RUN_FIELDS)
        if "text" not in run:
            raise Invalid(where, f"{where}.text is required")
        runs.append(Run(
            text=string(f"{where}.text", run["text"], MAX_TEXT, line=False),
            bold=boolean(f"{where}.bold", run.get("bold", False)),
            italic=boolean(f"{where}.italic", run.get("italic", False)),
            href=None if run.get("href") is None else _href(f"{where}.href", run["href"]),
        ))
    return tuple(runs)


def _block(path: str, value: Any, depth: int, count: _Count) -> Block:
    count.blocks += 1
    if count.blocks > MAX_BLOCKS:
        raise Invalid(path, f"{path}: a document holds at most {MAX_BLOCKS} blocks")
    if not isinstance(value, dict):
        raise Invalid(path, f"{path} must be a block object with a `type`")
    kind = value.get("type")
    if kind not in BLOCK_TYPES or not isinstance(kind, str):
        raise Invalid(f"{path}.type", f"{path}.type must be one of: {', '.join(BLOCK_TYPES)}")
    _object(path, value, BLOCK_FIELDS)
    fields: dict[str, Any] = {"type": kind}
    for name, item in value.items():
        where = f"{path}.{name}"
        if name == "type" or item is None:
            continue
        if name == "id":
            try:
                fields[name] = str(uuid.UUID(string(where, item, 36)))
            except ValueError:
                raise Invalid(where, f"{where} must be a UUID") from None
        elif name == "style":
            fields[name] = _style(where, item)
        elif name == "level":
            fields[name] = integer(where, item, 1, 3)
        elif name == "text":
            fields[name] = string(where, item, MAX_TEXT, line=False)
        elif name == "runs":
            fields[name] = _runs(where, item)
        elif name in ("label", "unsubscribe_label"):
            fields[name] = string(where, item, MAX_LABEL)
        elif name == "alt":
            fields[name] = string(where, item, themes.MAX_LINE)
        elif name == "href":
            fields[name] = _href(where, item)
        elif name == "unsubscribe_url":
            fields[name] = url(where, item)
        elif name == "src":
            fields[name] = url(where, item)
        elif name in ("full_width", "ordered", "unsubscribe"):
            fields[name] = boolean(where, item)
        elif name == "width":
            fields[name] = integer(where, item, *IMAGE_WIDTH)
        elif name == "height":
            fields[name] = integer(where, item, *(SPACER_HEIGHT if kind == "spacer" else IMAGE_HEIGHT))
        elif name == "thickness":
            fields[name] = integer(where, item, *THICKNESS)
        elif name == "items":
            fields[name] = tuple(_runs(f"{where}[{i}]", runs)
                                 for i, runs in enumerate(_array(where, item, MAX_ITEMS, "items")))
        elif name == "links":
            fields[name] = themes.socials_of(item, where)
        elif name == "columns":
            columns = _array(where, item, MAX_COLUMNS, "columns")
            if depth >= MAX_DEPTH:
                raise Invalid(where, f"{where}: columns nest at most {MAX_DEPTH} deep")
            result = []
            for j, column in enumerate(columns):
                at = f"{where}[{j}]"
                given = _object(at, column, ("blocks",))
                if "blocks" not in given:
                    raise Invalid(at, f"{at}.blocks is required")
                blocks = _array(f"{at}.blocks", given["blocks"], MAX_BLOCKS, "blocks")
                result.append(Column(tuple(_block(f"{at}.blocks[{k}]", b, depth + 1, count)
                                           for k, b in enumerate(blocks))))
            fields[name] = tuple(result)
    _required(path, kind, fields)
    return Block(**fields)


def _required(path: str, kind: str, fields: dict[str, Any]) -> None:
    needs = {"button": ("label", "href"), "image": ("src",), "columns": ("columns",), "list": ("items",),
             "social": ("links",)}.get(kind, ())
    for name in needs:
        if not fields.get(name):
            raise Invalid(f"{path}.{name}", f"{path}.{name} is required for a {kind} block")
    if kind in ("heading", "text", "quote", "code") and not (fields.get("text") or fields.get("runs")):
        raise Invalid(f"{path}.text", f"{path}.text (or runs) is required for a {kind} block")


def document_of(value: Any, prefix: str = "") -> Document:
    """``value`` checked as a builder document; ``prefix`` (``builder.``) starts every path."""
    top = prefix.rstrip(".") or "document"
    if not isinstance(value, dict):
        raise Invalid(top, f"{top} must be a builder document {{version: 1, blocks: [...]}}")
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    except (TypeError, ValueError):
        raise Invalid(top, f"{top} must be JSON") from None
    if size > MAX_BYTES:
        raise Invalid(top, f"{top}: a document is at most 5 MiB of JSON")
    _object(top, value, DOCUMENT_FIELDS)
    if value.get("version") != 1 or isinstance(value.get("version"), bool):
        raise Invalid(f"{prefix}version", f"{prefix}version must be 1")
    preview = value.get("preview_text")
    preview = "" if preview is None else string(f"{prefix}preview_text", preview, MAX_PREVIEW)
    theme = themes.theme_fields(value["theme"], f"{prefix}theme") if value.get("theme") is not None else {}
    blocks = _array(f"{prefix}blocks", value.get("blocks"), MAX_BLOCKS, "blocks")
    count = _Count()
    return Document(1, preview, theme, tuple(_block(f"{prefix}blocks[{i}]", b, 1, count)
                                             for i, b in enumerate(blocks)))
