"""
Brand import's reading of a website's page (docs/contract/dashboard.md, "Brand import result"):
the page is parsed with a real HTML parser (html5lib, the WHATWG parsing algorithm browsers
use), and its ``<head>`` and header give the candidates: logos from every source the contract
names, colours (``theme-color``, buttons; the CSS is read by ``domain.brand``), fonts (Google
Fonts detected), social links and the postal address. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any
from urllib.parse import parse_qs, unquote, urljoin, urlsplit

import attrs
import html5lib

from mailsvc.domain import themes
from mailsvc.domain.brand import color_of, local_name
from mailsvc.domain.errors import BrandFailed

SOCIAL_HOSTS = {"x.com": "x", "twitter.com": "x", "linkedin.com": "linkedin", "instagram.com": "instagram",
                "facebook.com": "facebook", "fb.com": "facebook", "youtube.com": "youtube", "youtu.be": "youtube",
                "github.com": "github", "tiktok.com": "tiktok", "discord.gg": "discord", "discord.com": "discord"}
GOOGLE_FONTS = ("fonts.googleapis.com",)
_IMPORT = re.compile(r"@import\s+(?:url\()?\s*['\"]?([^'\")\s;]+)")
#: Elements open at once beyond which a page is not read: html5lib looks through the open
#: elements for most tags, so a page nested 20,000 deep took 23 s to parse (and its walk
#: overflowed Python's stack, a 500).
MAX_DEPTH = 512
#: Nesting beyond which an inline SVG is not kept as a logo (serialising it recurses; logos are shallow).
MAX_SVG_DEPTH = 64
#: Where an element opens the page's header (the ``class`` and ``id`` of a ``div`` or ``nav``).
_HEADER_HINT = re.compile(r"\b(site-)?header\b|\bnavbar\b")

_EtreeBuilder: Any = html5lib.getTreeBuilder("etree")  # a class html5lib makes at run time


class _BoundedTreeBuilder(_EtreeBuilder):
    """
    html5lib's ElementTree builder, refusing a page that keeps more than MAX_DEPTH elements
    open: checked where html5lib opens an element of the page (its two insert methods).
    """

    def insertElementNormal(self, token):
        self._check_depth()
        return super().insertElementNormal(token)

    def insertElementTable(self, token):
        self._check_depth()
        return super().insertElementTable(token)

    def _check_depth(self) -> None:
        if len(self.openElements) >= MAX_DEPTH:
            raise BrandFailed("brand_fetch_failed",
                              f"url: the page could not be read: its elements nest more than {MAX_DEPTH} deep")


@attrs.define
class LogoSource:
    source: str
    url: str  # absolute; for an inline SVG, the page's URL with a #fragment
    inline: bytes | None = None


@attrs.define
class Page:
    url: str
    name: str = ""
    logos: list[LogoSource] = attrs.Factory(list)
    manifest: str = ""
    stylesheets: list[str] = attrs.Factory(list)
    css: str = ""
    theme_color: str | None = None
    button_colors: list[str] = attrs.Factory(list)
    google_fonts: list[str] = attrs.Factory(list)
    socials: list[dict[str, str]] = attrs.Factory(list)
    address: str = ""
    language: str = ""


def _text(element) -> str:
    return " ".join("".join(element.itertext()).split())


def _attr(element, name: str) -> str:
    return (element.get(name) or "").strip()


def _is_logo_like(element) -> bool:
    hints = " ".join(_attr(element, a) for a in ("class", "id", "alt", "src", "aria-label", "title")).lower()
    return "logo" in hints or "brand" in hints


def _nested_within(element, limit: int) -> bool:
    """Whether nothing under ``element`` is more than ``limit`` levels down (read level by level)."""
    level = [element]
    for _ in range(limit):
        level = [child for parent in level for child in parent]
        if not level:
            return True
    return False


def _svg_bytes(element) -> bytes:
    ET.register_namespace("", "http://www.w3.org/2000/svg")
    ET.register_namespace("xlink", "http://www.w3.org/1999/xlink")
    return ET.tostring(element, encoding="utf-8")


def google_families(href: str) -> list[str]:
    """Families a Google Fonts stylesheet URL loads (css and css2 forms)."""
    parts = urlsplit(href)
    if parts.hostname not in GOOGLE_FONTS:
        return []
    families = []
    for value in parse_qs(parts.query).get("family", []):
        for family in value.split("|"):
            name = unquote(family.split(":", 1)[0]).replace("+", " ").strip()
            if name and name not in families:
                families.append(name)
    return families


def read_page(body: bytes, url: str, charset: str | None = None) -> Page:
    """
    The candidates of one HTML page (``url`` is where it was read, after redirects).
    BrandFailed ``brand_fetch_failed`` for a page nested more than MAX_DEPTH deep.
    """
    parser = html5lib.HTMLParser(tree=_BoundedTreeBuilder, namespaceHTMLElements=False)
    root = parser.parse(body, transport_encoding=charset or None)
    reader = _Reader(url, root)
    # Document order without recursion: a page may nest deeper than Python's stack allows.
    stack: list[tuple[Any, bool, bool]] = [(root, False, False)]
    while stack:
        element, in_header, in_head = stack.pop()
        inherited = reader.visit(element, in_header, in_head)
        if inherited is not None:
            stack.extend((child, *inherited) for child in reversed(element))
    return reader.finished()


class _Reader:
    """What one page's elements give, read one at a time in document order."""

    def __init__(self, url: str, root):
        self.url = url
        self.page = Page(url)
        self.page.language = _attr(root, "lang")
        self.css: list[str] = []
        self.titles: list[str] = []
        self.seen_logos: set[str] = set()
        self.svg_count = 0
        self.parents: dict[int, Any] = {}
        for parent in root.iter():
            for child in parent:
                self.parents[id(child)] = parent

    def add_logo(self, source: str, href: str) -> None:
        if not href or href.startswith("data:"):
            return
        absolute = urljoin(self.url, href)
        if urlsplit(absolute).scheme in ("http", "https") and absolute not in self.seen_logos:
            self.seen_logos.add(absolute)
            self.page.logos.append(LogoSource(source, absolute))

    def visit(self, element, in_header: bool, in_head: bool) -> tuple[bool, bool] | None:
        """Read one element; the (in_header, in_head) its children are read with, None to skip them."""
        page = self.page
        tag = local_name(element.tag)
        if tag == "header" or _attr(element, "role") == "banner" or (
                tag in ("div", "nav") and _HEADER_HINT.search(_attr(element, "class") + " " + _attr(element, "id"))):
            in_header = True
        if tag == "head":
            in_head = True
        if tag == "title" and in_head:
            self.titles.append(_text(element))
        elif tag == "meta":
            self._meta(element)
        elif tag == "link":
            self._link_element(element)
        elif tag == "style":
            self.css.append("".join(element.itertext()))
        elif tag == "script" and _attr(element, "type").lower() == "application/ld+json":
            _json_ld(page, "".join(element.itertext()), self.add_logo)
        elif tag == "img":
            src = _attr(element, "src")
            if in_header:
                self.add_logo("header", src)
            elif _is_logo_like(element):
                self.add_logo("img", src)
        elif tag == "svg":
            self._svg(element, in_header)
            return None  # nothing of interest inside
        elif tag in ("a", "button"):
            _link(page, element, tag, self.url)
        elif tag == "address" and not page.address:
            page.address = _text(element)
        if _attr(element, "itemprop") == "address" and not page.address:
            page.address = _text(element)
        style = _attr(element, "style")
        if style:
            self.css.append("x{" + style + "}")
        return in_header, in_head

    def _meta(self, element) -> None:
        page = self.page
        key = (_attr(element, "property") or _attr(element, "name")).lower()
        content = _attr(element, "content")
        if key == "og:site_name" and content:
            page.name = page.name or content
        elif key == "application-name" and content:
            self.titles.insert(0, content)
        elif key == "theme-color":
            page.theme_color = page.theme_color or color_of(content)
        elif key in ("og:image", "og:image:url", "og:image:secure_url"):
            self.add_logo("og_image", content)

    def _link_element(self, element) -> None:
        page = self.page
        rel = _attr(element, "rel").lower().split()
        href = _attr(element, "href")
        if "apple-touch-icon" in rel or "apple-touch-icon-precomposed" in rel:
            self.add_logo("apple_touch_icon", href)
        elif "icon" in rel or "mask-icon" in rel:
            self.add_logo("icon", href)
        elif "manifest" in rel and href:
            page.manifest = page.manifest or urljoin(self.url, href)
        elif "stylesheet" in rel and href:
            absolute = urljoin(self.url, href)
            families = google_families(absolute)
            if families:
                page.google_fonts.extend(f for f in families if f not in page.google_fonts)
            elif absolute not in page.stylesheets:
                page.stylesheets.append(absolute)

    def _svg(self, element, in_header: bool) -> None:
        if (in_header or _is_logo_like(element) or self._is_logo_like_parent(element)) and _nested_within(
                element, MAX_SVG_DEPTH):
            self.svg_count += 1
            data = _svg_bytes(element)
            if len(data) <= 512 * 1024:
                self.page.logos.append(
                    LogoSource("inline_svg", f"{self.url.split('#')[0]}#svg-{self.svg_count}", data))

    def _is_logo_like_parent(self, element) -> bool:
        parent = self.parents.get(id(element))
        return parent is not None and local_name(parent.tag) == "a" and _is_logo_like(parent)

    def finished(self) -> Page:
        """The page, once every element was visited: its CSS, fonts imported by it, and its name."""
        page = self.page
        page.css = "\n".join(self.css)
        for imported in _IMPORT.findall(page.css):
            families = google_families(urljoin(self.url, imported))
            page.google_fonts.extend(f for f in families if f not in page.google_fonts)
        if not page.name and self.titles:
            page.name = re.split(r"\s+[|–—·-]\s+", self.titles[0])[0].strip()[:200]
        return page


def _link(page: Page, element, tag: str, url: str) -> None:
    hints = (_attr(element, "class") + " " + _attr(element, "id")).lower()
    if tag == "button" or re.search(r"\b(btn|button|cta)\b|btn-|button-", hints):
        style = _attr(element, "style")
        match = re.search(r"background(?:-color)?\s*:\s*([^;]+)", style)
        if match:
            found = color_of(match.group(1))
            if found:
                page.button_colors.append(found)
    if tag == "a":
        social = social_of(urljoin(url, _attr(element, "href")))
        if social and social not in page.socials:
            page.socials.append(social)


def social_of(href: str) -> dict[str, str] | None:
    """``{network, url}`` for a profile link of one of the networks named (as https)."""
    try:
        parts = urlsplit(href)
    except ValueError:
        return None
    host = (parts.hostname or "").lower().removeprefix("www.").removeprefix("m.")
    network = SOCIAL_HOSTS.get(host)
    if parts.scheme not in ("http", "https") or network is None or parts.path.strip("/") in ("", "share", "intent"):
        return None
    if "/share" in parts.path or "/intent/" in parts.path or "sharer" in parts.path:
        return None
    return {"network": network, "url": parts._replace(scheme="https", fragment="").geturl()[:themes.MAX_URL]}


def _json_ld(page: Page, text: str, add_logo) -> None:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the decoder goes
        return
    items = data if isinstance(data, list) else [data]
    flat: list[dict] = []
    for item in items:
        if isinstance(item, dict):
            flat.append(item)
            flat.extend(i for i in item.get("@graph", []) if isinstance(i, dict))
    for item in flat:
        kind = item.get("@type")
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(isinstance(k, str) and (k in ("Organization", "Corporation", "LocalBusiness", "Brand", "WebSite")
                                           or k.endswith("Business") or k.endswith("Store")) for k in kinds):
            continue
        logo = item.get("logo")
        if isinstance(logo, dict):
            logo = logo.get("url") or logo.get("contentUrl")
        if isinstance(logo, str):
            add_logo("json_ld", logo)
        if isinstance(item.get("name"), str) and "WebSite" not in kinds:
            page.name = page.name or item["name"].strip()[:200]
        same = item.get("sameAs") or []
        for href in same if isinstance(same, list) else [same]:
            social = social_of(href) if isinstance(href, str) else None
            if social and social not in page.socials:
                page.socials.append(social)
        address = item.get("address")
        if isinstance(address, dict) and not page.address:
            street = address.get("streetAddress", "")
            town = " ".join(str(address.get(k, "")) for k in ("postalCode", "addressLocality") if address.get(k))
            parts = [street, town, address.get("addressRegion", ""), address.get("addressCountry", "")]
            page.address = ", ".join(str(p).strip() for p in parts if isinstance(p, str) and p.strip())
        elif isinstance(address, str) and not page.address:
            page.address = address.strip()


def manifest_icons(body: bytes, url: str) -> list[str]:
    """The icons of a web manifest, largest first."""
    try:
        data = json.loads(body)
        icons = data.get("icons") or []
    except (ValueError, AttributeError):
        return []

    def size(icon: dict) -> int:
        sizes = str(icon.get("sizes", "")).split()
        return max((int(s.split("x")[0]) for s in sizes if re.fullmatch(r"\d+x\d+", s)), default=0)

    usable = [i for i in icons if isinstance(i, dict) and isinstance(i.get("src"), str)]
    usable.sort(key=size, reverse=True)
    return [urljoin(url, i["src"]) for i in usable]
