"""
Brand import's reading of a website (docs/contract/dashboard.md, "Brand import result"): the page is parsed with a
real HTML parser (html5lib, the WHATWG parsing algorithm browsers use), and its ``<head>`` and
header give the candidates: logos from every source the contract names, colours (CSS custom
properties, ``theme-color``, buttons, the logos), fonts (Google Fonts detected), social links
and the postal address. Logos are measured with Pillow (SVG by reading its XML) and scored;
colours are ranked into roles; the palette is derived with WCAG contrast. Pure: no I/O.
"""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from typing import Any
from urllib.parse import parse_qs, unquote, urljoin, urlsplit

import attrs
import html5lib
from PIL import IcoImagePlugin, Image

from mailsvc.domain import themes
from mailsvc.domain.errors import BrandFailed

SOURCES = ("header", "img", "inline_svg", "json_ld", "apple_touch_icon", "icon", "manifest", "og_image")
#: Points each source starts with (docs/decisions.md, "AI generation and brand import").
SOURCE_POINTS = {"header": 40, "inline_svg": 35, "json_ld": 32, "img": 28, "apple_touch_icon": 20,
                 "manifest": 16, "icon": 10, "og_image": 6}
SOCIAL_HOSTS = {"x.com": "x", "twitter.com": "x", "linkedin.com": "linkedin", "instagram.com": "instagram",
                "facebook.com": "facebook", "fb.com": "facebook", "youtube.com": "youtube", "youtu.be": "youtube",
                "github.com": "github", "tiktok.com": "tiktok", "discord.gg": "discord", "discord.com": "discord"}
GOOGLE_FONTS = ("fonts.googleapis.com",)
MAX_PIXELS = 40_000_000
LIGHT_BACKGROUND = "#ffffff"
DARK_BACKGROUND = "#1c1c1e"  # the dark scheme's card (themes.dark_palette)
#: WCAG 2.1 non-text contrast (1.4.11): a logo reads on a background at 3:1.
GRAPHIC_CONTRAST = 3.0
_HEX = re.compile(r"#([0-9a-fA-F]{8}|[0-9a-fA-F]{6}|[0-9a-fA-F]{3,4})\b")
_RGB = re.compile(r"rgba?\(\s*(\d{1,3})[\s,]+(\d{1,3})[\s,]+(\d{1,3})\s*(?:[,/]\s*([\d.]+%?)\s*)?\)")
_VAR = re.compile(r"var\(\s*(--[A-Za-z0-9_-]+)")
_CUSTOM = re.compile(r"(--[A-Za-z0-9_-]+)\s*:\s*([^;{}]+)")
_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
_IMPORT = re.compile(r"@import\s+(?:url\()?\s*['\"]?([^'\")\s;]+)")
#: Elements open at once beyond which a page is not read: html5lib looks through the open
#: elements for most tags, so a page nested 20,000 deep took 23 s to parse (and its walk
#: overflowed Python's stack, a 500).
MAX_DEPTH = 512
#: Nesting beyond which an inline SVG is not kept as a logo (serialising it recurses; logos are shallow).
MAX_SVG_DEPTH = 64

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


def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1].lower() if isinstance(tag, str) else ""


def color_of(value: str, props: dict[str, str] | None = None, depth: int = 0) -> str | None:
    """``#rrggbb`` of a CSS colour value (hex, rgb(), var()), or None; transparent ones are None."""
    value = value.strip()
    var = _VAR.search(value)
    if var and props and depth < 5 and var.group(1) in props:
        return color_of(props[var.group(1)], props, depth + 1)
    match = _HEX.search(value)
    if match:
        digits = match.group(1)
        if len(digits) in (3, 4):
            if len(digits) == 4 and digits[3] in "0":
                return None
            digits = "".join(c * 2 for c in digits[:3])
        elif len(digits) == 8:
            if int(digits[6:], 16) < 128:
                return None
            digits = digits[:6]
        return "#" + digits.lower()
    match = _RGB.search(value)
    if match:
        alpha = match.group(4)
        if alpha is not None:
            a = float(alpha.rstrip("%")) / (100 if alpha.endswith("%") else 1)
            if a < 0.5:
                return None
        r, g, b = (min(255, int(match.group(i))) for i in (1, 2, 3))
        return f"#{r:02x}{g:02x}{b:02x}"
    return None


def _saturation(hex_color: str) -> float:
    r, g, b = (int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5))
    high, low = max(r, g, b), min(r, g, b)
    return 0.0 if high == 0 else (high - low) / high


def neutral(hex_color: str) -> bool:
    return _saturation(hex_color) < 0.15


# The page.

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
    page = Page(url)
    page.language = _attr(root, "lang")
    css: list[str] = []
    titles: list[str] = []
    seen_logos: set[str] = set()
    svg_count = 0

    def add_logo(source: str, href: str) -> None:
        if not href or href.startswith("data:"):
            return
        absolute = urljoin(url, href)
        if urlsplit(absolute).scheme in ("http", "https") and absolute not in seen_logos:
            seen_logos.add(absolute)
            page.logos.append(LogoSource(source, absolute))

    def visit(element, in_header: bool, in_head: bool) -> tuple[bool, bool] | None:
        """Read one element; the (in_header, in_head) its children are read with, None to skip them."""
        nonlocal svg_count
        tag = _local(element.tag)
        if tag == "header" or _attr(element, "role") == "banner" or (
                tag in ("div", "nav") and re.search(r"\b(site-)?header\b|\bnavbar\b", _attr(element, "class") + " "
                                                    + _attr(element, "id"))):
            in_header = True
        if tag == "head":
            in_head = True
        rel = _attr(element, "rel").lower().split()
        if tag == "title" and in_head:
            titles.append(_text(element))
        elif tag == "meta":
            key = (_attr(element, "property") or _attr(element, "name")).lower()
            content = _attr(element, "content")
            if key == "og:site_name" and content:
                page.name = page.name or content
            elif key == "application-name" and content:
                titles.insert(0, content)
            elif key == "theme-color":
                page.theme_color = page.theme_color or color_of(content)
            elif key in ("og:image", "og:image:url", "og:image:secure_url"):
                add_logo("og_image", content)
        elif tag == "link":
            href = _attr(element, "href")
            if "apple-touch-icon" in rel or "apple-touch-icon-precomposed" in rel:
                add_logo("apple_touch_icon", href)
            elif "icon" in rel or "mask-icon" in rel:
                add_logo("icon", href)
            elif "manifest" in rel and href:
                page.manifest = page.manifest or urljoin(url, href)
            elif "stylesheet" in rel and href:
                absolute = urljoin(url, href)
                families = google_families(absolute)
                if families:
                    page.google_fonts.extend(f for f in families if f not in page.google_fonts)
                elif absolute not in page.stylesheets:
                    page.stylesheets.append(absolute)
        elif tag == "style":
            css.append("".join(element.itertext()))
        elif tag == "script" and _attr(element, "type").lower() == "application/ld+json":
            _json_ld(page, "".join(element.itertext()), add_logo)
        elif tag == "img":
            src = _attr(element, "src")
            if in_header:
                add_logo("header", src)
            elif _is_logo_like(element):
                add_logo("img", src)
        elif tag == "svg":
            if (in_header or _is_logo_like(element) or _is_logo_like_parent(element)) and _nested_within(
                    element, MAX_SVG_DEPTH):
                svg_count += 1
                data = _svg_bytes(element)
                if len(data) <= 512 * 1024:
                    page.logos.append(LogoSource("inline_svg", f"{url.split('#')[0]}#svg-{svg_count}", data))
            return None  # nothing of interest inside
        elif tag in ("a", "button"):
            _link(page, element, tag, url)
        elif tag == "address" and not page.address:
            page.address = _text(element)
        if _attr(element, "itemprop") == "address" and not page.address:
            page.address = _text(element)
        style = _attr(element, "style")
        if style:
            css.append("x{" + style + "}")
        return in_header, in_head

    parents: dict[int, Any] = {}
    for parent in root.iter():
        for child in parent:
            parents[id(child)] = parent

    def _is_logo_like_parent(element) -> bool:
        parent = parents.get(id(element))
        return parent is not None and _local(parent.tag) == "a" and _is_logo_like(parent)

    # Document order without recursion: a page may nest deeper than Python's stack allows.
    stack: list[tuple[Any, bool, bool]] = [(root, False, False)]
    while stack:
        element, in_header, in_head = stack.pop()
        inherited = visit(element, in_header, in_head)
        if inherited is not None:
            stack.extend((child, *inherited) for child in reversed(element))
    page.css = "\n".join(css)
    for imported in _IMPORT.findall(page.css):
        families = google_families(urljoin(url, imported))
        page.google_fonts.extend(f for f in families if f not in page.google_fonts)
    if not page.name and titles:
        page.name = re.split(r"\s+[|–—·-]\s+", titles[0])[0].strip()[:200]
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


# CSS.

@attrs.define
class Styles:
    props: dict[str, str] = attrs.Factory(dict)
    colors: list[tuple[str, str, float]] = attrs.Factory(list)  # (hex, source, weight-with-role-hint)
    hints: dict[str, str] = attrs.Factory(dict)  # hex → role named by a custom property
    fonts: list[tuple[str, str, str]] = attrs.Factory(list)  # (family, role, source)


_ROLE_NAMES = [("primary", ("primary", "brand", "main", "theme")), ("accent", ("accent", "secondary", "highlight")),
               ("text", ("text", "foreground", "fg", "body-color", "ink")),
               ("background", ("background", "bg", "surface", "canvas"))]


def _role_of_name(name: str) -> str | None:
    lowered = name.lower()
    for role, words in _ROLE_NAMES:
        if any(w in lowered for w in words):
            return role
    return None


def _family(value: str, props: dict[str, str]) -> str | None:
    var = _VAR.search(value)
    if var and var.group(1) in props:
        value = props[var.group(1)]
    first = value.split(",")[0].strip().strip("'\"").strip()
    if not first or first.startswith("var(") or first.lower() in ("inherit", "initial", "unset"):
        return None
    return first


def read_styles(css: str) -> Styles:
    styles = Styles()
    for name, value in _CUSTOM.findall(css):
        styles.props[name] = value.strip()
    for name, value in styles.props.items():
        found = color_of(value, styles.props)
        if found:
            role = _role_of_name(name)
            styles.colors.append((found, f"css:{name}", 30 if role in ("primary", "accent") else 12))
            if role and found not in styles.hints:
                styles.hints[found] = role
        lowered = name.lower()
        if "font" in lowered and "size" not in lowered and "weight" not in lowered:
            family = _family(value, styles.props)
            if family:
                role = "heading" if any(w in lowered for w in ("head", "display", "title")) else (
                    "body" if any(w in lowered for w in ("body", "sans", "base", "text", "main")) else "other")
                styles.fonts.append((family, role, f"css:{name}"))
    for selector, block in _RULE.findall(css):
        selector = selector.strip().lower()
        if selector.startswith("@"):
            continue
        declarations = dict((k.strip().lower(), v.strip()) for k, _, v in
                            (d.partition(":") for d in block.split(";")) if v)
        if re.search(r"\.(btn|button|cta)\b|\bbutton\b|\.btn-|\.button-", selector):
            for key in ("background-color", "background"):
                found = color_of(declarations.get(key, ""), styles.props)
                if found:
                    styles.colors.append((found, "button", 25))
                    break
        font = declarations.get("font-family")
        if font:
            family = _family(font, styles.props)
            if family:
                names = {s.strip() for s in selector.split(",")}
                role = "body" if names & {"body", "html", ":root"} else (
                    "heading" if names & {"h1", "h2", "h3"} else "other")
                styles.fonts.append((family, role, "css"))
        if selector in ("body", "html"):
            for key, role in (("color", "text"), ("background-color", "background"), ("background", "background")):
                found = color_of(declarations.get(key, ""), styles.props)
                if found:
                    styles.colors.append((found, f"css:{selector}", 10))
                    styles.hints.setdefault(found, role)
    return styles


# Logos.

@attrs.frozen
class Measured:
    content_type: str
    body: bytes  # what is stored (an icon file becomes PNG)
    width: int
    height: int
    transparent: bool
    colors: tuple[str, ...]
    on_light: bool
    on_dark: bool
    email_safe: bool


def _readable(colors: list[tuple[str, int]], background: str) -> bool:
    """Most of the visible colour (by weight) stands out from ``background``."""
    total = sum(n for _, n in colors) or 1
    standing = sum(n for c, n in colors if themes.contrast(c, background) >= GRAPHIC_CONTRAST)
    return standing / total >= 0.5


def measure(body: bytes) -> Measured | None:
    """The logo's figures, or None when it is no image Pillow or the SVG reader understands."""
    head = body[:1024].lstrip()
    if head.startswith(b"<svg") or (head.startswith(b"<?xml") and b"<svg" in head) or b"<svg" in head[:300]:
        return _measure_svg(body)
    try:
        image = Image.open(io.BytesIO(body))
        if image.width * image.height > MAX_PIXELS:
            return None
        kind = image.format
        if isinstance(image, IcoImagePlugin.IcoImageFile):  # stored as PNG: every client shows it
            image.size = max(image.info.get("sizes") or [image.size])  # the largest frame
            image.load()
            out = io.BytesIO()
            image.save(out, "PNG")
            body, kind = out.getvalue(), "PNG"
        image.load()
    except Exception:
        return None
    content_type = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}.get(kind or "")
    if content_type is None:
        return None
    rgba = image.convert("RGBA")
    small = rgba.copy()
    small.thumbnail((64, 64))
    raw = small.tobytes()  # RGBA, four bytes a pixel
    pixels = [raw[i:i + 4] for i in range(0, len(raw), 4)]
    transparent = any(p[3] < 250 for p in pixels)
    counts: Counter[str] = Counter()
    for r, g, b, a in pixels:
        if a >= 128:
            counts[f"#{r:02x}{g:02x}{b:02x}"] += 1
    common = counts.most_common(6)
    if not transparent:
        on_light = on_dark = True  # it brings its own background
    else:
        on_light, on_dark = _readable(common, LIGHT_BACKGROUND), _readable(common, DARK_BACKGROUND)
    return Measured(content_type, body, image.width, image.height, transparent, tuple(c for c, _ in common[:5]),
                    on_light, on_dark, content_type in ("image/png", "image/jpeg", "image/gif"))


def _length(value: str | None) -> float | None:
    match = re.fullmatch(r"\s*([\d.]+)\s*(px)?\s*", value or "")
    return float(match.group(1)) if match else None


def _measure_svg(body: bytes) -> Measured | None:
    if b"<!ENTITY" in body or b"<!DOCTYPE" in body.upper():
        return None  # no entity expansion, ever
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return None
    if _local(root.tag) != "svg":
        return None
    width, height = _length(root.get("width")), _length(root.get("height"))
    box = (root.get("viewBox") or "").replace(",", " ").split()
    if (width is None or height is None) and len(box) == 4:
        try:
            bw, bh = float(box[2]), float(box[3])
        except ValueError:
            bw = bh = 0
        if bw > 0 and bh > 0:
            if width is None and height is None:
                width, height = bw, bh
            elif width is None and height is not None:
                width = height * bw / bh
            elif width is not None:
                height = width * bh / bw
    counts: Counter[str] = Counter()
    for element in root.iter():
        values = [element.get("fill") or "", element.get("stroke") or "", element.get("stop-color") or ""]
        values += re.findall(r"(?:fill|stroke|stop-color)\s*:\s*([^;\"]+)", element.get("style") or "")
        if _local(element.tag) == "style":
            values += re.findall(r"(?:fill|stroke)\s*:\s*([^;}]+)", "".join(element.itertext()))
        shape = _local(element.tag) in ("path", "rect", "circle", "ellipse", "polygon", "text", "g", "use", "line")
        found_any = False
        for value in values:
            found = color_of(value) if value and value.strip() not in ("none", "currentColor") else None
            if found:
                counts[found] += 1
                found_any = True
        if shape and not found_any and not element.get("fill") and _local(element.tag) != "g":
            counts["#000000"] += 0  # a default black fill counts only if nothing else is coloured
    common = counts.most_common(6) or [("#000000", 1)]
    return Measured("image/svg+xml", body, round(width or 0), round(height or 0), True,
                    tuple(c for c, _ in common[:5]), _readable(common, LIGHT_BACKGROUND),
                    _readable(common, DARK_BACKGROUND), False)


def score(source: str, measured: Measured) -> float:
    """A logo's score, 0 to 100 (docs/decisions.md): its source, size, transparency, shape, use in e-mail."""
    points: float = SOURCE_POINTS.get(source, 0)
    size = min(measured.width, 400) / 400 if measured.width else 0.3
    points += 15 * size
    if measured.width and measured.width < 48:
        points -= 10
    if measured.transparent:
        points += 10
    if measured.email_safe:
        points += 12
    if measured.on_light:
        points += 10
    if measured.on_dark:
        points += 3
    if measured.height and 1.5 <= measured.width / measured.height <= 8:
        points += 5  # a wordmark's shape
    return round(max(0.0, min(100.0, points)), 1)


# Colours and the palette.

def rank_colors(found: list[tuple[str, str, float]], hints: dict[str, str]) -> list[dict[str, Any]]:
    """``colors[]``: each colour with its summed score, its sources and its role, best first."""
    scores: dict[str, float] = {}
    sources: dict[str, list[str]] = {}
    for hex_color, source, weight in found:
        scores[hex_color] = scores.get(hex_color, 0) + weight
        kind = source.split(":")[0]
        if kind not in sources.setdefault(hex_color, []):
            sources[hex_color].append(kind)
    for hex_color in scores:  # several kinds of source agreeing count more
        scores[hex_color] *= 1 + 0.25 * (len(sources[hex_color]) - 1)
    ordered = sorted(scores, key=lambda c: (-scores[c], c))
    roles: dict[str, str] = {}
    taken: set[str] = set()
    for hex_color in ordered:  # named roles first
        role = hints.get(hex_color)
        if role and role not in taken:
            roles[hex_color] = role
            taken.add(role)
    for hex_color in ordered:
        if hex_color in roles:
            continue
        if neutral(hex_color):
            role = "background" if themes.luminance(hex_color) > 0.6 else "text"
            role = role if role not in taken else "other"
        else:
            role = next((r for r in ("primary", "accent") if r not in taken), "other")
        roles[hex_color] = role
        if role != "other":
            taken.add(role)
    top = max(scores.values(), default=1) or 1
    return [{"hex": c, "role": roles[c], "score": round(100 * scores[c] / top, 1), "sources": sources[c]}
            for c in ordered][:12]


def palette_of(colors: list[dict[str, Any]], primary: str | None = None, accent: str | None = None) -> dict[str, Any]:
    by_role = {c["role"]: c["hex"] for c in reversed(colors)}
    primary = primary or by_role.get("primary") or themes.DEFAULT_THEME.brand_color
    accent = accent or by_role.get("accent")
    text = by_role.get("text") or "#111827"
    background = by_role.get("background") or LIGHT_BACKGROUND
    if themes.contrast(text, background) < themes.MIN_CONTRAST:
        text = themes.text_color_on(background)
    link = primary if themes.contrast(primary, LIGHT_BACKGROUND) >= themes.MIN_CONTRAST else themes.readable_on(
        primary, LIGHT_BACKGROUND, themes.BLACK)
    button_text = themes.text_color_on(primary)
    palette: dict[str, Any] = {"primary": primary}
    if accent and accent != primary:
        palette["accent"] = accent
    palette.update(text=text, background=background, link=link, button_text=button_text,
                   button_contrast=round(themes.contrast(button_text, primary), 2))
    return palette


# Fonts.

_SERIF = ("serif", "georgia", "times", "garamond", "playfair", "merriweather", "lora", "baskerville", "caslon",
          "libre", "crimson", "spectral", "cormorant", "bodoni", "didot")


def fallback_of(family: str) -> str:
    """The builder's ``font`` that stands in where the web font does not load."""
    lowered = family.lower()
    for font in ("inter", "verdana", "trebuchet", "georgia", "helvetica"):
        if font in lowered:
            return font
    if "arial" in lowered:
        return "helvetica"
    if any(w in lowered for w in _SERIF) and "sans" not in lowered:
        return "georgia"
    return "system"


_GENERIC = {"sans-serif", "serif", "monospace", "system-ui", "-apple-system", "blinkmacsystemfont", "cursive"}


def fonts_of(styles: Styles, google: list[str]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    google_lower = {g.lower(): g for g in google}
    for family, role, source in styles.fonts:
        if family.lower() in _GENERIC:
            continue
        shown = google_lower.get(family.lower(), family)
        entry = next((f for f in found if f["family"].lower() == family.lower()), None)
        if entry is None:
            found.append({"family": shown, "role": role, "google": family.lower() in google_lower,
                          "fallback": fallback_of(family), "source": source})
        elif entry["role"] == "other" and role != "other":
            entry["role"] = role
    for family in google:
        if not any(f["family"].lower() == family.lower() for f in found):
            found.append({"family": family, "role": "other", "google": True, "fallback": fallback_of(family),
                          "source": "google_fonts"})
    if found and not any(f["role"] == "body" for f in found):
        first_other = next((f for f in found if f["role"] == "other"), None)
        if first_other:
            first_other["role"] = "body"
    return found[:8]
