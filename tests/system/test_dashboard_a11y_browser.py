"""
The dashboard's pages pass axe-core's automated accessibility checks in a real headless Chromium
against the real daemon: WCAG 2.0, 2.1 and 2.2 A and AA rules (colour contrast among them) and
axe's best practices (heading order, landmarks, named table headers), in the light and the dark
theme (the system's ``prefers-color-scheme``), at 1,280 and 375 px. No violation of any impact on
the sign-in page nor on any signed-in page of an account with something in each. axe-core is the
npm package pinned in tests/node/package.json; its script is run in the page by the browser's
devtools protocol, which the dashboard's Content-Security-Policy does not govern (the policy stays
as served). axe leaves undecided what it cannot see: the overview chart's day labels (SVG text,
in the theme's muted colour) and an e-mail's preview (the sender's content in a sandboxed frame).
"""

from __future__ import annotations

import pytest
import resend

from tests.helpers.browser import api_key_of, drive, output_dir, set_first_password, settled
from tests.helpers.pagechecks import AXE, violations
from tests.helpers.polling import until

pytestmark = pytest.mark.slow

OUTPUT = output_dir("a11y")
def call(page, method: str, path: str, body: dict | None) -> dict:
    """The dashboard's own API, as the page calls it (session cookie, CSRF token)."""
    status, made = page.evaluate("""async ([method, path, body]) => {
        const me = await (await fetch("/me")).json();
        const r = await fetch(path, {method, body: body === null ? undefined : JSON.stringify(body),
            headers: {"Content-Type": "application/json", "X-CSRF-Token": me.csrf_token}});
        return [r.status, await r.json()];
    }""", [method, path, body])
    assert status in (200, 201), made
    return made


def seed(page, daemon) -> list[str]:
    """Something on every page; the hashes of the pages to check."""
    resend.api_url, resend.api_key = daemon.url, api_key_of(page)
    sent = [resend.Emails.send({"from": "onboarding@resend.dev", "to": [f"{kind}@resend.dev"],
                                "subject": f"Your order ({kind})", "html": "<p>Shipped</p>", "text": "Shipped"})
            for kind in ("delivered", "bounced")]
    domain = call(page, "POST", "/dashboard/domains", {"name": "mail.example.com"})
    hook = call(page, "POST", "/dashboard/webhooks", {"endpoint": "https://127.0.0.1:9/hook", "events": ["email.sent"]})
    call(page, "POST", "/dashboard/suppressions", {"email": "someone@example.com"})
    contact = call(page, "POST", "/dashboard/contacts", {"email": "ann@example.com", "first_name": "Ann"})
    template = call(page, "POST", "/dashboard/templates", {"name": "Order shipped", "subject": "Shipped",
                                                           "html": "<p>Hi</p>"})
    segment = call(page, "POST", "/dashboard/segments", {"name": "Customers"})
    broadcast = call(page, "POST", "/dashboard/broadcasts", {
        "segment_id": segment["id"], "name": "Spring sale", "from": "onboarding@resend.dev", "subject": "Sale",
        "html": "<p>S</p>"})
    message = until(lambda: call(page, "GET", "/dashboard/inbox", None)["data"], 30, "a message in the inbox")[0]
    return ["#/", "#/emails", f"#/emails/{sent[0]['id']}", "#/inbox", f"#/inbox/{message['id']}", "#/domains",
            f"#/domains/{domain['id']}", "#/api-keys", "#/webhooks", f"#/webhooks/{hook['id']}", "#/contacts",
            f"#/contacts/{contact['id']}", "#/broadcasts", f"#/broadcasts/{broadcast['id']}", "#/templates",
            f"#/templates/{template['id']}", "#/suppressions", "#/activity", "#/settings"]


def webhook_attempts_shown(page, hook_hash: str) -> list[str]:
    """A webhook delivery opened, with its attempts (nothing listens at its port): one e-mail sent
    after the webhook was made is one delivery."""
    resend.Emails.send({"from": "onboarding@resend.dev", "to": ["delivered@resend.dev"], "subject": "For the hook",
                        "text": "Hello"})
    page.goto(page.url.split("#")[0] + hook_hash)

    def attempted():
        page.reload()
        page.locator("p.success").wait_for()
        return page.locator("details.delivery table tbody tr").count() > 0
    until(attempted, 60, "an attempt of the webhook")
    page.locator("details.delivery summary").first.click()
    return violations(page, f"{hook_hash}, a delivery's attempts")


def shown_on_demand(page, email_hash: str, hashes: list[str]) -> list[str]:
    """What a page shows on a click: an e-mail's other tabs, the menu's drawer on a phone, a
    webhook delivery's attempts."""
    page.goto(page.url.split("#")[0] + email_hash)
    tablist = page.get_by_role("tablist", name="The e-mail's content")
    found = []
    for tab in ("HTML", "Text", "Source as signed", "Attachments"):
        tablist.get_by_role("tab", name=tab).click()
        found += violations(page, f"{email_hash}, its {tab} tab")
    page.set_viewport_size({"width": 375, "height": 740})
    page.get_by_role("button", name="Menu").click()
    page.get_by_role("navigation", name="Sections").get_by_role("link", name="Domains").wait_for(state="visible")
    found += violations(page, "the menu's drawer", widths=((375, 740),))
    return found + webhook_attempts_shown(page, next(h for h in hashes if h.startswith("#/webhooks/")))


def test_every_page_passes_axe_in_both_themes(daemon, browser):
    assert AXE.is_file(), "run scripts/test once: it installs tests/node (axe-core)"

    def walk(page, context):
        found: list[str] = []
        page.goto(daemon.url + "/")
        page.get_by_role("heading", level=1, name="Sign in to mailsvc").wait_for()
        found += violations(page, "sign-in")
        set_first_password(page, daemon)
        hashes = seed(page, daemon)
        for hash_ in hashes:
            page.goto(page.url.split("#")[0] + hash_)
            until(lambda: page.locator("main h1").count() == 1 and not page.get_by_text("Loading…").count(),
                  10, f"{hash_} shown")
            settled(page)
            found += violations(page, hash_)
        found += shown_on_demand(page, next(h for h in hashes if h.startswith("#/emails/")), hashes)
        assert not found, f"{len(found)} accessibility violations:\n" + "\n".join(found)

    drive(browser, daemon, "a11y", walk, output=OUTPUT, viewport=(1280, 800))
