"""
The builder's canvas in Debian's headless Chromium against the real daemon: blocks inserted
with the "+" palette, one selected by a click, a heading and a paragraph typed where they stand
(a word made bold with Ctrl+B, the line italic with the marks bar), a block moved with Alt+↓
and by drag and drop, a button's colour, alignment and URL set in the settings panel, Ctrl+Z and
Ctrl+Shift+Z over them, Delete, the template saved and opened again. Then the page at 375 and
1,280 px, light and dark: no horizontal scroll on a phone, the canvas above the settings there,
beside them on a desktop; the screenshots go to test-output/builder-inplace/. And links: words
selected in place, the link form refusing a ``javascript:`` address and taking an https: and a
mailto: one (Ctrl+K), the links saved in the document. Every step goes through
tests/helpers/builder_canvas.py.
"""

from __future__ import annotations

import psycopg2
import pytest

from tests.helpers.browser import drive, go, keep_screenshot, output_dir, set_first_password
from tests.helpers.builder import EVERY_BLOCK
from tests.helpers.builder_canvas import BuilderCanvas

OUTPUT = output_dir("builder-inplace")


def on_the_builder(browser, node, dsn, name: str, walk) -> None:
    """``walk(page, builder)`` on the builder of a new account on the top plan, at 1,280 px."""
    def signed_in(page, context):
        set_first_password(page, node)
        with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
            cur.execute("UPDATE tenants SET plan = 'scale'")
        go(page, "#/builder", "Builder")
        walk(page, BuilderCanvas(page))

    drive(browser, node, name, signed_in, output=OUTPUT, viewport=(1280, 900))


@pytest.mark.slow
def test_the_canvas_edits_moves_undoes_and_saves(daemon, browser, fresh_dsn):
    on_the_builder(browser, daemon, fresh_dsn, "builder-inplace", walk)


def walk(page, builder):
    # Insert: a heading at the top, then a text and a button after it; no per-block forms beside.
    builder.append_blocks("heading", "text", "button")
    assert builder.types() == ["heading", "text", "button"]
    assert page.locator("#blocks, li.block, .blockfields").count() == 0

    # The theme's brand colour, a swatch: the canvas's button takes it.
    builder.set_theme("brand_color", "#0f766e")
    brand = builder.theme.locator(".swatchfield", has=page.locator("input[name=brand_color]"))
    assert brand.locator(".swatchvalue").text_content() == "#0f766e"
    background = builder.block("button").locator(".cbutton").evaluate("e => getComputedStyle(e).backgroundColor")
    assert background == "rgb(15, 118, 110)"

    # Select: the outline on the canvas, the block's settings beside it.
    builder.select_block("heading")
    assert "selected" in builder.block("heading").get_attribute("class")

    # Edit where it stands: the heading's text, and a paragraph with one word in bold.
    builder.type_text("heading", "Spring news")
    assert builder.text("heading").text_content() == "Spring news"
    builder.text("text").click()
    page.keyboard.press("Control+A")
    page.keyboard.type("Fresh ")
    page.keyboard.press("Control+B")
    page.keyboard.type("flowers")
    page.keyboard.press("Control+B")
    # The marks bar, for a pointer: the whole line made italic, the caret kept in the text.
    page.keyboard.press("Shift+Home")
    builder.mark("Italic")
    page.keyboard.press("Escape")

    # Alt+↓: the heading goes below the text, and keeps the focus.
    builder.move_block("heading", 1)
    assert builder.types() == ["text", "heading", "button"]
    assert page.evaluate("document.activeElement.dataset.type") == "heading"

    # Settings: the button's colour (a swatch, no "—"), alignment and URL.
    builder.select_block("button")
    builder.set_setting("Button URL", "https://example.com/spring")
    builder.set_setting("Background", "#7c3aed")
    assert builder.settings.locator(".swatchvalue").nth(1).text_content() == "#7c3aed"
    assert builder.settings.locator(".swatchvalue").nth(0).text_content() == "Theme"
    builder.set_setting("Alignment", "Centre")
    assert builder.settings.get_by_role("radio", name="Centre").is_checked()

    # Undo and redo with the keyboard, on the canvas: the alignment goes, and comes back.
    builder.block("button").focus()
    builder.undo(keyboard=True)
    assert builder.settings.get_by_role("radio", name="Default").is_checked()
    builder.redo(keyboard=True)
    assert builder.settings.get_by_role("radio", name="Centre").is_checked()
    # Undo takes back a move too.
    builder.move_block("heading", -1)
    assert builder.types() == ["heading", "text", "button"]
    builder.undo(keyboard=True)
    assert builder.types() == ["text", "heading", "button"]

    # Drag and drop on the canvas: the button onto the first gap, then Ctrl+Z puts it back.
    builder.drag_block("button", 0)
    assert builder.types() == ["button", "text", "heading"]
    builder.block("text").focus()
    builder.undo(keyboard=True)
    assert builder.types() == ["text", "heading", "button"]
    # Ctrl+Z while typing on the canvas takes the typing back as one change.
    builder.text("heading").click()
    page.keyboard.type(" and more")
    builder.undo(keyboard=True)
    assert builder.text("heading").text_content() == "Spring news"
    # Delete removes the selected block; Undo brings it back.
    builder.remove_block("heading")
    assert builder.types() == ["text", "button"]
    builder.undo()
    assert builder.types() == ["text", "heading", "button"]

    # The preview is the server's rendering of it.
    builder.rendered()
    builder.preview.get_by_text("Spring news").wait_for()

    # The panel's arrows move the selected block too (a phone has no Alt+arrows).
    builder.select_block("text")
    builder.settings.get_by_role("button", name="Move block down").click()
    assert builder.types() == ["heading", "text", "button"]
    builder.settings.get_by_role("button", name="Move block up").click()
    assert builder.types() == ["text", "heading", "button"]

    # Columns: a block inserted in a column by its own "+"; two undos take both back.
    builder.insert_block("columns", 3)
    builder.insert_block("image", 0, column=builder.column("columns", 0))
    assert builder.column("columns", 0).locator(".cblock[data-type=image] img").count() == 1
    builder.undo(keyboard=True)
    builder.undo(keyboard=True)
    assert builder.types() == ["text", "heading", "button"]

    # Saved, and opened again: the same document.
    template_id = builder.save("Spring")
    saved = builder.saved(template_id)
    assert [b["type"] for b in saved["blocks"]] == ["text", "heading", "button"]
    text, title_block, button = saved["blocks"]
    assert title_block["text"] == "Spring news"
    assert text["runs"] == [{"text": "Fresh ", "italic": True}, {"text": "flowers", "bold": True, "italic": True}], text
    assert button["href"] == "https://example.com/spring"
    assert button["style"] == {"background": "#7c3aed", "align": "center"}
    go(page, f"#/builder/{template_id}", "Builder: Spring")
    assert builder.types() == ["text", "heading", "button"]
    assert builder.block("text").locator("strong").text_content() == "flowers"
    builder.rendered()

    look(page, builder)


@pytest.mark.slow
def test_a_link_given_in_place_is_saved_and_a_bad_one_refused(daemon, browser, fresh_dsn):
    on_the_builder(browser, daemon, fresh_dsn, "builder-link", links)


def links(page, builder):
    builder.append_blocks("heading", "text")
    builder.type_text("heading", "Spring news")
    builder.type_text("text", "Read the notes today.")

    # A script for a link is refused, saying why; the text keeps no link.
    builder.select_words("text", "the notes")
    refused = builder.link("javascript:alert(1)")
    assert refused == "Only https://, http:// and mailto: links go in an e-mail (not javascript:).", refused
    assert page.get_by_role("form", name="Link").get_by_label("Link URL").get_attribute("aria-invalid") == "true"
    builder.cancel_link()
    assert builder.text("text").locator("a").count() == 0

    # The words still selected after Cancel: the marks bar's Link makes them a link.
    assert page.evaluate("getSelection().toString()") == "the notes"
    assert builder.link("https://acme.example/notes?from=mail") == ""
    assert builder.text("text").locator("a").text_content() == "the notes"
    # Ctrl+K in a heading: the same form, Enter applies it; a mailto: link is one too.
    builder.select_words("heading", "news")
    page.keyboard.press("Control+k")
    form = page.get_by_role("form", name="Link")
    form.get_by_label("Link URL").fill("mailto:news@acme.example")
    form.get_by_label("Link URL").press("Enter")
    assert form.is_hidden()
    assert builder.text("heading").locator("a").get_attribute("href") == "mailto:news@acme.example"
    builder.rendered()
    builder.preview.get_by_role("link", name="the notes").wait_for()

    template_id = builder.save("Links")
    heading, text = builder.saved(template_id)["blocks"]
    assert heading["runs"] == [{"text": "Spring "}, {"text": "news", "href": "mailto:news@acme.example"}], heading
    assert text["runs"] == [{"text": "Read "}, {"text": "the notes", "href": "https://acme.example/notes?from=mail"},
                            {"text": " today."}], text
    # Undo takes the last link back; Remove link in the form takes the other away.
    builder.undo()
    assert builder.text("heading").locator("a").count() == 0
    builder.select_words("text", "the notes")
    builder.mark("Link")
    assert form.get_by_label("Link URL").input_value() == "https://acme.example/notes?from=mail"
    form.get_by_role("button", name="Remove link").click()
    assert builder.text("text").locator("a").count() == 0


#: The panel's fields for each block type of tests/samples/builder/every_block.json (the text is
#: on the canvas), and the style's, which all but spacers and columns have.
SETTINGS = {
    "heading": ["Heading level"], "text": [], "quote": [], "code": [], "button": ["Button URL", "Full width"],
    "image": ["Image URL", "Alt text", "Width (px)", "Height (px)", "Link URL"], "divider": ["Thickness (px)"],
    "spacer": ["Height (px)"], "list": ["Numbered", "Items, one a line"], "social": ["Links: network URL, one a line"],
    "footer": ["Unsubscribe link", "Unsubscribe label", "Unsubscribe URL"],
}
STYLE = ["Text colour", "Background", "Font size (px)", "top", "right", "bottom", "left"]


@pytest.mark.slow
def test_every_block_of_the_sample_has_its_fields_on_the_canvas_or_in_the_panel(daemon, browser, fresh_dsn):
    on_the_builder(browser, daemon, fresh_dsn, "builder-every-block", every_block)


def every_block(page, builder):
    # The sample's blocks have no ids, as a document made through the API may not.
    template_id = page.evaluate("""async (document) => {
        const me = await (await fetch("/me")).json();
        const made = await fetch("/dashboard/templates", {method: "POST",
            body: JSON.stringify({name: "Every block", builder: document}),
            headers: {"Content-Type": "application/json", "X-CSRF-Token": me.csrf_token}});
        const body = await made.json();
        if (!made.ok) throw new Error(JSON.stringify(body));
        return body.id;
    }""", EVERY_BLOCK)
    go(page, f"#/builder/{template_id}", "Builder: Every block")
    assert builder.types() == [block["type"] for block in EVERY_BLOCK["blocks"]]
    for index, kind in enumerate(builder.types()):
        if kind != "columns":
            builder.select_block(index)
            for label in SETTINGS[kind] + ([] if kind == "spacer" else STYLE):
                assert builder.setting(label).count() == 1, (index, kind, label)
    builder.select_block(0, within=builder.column("columns", 1))
    assert builder.setting("Image URL").input_value() == "http://127.0.0.1:1/right.png"

    # What the old forms showed is there: a heading's level, a footer's text with its link.
    builder.select_block(1)
    assert builder.setting("Heading level").input_value() == "2"
    assert builder.text("footer").locator("a").get_attribute("href") == "https://acme.example"
    builder.select_block(6)
    assert builder.setting("Height (px)").input_value() == "240"
    builder.set_setting("Height (px)", 300)
    builder.select_block("footer")
    assert builder.setting("Unsubscribe label").input_value() == "Unsubscribe from these e-mails"
    builder.set_setting("Unsubscribe URL", "https://acme.example/unsubscribe")
    builder.type_text("footer", " Thanks.", replace=False)
    builder.select_block(1)
    builder.set_setting("Heading level", 3)

    saved = builder.saved(builder.save())["blocks"]
    assert saved[6]["height"] == 300
    assert saved[1]["level"] == 3
    footer = saved[-1]
    assert footer["unsubscribe_url"] == "https://acme.example/unsubscribe"
    assert footer["runs"] == [{"text": "You get this because you signed up at "},
                              {"text": "acme.example", "href": "https://acme.example"}, {"text": ". Thanks."}], footer
    assert all(block.get("id") for block in saved)


def look(page, builder) -> None:
    """The page at a phone's and a desktop's width, light and dark: screenshots, and the layout."""
    builder.select_block("button")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    for width in (375, 1280):
        for scheme in ("light", "dark"):
            page.set_viewport_size({"width": width, "height": 900})
            page.emulate_media(color_scheme=scheme)
            page.evaluate("window.scrollTo(0, 0)")  # the sticky marks bar and side pane where they start
            page.wait_for_timeout(300)
            keep_screenshot(page, OUTPUT / f"builder-{width}-{scheme}.png")
            seen = page.evaluate("""() => {
                const box = (s) => document.querySelector(s).getBoundingClientRect();
                return {scroll: document.documentElement.scrollWidth, inner: window.innerWidth,
                        canvas: box('.canvascard'), settings: box('.settingscard')};
            }""")
            where = f"{width} px, {scheme}"
            assert seen["scroll"] <= seen["inner"], (where, seen)
            if width == 375:
                assert seen["settings"]["top"] >= seen["canvas"]["bottom"], (where, seen)
            else:
                assert seen["settings"]["left"] >= seen["canvas"]["right"], (where, seen)
