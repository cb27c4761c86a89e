"""
The dashboard's layout in a real headless Chromium against the real daemon: every page, with
long addresses, subjects and ids in it, at 375 and 1,280 px, light and dark (the system's
``prefers-color-scheme``), fits its screen (nothing scrolls sideways), no address, subject, button
or badge breaks over lines, and its text meets WCAG AA contrast; the theme switch is kept per
browser; the menu is a drawer on a phone; a list page opens on its list; an e-mail's page shows
its events first and its content in tabs; the list narrows by days and sending domain.
Screenshots of every page go to ``test-output/layout/`` (or ``$MAILSVC_TEST_OUTPUT/layout``).
docs/decisions.md, "Dashboard: themes and small screens" and "Dashboard: an e-mail's page".
"""

from __future__ import annotations

import json
import re

import psycopg2
import pytest
import resend

from tests.helpers.browser import (
    Seen,
    api_key_of,
    drive,
    go,
    output_dir,
    set_first_password,
    settled,
)
from tests.helpers.pagechecks import LONG_LABEL, fits, page_call
from tests.helpers.polling import until

pytestmark = pytest.mark.slow

OUTPUT = output_dir("layout")
#: Copied to docs/images/ with MAILSVC_UPDATE_SCREENSHOTS=1 (the README's "Dashboard").
DOCS_SHOTS = frozenset({"emails-375-dark", "inbox-1280-dark"})
#: A message with its own dark-mode rules, as a well-made e-mail has.
HTML = """<!doctype html><html><head><meta name="color-scheme" content="light dark"><style>
body { font-family: sans-serif; margin: 0; padding: 24px; background: #ffffff; color: #1d2939; }
@media (prefers-color-scheme: dark) { body { background: #16181d; color: #e6e9ef; } }
</style></head><body><h1>Your order has shipped</h1><p>It arrives on Thursday.</p></body></html>"""
LONG_SUBJECT = "Your order INV-2026-000123456789 has shipped: track it, change the address or return it"


def seed(page, daemon) -> dict:
    """An account with something on every page, its values as long as real ones get."""
    token = api_key_of(page)
    resend.api_url, resend.api_key = daemon.url, token
    sent = [resend.Emails.send({"from": "onboarding@resend.dev", "to": [f"{kind}+{LONG_LABEL}@resend.dev"],
                                "subject": f"{LONG_SUBJECT} ({kind})", "html": HTML, "text": "Your order has shipped"})
            for kind in ("delivered", "bounced", "complained")]
    status, domain = page_call(page, "POST", "/dashboard/domains", {"name": f"mail.{LONG_LABEL}.example.com"})
    assert status in (200, 201), domain
    status, hook = page_call(page, "POST", "/dashboard/webhooks", {
        "endpoint": f"https://127.0.0.1:9/hooks/{LONG_LABEL}/mailsvc/events", "events": ["email.sent"]})
    assert status in (200, 201), hook
    made = {}
    for name, path, body in (
            ("suppression", "/dashboard/suppressions", {"email": f"someone.{LONG_LABEL}@example.com"}),
            ("contact", "/dashboard/contacts", {"email": f"contact.{LONG_LABEL}@example.com", "first_name": "Ann"}),
            ("template", "/dashboard/templates",
             {"name": "Order shipped", "subject": "Shipped", "html": "<p>Shipped</p>"}),
            ("segment", "/dashboard/segments", {"name": f"Customers {LONG_LABEL}"})):
        status, made[name] = page_call(page, "POST", path, body)
        assert status in (200, 201), made[name]
    status, broadcast = page_call(page, "POST", "/dashboard/broadcasts", {
        "segment_id": made["segment"]["id"], "name": f"Spring sale {LONG_LABEL}", "from": "onboarding@resend.dev",
        "subject": LONG_SUBJECT, "html": "<p>Spring</p>"})
    assert status in (200, 201), broadcast

    def inbox():
        listed = page_call(page, "GET", "/dashboard/inbox", None)[1]["data"]
        return listed if len(listed) == 3 else None
    message = until(inbox, 30, "three messages in the inbox")[0]
    return {"email": sent[0]["id"], "domain": domain["id"], "webhook": hook["id"], "message": message["id"],
            "contact": made["contact"]["id"], "template": made["template"]["id"], "broadcast": broadcast["id"]}


def pages(made: dict) -> list[tuple[str, str, str]]:
    return [("#/", "Overview", "overview"), ("#/emails", "E-mails", "emails"),
            (f"#/emails/{made['email']}", f"{LONG_SUBJECT} (delivered)", "email"),
            ("#/inbox", "Inbox", "inbox"), (f"#/inbox/{made['message']}", None, "inbox-message"),
            ("#/domains", "Domains", "domains"), (f"#/domains/{made['domain']}", None, "domain"),
            ("#/api-keys", "API keys", "api-keys"), ("#/webhooks", "Webhooks", "webhooks"),
            (f"#/webhooks/{made['webhook']}", "Webhook", "webhook"), ("#/suppressions", "Suppressions", "suppressions"),
            ("#/contacts", "Contacts and segments", "contacts"), ("#/templates", "Templates", "templates"),
            ("#/broadcasts", "Broadcasts", "broadcasts"), ("#/activity", "Activity", "activity"),
            ("#/settings", "Settings", "settings")]


def edited_pages(made: dict) -> list[tuple[str, str | None, str]]:
    """The pages of one thing edited in place, and the overview of a week of one domain (walked
    after the lists, whose times are checked while still "just now")."""
    return [("#/?days=7&domain=resend.dev", "Overview", "overview-week"),
            (f"#/contacts/{made['contact']}", None, "contact"),
            (f"#/templates/{made['template']}", "Order shipped", "template"),
            (f"#/broadcasts/{made['broadcast']}", f"Spring sale {LONG_LABEL}", "broadcast")]


def open_page(page, hash_: str, heading: str | None) -> None:
    if heading:
        go(page, hash_, heading)
    else:
        page.goto(page.url.split("#")[0] + hash_)
        page.locator("main h1").wait_for()
    settled(page)


def drawer_and_theme(page) -> None:
    """On a phone the menu is a drawer, by the keyboard too; the theme switch outlives a reload."""
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 375, "height": 740})
    go(page, "#/emails", "E-mails")
    link = page.get_by_role("navigation", name="Sections").get_by_role("link", name="Domains")
    assert not link.is_visible()
    menu = page.get_by_role("button", name="Menu")
    menu.focus()
    page.keyboard.press("Enter")
    link.wait_for(state="visible")
    assert menu.get_attribute("aria-expanded") == "true"
    assert page.evaluate("document.activeElement.textContent") == "Overview"
    page.keyboard.press("Escape")
    link.wait_for(state="hidden")
    assert page.evaluate("document.activeElement.textContent") == "Menu"
    menu.click()  # the Menu button stays in reach with the drawer open
    link.wait_for(state="visible")
    menu.click()
    link.wait_for(state="hidden")

    light = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    page.get_by_label("Theme").select_option("dark")
    dark = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    assert dark != light
    page.reload()
    page.get_by_role("heading", level=1, name="E-mails").wait_for()
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert page.evaluate("getComputedStyle(document.documentElement).backgroundColor") == dark
    page.emulate_media(color_scheme="dark")
    page.get_by_label("Theme").select_option("light")
    assert page.evaluate("getComputedStyle(document.documentElement).backgroundColor") == light
    page.get_by_label("Theme").select_option("auto")
    assert page.evaluate("localStorage.getItem('mailsvc.theme')") == "auto"
    assert page.evaluate("getComputedStyle(document.documentElement).backgroundColor") == dark


def activity(page) -> None:
    """The Activity page tells what was done in words (the code in the tooltip), filtered in the hash."""
    page.set_viewport_size({"width": 1280, "height": 800})
    go(page, "#/activity", "Activity")
    added = page.locator(".activity-what", has_text=f"added the domain mail.{LONG_LABEL}.example.com")
    assert added.count() == 1
    assert added.get_attribute("title").startswith("domain.create {")
    assert page.locator(".activity-what", has_text="signed in").count() >= 1
    page.get_by_label("Kind of action").select_option("domains")
    page.wait_for_url("**#/activity?kind=domains")
    page.get_by_role("heading", level=1, name="Activity").wait_for()
    whats = page.locator(".activity-what").all_inner_texts()
    assert whats and all("domain" in what for what in whats), whats
    page.get_by_label("Member").select_option(index=1)
    page.wait_for_url(re.compile(r"#/activity\?kind=domains&member=[\w-]+$"))


def lists_first(page) -> None:
    """A list page with something in it opens on the list; "New key" opens the form."""
    page.set_viewport_size({"width": 1280, "height": 800})
    go(page, "#/api-keys", "API keys")
    name = page.get_by_label("Name", exact=True)
    assert not name.is_visible()
    assert page.locator("tbody tr:not(.empty)").count() >= 1
    page.get_by_role("button", name="New key").click()
    name.wait_for(state="visible")
    assert page.evaluate("document.activeElement.name") == "name"


def filters_in_the_hash(page) -> None:
    """The e-mails list by status chip and search, the filter in the hash (Back returns to the
    previous one), its states in words with their codes in a title, times relative."""
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1280, "height": 800})
    go(page, "#/emails", "E-mails")
    assert page.locator("tbody tr").count() == 3
    page.get_by_role("group", name="Filter by status").get_by_role("link", name="bounced").click()
    page.wait_for_url("**#/emails?status=bounced")
    until(lambda: page.locator("tbody tr").count() == 1 and "(bounced)" in page.locator("tbody tr").text_content(),
          10, "the bounced e-mail alone")
    chip = page.get_by_role("group", name="Filter by status").get_by_role("link", name="bounced")
    assert chip.get_attribute("aria-current") == "true"
    page.get_by_label("Search subject, sender or recipient").fill("complained")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**#/emails?status=bounced&q=complained")
    page.get_by_role("cell", name="No bounced e-mail matches “complained”.").wait_for()
    page.go_back()
    page.wait_for_url("**#/emails?status=bounced")
    page.locator("tbody tr a.clip").wait_for()
    badge = page.locator("tbody .badge")
    assert badge.text_content() == "bounced" and badge.get_attribute("title") == "bounced"
    assert page.locator("tbody time").text_content() == "just now"
    assert page.locator("tbody time").get_attribute("title")
    go(page, "#/suppressions", "Suppressions")

    def three():
        page.reload()
        page.locator("tbody .badge").first.wait_for()
        return page.locator("tbody .badge").count() == 3
    until(three, 30, "the three suppressions (the bounce's and the complaint's recorded as they are delivered)")
    origins = page.eval_on_selector_all("tbody .badge", "nodes => nodes.map((n) => [n.title, n.textContent])")
    assert sorted(origins) == [["complaint", "complaint"], ["hard_bounce", "hard bounce"], ["manual", "added by hand"]]


def dark_preview(page, made: dict) -> None:
    """In the dark theme (chosen, the system light) the message's frame is dark: its own
    prefers-color-scheme rules apply; the preview's Dark button turns it back to light."""
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1280, "height": 800})
    open_page(page, f"#/inbox/{made['message']}", None)
    page.get_by_label("Theme").select_option("dark")
    page.reload()
    page.locator("main h1").wait_for()
    assert page.get_by_role("button", name="Dark").get_attribute("aria-pressed") == "true"
    scheme = page.evaluate("getComputedStyle(document.querySelector('iframe.mailframe')).colorScheme")
    assert scheme == "dark", scheme

    def background():
        body = page.frame_locator("iframe.mailframe").locator("body")
        return body.evaluate("b => getComputedStyle(b).backgroundColor")
    until(lambda: background() == "rgb(22, 24, 29)", 10, "the preview dark")
    page.get_by_role("button", name="Dark").click()
    until(lambda: background() == "rgb(255, 255, 255)", 10, "the preview light again")


def overview_counts(page) -> None:
    """The Overview's figures are read again when its link is followed from the Overview itself."""
    page.set_viewport_size({"width": 1280, "height": 800})
    go(page, "#/", "Overview")
    page.get_by_role("navigation", name="Sections").get_by_role("link", name="Overview").click()
    sent = page.locator("div.card.stat", has_text="sent (30 days)").locator(".stat-value")
    until(lambda: sent.text_content() == "3", 10, "3 sent on the Overview")


def email_page(page, made: dict, problems: list[str]) -> None:
    """An e-mail's status and events come first; its content is in tabs: the preview (light and
    dark, its own dark rules applied), the HTML as written, the source as signed (its Inbox copy);
    each id has its copy button."""
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1280, "height": 800})
    go(page, f"#/emails/{made['email']}", f"{LONG_SUBJECT} (delivered)")
    headings = page.locator("main section.card h2").all_text_contents()
    assert headings == ["Status", "Details", "Content"], headings
    page.locator("ol.timeline li", has_text="delivered").locator("pre.answer").wait_for()
    for label in ("Copy id", "Copy Message-ID"):
        assert page.get_by_role("button", name=re.compile(f"^{label}: ")).count() == 1, label
    tablist = page.get_by_role("tablist", name="The e-mail's content")
    assert tablist.get_by_role("tab").all_text_contents() == [
        "Preview", "HTML", "Text", "Source as signed", "Attachments"]

    def background():
        return page.frame_locator("iframe.preview").locator("body").evaluate("b => getComputedStyle(b).backgroundColor")
    page.frame_locator("iframe.preview").get_by_text("Your order has shipped").wait_for()
    until(lambda: background() == "rgb(255, 255, 255)", 10, "the preview light")
    page.get_by_role("button", name="Dark").click()
    until(lambda: background() == "rgb(22, 24, 29)", 10, "the preview dark, as the message's own rules say")
    page.get_by_role("button", name="Phone width").click()
    assert page.locator("iframe.preview").evaluate("f => f.getBoundingClientRect().width") <= 375
    tablist.get_by_role("tab", name="HTML").click()
    assert "@media (prefers-color-scheme: dark)" in page.get_by_role("tabpanel").locator("pre").text_content()
    tablist.get_by_role("tab", name="HTML").press("ArrowRight")
    assert page.get_by_role("tabpanel").locator("pre.text").text_content() == "Your order has shipped"
    tablist.get_by_role("tab", name="Source as signed").click()
    assert page.get_by_role("tabpanel").locator("pre.source").text_content().startswith("DKIM-Signature:")
    fits(page, "email-source", problems, OUTPUT, DOCS_SHOTS)
    page.get_by_role("link", name="Its Inbox copy").click()
    page.wait_for_url(re.compile(r"#/inbox/[\w-]+$"))


def filter_by_day(page) -> None:
    """The list by a range of days (the reader's) and by sending domain, kept in the hash."""
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1280, "height": 800})
    go(page, "#/emails", "E-mails")
    today = page.evaluate("new Date().toLocaleDateString('en-CA')")
    page.get_by_label("From day").fill("2020-01-01")
    page.get_by_label("To day").fill("2020-01-31")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**#/emails?from=2020-01-01&to=2020-01-31")
    page.get_by_role("cell", name="No e-mail from 2020-01-01 to 2020-01-31.").wait_for()
    page.get_by_label("From day").fill(today)
    page.get_by_label("To day").fill(today)
    page.get_by_label("Sending domain").fill("resend.dev")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url(f"**#/emails?from={today}&to={today}&domain=resend.dev")
    until(lambda: page.locator("tbody tr:not(.empty)").count() == 3, 10, "today's three e-mails")
    page.get_by_role("group", name="Filter by status").get_by_role("link", name="bounced").click()
    page.wait_for_url(f"**#/emails?status=bounced&from={today}&to={today}&domain=resend.dev")
    until(lambda: page.locator("tbody tr:not(.empty)").count() == 1, 10, "today's bounced e-mail")


def webhook_deliveries(page, made: dict) -> None:
    """A failed attempt is told in words with its payload as sent, every attempt of it in a table;
    Retry now makes one more at once; the last 24 hours' share. (The webhook hears of the e-mails
    sent after it was made: one more.)"""
    resend.Emails.send({"from": "onboarding@resend.dev", "to": ["delivered@resend.dev"], "subject": "For the hook",
                        "text": "Hello"})
    page.get_by_label("Theme").select_option("auto")  # the system's, as fits sets it
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1280, "height": 800})

    go(page, f"#/webhooks/{made['webhook']}", "Webhook")

    def attempted():
        page.reload()
        page.locator("p.success").wait_for()
        return page.locator("details.delivery summary .muted").count() > 0
    until(attempted, 60, "a failed attempt of the webhook")
    assert "0 % delivered" in page.locator("p.success").text_content()
    delivery = page.locator("details.delivery", has=page.locator("summary .muted")).first
    delivery.locator("summary").click()
    assert delivery.get_by_role("columnheader", name="Error", exact=True).count() == 1
    payload = json.loads(delivery.locator("pre.source").text_content())
    assert payload["type"] == "email.sent" and payload["data"]["email_id"]
    assert delivery.get_by_role("button", name=re.compile("^Copy the payload")).is_visible()
    # Every attempt, with what went wrong in words (nothing listens at port 9), and Retry now.
    attempts = delivery.get_by_role("table", name=re.compile("^Every attempt of this"))
    first = attempts.locator("tbody tr").first
    assert first.locator("td").nth(2).text_content() == "None"  # no HTTP status
    assert "Connection refused" in first.locator("td").nth(4).text_content()
    assert re.fullmatch(r"\d+ (ms|s)|\d+\.\d s", first.locator("td").nth(3).text_content())
    made = attempts.locator("tbody tr").count()
    event_id = delivery.get_attribute("data-event")
    delivery.get_by_role("button", name="Retry now").click()

    def retried():
        page.reload()
        opened = page.locator(f"details.delivery[data-event='{event_id}']")
        opened.locator("summary").wait_for()
        if not opened.evaluate("d => d.open"):
            opened.locator("summary").click()
        return opened.locator("table tbody tr").count() > made
    until(retried, 30, "the retried attempt")
    problems: list[str] = []
    fits(page, "webhook-delivery", problems, OUTPUT, DOCS_SHOTS)
    assert not problems, "\n".join(problems)


def lists_paged(page) -> None:
    """A list a page at a time, the cursor in the hash: Older, then Newer, and Back returns."""
    page.set_viewport_size({"width": 1280, "height": 800})
    status, added = page_call(page, "POST", "/dashboard/suppressions/batch/add", {
        "emails": [f"paged{i:02}@example.com" for i in range(55)]})
    assert status == 201, added
    go(page, "#/suppressions", "Suppressions")
    assert page.locator("tbody tr:not(.empty)").count() == 50
    assert page.get_by_role("link", name="← Newer").count() == 0
    page.get_by_role("link", name="Older →").click()
    page.wait_for_url(re.compile(r"#/suppressions\?after=[\w-]+$"))
    until(lambda: page.locator("tbody tr:not(.empty)").count() == 58 - 50, 10, "the older page's 8 addresses")
    assert page.get_by_role("link", name="Older →").count() == 0
    page.get_by_role("link", name="← Newer").click()
    page.wait_for_url(re.compile(r"#/suppressions\?before=[\w-]+$"))
    until(lambda: page.locator("tbody tr:not(.empty)").count() == 50, 10, "the newer page again")
    page.go_back()
    page.wait_for_url(re.compile(r"#/suppressions\?after=[\w-]+$"))
    page.get_by_role("link", name="← Newer").wait_for()
    page.get_by_label("Origin").select_option("manual")
    page.wait_for_url("**#/suppressions?origin=manual")


def autosaved_template(page, made: dict, seen) -> None:
    """A template's draft saved by itself a second after the typing stops, the state shown;
    Ctrl+Z restores the previous saved value (and saves it); leaving with changes unsaved asks."""
    page.set_viewport_size({"width": 1280, "height": 800})
    path = f"/dashboard/templates/{made['template']}"
    go(page, f"#{path.removeprefix('/dashboard')}", "Order shipped")
    state = page.locator("#draft-state")
    subject = page.get_by_label("Subject", exact=True)
    subject.fill("Shipped today")
    assert state.text_content() == "Unsaved changes…"
    state.get_by_text("Saved.").wait_for()
    assert page_call(page, "GET", path)[1]["subject"] == "Shipped today"
    subject.press("Control+z")
    until(lambda: subject.input_value() == "Shipped", 10, "the previous saved subject on screen")
    until(lambda: page_call(page, "GET", path)[1]["subject"] == "Shipped", 10, "the previous saved subject saved")
    page.get_by_label("Reply-To").fill("replies@example.com, desk@example.com")
    state.get_by_text("Saved.").wait_for()
    assert page_call(page, "GET", path)[1]["reply_to"] == ["replies@example.com", "desk@example.com"]
    subject.fill("Not saved yet")
    asked = len(seen.dialogs)
    page.get_by_role("navigation", name="Sections").get_by_role("link", name="Templates").click()
    page.get_by_role("heading", level=1, name="Templates").wait_for()
    assert seen.dialogs[asked:] == ["This page has changes that are not saved yet. Leave it and lose them?"]


def edited_broadcast(page, made: dict, dsn: str) -> None:
    """A draft broadcast edited in place and saved; scheduled (as a send at a time leaves it: the
    account has no verified domain to send from), it offers to cancel the schedule to edit it,
    and its PATCH is refused (409) until then."""
    page.set_viewport_size({"width": 1280, "height": 800})
    path = f"/dashboard/broadcasts/{made['broadcast']}"
    go(page, f"#{path.removeprefix('/dashboard')}", f"Spring sale {LONG_LABEL}")
    page.get_by_label("Preview text").fill("Everything half price")
    page.locator("#draft-state").get_by_text("Saved.").wait_for()
    assert page_call(page, "GET", path)[1]["preview_text"] == "Everything half price"
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("UPDATE broadcasts SET status = 'scheduled', scheduled_at = now() + interval '2 days'"
                    " WHERE id = %s", (made["broadcast"],))
    status, refused = page_call(page, "PATCH", path, {"subject": "Too late"})
    assert status == 409, refused
    page.reload()
    page.get_by_role("button", name="Cancel the schedule to edit").click()
    page.get_by_label("Preview text").wait_for()
    assert page_call(page, "GET", path)[1]["status"] == "draft"
    assert page.get_by_label("Preview text").input_value() == "Everything half price"


def test_every_page_fits_a_phone_in_both_themes(daemon, browser, fresh_dsn):
    def walk(page, context):
        set_first_password(page, daemon)
        made = seed(page, daemon)
        problems: list[str] = []
        overview_counts(page)
        # First, while the e-mails are still "just now" (the shots below take a while).
        filters_in_the_hash(page)
        for hash_, heading, name in pages(made):
            open_page(page, hash_, heading)
            for opened in page.locator("details.delivery").all()[:1]:
                opened.evaluate("d => { d.open = true; }")
            fits(page, name, problems, OUTPUT, DOCS_SHOTS)
        email_page(page, made, problems)
        assert not problems, "\n".join(problems)
        filter_by_day(page)
        drawer_and_theme(page)
        activity(page)
        lists_first(page)
        dark_preview(page, made)
        webhook_deliveries(page, made)
        for hash_, heading, name in edited_pages(made):
            open_page(page, hash_, heading)
            fits(page, name, problems, OUTPUT, DOCS_SHOTS)
        assert not problems, "\n".join(problems)
        lists_paged(page)
        autosaved_template(page, made, seen)
        edited_broadcast(page, made, fresh_dsn)

    seen = Seen()
    drive(browser, daemon, "layout", walk, output=OUTPUT, viewport=(1280, 800), seen=seen)
