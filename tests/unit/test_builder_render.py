"""
The template builder's renderer, pure: the every-block document against its golden
HTML and text (a diff shows any change of output; MAILSVC_UPDATE_GOLDEN=1 rewrites them), a
strict HTML parse with an ``alt`` on every ``<img>``, what MJML lacks and the renderer adds
(dark scheme, VML buttons, preheader, web fonts, width, radius, readable button text), and
placeholders passing through untouched for the one scanner.
"""

import os
import re

import html5lib
import pytest

from mailsvc.domain import placeholders
from mailsvc.domain.documents import document_of
from mailsvc.domain.emailhtml import BuilderRenderer, esc
from mailsvc.domain.themes import DEFAULT_THEME, brand_of, contrast, theme_of
from tests.helpers.builder import ASSETS, SAMPLES, render_every_block


def strict_parse(html: str):
    parser = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False)
    return parser.parse(html)


def test_the_every_block_document_matches_its_golden_files():
    html, text = render_every_block()
    golden_html, golden_text = SAMPLES / "every_block.html", SAMPLES / "every_block.txt"
    if os.environ.get("MAILSVC_UPDATE_GOLDEN") == "1":
        golden_html.write_text(html)
        golden_text.write_text(text)
    assert html == golden_html.read_text()
    assert text == golden_text.read_text()


def test_rendering_is_deterministic():
    assert render_every_block() == render_every_block()


def test_the_html_is_well_formed_and_every_image_has_alt():
    html, _ = render_every_block()
    tree = strict_parse(html)  # raises on the first parse error
    images = tree.findall(".//img")
    assert len(images) >= 10
    assert all("alt" in img.attrib for img in images), [img.attrib for img in images if "alt" not in img.attrib]
    no_alt = BuilderRenderer(ASSETS).render(document_of({"version": 1, "blocks": [
        {"type": "image", "src": "https://a.example/x.png"}]}), DEFAULT_THEME, brand_of(None))[0]
    assert all("alt" in img.attrib for img in strict_parse(no_alt).findall(".//img"))


def test_what_the_renderer_adds_to_mjml():
    html, _ = render_every_block()
    # Dark scheme: media query, Outlook.com attributes, the logo swap.
    assert '<meta name="color-scheme" content="light dark">' in html
    assert "@media (prefers-color-scheme: dark)" in html and "[data-ogsc] .msv-t" in html
    assert "[data-ogsb] .msv-card" in html
    assert ".msv-logo-light { display:none !important; }" in html
    assert 'class="msv-logo-dark"' in html and "logo-dark.png" in html
    # VML buttons for Outlook beside the HTML one.
    assert html.count("<v:roundrect") == 2 and html.count('class="msv-btn"') == 2
    assert 'href="https://acme.example/editor"' in html
    # Hidden preheader.
    assert re.search(r'<div style="display:none;[^"]*">Our spring release is here, \{\{\{FIRST_NAME\|friend}}}</div>',
                     html)
    # Web fonts, with the fallback stack, and that stack forced on Outlook.
    assert "fonts.googleapis.com/css2?family=Inter" in html and "Playfair%20Display" in html
    assert "font-family:&#x27;Inter&#x27;, Inter, -apple-system" in html
    assert "<!--[if mso]><style>body, table, td, div, p, a, li, blockquote, h1, h2, h3 { font-family: Inter," in html
    # Width and radius (the document's radius wins over the account's).
    assert "max-width:600px" in html and "border-radius:10px" in html
    # Social icons from the daemon.
    assert f'src="{ASSETS}/files/social/github.png"' in html and 'alt="GitHub"' in html


def test_button_text_is_chosen_for_contrast():
    def button_colours(theme: dict, style: dict | None = None) -> tuple[str, str]:
        block = {"type": "button", "label": "Go", "href": "https://a.example"}
        if style:
            block["style"] = style
        html, _ = BuilderRenderer(ASSETS).render(document_of({"version": 1, "blocks": [block]}), theme_of(theme),
                                                 brand_of(None))
        found = re.search(r'class="msv-btn"[^>]*style="[^"]*color:(#[0-9a-f]{6});[^"]*background-color:(#[0-9a-f]{6})',
                          html)
        return found.group(1), found.group(2)

    for brand in ("#4f46e5", "#fbbf24", "#777777", "#22c55e", "#0b0b0b", "#e5e7eb"):
        text, background = button_colours({"brand_color": brand})
        assert background == brand and contrast(text, background) >= 4.5, brand
    assert button_colours({"brand_color": "#fbbf24"})[0] == "#111111"
    assert button_colours({"brand_color": "#4f46e5"})[0] == "#ffffff"
    assert button_colours({"brand_color": "#4f46e5", "button_text_color": "#ffff00"})[0] == "#ffff00"
    assert button_colours({}, {"background": "#fde68a"}) == ("#111111", "#fde68a")


def test_placeholders_pass_through_untouched():
    document = document_of({"version": 1, "preview_text": "Hi {{{NAME|you & me}}}", "blocks": [
        {"type": "heading", "text": "Hi {{{NAME|you & me}}} <b>"},
        {"type": "text", "runs": [{"text": "Order {{{ORDER}}}", "href": "{{{ORDER_URL}}}"}]},
        {"type": "button", "label": "Pay {{{TOTAL}}}", "href": "{{{PAY_URL}}}"},
        {"type": "footer", "text": "Bye", "unsubscribe": True},
    ]})
    html, text = BuilderRenderer(ASSETS).render(document, DEFAULT_THEME, brand_of(None))
    for written in ("{{{NAME|you & me}}}", "{{{ORDER}}}", 'href="{{{ORDER_URL}}}"', "Pay {{{TOTAL}}}",
                    'href="{{{PAY_URL}}}"', 'href="{{{RESEND_UNSUBSCRIBE_URL}}}"'):
        assert written in html, written
    assert "&lt;b&gt;" in html and "<b>" not in html
    assert text.startswith("Hi {{{NAME|you & me}}} <b>\n\nOrder {{{ORDER}}} ({{{ORDER_URL}}})\n\n")
    values = {"NAME": "Ann <&>", "ORDER": "42", "ORDER_URL": "https://shop.example/o/42", "TOTAL": "9 €",
              "PAY_URL": "https://shop.example/pay?o=42&x=1", "RESEND_UNSUBSCRIBE_URL": "https://u.example/t"}
    filled = placeholders.fill(html, lambda key, fallback: values.get(key, fallback),
                               lambda v: esc(v))
    assert "Hi Ann &lt;&amp;&gt; &lt;b&gt;" in filled and 'href="https://shop.example/pay?o=42&amp;x=1"' in filled
    assert "{{{" not in filled
    strict_parse(filled)


@pytest.mark.parametrize("hostile", ['<script>alert(1)</script>', '"><img src=x onerror=alert(1)>',
                                     "</mj-text></mj-column><mj-raw><script>x</script></mj-raw>",
                                     "{{{A}}}<{{{B}}}>", "&amp; &lt;"])
def test_hostile_text_stays_text(hostile):
    document = document_of({"version": 1, "preview_text": hostile, "blocks": [
        {"type": "heading", "text": hostile}, {"type": "text", "runs": [{"text": hostile, "bold": True}]},
        {"type": "button", "label": hostile, "href": "https://a.example"}, {"type": "code", "text": hostile},
        {"type": "image", "src": "https://a.example/x.png", "alt": hostile},
        {"type": "list", "items": [[{"text": hostile}]]}, {"type": "footer", "text": hostile}]})
    html, _ = BuilderRenderer(ASSETS).render(document, DEFAULT_THEME, brand_of(None))
    tree = strict_parse(html)
    assert not tree.findall(".//script") and not tree.findall(".//mj-raw")
    assert all(img.get("src") != "x" for img in tree.findall(".//img"))
