"""
Small things of the dashboard in a real headless Chromium against the real daemon: at 375 px
Escape closes the menu's drawer (and a "New …" form) wherever the focus is, and gives the focus
back to the button that opened it; the segments open on their list with "New segment"; a new
broadcast of an account with no segment says how to make one; a draft broadcast says it is a
draft (no "0 / 0 written"); an e-mail's long addresses and a webhook's long endpoint stay on one
line with an ellipsis, their whole value in a title and a copy button; the Activity page's menus
are as wide as their choices. Each page changed is shot at 375 and 1,280 px, light and dark, fits
its screen and passes axe (the layout and a11y walks' checks). docs/decisions.md, "Dashboard:
themes and small screens".
"""

from __future__ import annotations

import pytest
import resend

from tests.helpers.browser import api_key_of, drive, go, output_dir, set_first_password, settled
from tests.helpers.pagechecks import BROKEN, LONG_LABEL, fits, page_call, violations
from tests.helpers.polling import until

pytestmark = pytest.mark.slow

OUTPUT = output_dir("small")

ADDRESS = f"delivered+{LONG_LABEL}@resend.dev"
ENDPOINT = f"https://127.0.0.1:9/hooks/{LONG_LABEL}/mailsvc/events"

#: Each ``.clip`` matching the selector as [its title, whether its text is cut, its lines].
CLIPPED = """(selector) => [...document.querySelectorAll(selector)].filter((n) => n.checkVisibility()).map((n) => {
  const text = document.createRange();
  text.selectNodeContents(n);
  const lines = new Set([...text.getClientRects()].map((r) => Math.round(r.top)));
  return [n.title, n.scrollWidth > n.clientWidth, lines.size];
})"""


def drawer_closes_on_escape(page) -> None:
    """By the keyboard at 375 px: Menu opens the drawer; Escape, with the focus on the header
    (Shift+Tab from the first link), closes it and the focus is on Menu again."""
    page.set_viewport_size({"width": 375, "height": 740})
    go(page, "#/emails", "E-mails")
    link = page.get_by_role("navigation", name="Sections").get_by_role("link", name="Domains")
    menu = page.get_by_role("button", name="Menu")
    menu.focus()
    page.keyboard.press("Enter")
    link.wait_for(state="visible")
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.activeElement.textContent") == "Sign out"
    page.keyboard.press("Escape")
    link.wait_for(state="hidden")
    assert menu.get_attribute("aria-expanded") == "false"
    assert page.evaluate("document.activeElement.textContent") == "Menu"


def segments_first(page) -> None:
    """With no segment the form is open; with one, the page opens on the lists and "New segment"
    opens the form, which Escape closes (focus back on the button)."""
    page.set_viewport_size({"width": 375, "height": 740})
    go(page, "#/contacts", "Contacts and segments")
    name = page.get_by_label("New segment name")
    name.fill(f"Customers {LONG_LABEL}")
    page.get_by_role("button", name="Create segment").click()
    page.get_by_label(f"New name for segment Customers {LONG_LABEL}").wait_for()
    assert not name.is_visible()
    opener = page.get_by_role("button", name="New segment")
    opener.click()
    assert page.evaluate("document.activeElement.name") == "name" and name.is_visible()
    page.keyboard.press("Escape")
    name.wait_for(state="hidden")
    assert opener.get_attribute("aria-expanded") == "false"
    assert page.evaluate("document.activeElement.textContent") == "New segment"


def no_segment_yet(page) -> None:
    """A new broadcast with no segment to go to: a sentence and a link to the segments, no menu."""
    page.set_viewport_size({"width": 1280, "height": 800})
    go(page, "#/broadcasts", "Broadcasts")
    said = page.locator("#no-segment")
    assert said.text_content().startswith("There is no segment yet"), said.text_content()
    assert said.get_by_role("link").get_attribute("href") == "#/contacts"
    assert page.locator("select[name=segment_id]").count() == 0


def draft_in_words(page, broadcast: str) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    go(page, f"#/broadcasts/{broadcast}", f"Spring sale {LONG_LABEL}")
    assert page.locator("#progress-text").text_content().startswith("A draft: nothing is sent")
    assert page.get_by_text("written").count() == 0
    assert page.get_by_label("Sending progress").count() == 0


def clipped(page, selector: str, value: str) -> None:
    """At 375 px each ``selector`` showing ``value`` is on one line, cut, the value whole in its title."""
    page.set_viewport_size({"width": 375, "height": 740})
    settled(page)
    shown = [s for s in page.evaluate(CLIPPED, selector) if s[0] == value]
    assert shown and all(s == [value, True, 1] for s in shown), shown
    assert page.get_by_role("button", name=f"Copy address: {value}").count() + page.get_by_role(
        "button", name=f"Copy URL: {value}").count() >= 1
    assert not page.evaluate(BROKEN)


def activity_menus(page) -> None:
    """At 1,280 px each menu is as wide as its longest choice (well under the row's half)."""
    page.set_viewport_size({"width": 1280, "height": 800})
    go(page, "#/activity", "Activity")
    for label in ("Kind of action", "Member"):
        width = page.get_by_label(label).evaluate("s => s.getBoundingClientRect().width")
        assert width < 320, (label, width)


def test_small_things(daemon, browser):
    def walk(page, context):
        set_first_password(page, daemon)
        resend.api_url, resend.api_key = daemon.url, api_key_of(page)
        email = resend.Emails.send({"from": "onboarding@resend.dev", "to": [ADDRESS], "subject": "Shipped",
                                    "text": "Your order has shipped"})
        status, hook = page_call(page, "POST", "/dashboard/webhooks", {"endpoint": ENDPOINT, "events": ["email.sent"]})
        assert status in (200, 201), hook
        drawer_closes_on_escape(page)
        no_segment_yet(page)
        problems: list[str] = []
        fits(page, "broadcasts-no-segment", problems, OUTPUT)
        segments_first(page)
        fits(page, "contacts", problems, OUTPUT)
        segment = page_call(page, "GET", "/dashboard/segments", None)[1]["data"][0]
        status, broadcast = page_call(page, "POST", "/dashboard/broadcasts", {
            "segment_id": segment["id"], "name": f"Spring sale {LONG_LABEL}", "from": "onboarding@resend.dev",
            "subject": "Spring", "html": "<p>Spring</p>"})
        assert status in (200, 201), broadcast
        draft_in_words(page, broadcast["id"])
        fits(page, "broadcast-draft", problems, OUTPUT)

        go(page, f"#/emails/{email['id']}", "Shipped")

        def addressed():
            page.reload()
            page.locator("ol.timeline li").first.wait_for()
            return page.locator("ol.timeline .clip.to").count() >= 1
        until(addressed, 30, "an event of the e-mail with its address")
        clipped(page, "ol.timeline .clip.to", ADDRESS)
        fits(page, "email", problems, OUTPUT)
        go(page, "#/webhooks", "Webhooks")
        clipped(page, "tbody .clip", ENDPOINT)
        fits(page, "webhooks", problems, OUTPUT)
        go(page, f"#/webhooks/{hook['id']}", "Webhook")
        clipped(page, "dd .clip", ENDPOINT)
        fits(page, "webhook", problems, OUTPUT)
        activity_menus(page)
        fits(page, "activity", problems, OUTPUT)
        assert not problems, "\n".join(problems)
        found = []
        for hash_ in ("#/broadcasts", "#/contacts", f"#/broadcasts/{broadcast['id']}", f"#/emails/{email['id']}",
                      "#/webhooks", f"#/webhooks/{hook['id']}", "#/activity"):
            page.goto(page.url.split("#")[0] + hash_)
            page.locator("main h1").wait_for()
            settled(page)
            found += violations(page, hash_)
        assert not found, "\n".join(found)

    drive(browser, daemon, "small", walk, output=OUTPUT, viewport=(1280, 800))
