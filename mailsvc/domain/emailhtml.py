"""
The template builder's renderer: a checked builder document (``mailsvc.domain.documents``) and
its theme become MJML, which ``mjml-python`` turns into table-based, responsive HTML
(docs/decisions.md, "Template builder"). Then what MJML has no element for is added: dark-scheme
styles (``prefers-color-scheme`` and Outlook.com's ``[data-ogsc]`` / ``[data-ogsb]``, with the
dark logo), VML buttons for Outlook on Windows, the hidden preheader, web fonts with the theme's
fallback stack (forced on Outlook), ``content_width``, ``radius``, and a button text colour
reaching 4.5:1 when none is set. The plain text comes from the document, never from the HTML.
Text is HTML-escaped except placeholders (``{{{KEY|fallback}}}``), left for
``mailsvc.domain.placeholders`` to fill at send time. Pure and deterministic.
"""

from __future__ import annotations

import html as html_escaping
import re
from collections.abc import Iterable
from urllib.parse import quote

import attrs
from mjml import mjml2html

from mailsvc.domain import themes
from mailsvc.domain.documents import Block, Document, Run
from mailsvc.domain.themes import Brand, DarkPalette, Theme

#: A placeholder as the scanner reads it, left as written when it holds nothing that would
#: break the HTML around it (its value is escaped when it is filled).
_PLACEHOLDER = re.compile(r"\{\{\{[^{}<>\"]{1,2200}?\}\}\}")
HEADING_SIZES = {1: 32, 2: 24, 3: 20}
TEXT_SIZE = 16
FOOTER_SIZE = 13
CODE_FONT = "Menlo, Consolas, 'Courier New', monospace"
#: Around a block unless its style sets ``padding``: (vertical, horizontal) pixels.
BLOCK_PADDING = (8, 32)
COLUMN_PADDING = (8, 12)
CARD_PADDING = 24
SOCIAL_SIZE = 28
NETWORK_NAMES = {"x": "X", "linkedin": "LinkedIn", "instagram": "Instagram", "facebook": "Facebook",
                 "youtube": "YouTube", "github": "GitHub", "tiktok": "TikTok", "discord": "Discord",
                 "website": "Website"}
#: Where the web fonts of ``web_font`` are loaded from (clients that cannot load them use ``font``).
WEB_FONTS_URL = "https://fonts.googleapis.com/css2?family={family}:wght@400;700&display=swap"


def esc(text: str) -> str:
    """``text`` escaped for HTML (text or a double-quoted attribute), placeholders left as written."""
    out = []
    done = 0
    for found in _PLACEHOLDER.finditer(text):
        out.append(html_escaping.escape(text[done:found.start()], quote=True))
        out.append(found.group())
        done = found.end()
    out.append(html_escaping.escape(text[done:], quote=True))
    return "".join(out)


def _attr(value: str | int) -> str:
    return esc(str(value))


@attrs.frozen
class _Look:
    """A theme resolved into what the markup uses."""

    theme: Theme
    dark: DarkPalette
    font: str
    heading_font: str
    fallback_font: str
    muted: str
    button_text: str

    @classmethod
    def of(cls, theme: Theme) -> _Look:
        fallback = themes.FONT_STACKS[theme.font]
        heading_fallback = themes.FONT_STACKS[theme.heading_font or theme.font]
        web = theme.web_font
        heading_web = theme.heading_web_font or web
        return cls(
            theme=theme, dark=themes.dark_palette(theme),
            font=f"'{web}', {fallback}" if web else fallback,
            heading_font=f"'{heading_web}', {heading_fallback}" if heading_web else heading_fallback,
            fallback_font=fallback,
            muted=themes.readable_on(themes.mix(theme.text_color, theme.content_color, 0.35), theme.content_color,
                                     theme.text_color),
            button_text=theme.button_text_color or themes.text_color_on(theme.brand_color),
        )


class BuilderRenderer:
    """
    Renders builder documents (``DocumentRenderer`` of ``mailsvc.app.templates``);
    ``assets_url`` is the daemon's public base, where the social icons are served
    (``/files/social/<network>.png``).
    """

    def __init__(self, assets_url: str):
        self._assets = assets_url.rstrip("/")

    def icon_url(self, network: str) -> str:
        return f"{self._assets}/files/social/{network}.png"

    def render(self, document: Document, theme: Theme, brand: Brand) -> tuple[str, str]:
        """(html, text) of ``document`` shown with ``theme`` (the document's own theme fields win)."""
        theme = theme.with_fields(document.theme)
        return self.html(document, theme, brand), text_of(document, brand)

    def mjml(self, document: Document, theme: Theme, brand: Brand) -> str:
        look = _Look.of(theme)
        body = [self._logo(look)] if theme.logo_url else []
        body += [self._section(block, look, brand) for block in document.blocks]
        return "".join([
            "<mjml><mj-head>",
            f"<mj-title>{esc(document.preview_text)}</mj-title>",
            f"<mj-preview>{esc(document.preview_text)}</mj-preview>" if document.preview_text else "",
            "<mj-attributes>",
            f'<mj-all font-family="{_attr(look.font)}" />',
            f'<mj-text font-size="{TEXT_SIZE}px" line-height="1.6" color="{theme.text_color}" />',
            "</mj-attributes>",
            f"<mj-style>{_dark_css(look)}</mj-style>",
            "</mj-head>",
            f'<mj-body width="{theme.content_width}px" background-color="{theme.background_color}"'
            ' css-class="msv-bg">',
            f'<mj-wrapper background-color="{theme.content_color}" border-radius="{theme.radius}px"'
            f' padding="{CARD_PADDING}px 0" css-class="msv-card">',
            *body,
            "</mj-wrapper></mj-body></mjml>",
        ])

    def html(self, document: Document, theme: Theme, brand: Brand) -> str:
        look = _Look.of(theme)
        out = mjml2html(self.mjml(document, theme, brand), fonts={})
        head = ('<meta name="color-scheme" content="light dark">'
                '<meta name="supported-color-schemes" content="light dark">')
        mso = ("<!--[if mso]><style>body, table, td, div, p, a, li, blockquote, h1, h2, h3"
               f" {{ font-family: {look.fallback_font} !important; }}</style><![endif]-->")
        fonts = "".join(self._fonts(theme))
        out = out.replace("<head>", "<head>" + head, 1).replace("</head>", fonts + mso + "</head>", 1)
        return out

    @staticmethod
    def _fonts(theme: Theme) -> Iterable[str]:
        """The web fonts' style sheets, hidden from Outlook (MJML links only the fonts its own
        elements name, not those of the headings this renderer writes)."""
        families = []
        for family in (theme.web_font, theme.heading_web_font):
            if family and family not in families:
                families.append(family)
        for family in families:
            url = WEB_FONTS_URL.format(family=quote(family, safe=""))  # the family is letters, digits, spaces
            yield (f'<!--[if !mso]><!--><link href="{_attr(url)}" rel="stylesheet" type="text/css">'
                   f'<style type="text/css">@import url({url});</style><!--<![endif]-->')

    def _logo(self, look: _Look) -> str:
        theme = look.theme
        alt = _attr(theme.logo_alt)
        image = ('<img class="msv-logo-light" src="{src}" alt="{alt}" width="{w}"'
                 ' style="display:inline-block;width:{w}px;max-width:100%;height:auto;border:0;outline:none;">')
        light = image.format(src=_attr(theme.logo_url), alt=alt, w=theme.logo_width)
        dark = ""
        if theme.logo_dark_url:
            dark = ('<!--[if !mso]><!--><div class="msv-logo-dark" style="display:none;max-height:0;'
                    'overflow:hidden;mso-hide:all;">'
                    f'<img src="{_attr(theme.logo_dark_url)}" alt="{alt}" width="{theme.logo_width}"'
                    f' style="display:inline-block;width:{theme.logo_width}px;max-width:100%;height:auto;border:0;'
                    'outline:none;"></div><!--<![endif]-->')
        return (f'<mj-section padding="0"><mj-column><mj-text align="{theme.logo_align}"'
                f' padding="8px {BLOCK_PADDING[1]}px 16px">{light}{dark}</mj-text></mj-column></mj-section>')

    def _section(self, block: Block, look: _Look, brand: Brand) -> str:
        if block.type == "columns":
            width = 100 / len(block.columns)
            columns = "".join(
                f'<mj-column width="{width:.4g}%">'
                + "".join(self._elements(inner, look, brand, COLUMN_PADDING))
                + "</mj-column>"
                for column in block.columns
                for inner in [_flat(column.blocks)]
            )
            background = f' background-color="{block.style.background}"' if block.style.background else ""
            padding = _padding(block, (0, BLOCK_PADDING[1] - COLUMN_PADDING[1]))
            return f'<mj-section padding="{padding}"{background}>{columns}</mj-section>'
        return ('<mj-section padding="0"><mj-column>' + "".join(self._elements([block], look, brand, BLOCK_PADDING))
                + "</mj-column></mj-section>")

    def _elements(self, blocks: list[Block], look: _Look, brand: Brand, default: tuple[int, int]) -> Iterable[str]:
        for block in blocks:
            yield self._element(block, look, brand, default)

    def _element(self, block: Block, look: _Look, brand: Brand, default: tuple[int, int]) -> str:
        theme = look.theme
        style = block.style
        common = f' padding="{_padding(block, default)}"'
        if style.background and block.type != "button":  # a button's background is the button's
            common += f' container-background-color="{style.background}"'
        align = style.align or ("center" if block.type in ("button", "image", "social") else "left")
        if block.type == "image":
            attributes = f' src="{_attr(block.src)}" alt="{_attr(block.alt)}" align="{align}"'
            if block.width:
                attributes += f' width="{block.width}px"'
            if block.height:
                attributes += f' height="{block.height}px"'
            if block.href:
                attributes += f' href="{_attr(block.href)}"'
            return f'<mj-image{common}{attributes} border-radius="{theme.radius}px" />'
        if block.type == "divider":
            colour = style.color or themes.mix(theme.text_color, theme.content_color, 0.85)
            css = "" if style.color else ' css-class="msv-hr"'
            return (f'<mj-divider{common} border-color="{colour}" border-width="{block.thickness}px"'
                    f' border-style="solid"{css} />')
        if block.type == "spacer":
            return f'<mj-spacer height="{block.height or 24}px"{common} />'
        if block.type == "social":
            elements = "".join(
                f'<mj-social-element src="{_attr(self.icon_url(link.network))}" href="{_attr(link.url)}"'
                f' alt="{NETWORK_NAMES[link.network]}" background-color="transparent" padding="4px"'
                f' icon-size="{SOCIAL_SIZE}px"></mj-social-element>'
                for link in block.links)
            return f'<mj-social{common} mode="horizontal" align="{align}">{elements}</mj-social>'
        return f'<mj-text{common} align="{align}">{self._inner(block, look, brand, align)}</mj-text>'

    def _inner(self, block: Block, look: _Look, brand: Brand, align: str) -> str:
        theme = look.theme
        style = block.style
        own = style.color
        classes = "" if own else ' class="msv-t"'
        colour = own or theme.text_color
        base = f"margin:0;text-align:{align};color:{colour};"
        if block.type == "heading":
            size = style.font_size or HEADING_SIZES[block.level]
            return (f'<h{block.level}{classes} style="{base}font-family:{_attr(look.heading_font)};font-size:{size}px;'
                    f'line-height:1.25;font-weight:700;">{_runs(block.content(), look)}</h{block.level}>')
        if block.type == "text":
            size = style.font_size or TEXT_SIZE
            return (f'<p{classes} style="{base}font-size:{size}px;line-height:1.6;">'
                    f"{_runs(block.content(), look, themed=not style.background)}</p>")
        if block.type == "quote":
            size = style.font_size or TEXT_SIZE + 2
            return (f'<blockquote{classes} style="{base}font-size:{size}px;line-height:1.6;font-style:italic;'
                    f'padding:4px 0 4px 16px;border-left:4px solid {theme.brand_color};">'
                    f"{_runs(block.content(), look)}</blockquote>")
        if block.type == "code":
            size = style.font_size or 14
            background = "#f3f4f6" if themes.luminance(theme.content_color) > 0.5 else "#27272a"
            code_colour = own or themes.text_color_on(background)
            return (f'<pre class="msv-code" style="margin:0;padding:12px 16px;background-color:{background};'
                    f'border-radius:{min(theme.radius, 8)}px;font-family:{_attr(CODE_FONT)};font-size:{size}px;'
                    f'line-height:1.5;white-space:pre-wrap;word-break:break-word;text-align:left;'
                    f'color:{code_colour};">{esc(block.text or "".join(r.text for r in block.content()))}</pre>')
        if block.type == "list":
            tag = "ol" if block.ordered else "ul"
            size = style.font_size or TEXT_SIZE
            items = "".join(f'<li style="margin:0 0 4px;">{_runs(item, look)}</li>' for item in block.items)
            return (f'<{tag}{classes} style="{base}padding:0 0 0 24px;font-size:{size}px;line-height:1.6;">'
                    f"{items}</{tag}>")
        if block.type == "button":
            return _button(block, look, align)
        if block.type == "footer":
            return _footer(block, look, brand, align)
        raise AssertionError(block.type)


def _flat(blocks: Iterable[Block]) -> list[Block]:
    """Blocks of a column, columns nested in it laid out one after another (MJML nests no columns)."""
    result: list[Block] = []
    for block in blocks:
        if block.type == "columns":
            for column in block.columns:
                result.extend(_flat(column.blocks))
        else:
            result.append(block)
    return result


def _padding(block: Block, default: tuple[int, int]) -> str:
    p = block.style.padding
    if p is None:
        return f"{default[0]}px {default[1]}px"
    return f"{p.top}px {p.right}px {p.bottom}px {p.left}px"


def _runs(runs: Iterable[Run], look: _Look, themed: bool = True) -> str:
    """Runs as HTML; links take the dark scheme's colour unless their block has its own background."""
    out = []
    for run in runs:
        part = esc(run.text).replace("\n", "<br>")
        if run.bold:
            part = f"<strong>{part}</strong>"
        if run.italic:
            part = f"<em>{part}</em>"
        if run.href:
            css = ' class="msv-a"' if themed else ""
            part = (f'<a{css} href="{_attr(run.href)}" style="color:{look.theme.link_color};'
                    f'text-decoration:underline;">{part}</a>')
        out.append(part)
    return "".join(out)


def _button(block: Block, look: _Look, align: str) -> str:
    theme = look.theme
    background = block.style.background or theme.brand_color
    colour = block.style.color or (look.button_text if not block.style.background
                                   else themes.text_color_on(background))
    size = block.style.font_size or TEXT_SIZE
    label = esc(block.label)
    href = _attr(block.href)
    inner_width = theme.content_width - 2 * BLOCK_PADDING[1]
    width = inner_width if block.full_width else min(inner_width, round(len(block.label) * size * 0.6) + 48)
    height = round(size * 1.5) + 24
    arc = min(50, round(theme.radius * 100 / height))
    font = _attr(look.font)
    vml = (f'<!--[if mso]><v:roundrect xmlns:v="urn:schemas-microsoft-com:vml"'
           f' xmlns:w="urn:schemas-microsoft-com:office:word" href="{href}"'
           f' style="height:{height}px;v-text-anchor:middle;width:{width}px;" arcsize="{arc}%"'
           f' strokecolor="{background}" fillcolor="{background}"><w:anchorlock/>'
           f'<center style="color:{colour};font-family:{_attr(look.fallback_font)};font-size:{size}px;'
           f'font-weight:bold;">{label}</center></v:roundrect><![endif]-->')
    table_width = ' width="100%"' if block.full_width else ""
    link_display = "block" if block.full_width else "inline-block"
    html = (f'<!--[if !mso]><!--><table role="presentation" border="0" cellpadding="0" cellspacing="0"'
            f' align="{align}"{table_width} class="msv-btn-t" style="border-collapse:separate;'
            f'{"margin:0 auto;" if align == "center" else ""}">'
            f'<tr><td class="msv-btn-bg" align="center" bgcolor="{background}" style="border-radius:{theme.radius}px;'
            f'background-color:{background};">'
            f'<a class="msv-btn" href="{href}" target="_blank" style="display:{link_display};padding:12px 24px;'
            f'font-family:{font};font-size:{size}px;font-weight:700;line-height:1.5;color:{colour};'
            f'text-decoration:none;border-radius:{theme.radius}px;background-color:{background};">{label}</a>'
            f"</td></tr></table><!--<![endif]-->")
    return vml + html


def _footer(block: Block, look: _Look, brand: Brand, align: str) -> str:
    colour = block.style.color or look.muted
    classes = "" if block.style.color else ' class="msv-m"'
    size = block.style.font_size or FOOTER_SIZE
    style = f"margin:0 0 8px;text-align:{align};color:{colour};font-size:{size}px;line-height:1.5;"
    parts = []
    if block.content():
        parts.append(f'<p{classes} style="{style}">{_runs(block.content(), look)}</p>')
    postal = _postal(brand)
    if postal:
        parts.append(f'<p{classes} style="{style}">{esc(postal).replace(chr(10), "<br>")}</p>')
    if block.unsubscribe:
        parts.append(f'<p{classes} style="{style}"><a{classes} href="{_attr(block.unsubscribe_url)}"'
                     f' style="color:{colour};text-decoration:underline;">{esc(block.unsubscribe_label)}</a></p>')
    return "".join(parts) or f'<p{classes} style="{style}"></p>'


def _postal(brand: Brand) -> str:
    return "\n".join(part for part in (brand.name, brand.address) if part)


def _dark_css(look: _Look) -> str:
    d = look.dark
    rules = {
        ".msv-bg, body": f"background-color:{d.background} !important;",
        ".msv-card, .msv-card > table": f"background:{d.content} !important;background-color:{d.content} !important;",
        ".msv-t": f"color:{d.text} !important;",
        ".msv-m": f"color:{d.muted} !important;",
        ".msv-a": f"color:{d.link} !important;",
        ".msv-hr p": f"border-top-color:{d.rule} !important;",
        ".msv-code": "background-color:#27272a !important;color:#f4f4f5 !important;",
    }
    light_rules = "".join(f"{selector} {{ {body} }}" for selector, body in rules.items())
    swap = (".msv-logo-light { display:none !important; }"
            " .msv-logo-dark { display:block !important; max-height:none !important; overflow:visible !important; }")
    ogsc = "".join(
        f"{', '.join(f'[data-ogsc] {s.strip()}' for s in selector.split(','))} {{ {body} }}"
        for selector, body in rules.items() if "color:" in body and "background" not in body)
    ogsb = "".join(
        f"{', '.join(f'[data-ogsb] {s.strip()}' for s in selector.split(','))} {{ {body} }}"
        for selector, body in rules.items() if "background" in body)
    # The brand's buttons keep their colours in every scheme (their contrast was chosen).
    button = look.theme.brand_color
    keep = (f"[data-ogsb] .msv-btn-bg, [data-ogsb] .msv-btn {{ background-color:{button} !important; }}"
            f" [data-ogsc] .msv-btn {{ color:{look.button_text} !important; }}")
    return (":root { color-scheme: light dark; supported-color-schemes: light dark; }"
            f" @media (prefers-color-scheme: dark) {{ {light_rules} {swap} }}"
            f" {ogsc} {ogsb} {keep} [data-ogsc] .msv-logo-light {{ display:none !important; }}"
            " [data-ogsc] .msv-logo-dark { display:block !important; max-height:none !important; }")


# Plain text, from the document.

def _runs_text(runs: Iterable[Run]) -> str:
    out = []
    for run in runs:
        if run.href and run.href != run.text:
            out.append(f"{run.text} ({run.href})")
        else:
            out.append(run.text)
    return "".join(out)


def _text_blocks(blocks: Iterable[Block], brand: Brand) -> list[str]:
    out: list[str] = []
    for block in blocks:
        kind = block.type
        if kind in ("heading", "text"):
            out.append(_runs_text(block.content()))
        elif kind == "quote":
            out.append("\n".join("> " + line for line in _runs_text(block.content()).split("\n")))
        elif kind == "code":
            out.append(block.text or "".join(r.text for r in block.content()))
        elif kind == "button":
            out.append(f"{block.label} ({block.href})")
        elif kind == "image":
            if block.alt:
                out.append(f"{block.alt} ({block.href})" if block.href else block.alt)
        elif kind == "divider":
            out.append("-" * 20)
        elif kind == "list":
            out.append("\n".join((f"{n}. " if block.ordered else "- ") + _runs_text(item)
                                 for n, item in enumerate(block.items, 1)))
        elif kind == "social":
            out.append("\n".join(f"{NETWORK_NAMES[link.network]}: {link.url}" for link in block.links))
        elif kind == "footer":
            lines = [_runs_text(block.content()), _postal(brand)]
            if block.unsubscribe:
                lines.append(f"{block.unsubscribe_label}: {block.unsubscribe_url}")
            out.append("\n".join(line for line in lines if line))
        elif kind == "columns":
            for column in block.columns:
                out.extend(_text_blocks(column.blocks, brand))
    return out


def text_of(document: Document, brand: Brand) -> str:
    """The plain-text part: each block's text, links as ``text (url)``, blank lines between."""
    return "\n\n".join(part for part in _text_blocks(document.blocks, brand) if part.strip()) + "\n"
