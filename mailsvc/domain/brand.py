"""
Brand import's choosing (docs/contract/dashboard.md, "Brand import result"), from what
``domain.brandpage`` read of the page: the CSS read for colours and fonts, logos measured
with Pillow (SVG by reading its XML) and scored, colours ranked into roles, the palette
derived with WCAG contrast, fonts given their fallbacks. Pure: no I/O.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from collections import Counter
from typing import Any

import attrs
from PIL import IcoImagePlugin, Image

from mailsvc.domain import themes

SOURCES = ("header", "img", "inline_svg", "json_ld", "apple_touch_icon", "icon", "manifest", "og_image")
#: Points each source starts with (docs/decisions.md, "AI generation and brand import").
SOURCE_POINTS = {"header": 40, "inline_svg": 35, "json_ld": 32, "img": 28, "apple_touch_icon": 20,
                 "manifest": 16, "icon": 10, "og_image": 6}
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


def local_name(tag: Any) -> str:
    """An element's name without its namespace, lower case ('' for a comment or the like)."""
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
    if local_name(root.tag) != "svg":
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
        if local_name(element.tag) == "style":
            values += re.findall(r"(?:fill|stroke)\s*:\s*([^;}]+)", "".join(element.itertext()))
        shape = local_name(element.tag) in ("path", "rect", "circle", "ellipse", "polygon", "text", "g", "use", "line")
        found_any = False
        for value in values:
            found = color_of(value) if value and value.strip() not in ("none", "currentColor") else None
            if found:
                counts[found] += 1
                found_any = True
        if shape and not found_any and not element.get("fill") and local_name(element.tag) != "g":
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
