"""
The builder page as its user drives it, for the browser tests: a block inserted with a gap's "+"
and the palette, selected by a click, its text typed where it stands, moved with Alt+arrows or
dragged by its handle, removed with Delete; the selected block's settings set in the side panel;
a link given through the marks bar's link form; the theme; Undo and Redo; the template saved. The
builder's selectors live here, so that a change of the page is a change of this file.
"""

from __future__ import annotations

import re

from tests.helpers.polling import until

TOP = "#canvas > .cblock"
#: A block named by its place among the top-level blocks, or by its type (the first of it).
At = int | str


class BuilderCanvas:
    """The builder shown in ``page`` (Playwright's synchronous page)."""

    def __init__(self, page):
        self.page = page
        self.settings = page.locator("#settings")
        self.theme = page.locator("#theme")
        self.preview = page.frame_locator("iframe.mailframe")

    def block(self, at: At, within=None):
        """The block ``at``: among the top-level blocks, or those of the locator ``within`` (a column)."""
        kind = "" if isinstance(at, int) else f"[data-type={at}]"
        blocks = (within.locator(f":scope > .canvaslist > .cblock{kind}") if within is not None
                  else self.page.locator(f"{TOP}{kind}"))
        return blocks.nth(at) if isinstance(at, int) else blocks.first

    def column(self, at: At, index: int):
        """Column ``index`` of the columns block ``at``."""
        return self.block(at).locator(".ccolumn").nth(index)

    def types(self, within=None) -> list[str]:
        """The top-level blocks' types, in order (or a column's, given its locator)."""
        blocks = within.locator(":scope > .canvaslist > .cblock") if within is not None else self.page.locator(TOP)
        return [blocks.nth(i).get_attribute("data-type") for i in range(blocks.count())]

    def text(self, at: At, within=None):
        """The text of block ``at``, editable where it stands."""
        return self.block(at, within).locator("[contenteditable]").first

    def insert_block(self, kind: str, at: int, column=None) -> None:
        """A block of type ``kind`` inserted at ``at`` with the "+" there (in ``column``, a locator, if given)."""
        gap = (column or self.page.locator("#canvas")).locator(":scope > .gap" if column is None
                                                               else ":scope > .canvaslist > .gap").nth(at)
        gap.locator("button.plus").click()
        gap.get_by_role("button", name=kind, exact=True).click()

    def append_blocks(self, *kinds: str) -> None:
        """Blocks of ``kinds`` inserted one after another at the end of the canvas, in that order."""
        start = self.page.locator(TOP).count()
        for offset, kind in enumerate(kinds):
            self.insert_block(kind, start + offset)

    def select_block(self, at: At, within=None) -> None:
        """A click on block ``at``: selected, its settings beside the canvas."""
        block = self.block(at, within)
        kind = block.get_attribute("data-type")
        block.click()
        self.settings.locator("h3", has_text=f"{kind} block").wait_for()

    def type_text(self, at: At, text: str, *, replace: bool = True, within=None) -> None:
        """``text`` typed into block ``at`` where it stands (over its text, or at its end), then the text left."""
        self.text(at, within).click()
        self.page.keyboard.press("Control+A" if replace else "Control+End")
        self.page.keyboard.type(text)
        self.page.keyboard.press("Escape")

    def select_words(self, at: At, words: str) -> None:
        """The caret put in block ``at``'s text and ``words`` (a part of it) selected, as a mouse would."""
        self.text(at).click()
        self.text(at).evaluate("""(node, words) => {
            const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
            for (let text = walker.nextNode(); text; text = walker.nextNode()) {
                const from = text.data.indexOf(words);
                if (from < 0) continue;
                const range = document.createRange();
                range.setStart(text, from); range.setEnd(text, from + words.length);
                getSelection().removeAllRanges(); getSelection().addRange(range);
                return;
            }
            throw new Error(`${words} is not in the text`);
        }""", words)

    def mark(self, name: str) -> None:
        """A press of the marks bar's ``name`` (Bold, Italic, Link)."""
        self.page.get_by_role("toolbar", name="Text marks").get_by_role("button", name=name, exact=True).click()

    def link(self, url: str) -> str:
        """The selected words made a link to ``url`` through the link form; the form's refusal, or ""."""
        self.mark("Link")
        form = self.page.get_by_role("form", name="Link")
        form.get_by_label("Link URL").fill(url)
        form.get_by_role("button", name="Apply link").click()
        return form.get_by_role("alert").text_content() if form.is_visible() else ""

    def cancel_link(self) -> None:
        """The link form closed with Cancel, the selection back in the text."""
        self.page.get_by_role("form", name="Link").get_by_role("button", name="Cancel").click()

    def move_block(self, at: At, by: int) -> None:
        """Block ``at`` moved ``by`` places with Alt+↑ / Alt+↓, the focus on it."""
        self.block(at).focus()
        for _ in range(abs(by)):
            self.page.keyboard.press("Alt+ArrowUp" if by < 0 else "Alt+ArrowDown")

    def drag_block(self, at: At, to_gap: int) -> None:
        """Block ``at`` dragged by its handle and dropped on the top-level gap ``to_gap``."""
        transfer = self.page.evaluate_handle("new DataTransfer()")
        self.block(at).locator(":scope > .chandle").dispatch_event("dragstart", {"dataTransfer": transfer})
        gap = self.page.locator("#canvas > .gap").nth(to_gap)
        gap.dispatch_event("dragover", {"dataTransfer": transfer})
        gap.dispatch_event("drop", {"dataTransfer": transfer})

    def remove_block(self, at: At) -> None:
        """Block ``at`` removed with Delete."""
        self.block(at).focus()
        self.page.keyboard.press("Delete")

    def set_setting(self, label: str, value) -> None:
        """The selected block's setting ``label`` set: a select's option, a box (un)checked, a field
        filled and left, a colour picked, an alignment chosen by its name."""
        if label == "Alignment":
            self.settings.get_by_role("radiogroup", name="Alignment").get_by_text(value, exact=True).click()
            return
        node = self.settings.get_by_label(label, exact=True)
        kind = node.evaluate("e => e.localName === 'input' ? e.type : e.localName")
        if kind == "select":
            node.select_option(str(value))
        elif kind == "checkbox":
            node.set_checked(bool(value))
        elif kind == "color":
            node.fill(value)
        else:
            node.fill(str(value))
            node.press("Tab")

    def setting(self, label: str):
        """The selected block's setting ``label``, to read."""
        return self.settings.get_by_label(label, exact=True)

    def set_theme(self, key: str, value: str) -> None:
        """The document theme's ``key`` (brand_color, font...) set."""
        node = self.theme.locator(f"[name={key}]")
        if node.evaluate("e => e.localName") == "select":
            node.select_option(value)
        else:
            node.fill(value)
            node.dispatch_event("change")

    def undo(self, keyboard: bool = False) -> None:
        """Undo: Ctrl+Z where the focus is, or the Undo button."""
        if keyboard:
            self.page.keyboard.press("Control+z")
        else:
            self.page.get_by_role("button", name="Undo").click()

    def redo(self, keyboard: bool = False) -> None:
        """Redo: Ctrl+Shift+Z where the focus is, or the Redo button."""
        if keyboard:
            self.page.keyboard.press("Control+Shift+z")
        else:
            self.page.get_by_role("button", name="Redo").click()

    def rendered(self) -> None:
        """Waits for the preview to show the document as it is."""
        self.page.get_by_text("Preview up to date.").wait_for()

    def save(self, name: str | None = None, subject: str | None = None) -> str:
        """The document saved as a template (named ``name``); its id."""
        if name is not None:
            self.page.get_by_label("Template name").fill(name)
        if subject is not None:
            self.page.get_by_label("Subject").fill(subject)
        status = self.page.locator("#save-status")
        status.evaluate("e => e.replaceChildren()")  # a second save says "Saved." again
        self.page.locator(".meta").get_by_role("button", name=re.compile("^Save")).click()
        until(lambda: (status.text_content() or "").startswith("Saved"), 10, "the save")
        return status.get_attribute("data-template-id")

    def saved(self, template_id: str) -> dict:
        """The builder document of template ``template_id``, as the server keeps it."""
        return self.page.evaluate("async (id) => (await (await fetch(`/dashboard/templates/${id}`)).json()).builder",
                                  template_id)
