"""
Builder documents checked into attrs values: a table of bad documents, each refused
with a message that starts with the path of the offending field; the caps (200 blocks, columns
3 deep, 5 MiB); the theme and brand tables (docs/contract/dashboard.md). No I/O.
"""

import copy
import json
from pathlib import Path

import pytest

from mailsvc.domain.documents import Block, Document, Run, document_of
from mailsvc.domain.errors import Invalid
from mailsvc.domain.themes import (
    DEFAULT_THEME,
    brand_fields,
    brand_of,
    contrast,
    text_color_on,
    theme_fields,
    theme_of,
)

SAMPLES = Path(__file__).parent.parent / "samples" / "builder"
EVERY_BLOCK = json.loads((SAMPLES / "every_block.json").read_text())


def doc(*blocks, **fields) -> dict:
    return {"version": 1, "blocks": list(blocks), **fields}


def nested(depth: int) -> dict:
    block = {"type": "text", "text": "deep"}
    for _ in range(depth - 1):
        block = {"type": "columns", "columns": [{"blocks": [block]}]}
    return block


BAD = [
    # The document.
    ("not a document", "document must be a builder document"),
    ({"blocks": []}, "version must be 1"),
    ({"version": 2, "blocks": []}, "version must be 1"),
    ({"version": True, "blocks": []}, "version must be 1"),
    ({"version": 1}, "blocks must be an array"),
    ({"version": 1, "blocks": {}}, "blocks must be an array"),
    (doc(colour="x"), "document.colour is not a field"),
    (doc(preview_text=3), "preview_text must be a string"),
    (doc(preview_text="x" * 501), "preview_text must be at most 500"),
    (doc(preview_text="a\x00b"), "preview_text must not contain control characters"),
    (doc(theme=[]), "theme must be an object"),
    (doc(theme={"content_width": 479}), "theme.content_width must be between 480 and 800"),
    (doc(theme={"radius": 33}), "theme.radius must be between 0 and 32"),
    (doc(theme={"brand_color": "red"}), "theme.brand_color must be a colour"),
    (doc(theme={"font": "comic"}), "theme.font must be one of"),
    (doc(theme={"logo_url": "javascript:alert(1)"}), "theme.logo_url must be a https:, http: URL"),
    (doc(theme={"web_font": "Inter;}</style>"}), "theme.web_font must be a font family name"),
    (doc(theme={"wobble": 1}), "theme.wobble is not a field"),
    # Blocks and their types.
    (doc("heading"), "blocks[0] must be a block object"),
    (doc({"text": "x"}), "blocks[0].type must be one of"),
    (doc({"type": "marquee"}), "blocks[0].type must be one of"),
    (doc({"type": "text", "text": "x", "colour": "#000000"}), "blocks[0].colour is not a field"),
    (doc({"type": "text", "text": "x", "id": "abc"}), "blocks[0].id must be a UUID"),
    (doc({"type": "heading"}), "blocks[0].text (or runs) is required"),
    (doc({"type": "heading", "text": "x", "level": 4}), "blocks[0].level must be between 1 and 3"),
    (doc({"type": "heading", "text": "x", "level": "1"}), "blocks[0].level must be an integer"),
    (doc({"type": "text", "text": 5}), "blocks[0].text must be a string"),
    (doc({"type": "text", "text": "x" * 20_001}), "blocks[0].text must be at most 20000"),
    # Styles.
    (doc({"type": "text", "text": "x", "style": "bold"}), "blocks[0].style must be an object"),
    (doc({"type": "text", "text": "x", "style": {"align": "justify"}}), "blocks[0].style.align must be one of"),
    (doc({"type": "text", "text": "x", "style": {"color": "#fff"}}), "blocks[0].style.color must be a colour"),
    (doc({"type": "text", "text": "x", "style": {"background": "#gggggg"}}),
     "blocks[0].style.background must be a colour"),
    (doc({"type": "text", "text": "x"}, {"type": "text", "text": "y"}, {"type": "text", "text": "z"},
         {"type": "text", "text": "x", "style": {"font_size": 65}}), "blocks[3].style.font_size must be between 10"),
    (doc({"type": "text", "text": "x", "style": {"font_size": 9}}), "blocks[0].style.font_size must be between 10"),
    (doc({"type": "text", "text": "x", "style": {"font_size": 12.5}}), "blocks[0].style.font_size must be an integer"),
    (doc({"type": "text", "text": "x", "style": {"padding": {"top": -1}}}),
     "blocks[0].style.padding.top must be between 0 and 200"),
    (doc({"type": "text", "text": "x", "style": {"padding": {"middle": 1}}}),
     "blocks[0].style.padding.middle is not a field"),
    (doc({"type": "text", "text": "x", "style": {"weight": 700}}), "blocks[0].style.weight is not a field"),
    # Runs.
    (doc({"type": "text", "runs": "x"}), "blocks[0].runs must be an array"),
    (doc({"type": "text", "runs": [{"bold": True}]}), "blocks[0].runs[0].text is required"),
    (doc({"type": "text", "runs": [{"text": "x", "bold": "yes"}]}), "blocks[0].runs[0].bold must be true or false"),
    (doc({"type": "text", "runs": [{"text": "x", "href": "javascript:alert(1)"}]}),
     "blocks[0].runs[0].href must be a https:, http:, mailto: URL"),
    (doc({"type": "text", "runs": [{"text": "x", "href": "data:text/html,hi"}]}), "blocks[0].runs[0].href must be"),
    (doc({"type": "text", "runs": [{"text": "x", "href": "https://a.example/\"onclick"}]}),
     "blocks[0].runs[0].href must be a URL without"),
    (doc({"type": "text", "runs": [{"text": "x", "href": "https:///nohost"}]}), "blocks[0].runs[0].href must be an"),
    # Buttons.
    (doc({"type": "button", "href": "https://a.example"}), "blocks[0].label is required"),
    (doc({"type": "button", "label": "Go"}), "blocks[0].href is required"),
    (doc({"type": "button", "label": "Go", "href": "vbscript:x"}), "blocks[0].href must be"),
    (doc({"type": "button", "label": "Go", "href": "https://a.example", "full_width": 1}),
     "blocks[0].full_width must be true or false"),
    (doc({"type": "button", "label": "x" * 201, "href": "https://a.example"}), "blocks[0].label must be at most 200"),
    # Images.
    (doc({"type": "image", "alt": "x"}), "blocks[0].src is required"),
    (doc({"type": "image", "src": "ftp://a.example/x.png"}), "blocks[0].src must be"),
    (doc({"type": "image", "src": "https://a.example/x.png", "width": 0}), "blocks[0].width must be between 1"),
    (doc({"type": "image", "src": "https://a.example/x.png", "height": 5000}), "blocks[0].height must be between"),
    (doc({"type": "image", "src": "https://a.example/x.png", "alt": 3}), "blocks[0].alt must be a string"),
    # Dividers and spacers.
    (doc({"type": "divider", "thickness": 0}), "blocks[0].thickness must be between 1 and 20"),
    (doc({"type": "spacer", "height": 401}), "blocks[0].height must be between 1 and 400"),
    # Columns.
    (doc({"type": "columns"}), "blocks[0].columns is required"),
    (doc({"type": "columns", "columns": {}}), "blocks[0].columns must be an array"),
    (doc({"type": "columns", "columns": [{"blocks": []}] * 5}), "blocks[0].columns: at most 4"),
    (doc({"type": "columns", "columns": [{}]}), "blocks[0].columns[0].blocks is required"),
    (doc({"type": "columns", "columns": [{"blocks": [{"type": "text", "text": "x", "style": {"font_size": 99}}]}]}),
     "blocks[0].columns[0].blocks[0].style.font_size"),
    (doc({"type": "columns", "columns": [{"blocks": [{"type": "blink"}]}]}),
     "blocks[0].columns[0].blocks[0].type must be one of"),
    (doc(nested(4)), "blocks[0].columns[0].blocks[0].columns[0].blocks[0].columns: columns nest at most 3 deep"),
    # Lists.
    (doc({"type": "list"}), "blocks[0].items is required"),
    (doc({"type": "list", "items": [["x"]]}), "blocks[0].items[0][0] must be an object"),
    (doc({"type": "list", "items": [[{"text": "x"}]], "ordered": "yes"}), "blocks[0].ordered must be true or false"),
    # Social.
    (doc({"type": "social"}), "blocks[0].links is required"),
    (doc({"type": "social", "links": [{"network": "myspace", "url": "https://myspace.com/a"}]}),
     "blocks[0].links[0].network must be one of"),
    (doc({"type": "social", "links": [{"network": "x", "url": "http://x.com/a"}]}),
     "blocks[0].links[0].url must be a https: URL"),
    (doc({"type": "social", "links": [{"network": "x", "url": "{{{X_URL}}}"}]}), "blocks[0].links[0].url must be"),
    # Footers.
    (doc({"type": "footer", "text": "x", "unsubscribe": "yes"}), "blocks[0].unsubscribe must be true or false"),
    (doc({"type": "footer", "text": "x", "unsubscribe_url": "javascript:void(0)"}),
     "blocks[0].unsubscribe_url must be"),
    (doc({"type": "footer", "text": "x", "unsubscribe_label": "a\nb"}),
     "blocks[0].unsubscribe_label must not contain control characters"),
    # Caps.
    (doc(*[{"type": "spacer"}] * 201), "blocks: at most 200 blocks"),
    (doc(*[{"type": "spacer"}] * 150, {"type": "columns", "columns": [{"blocks": [{"type": "spacer"}] * 60}]}),
     "blocks[150].columns[0].blocks[49]: a document holds at most 200 blocks"),
    (doc({"type": "code", "text": "x" * 20_000}, *[{"type": "code", "text": "x" * 20_000}] * 199), None),
]


@pytest.mark.parametrize("document, message", [b for b in BAD if b[1] is not None],
                         ids=[str(i) for i, b in enumerate(BAD) if b[1] is not None])
def test_bad_documents_are_refused_naming_the_path(document, message):
    with pytest.raises(Invalid) as e:
        document_of(document)
    assert e.value.message.startswith(message), e.value.message


def test_at_least_forty_bad_documents():
    assert len([b for b in BAD if b[1] is not None]) >= 40


def test_prefixes_name_where_the_document_sits():
    with pytest.raises(Invalid) as e:
        document_of(doc({"type": "text", "text": "x", "style": {"font_size": 65}}), "builder.")
    assert e.value.message.startswith("builder.blocks[0].style.font_size")


def test_the_caps_allow_what_they_name():
    assert len(document_of(doc(*[{"type": "spacer"}] * 200)).blocks) == 200
    assert document_of(doc(nested(3))).blocks[0].type == "columns"
    big = doc({"type": "code", "text": "x" * 20_000})
    big["blocks"] *= 200
    assert len(document_of(big).blocks) == 200
    huge = doc({"type": "code", "text": "é" * 15_000})
    huge["blocks"] *= 200  # 6 MB of UTF-8
    with pytest.raises(Invalid) as e:
        document_of(huge)
    assert e.value.message == "document: a document is at most 5 MiB of JSON"


def test_every_block_document_becomes_values():
    document = document_of(copy.deepcopy(EVERY_BLOCK))
    assert isinstance(document, Document) and document.version == 1
    assert {b.type for b in document.blocks} == {
        "heading", "text", "button", "image", "divider", "spacer", "columns", "list", "quote", "code", "social",
        "footer"}
    heading = document.blocks[0]
    assert heading == Block(type="heading", id="0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", level=1,
                            text="Hello {{{FIRST_NAME|there}}}, spring is here", style=heading.style)
    assert heading.style.font_size == 34 and heading.style.padding.top == 8
    assert document.blocks[3].runs[1] == Run("editor", bold=True)
    assert document.blocks[5].href == "{{{CTA_URL}}}"  # a placeholder href is allowed
    assert document.theme == {"radius": 10, "heading_font": "georgia", "heading_web_font": "Playfair Display"}
    footer = document.blocks[-1]
    assert footer.unsubscribe and footer.unsubscribe_url == "{{{RESEND_UNSUBSCRIBE_URL}}}"


def test_theme_and_brand_tables():
    assert theme_of(None) == DEFAULT_THEME
    theme = theme_of({"brand_color": "#FF0000", "content_width": 640, "logo_align": "left", "button_text_color": ""})
    assert theme.brand_color == "#ff0000" and theme.content_width == 640
    for bad, path in [({"logo_align": "middle"}, "theme.logo_align"), ({"logo_width": 5}, "theme.logo_width"),
                      ({"button_text_color": "white"}, "theme.button_text_color"),
                      ({"heading_font": "papyrus"}, "theme.heading_font"),
                      ({"link_color": None, "text_color": 1}, "theme.text_color")]:
        with pytest.raises(Invalid) as e:
            theme_fields(bad)
        assert e.value.message.startswith(path), e.value.message
    brand = brand_of({"name": "Acme", "website": "https://acme.example", "address": "1 Main St\nTown",
                      "socials": [{"network": "github", "url": "https://github.com/acme"}]})
    assert brand.as_json()["socials"] == [{"network": "github", "url": "https://github.com/acme"}]
    for bad, path in [({"socials": [{"network": "myspace", "url": "https://a.example"}]}, "brand.socials[0].network"),
                      ({"socials": [{"network": "x", "url": "http://x.com/a"}]}, "brand.socials[0].url"),
                      ({"socials": [{"network": "x", "url": "https://x.com/a", "icon": "y"}]}, "brand.socials[0].icon"),
                      ({"website": "ftp://acme.example"}, "brand.website"), ({"name": 3}, "brand.name"),
                      ({"colour": "x"}, "brand.colour")]:
        with pytest.raises(Invalid) as e:
            brand_fields(bad)
        assert e.value.message.startswith(path), e.value.message


@pytest.mark.parametrize("background", ["#2563eb", "#777777", "#767676", "#808080", "#ffcc00", "#000000", "#ffffff",
                                        "#ff0000", "#00ff00", "#5a5a5a", "#949494", "#0ea5e9"])
def test_the_automatic_button_text_reaches_four_and_a_half(background):
    chosen = text_color_on(background)
    assert chosen in ("#ffffff", "#111111", "#000000")
    assert contrast(chosen, background) >= 4.5


def test_every_grey_gets_a_readable_button_text():
    assert min(contrast(text_color_on(f"#{v:02x}{v:02x}{v:02x}"), f"#{v:02x}{v:02x}{v:02x}") for v in range(256)) >= 4.5
