"""
The plain-text alternative of an HTML e-mail: what a reader sees, as text. Paragraphs and
headings are separated by a blank line, ``<br>``, rows and blocks start lines, list items get
``*`` or their number (indented when nested), a link keeps its address as ``text (url)``,
``<pre>`` keeps its spacing, and nothing of ``<head>``'s title, scripts, styles, comments or
elements hidden with ``display:none`` (e-mail preheaders) is shown. Lines are not wrapped.

One regular-expression scan, no tree: e-mail HTML is often malformed, and a browser-grade
parser (inscriptis, used before) cost several times more than the rest of building the message.
"""

from __future__ import annotations

import re
from html import unescape

_TOKEN = re.compile(
    r"<!--.*?(?:-->|\Z)"  # a comment (an unclosed one runs to the end)
    r"|<[!?][^>]*>?"  # <!doctype ...>, <![CDATA[...]]>, <?xml ...?>
    # A tag; one that never ends (no ">", or a quote never closed) runs to the end of the text,
    # as in a browser, which is dropped: every "<" and letter is read once (linear time).
    r"|<(/?)([A-Za-z][A-Za-z0-9:-]*+)((?:[^>\"']++|\"[^\"]*+(?:\"|\Z)|'[^']*+(?:'|\Z))*+)(>|\Z)",
    re.S,
)
#: An attribute's value: double-quoted, single-quoted or bare.
_HREF, _ALT = (re.compile(rf"""(?:^|[\s"'/]){name}\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.I)
               for name in ("href", "alt"))
_HIDDEN = re.compile(r"""(?:^|[\s"'/])style\s*=\s*["'][^"']*display\s*:\s*none""", re.I)
#: Elements whose content is never shown, with the end tag that closes each.
_SKIPPED = {name: re.compile(rf"</{name}\s*>", re.I) for name in ("script", "style", "title", "template")}
#: Block elements: a line break before and after (1), or a blank line (2).
_BLOCKS = {
    **dict.fromkeys(("p", "h1", "h2", "h3", "h4", "h5", "h6", "table", "blockquote", "pre", "dl", "hr",
                     "figure", "fieldset", "form"), 2),
    **dict.fromkeys(("div", "tr", "li", "dt", "dd", "section", "article", "header", "footer", "nav", "aside",
                     "main", "address", "caption", "center", "figcaption", "tbody", "thead", "tfoot", "body",
                     "html", "ul", "ol", "details", "summary", "legend", "option"), 1),
}
_VOID = frozenset(("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
                   "track", "wbr"))
#: Characters that take no room: zero-width spaces and joiners, soft hyphens (preheader fillers).
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad\u034f"))
#: Nested lists are indented this many levels at most.
_MAX_INDENT = 8
_BLANK_LINES = re.compile(r"\n(?:[ \t]*\n)+")


def _attribute(pattern: re.Pattern, attributes: str) -> str | None:
    found = pattern.search(attributes)
    if found is None:
        return None
    return unescape(next(g for g in found.groups() if g is not None)).strip()


class _Text:
    """The output: words, owed spaces and owed line breaks, indentation of list items."""

    def __init__(self):
        self.out: list[str] = []
        self.breaks = 0  # line breaks owed before the next word (1: new line, 2: blank line)
        self.space = False  # a space owed before the next word on the same line
        self.fresh = True  # at the start of a line
        self.prefix = ""  # a list item's marker, written before its first word
        self.indent = ""

    def block(self, blank: int) -> None:
        if blank > self.breaks and self.out:
            self.breaks = blank
        self.space = False

    def line_break(self) -> None:
        self.out.append("\n")
        self.fresh, self.space, self.breaks = True, False, 0

    def words(self, text: str) -> None:
        if text[:1].isspace():
            self.space = True
        words = text.split()
        if not words:
            return
        self.write(" ".join(words))
        if text[-1:].isspace():
            self.space = True

    def write(self, text: str) -> None:
        if self.breaks:
            self.out.append("\n" * self.breaks)
            self.fresh = True
            self.breaks = 0
        if self.fresh:
            if self.indent or self.prefix:
                self.out.append(self.indent + self.prefix)
                self.prefix = ""
            self.fresh = False
        elif self.space:
            self.out.append(" ")
        self.space = False
        self.out.append(text)

    def preformatted(self, text: str) -> None:
        lines = text.split("\n")
        for n, line in enumerate(lines):
            if n:
                self.line_break()
            if line:
                self.write(line)


def _end_link(text: _Text, href: str | None, start: int) -> None:
    """After a link's text, its address (unless the text is the address)."""
    label = "".join(text.out[start:]).strip()
    if href and href != label and f"mailto:{label}" != href:
        owed = text.space  # a space at the end of the link's text comes after the address
        text.space = bool(label)
        text.write(f"({href})" if label else href)
        text.space = owed


def html_to_text(html: str) -> str:
    """``html`` as plain text (see the module's description), without trailing spaces on lines."""
    text = _Text()
    lists: list[list[int]] = []  # per open list: [next number] for <ol>, [] for <ul>
    links: list[tuple[str | None, int]] = []  # per open <a>: (its address, where its text starts)
    pre = 0
    hidden: tuple[str, int] | None = None  # (element, nesting) while inside a display:none element
    position = 0
    length = len(html)
    search = _TOKEN.search
    while position < length:
        found = search(html, position)
        if found is None:
            end = length
        else:
            end, after = found.span()
        if end > position and hidden is None:
            chunk = html[position:end]
            if "&" in chunk:
                chunk = unescape(chunk)
            if not chunk.isascii():
                chunk = chunk.translate(_INVISIBLE)
            if pre:
                text.preformatted(chunk.replace("\r\n", "\n"))
            else:
                text.words(chunk)
        if found is None:
            break
        position = after
        slash, name, attributes, closed = found.groups()
        if name is None or not closed:
            continue  # a comment, a declaration, a tag cut off by the end
        name = name.lower()
        closing = slash == "/"
        if hidden is not None:
            if name == hidden[0] and name not in _VOID:
                depth = hidden[1] + (-1 if closing else 1)
                hidden = None if depth == 0 else (name, depth)
            continue
        if closing:
            if name == "a":
                if links:
                    _end_link(text, *links.pop())
            elif name in ("ul", "ol"):
                if lists:
                    lists.pop()
                text.indent = "  " * min(max(len(lists) - 1, 0), _MAX_INDENT)
                text.block(2 if not lists else 1)
            elif name == "pre":
                pre = max(pre - 1, 0)
                text.block(2)
            elif name in ("td", "th"):
                text.space = True
            elif name in _BLOCKS:
                text.block(_BLOCKS[name])
            continue
        if name in _SKIPPED:
            if attributes.rstrip().endswith("/"):
                continue
            end_tag = _SKIPPED[name].search(html, position)
            position = end_tag.end() if end_tag is not None else length
            continue
        if (attributes and "none" in attributes.lower() and name not in _VOID and _HIDDEN.search(attributes)
                and not attributes.rstrip().endswith("/")):
            hidden = (name, 1)
            continue
        if name == "br":
            text.line_break()
        elif name == "a":
            if links:  # no link in a link: a new one ends the one open
                _end_link(text, *links.pop())
            href = _attribute(_HREF, attributes)
            if href is not None and (href.startswith(("#", "javascript:", "cid:")) or not href):
                href = None
            links.append((href, len(text.out)))
        elif name == "img":
            if links:
                alt = _attribute(_ALT, attributes)
                if alt:
                    text.words(f" {alt} ")
        elif name in ("ul", "ol"):
            text.block(1 if lists else 2)
            lists.append([1] if name == "ol" else [])
            text.indent = "  " * min(len(lists) - 1, _MAX_INDENT)
        elif name == "li":
            text.block(1)
            if lists and lists[-1]:
                text.prefix = f"{lists[-1][0]}. "
                lists[-1][0] += 1
            else:
                text.prefix = "* "
        elif name == "pre":
            text.block(2)
            pre += 1
        elif name in ("td", "th"):
            text.space = True
        elif name in _BLOCKS:
            text.block(_BLOCKS[name])
    lines = [line.rstrip() for line in "".join(text.out).split("\n")]
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip("\n")
