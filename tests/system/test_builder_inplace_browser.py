"""
The builder's canvas in Debian's headless Chromium against the real daemon: blocks inserted
with the "+" palette, one selected by a click, a heading and a paragraph typed where they stand
(a word made bold with Ctrl+B, the line italic with the marks bar), a block moved with Alt+↓
and by drag and drop, a button's colour, alignment and URL set in the settings panel, Ctrl+Z and
Ctrl+Shift+Z over them, Delete, the template saved and opened again. Then the page at 375 and
1,280 px, light and dark: no horizontal scroll on a phone, the canvas above the settings there,
beside them on a desktop; the screenshots go to test-output/builder-inplace/.
"""

from __future__ import annotations

import psycopg2
import pytest

from tests.helpers.browser import drive, go, output_dir, set_first_password
from tests.helpers.polling import until

OUTPUT = output_dir("builder-inplace")
CANVAS = "#canvas > .cblock"


@pytest.mark.slow
def test_the_canvas_edits_moves_undoes_and_saves(daemon, browser, fresh_dsn):
    drive(browser, daemon, "builder-inplace", lambda page, context: walk(page, daemon, fresh_dsn), output=OUTPUT,
          viewport=(1280, 900))


def order(page) -> list[str]:
    blocks = page.locator(CANVAS)
    return [blocks.nth(i).get_attribute("data-type") for i in range(blocks.count())]


def insert(page, at: int, kind: str) -> None:
    gap = page.locator("#canvas > .gap").nth(at)
    gap.locator("button.plus").click()
    gap.get_by_role("button", name=kind, exact=True).click()


def saved_builder(page, template_id: str) -> dict:
    return page.evaluate("async (id) => (await (await fetch(`/dashboard/templates/${id}`)).json()).builder",
                         template_id)


def walk(page, node, dsn):
    set_first_password(page, node)
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("UPDATE tenants SET plan = 'scale'")
    go(page, "#/builder", "Builder")

    # Insert: a heading at the top, then a text and a button after it.
    insert(page, 0, "heading")
    insert(page, 1, "text")
    insert(page, 2, "button")
    assert order(page) == ["heading", "text", "button"]
    assert page.locator("#blocks > ol > li.block").count() == 3  # the outline follows

    # The theme's brand colour, a swatch: the canvas's button takes it.
    page.locator("input[name=brand_color]").fill("#0f766e")
    brand = page.locator(".theme .swatchfield", has=page.locator("input[name=brand_color]"))
    assert brand.locator(".swatchvalue").text_content() == "#0f766e"
    background = page.locator(f"{CANVAS} .cbutton").evaluate("e => getComputedStyle(e).backgroundColor")
    assert background == "rgb(15, 118, 110)"

    # Select: the outline on the canvas, the block's settings beside it.
    heading = page.locator(f"{CANVAS}[data-type=heading]")
    heading.click()
    assert "selected" in heading.get_attribute("class")
    page.locator("#settings h3", has_text="heading block").wait_for()

    # Edit where it stands: the heading's text, and a paragraph with one word in bold.
    title = heading.locator("[contenteditable]")
    title.click()
    page.keyboard.press("Control+A")
    page.keyboard.type("Spring news")
    page.keyboard.press("Enter")
    outline_heading = page.locator("#blocks li.block[data-type=heading]").get_by_label("Heading text")
    assert outline_heading.input_value() == "Spring news"
    body = page.locator(f"{CANVAS}[data-type=text] [contenteditable]")
    body.click()
    page.keyboard.press("Control+A")
    page.keyboard.type("Fresh ")
    page.keyboard.press("Control+B")
    page.keyboard.type("flowers")
    page.keyboard.press("Control+B")
    # The marks bar, for a pointer: the whole line made italic, the caret kept in the text.
    page.keyboard.press("Shift+Home")
    page.get_by_role("toolbar", name="Text marks").get_by_role("button", name="Italic").click()
    page.keyboard.press("Escape")

    # Alt+↓: the heading goes below the text, and keeps the focus.
    page.locator(f"{CANVAS}[data-type=heading]").focus()
    page.keyboard.press("Alt+ArrowDown")
    assert order(page) == ["text", "heading", "button"]
    assert page.evaluate("document.activeElement.dataset.type") == "heading"

    # Settings: the button's colour (a swatch, no "—"), alignment and URL.
    page.locator(f"{CANVAS}[data-type=button]").click()
    settings = page.locator("#settings")
    settings.get_by_label("Button URL").fill("https://example.com/spring")
    settings.get_by_label("Button URL").press("Tab")
    settings.get_by_label("Background", exact=True).fill("#7c3aed")
    assert settings.locator(".swatchvalue").nth(1).text_content() == "#7c3aed"
    assert settings.locator(".swatchvalue").nth(0).text_content() == "Theme"
    settings.get_by_text("Centre", exact=True).click()
    assert settings.get_by_role("radio", name="Centre").is_checked()

    # Undo and redo with the keyboard, on the canvas: the alignment goes, and comes back.
    page.locator(f"{CANVAS}[data-type=button]").focus()
    page.keyboard.press("Control+z")
    assert page.locator("#settings").get_by_role("radio", name="Default").is_checked()
    page.keyboard.press("Control+Shift+z")
    assert page.locator("#settings").get_by_role("radio", name="Centre").is_checked()
    # Undo takes back a move too.
    page.locator(f"{CANVAS}[data-type=heading]").focus()
    page.keyboard.press("Alt+ArrowUp")
    assert order(page) == ["heading", "text", "button"]
    page.keyboard.press("Control+z")
    assert order(page) == ["text", "heading", "button"]

    # Drag and drop on the canvas: the button onto the first gap, then Ctrl+Z puts it back.
    transfer = page.evaluate_handle("new DataTransfer()")
    page.locator(f"{CANVAS}[data-type=button] > .chandle").dispatch_event("dragstart", {"dataTransfer": transfer})
    first_gap = page.locator("#canvas > .gap").first
    first_gap.dispatch_event("dragover", {"dataTransfer": transfer})
    first_gap.dispatch_event("drop", {"dataTransfer": transfer})
    assert order(page) == ["button", "text", "heading"]
    page.locator(f"{CANVAS}[data-type=text]").focus()
    page.keyboard.press("Control+z")
    assert order(page) == ["text", "heading", "button"]
    # Ctrl+Z while typing on the canvas takes the typing back as one change.
    page.locator(f"{CANVAS}[data-type=heading] [contenteditable]").click()
    page.keyboard.type(" and more")
    page.keyboard.press("Control+z")
    assert page.locator(f"{CANVAS}[data-type=heading] [contenteditable]").text_content() == "Spring news"
    # Delete removes the selected block; Undo brings it back.
    page.locator(f"{CANVAS}[data-type=heading]").focus()
    page.keyboard.press("Delete")
    assert order(page) == ["text", "button"]
    page.get_by_role("button", name="Undo").click()
    assert order(page) == ["text", "heading", "button"]

    # The preview is the server's rendering of it.
    page.get_by_text("Preview up to date.").wait_for()
    page.frame_locator("iframe.mailframe").get_by_text("Spring news").wait_for()

    # The panel's arrows move the selected block too (a phone has no Alt+arrows).
    page.locator(f"{CANVAS}[data-type=text]").click()
    page.locator("#settings").get_by_role("button", name="Move block down").click()
    assert order(page) == ["heading", "text", "button"]
    page.locator("#settings").get_by_role("button", name="Move block up").click()
    assert order(page) == ["text", "heading", "button"]

    # Columns: a block inserted in a column by its own "+"; two undos take both back.
    insert(page, 3, "columns")
    column = page.locator(f"{CANVAS}[data-type=columns] .ccolumn").first
    column.locator(".gap button.plus").click()
    column.get_by_role("button", name="image", exact=True).click()
    assert column.locator(".cblock[data-type=image] img").count() == 1
    page.keyboard.press("Control+z")
    page.keyboard.press("Control+z")
    assert order(page) == ["text", "heading", "button"]

    # Saved, and opened again: the same document.
    page.get_by_label("Template name").fill("Spring")
    page.get_by_role("button", name="Save as template").click()
    template_id = until(lambda: page.locator("#save-status").get_attribute("data-template-id"), 10, "the save")
    saved = saved_builder(page, template_id)
    assert [b["type"] for b in saved["blocks"]] == ["text", "heading", "button"]
    text, title_block, button = saved["blocks"]
    assert title_block["text"] == "Spring news"
    assert text["runs"] == [{"text": "Fresh ", "italic": True}, {"text": "flowers", "bold": True, "italic": True}], text
    assert button["href"] == "https://example.com/spring"
    assert button["style"] == {"background": "#7c3aed", "align": "center"}
    go(page, f"#/builder/{template_id}", "Builder: Spring")
    assert order(page) == ["text", "heading", "button"]
    assert page.locator(f"{CANVAS}[data-type=text] strong").text_content() == "flowers"
    page.get_by_text("Preview up to date.").wait_for()

    look(page)


def look(page) -> None:
    """The page at a phone's and a desktop's width, light and dark: screenshots, and the layout."""
    page.locator(f"{CANVAS}[data-type=button]").click()
    OUTPUT.mkdir(parents=True, exist_ok=True)
    for width in (375, 1280):
        for scheme in ("light", "dark"):
            page.set_viewport_size({"width": width, "height": 900})
            page.emulate_media(color_scheme=scheme)
            page.wait_for_timeout(300)
            page.screenshot(path=str(OUTPUT / f"builder-{width}-{scheme}.png"), full_page=True)
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
