"""
The builder's theme and brand profile (docs/contract/dashboard.md, "Builder theme and brand profile"): their fields
checked (each message starts with the field's path), the defaults an account without a saved
theme gets, field-by-field overrides, and the colour arithmetic the renderer needs (WCAG 2
relative luminance and contrast, the automatic button text colour, the dark-scheme palette).
Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import attrs

from mailsvc.domain import placeholders
from mailsvc.domain.errors import Invalid
from mailsvc.domain.text import checked_string

HEX = re.compile(r"#[0-9a-fA-F]{6}\Z")
FONTS = ("system", "inter", "helvetica", "georgia", "verdana", "trebuchet")
#: What each ``font`` is written as: the fallbacks every client has (``font`` is the
#: fallback of ``web_font``).
FONT_STACKS = {
    "system": "-apple-system, BlinkMacSystemFont, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif",
    "inter": "Inter, -apple-system, BlinkMacSystemFont, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif",
    "helvetica": "'Helvetica Neue', Helvetica, Arial, sans-serif",
    "georgia": "Georgia, 'Times New Roman', Times, serif",
    "verdana": "Verdana, Geneva, Tahoma, sans-serif",
    "trebuchet": "'Trebuchet MS', 'Lucida Grande', 'Lucida Sans Unicode', Arial, sans-serif",
}
ALIGNS = ("left", "center", "right")
NETWORKS = ("x", "linkedin", "instagram", "facebook", "youtube", "github", "tiktok", "discord", "website")
#: A web font's family: letters, digits and spaces (it goes into CSS and a font URL).
WEB_FONT = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ]{0,63}\Z")
CONTENT_WIDTH = (480, 800)
RADIUS = (0, 32)
LOGO_WIDTH = (16, 800)
MAX_URL = 2048
MAX_LINE = 500
MAX_SOCIALS = 20
WHITE = "#ffffff"
NEAR_BLACK = "#111111"
BLACK = "#000000"
#: WCAG 2 AA for normal text.
MIN_CONTRAST = 4.5


@attrs.frozen
class Theme:
    brand_color: str = "#2563eb"
    text_color: str = "#1f2937"
    background_color: str = "#f3f4f6"
    content_color: str = "#ffffff"
    link_color: str = "#2563eb"
    font: str = "system"
    content_width: int = 600
    radius: int = 6
    logo_url: str = ""
    logo_alt: str = ""
    logo_dark_url: str = ""
    logo_width: int = 120
    logo_align: str = "center"
    button_text_color: str = ""
    web_font: str = ""
    heading_font: str = ""
    heading_web_font: str = ""

    def with_fields(self, fields: dict[str, Any]) -> Theme:
        """This theme overridden field by field (a None field keeps this theme's value)."""
        return attrs.evolve(self, **{k: v for k, v in fields.items() if v is not None})

    def as_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


THEME_FIELDS = tuple(a.name for a in attrs.fields(Theme))
DEFAULT_THEME = Theme()


@attrs.frozen
class Social:
    network: str
    url: str


@attrs.frozen
class Brand:
    name: str = ""
    website: str = ""
    address: str = ""
    socials: tuple[Social, ...] = ()
    imported_from: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "website": self.website, "address": self.address,
                "socials": [{"network": s.network, "url": s.url} for s in self.socials],
                "imported_from": self.imported_from}


BRAND_FIELDS = ("name", "website", "address", "socials", "imported_from")
DEFAULT_BRAND = Brand()


# Checks shared with documents.

def string(path: str, value: Any, max_chars: int, *, line: bool = True) -> str:
    """A document's or theme's string: one line unless said otherwise."""
    return checked_string(path, value, max_chars, line=line)


def integer(path: str, value: Any, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise Invalid(path, f"{path} must be an integer")
    if not low <= value <= high:
        raise Invalid(path, f"{path} must be between {low} and {high}")
    return value


def boolean(path: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid(path, f"{path} must be true or false")
    return value


def choice(path: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed or not isinstance(value, str):
        raise Invalid(path, f"{path} must be one of: {', '.join(allowed)}")
    return value


def color(path: str, value: Any) -> str:
    if not isinstance(value, str) or not HEX.match(value):
        raise Invalid(path, f"{path} must be a colour written #rrggbb")
    return value.lower()


def is_placeholder(value: str) -> bool:
    """The whole value is one placeholder (``{{{URL}}}``): filled at send time."""
    return (value.startswith(placeholders.OPEN) and value.endswith(placeholders.CLOSE)
            and value.count(placeholders.OPEN) == 1 and value.count(placeholders.CLOSE) == 1
            and placeholders.KEY.match(value[3:-3].partition("|")[0].strip()) is not None)


def url(path: str, value: Any, *, schemes: tuple[str, ...] = ("https", "http"), allow_placeholder: bool = True,
        max_chars: int = MAX_URL) -> str:
    """An absolute URL of one of ``schemes`` (or a placeholder): ``javascript:`` and the like are refused."""
    text = string(path, value, max_chars)
    if allow_placeholder and is_placeholder(text):
        return text
    if any(c.isspace() for c in text) or any(c in text for c in '<>"\\'):
        raise Invalid(path, f"{path} must be a URL without spaces, quotes or angle brackets")
    try:
        parts = urlsplit(text)
    except ValueError:
        raise Invalid(path, f"{path} is not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        raise Invalid(path, f"{path} must be a {', '.join(s + ':' for s in schemes)} URL"
                            + (" or a placeholder" if allow_placeholder else ""))
    if scheme in ("http", "https") and not parts.hostname:
        raise Invalid(path, f"{path} must be an absolute URL with a host")
    if scheme == "mailto" and len(text) <= len("mailto:"):
        raise Invalid(path, f"{path} must name an address after mailto:")
    return text


def _object(path: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise Invalid(path, f"{path} must be an object")
    return value


def _unknown(path: str, value: dict, known: tuple[str, ...]) -> None:
    for key in value:
        if key not in known:
            raise Invalid(path, f"{path}.{key} is not a field (known: {', '.join(known)})")


def theme_fields(value: Any, path: str = "theme") -> dict[str, Any]:
    """The fields of a theme object, checked; a field given as null or absent is left out."""
    given = _object(path, value)
    _unknown(path, given, THEME_FIELDS)
    fields: dict[str, Any] = {}
    for name, item in given.items():
        where = f"{path}.{name}"
        if item is None:
            continue
        if name.endswith("_color") and name != "button_text_color":
            fields[name] = color(where, item)
        elif name == "button_text_color":
            fields[name] = "" if item == "" else color(where, item)
        elif name in ("font", "heading_font"):
            fields[name] = "" if item == "" and name == "heading_font" else choice(where, item, FONTS)
        elif name == "content_width":
            fields[name] = integer(where, item, *CONTENT_WIDTH)
        elif name == "radius":
            fields[name] = integer(where, item, *RADIUS)
        elif name == "logo_width":
            fields[name] = integer(where, item, *LOGO_WIDTH)
        elif name == "logo_align":
            fields[name] = choice(where, item, ALIGNS)
        elif name in ("logo_url", "logo_dark_url"):
            fields[name] = "" if item == "" else url(where, item)
        elif name == "logo_alt":
            fields[name] = string(where, item, MAX_LINE)
        elif name in ("web_font", "heading_web_font"):
            if item != "" and (not isinstance(item, str) or not WEB_FONT.match(item)):
                raise Invalid(where, f"{where} must be a font family name of letters, digits and spaces")
            fields[name] = item
    return fields


def socials_of(value: Any, path: str) -> tuple[Social, ...]:
    if not isinstance(value, list):
        raise Invalid(path, f"{path} must be an array of {{network, url}}")
    if len(value) > MAX_SOCIALS:
        raise Invalid(path, f"{path}: at most {MAX_SOCIALS} links")
    result = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        link = _object(where, item)
        _unknown(where, link, ("network", "url"))
        network = choice(f"{where}.network", link.get("network"), NETWORKS)
        result.append(Social(network, url(f"{where}.url", link.get("url"), schemes=("https",),
                                          allow_placeholder=False)))
    return tuple(result)


def brand_fields(value: Any, path: str = "brand") -> dict[str, Any]:
    given = _object(path, value)
    _unknown(path, given, BRAND_FIELDS)
    fields: dict[str, Any] = {}
    for name, item in given.items():
        where = f"{path}.{name}"
        if name == "imported_from":
            fields[name] = None if item in (None, "") else url(where, item, allow_placeholder=False)
        elif item is None:
            continue
        elif name == "name":
            fields[name] = string(where, item, 200)
        elif name == "website":
            fields[name] = "" if item == "" else url(where, item, allow_placeholder=False)
        elif name == "address":
            fields[name] = string(where, item, MAX_LINE, line=False)
        elif name == "socials":
            fields[name] = socials_of(item, where)
    return fields


def theme_of(stored: dict | None) -> Theme:
    """The theme an account uses: its saved fields over the defaults."""
    return DEFAULT_THEME.with_fields(theme_fields(stored or {}))


def brand_of(stored: dict | None) -> Brand:
    return attrs.evolve(DEFAULT_BRAND, **brand_fields(stored or {}))


# Colours.

def _channel(c: int) -> float:
    s = c / 255
    return s / 12.92 if s <= 0.04045 else ((s + 0.055) / 1.055) ** 2.4


def luminance(hex_color: str) -> float:
    """WCAG 2 relative luminance of ``#rrggbb``."""
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * _channel(r) + 0.7152 * _channel(g) + 0.0722 * _channel(b)


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two colours (1 to 21)."""
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def text_color_on(background: str) -> str:
    """White when it reaches 4.5:1 on ``background``, else near-black, else black (always ≥ 4.58)."""
    for candidate in (WHITE, NEAR_BLACK):
        if contrast(candidate, background) >= MIN_CONTRAST:
            return candidate
    return BLACK


def mix(a: str, b: str, amount: float) -> str:
    """``a`` moved ``amount`` (0 to 1) of the way to ``b``."""
    ca = [int(a[i:i + 2], 16) for i in (1, 3, 5)]
    cb = [int(b[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * amount):02x}" for x, y in zip(ca, cb, strict=True))


def readable_on(foreground: str, background: str, toward: str) -> str:
    """``foreground`` moved toward ``toward`` in steps until it reads at 4.5:1 on ``background``."""
    for step in range(11):
        candidate = mix(foreground, toward, step / 10)
        if contrast(candidate, background) >= MIN_CONTRAST:
            return candidate
    return toward


@attrs.frozen
class DarkPalette:
    """The colours of the dark scheme, derived from a theme (the brand's buttons keep theirs)."""

    background: str
    content: str
    text: str
    muted: str
    link: str
    rule: str


def dark_palette(theme: Theme) -> DarkPalette:
    content = "#1c1c1e"
    return DarkPalette(
        background="#111113", content=content, text="#ececec", muted="#a1a1aa",
        link=readable_on(theme.link_color, content, WHITE), rule="#3f3f46",
    )
