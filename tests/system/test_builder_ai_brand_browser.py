"""
The builder's "Generate with AI" and "Import from website", and the pages waiting out
the account's shared API rate (429), in Debian's headless Chromium against the real daemon,
PostgreSQL and the SMTP sink of tests/system/test_content_ui_browser.py. The fake AI provider
(tests/helpers/fake_ai.py) and the fixture website (tests/helpers/fixture_site.py) are Twisted servers: they run
in a process of their own on loopback, and the test scripts the provider's next answers through
that process's stdin. Screenshots go to test-output/content/.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import psycopg2
import pytest
import requests

from tests.helpers.browser import drive, go, set_first_password
from tests.helpers.builder_canvas import BuilderCanvas
from tests.helpers.content_ui import OUTPUT, Session, daemon, shoot, sink  # noqa: F401 (fixtures)
from tests.helpers.daemon import ROOT
from tests.helpers.fixture_site import ACCENT, BUTTON, PRIMARY
from tests.helpers.polling import until

pytestmark = pytest.mark.slow

FAKES = """
import json, sys, threading
sys.path.insert(0, {root!r})
from twisted.internet import reactor
from tests.helpers.fake_ai import FakeProvider, Turn
from tests.helpers.fixture_site import FixtureSite

provider, site = FakeProvider(), FixtureSite()
print(json.dumps({{"ai": provider.base_url, "site": site.number}}), flush=True)

def script(line):
    provider.script(Turn(**json.loads(line)))
    print("scripted", flush=True)

def read():
    for line in sys.stdin:
        reactor.callFromThread(script, line)
    reactor.callFromThread(reactor.stop)

threading.Thread(target=read, daemon=True).start()
reactor.run()
"""

GENERATED = {"subject": "Autumn sale", "preview_text": "Rockets at half price", "document": {"version": 1, "blocks": [
    {"type": "heading", "text": "Autumn sale at Acme Rockets"},
    {"type": "text", "runs": [{"text": "Every rocket at half price until Sunday."}]},
    {"type": "button", "label": "Shop the autumn sale", "href": "https://acme.example/sale"},
    {"type": "footer", "text": "Acme Rockets, 1 Launch Way", "unsubscribe": True},
]}}
AI_QUOTA = 2


class Fakes:
    """The fake AI provider and the fixture site, served by a reactor in a child process."""

    def __init__(self):
        self.process = subprocess.Popen([sys.executable, "-c", FAKES.format(root=str(ROOT))], cwd=ROOT,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        started = json.loads(self.process.stdout.readline())
        self.ai_url, self.site_port = started["ai"], started["site"]

    def script(self, **turn) -> None:
        """The provider's next answer (a tests.helpers.fake_ai.Turn's fields), in place before the call."""
        self.process.stdin.write(json.dumps(turn) + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "scripted"

    def stop(self) -> None:
        self.process.stdin.close()  # the child's reactor stops at the end of its input
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()


@pytest.fixture
def fakes():
    running = Fakes()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def daemon_settings(fakes) -> dict[str, str]:
    """AI on the fake provider; brand import may fetch the fixture site's loopback port."""
    return dict(MAILSVC_AI_PROVIDER="openai", MAILSVC_AI_BASE_URL=fakes.ai_url, MAILSVC_AI_API_KEY="sk-test",
                MAILSVC_AI_MODEL="fake-model", MAILSVC_AI_MONTHLY_QUOTA=str(AI_QUOTA),
                MAILSVC_SECURITY_TEST_EXTRA_PORTS=str(fakes.site_port))


def operator_patch(node, tmp_path, tenant_id: str, **fields) -> None:
    """PATCH /admin/v1/tenants/{id} with the operator token of the daemon ``node``."""
    token = (tmp_path / "state" / "operator-token").read_text().strip()
    response = requests.patch(f"{node.url}/admin/v1/tenants/{tenant_id}", json=fields, timeout=10,
                              headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text


def preview_html(page) -> str:
    """The document shown in the live preview frame (the server's rendering)."""
    return page.frame_locator("iframe.mailframe").locator("html").evaluate("e => e.outerHTML")


def test_generate_with_ai_undo_and_import_a_brand(daemon, browser, fakes, tmp_path):  # noqa: F811
    drive(browser, daemon, "builder-ai-brand",
          lambda page, context: ai_and_brand(page, context, daemon, fakes, tmp_path), output=OUTPUT)


def ai_and_brand(page, context, node, fakes, tmp_path):
    set_first_password(page, node)
    api = Session(node.url, context)
    operator_patch(node, tmp_path, api.call("GET", "/me")["account"]["id"], plan="scale")

    # A design of one's own first: a heading and a text.
    go(page, "#/builder", "Builder")
    builder = BuilderCanvas(page)
    frame = builder.preview
    builder.append_blocks("heading", "text")
    builder.type_text("heading", "Before the AI")
    frame.get_by_text("Before the AI").wait_for()
    quota = page.locator("#ai-quota")
    assert quota.text_content() == f"{AI_QUOTA} of {AI_QUOTA} generations left this month (10 a minute)."

    # Generate: the provider's document replaces the design, on the canvas and in the preview.
    fakes.script(content=json.dumps(GENERATED))
    page.get_by_label("Describe the e-mail").fill("An autumn sale for Acme Rockets, half price until Sunday.")
    page.get_by_role("button", name="Generate", exact=True).click()
    page.get_by_text("Generated: the design below was replaced").wait_for()
    assert builder.types() == ["heading", "text", "button", "footer"]
    assert builder.text("heading").text_content() == "Autumn sale at Acme Rockets"
    assert page.get_by_label("Subject").input_value() == "Autumn sale"
    page.locator("#ai-quota", has_text=f"1 of {AI_QUOTA} generations left").wait_for()
    frame.get_by_text("Shop the autumn sale").wait_for()
    assert frame.get_by_text("Autumn sale at Acme Rockets").count() == 1
    shoot(page, "builder-ai")

    # Undo: one's own design again, on the canvas and in the preview.
    builder.undo()
    assert builder.types() == ["heading", "text"]
    assert builder.text("heading").text_content() == "Before the AI"
    frame.get_by_text("Before the AI").wait_for()
    assert "Shop the autumn sale" not in preview_html(page)

    # The provider failing: said in words, nothing replaced, nothing charged.
    fakes.script(status=500, content="upstream failure")
    page.get_by_role("button", name="Generate", exact=True).click()
    failed = page.locator("#main p.error")
    failed.wait_for()
    assert failed.text_content().startswith("The AI provider could not be reached or answered an error.")
    assert builder.types() == ["heading", "text"]
    assert quota.text_content().startswith(f"1 of {AI_QUOTA} ")

    # Import from website: the AI's pick (the last generation of the quota) is proposed.
    fakes.script(content=json.dumps({"logo": 1, "dark_logo": None, "primary": BUTTON, "accent": PRIMARY,
                                     "rationale": "The teal of the buttons carries the brand."}))
    page.get_by_label("Website").fill(f"http://127.0.0.1:{fakes.site_port}/")
    page.get_by_role("button", name="Import", exact=True).click()
    result = page.locator("#brand-result")
    result.get_by_text("The teal of the buttons carries the brand.").wait_for(timeout=60_000)
    page.locator("#ai-quota", has_text=f"0 of {AI_QUOTA} generations left").wait_for()
    logos = result.get_by_role("radiogroup", name="Logo").get_by_role("radio")
    assert logos.count() >= 3
    assert logos.nth(1).is_checked()  # the AI's pick
    for i in range(logos.count()):  # each stored logo is served by the daemon and shown
        assert result.locator("div.logos img").nth(i).evaluate("img => img.complete && img.naturalWidth > 0")
    brand_colours = result.get_by_role("radiogroup", name="Brand colour")
    assert brand_colours.get_by_role("radio", name=re.compile(f"^ ?{BUTTON} ")).is_checked()
    for hex_ in (PRIMARY, ACCENT):
        assert brand_colours.get_by_role("radio", name=re.compile(f"^ ?{hex_} ")).count() == 1
    body_fonts = result.get_by_role("radiogroup", name="Body web font")
    assert body_fonts.get_by_role("radio", name=re.compile("Poppins")).is_checked()
    assert result.get_by_label("Safe font").input_value() == "system"

    # Pick others than the proposals: the last logo, the accent, Playfair Display for the body
    # (its safe font, georgia, follows) and Poppins for the headings.
    logos.last.check()
    chosen_logo = logos.last.get_attribute("value")
    brand_colours.get_by_role("radio", name=re.compile(f"^ ?{ACCENT} ")).check()
    result.get_by_role("radiogroup", name="Link colour").get_by_role("radio", name=re.compile(f"^ ?{BUTTON} ")).check()
    body_fonts.get_by_role("radio", name=re.compile("Playfair Display")).check()
    assert result.get_by_label("Safe font").input_value() == "georgia"
    result.get_by_role("radiogroup", name="Heading web font").get_by_role("radio", name=re.compile("Poppins")).check()
    shoot(page, "brand-import", "content-brand-import.png",
          page.locator("section.card", has=page.get_by_role("heading", name="Import from website")))
    result.get_by_role("button", name="Apply to theme").click()
    result.locator("#brand-applied").wait_for()

    # The theme panel and the preview show the picks.
    theme = page.locator("#theme")
    assert theme.locator("input[name=brand_color]").input_value() == ACCENT
    assert theme.locator("input[name=link_color]").input_value() == BUTTON
    assert theme.locator("input[name=logo_url]").input_value() == chosen_logo
    assert theme.locator("select[name=font]").input_value() == "georgia"
    assert theme.locator("input[name=web_font]").input_value() == "Playfair Display"
    assert theme.locator("input[name=heading_web_font]").input_value() == "Poppins"
    frame.locator(f"img[src='{chosen_logo}']").first.wait_for()
    shown = preview_html(page)
    assert ACCENT in shown and "Playfair Display" in shown and "Georgia" in shown, shown[:2000]
    shoot(page, "builder-brand-applied")

    # Saved: the template's document has the picks and one's own blocks; so has the account's theme.
    template_id = builder.save("Autumn")
    saved = api.call("GET", f"/dashboard/templates/{template_id}")["builder"]
    assert [(b["type"], b.get("text")) for b in saved["blocks"]] == [
        ("heading", "Before the AI"), ("text", "Some text.")]
    picks = {"brand_color": ACCENT, "link_color": BUTTON, "logo_url": chosen_logo, "font": "georgia",
             "web_font": "Playfair Display", "heading_web_font": "Poppins"}
    assert {k: saved["theme"].get(k) for k in picks} == picks
    account = api.call("GET", "/dashboard/template-builder/theme")
    assert account["theme_saved"] and {k: account["theme"].get(k) for k in picks} == picks
    assert account["brand"]["name"] == "Acme Rockets"

    # The quota used up (a generation and the import's pick): said in words.
    page.get_by_role("button", name="Generate", exact=True).click()
    page.locator("#main p.error", has_text="This month's AI generations are used up").wait_for()
    assert builder.types() == ["heading", "text"]


def test_the_pages_wait_out_429s(daemon, browser, sink, fresh_dsn, tmp_path):  # noqa: F811
    drive(browser, daemon, "rate-limited",
          lambda page, context: rate_limited(page, context, daemon, fresh_dsn, tmp_path), output=OUTPUT)


def rate_limited(page, context, node, fresh_dsn, tmp_path):
    set_first_password(page, node)
    api = Session(node.url, context)
    tenant_id = api.call("GET", "/me")["account"]["id"]
    operator_patch(node, tmp_path, tenant_id, plan="scale")  # the builder's plan
    api.call("POST", "/dashboard/domains", {"name": "acme.example.com"})
    with psycopg2.connect(fresh_dsn) as conn, conn.cursor() as cur:
        cur.execute("UPDATE domains SET status = 'verified'")
        cur.execute("UPDATE tenants SET delivery_mode = 'relay'")
    segment = api.call("POST", "/dashboard/segments", {"name": "Readers"})
    api.call("POST", "/dashboard/contacts/batch", {"segment_id": segment["id"], "contacts": [
        {"email": f"r{i}@example.net"} for i in range(30)]})
    made = api.call("POST", "/dashboard/broadcasts", {
        "name": "Rate test", "segment_id": segment["id"], "from": "news@acme.example.com", "subject": "Hello",
        "html": "<p>Hello</p>", "send": True})
    until(lambda: api.call("GET", f"/dashboard/broadcasts/{made['id']}")["stats"].get("delivered") == 30, 90,
          "the broadcast's deliveries")

    # One request a second (bursts of two) for the whole account: the pages meet 429s.
    operator_patch(node, tmp_path, tenant_id, api_rate_per_sec=1)
    refused, answers = [], []
    page.on("response", lambda r: r.status == 429 and refused.append(r.url))
    page.on("response", lambda r: answers.append((r.url, r.status)))
    go(page, f"#/broadcasts/{made['id']}", "Rate test")
    page.locator("#progress-text").get_by_text("30 / 30 written (100 %)").wait_for(timeout=30_000)
    page.locator("#stats g[data-outcome=delivered][data-count='30']").wait_for(timeout=30_000)

    def reads() -> int:
        """The page's answered reads of the broadcast (it reads it every second, waiting out 429s)."""
        return sum(1 for url, status in answers if status == 200 and url.endswith(f"/broadcasts/{made['id']}"))

    before = reads()
    until(lambda: reads() >= before + 3, 30, "three more reads of the broadcast by its page",
          pause=lambda seconds: page.wait_for_timeout(seconds * 1000))  # Playwright's events come meanwhile
    assert page.locator("#stats g[data-outcome=delivered]").get_attribute("data-count") == "30"
    assert page.locator("p.error").count() == 0, page.locator("p.error").first.text_content()
    go(page, "#/contacts", "Contacts and segments")
    page.get_by_role("link", name="r0@example.net").wait_for(timeout=30_000)
    assert page.locator("#contact-list tbody tr").count() == 30
    assert page.locator("p.error").count() == 0, page.locator("p.error").first.text_content()
    go(page, "#/builder", "Builder")
    BuilderCanvas(page).insert_block("heading", 0)
    page.get_by_text("Preview up to date.").wait_for(timeout=30_000)
    # The frame's load of the rendering is not counted: it shows the e-mail, never a 429's JSON.
    page.frame_locator("iframe.mailframe").get_by_text("A heading").wait_for()
    shoot(page, "rate-limited-builder")
    assert refused, "no request met a 429: the test did not test the waiting"
    assert page.locator("p.error").count() == 0, page.locator("p.error").first.text_content()
