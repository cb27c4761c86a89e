"""
The content pages in Debian's headless Chromium against the real daemon, PostgreSQL and
an SMTP sink on loopback (the account relays everything to it): an e-mail of eight block types
built with mouse and keyboard (a two-column row included), saved as a template, published after
its diff, a test sent and its HTML part compared with the renderer's output for the saved
document; a broadcast to a 2,000-contact segment sent from the UI with its progress bar reaching
100 % and the chart matching the delivery counts; a scheduled broadcast canceled from the UI.
Screenshots go to test-output/content/ (and, with MAILSVC_UPDATE_SCREENSHOTS=1, docs/images/).
"""

from __future__ import annotations

import email
import email.policy
import re

import psycopg2
import pytest

from tests.helpers.browser import PASSWORD, drive, go
from tests.helpers.builder_canvas import BuilderCanvas
from tests.helpers.content_ui import OUTPUT, Session, daemon, daemon_settings, shoot, sink  # noqa: F401 (fixtures)
from tests.helpers.polling import until

CONTACTS = 2000


def press(button) -> None:
    """
    Activates a button with the keyboard (focus, Enter), for the buttons below a preview frame.
    The frame is ``sandbox=""``: an opaque origin, which Chromium puts in a process of its own
    (IsolateSandboxedIframes), and a mouse event is routed to a frame's process by the browser's
    hit-test data. A click right after a scroll into view (what Playwright's click does) is routed
    by the data from before the scroll: where the frame was, so it lands in the frame and the
    button never sees it (the "Send test" that showed nothing). Key events go to the focused
    element, not through that hit test.
    """
    button.focus()
    button.press("Enter")


@pytest.mark.slow
def test_content_pages(daemon, browser, sink, fresh_dsn):  # noqa: F811 (the fixtures)
    drive(browser, daemon, "content", lambda page, context: walk(page, context, daemon, sink, fresh_dsn),
          output=OUTPUT)


def walk(page, context, daemon, sink, fresh_dsn):  # noqa: F811 (the fixtures, passed on)
    link = daemon.wait_for(r"sets a password at (\S+)").group(1)
    page.goto(link)
    page.get_by_label("New password").fill(PASSWORD)
    page.get_by_label("Repeat it").fill(PASSWORD)
    page.get_by_role("button", name="Set password and sign in").click()
    page.get_by_role("heading", name="Overview").wait_for()
    api = Session(daemon.url, context)
    api.call("POST", "/dashboard/domains", {"name": "acme.example.com"})
    with psycopg2.connect(fresh_dsn) as conn, conn.cursor() as cur:
        cur.execute("UPDATE domains SET status = 'verified'")
        cur.execute("UPDATE tenants SET plan = 'scale', delivery_mode = 'relay', send_rate_per_sec = 2000,"
                    " daily_quota = 100000, monthly_quota = 1000000")

    # The builder: eight block types, a two-column row, mouse and keyboard, on the canvas.
    go(page, "#/builder", "Builder")
    builder = BuilderCanvas(page)
    builder.append_blocks("heading", "text", "button", "divider", "list", "quote", "columns", "footer")
    assert len(builder.types()) == 8
    # Inside the columns: an image on the left, a code block on the right.
    builder.insert_block("image", 0, column=builder.column("columns", 0))
    builder.insert_block("code", 0, column=builder.column("columns", 1))
    # Edit the heading's text with the keyboard, where it stands.
    builder.type_text("heading", "Spring news")
    # Keyboard move: the footer (last) goes up one with Alt+ArrowUp, then back down.
    builder.move_block("footer", -1)
    assert builder.types()[6] == "footer"
    builder.move_block("footer", 1)
    assert builder.types()[7] == "footer"
    # Drag and drop: the quote onto the gap before the text.
    builder.drag_block("quote", 1)
    assert builder.types() == ["heading", "quote", "text", "button", "divider", "list", "columns", "footer"]
    # Remove then undo.
    builder.select_block("divider")
    builder.settings.get_by_role("button", name="Remove block").click()
    assert len(builder.types()) == 7
    builder.undo()
    assert len(builder.types()) == 8
    # The theme: a brand colour.
    builder.set_theme("brand_color", "#7c3aed")
    # The live preview: the server's rendering in the sandboxed frame.
    page.get_by_text("Preview up to date.").wait_for()
    frame = page.frame_locator("iframe.mailframe")
    frame.get_by_text("Spring news").wait_for()
    page.get_by_role("button", name="Phone").click()
    page.get_by_role("button", name="Light / dark").click()
    page.wait_for_timeout(300)
    shoot(page, "builder-phone-dark")
    page.get_by_role("button", name="Desktop").click()
    page.get_by_role("button", name="Light / dark").click()
    page.get_by_label("Template name").fill("Spring")
    page.get_by_label("Subject").fill("Spring news")
    shoot(page, "builder", "content-builder.png")
    template_id = builder.save()

    # The template: publish after the diff, send a test, compare with the renderer.
    go(page, f"#/templates/{template_id}", "Spring")
    page.get_by_label("From", exact=True).fill("news@acme.example.com")
    page.get_by_role("button", name="Save draft").click()
    page.get_by_text("Saved.").wait_for()
    page.get_by_role("button", name="Compare with the published version").click()
    page.locator("#publish-diff pre.diff").first.wait_for()
    page.get_by_role("button", name="Publish", exact=True).click()
    page.get_by_text("Published version is current.").wait_for()
    page.get_by_role("button", name="Preview with these values").click()
    page.frame_locator("iframe.mailframe").get_by_text("Spring news").wait_for()
    press(page.get_by_role("button", name="Send test"))
    page.get_by_text("Test sent to owner@example.com").or_(page.locator("p.error")).first.wait_for()
    assert not page.locator("p.error").count(), page.locator("p.error").first.text_content()
    got = until(lambda: [m for r, m in list(sink.messages) if r == ["owner@example.com"]], 30, "the test at the sink")
    parsed = email.message_from_bytes(got[0], policy=email.policy.default)
    assert parsed["Subject"] == "Spring news"
    saved = api.call("GET", f"/dashboard/templates/{template_id}")
    rendered = api.call("POST", "/dashboard/template-builder/render", {"document": saved["builder"]})
    sent_html = parsed.get_body(("html",)).get_content().replace("\r\n", "\n")
    assert sent_html.strip() == rendered["html"].replace("\r\n", "\n").strip()
    go(page, "#/templates", "Templates")
    shoot(page, "templates", "content-templates.png")

    # A broadcast to 2,000 contacts, sent from the UI.
    segment = api.call("POST", "/dashboard/segments", {"name": "Everyone"})
    for start in range(0, CONTACTS, 1000):
        made = api.call("POST", "/dashboard/contacts/batch", {"segment_id": segment["id"], "contacts": [
            {"email": f"c{i}@example.net", "first_name": f"F{i}"} for i in range(start, start + 1000)]})
        assert not made["errors"]
    go(page, "#/broadcasts", "Broadcasts")
    assert page.get_by_role("option", name="Everyone (2,000 contacts)").count() == 1
    page.get_by_label("Name").fill("Spring launch")
    page.get_by_label("Subject").fill("Hello {{{FIRST_NAME|there}}}")
    page.get_by_label("Start from").select_option(label="Spring")
    page.get_by_label("Insert placeholder").select_option("{{{FIRST_NAME|there}}}")
    page.get_by_role("button", name="Insert", exact=True).click()
    page.get_by_role("button", name="Create draft").click()
    page.get_by_role("heading", name="Spring launch").wait_for()
    assert page.locator("#cancel-why").text_content().startswith("Cancel is unavailable")
    # Preview as one of the segment's members offered in the menu (the newest 50).
    member = page.get_by_label("Preview as").locator("option").nth(1).text_content()
    page.get_by_label("Preview as").select_option(label=member)
    press(page.get_by_role("button", name="Show preview"))
    first_name = "F" + re.fullmatch(r"c(\d+)@example\.net", member).group(1)
    page.locator("#bc-subject").get_by_text(f"Hello {first_name}").wait_for()
    press(page.get_by_role("button", name="Send now"))
    page.locator("#progress-text").get_by_text(re.compile(r"^[1-9][\d,]* / 2,000 written")).wait_for(timeout=60_000)
    shoot(page, "broadcast-progress", "content-broadcast.png")
    page.locator("#progress-text").get_by_text("2,000 / 2,000 written (100 %)").wait_for(timeout=120_000)
    until(lambda: len([r for r, _ in list(sink.messages) if r != ["owner@example.com"]]) >= CONTACTS, 120,
          "the deliveries")
    page.locator("#stats g[data-outcome=delivered][data-count='2000']").wait_for(timeout=30_000)
    broadcast_id = page.url.rsplit("/", 1)[1]
    stats = api.call("GET", f"/dashboard/broadcasts/{broadcast_id}")["stats"]
    for outcome, count in stats.items():
        assert page.locator(f"#stats g[data-outcome={outcome}]").get_attribute("data-count") == str(count)
    assert page.get_by_role("button", name="Cancel", exact=True).is_disabled()
    shoot(page, "broadcast-sent")

    # Schedule a copy in words, then cancel it from the UI.
    press(page.get_by_role("button", name="Duplicate"))
    page.get_by_role("heading", name="Spring launch (copy)").wait_for()
    page.get_by_label("Or in words").fill("in 2 days")
    press(page.get_by_role("button", name="Schedule"))
    page.locator("#scheduled").wait_for()
    copy_id = page.url.rsplit("/", 1)[1]
    assert api.call("GET", f"/dashboard/broadcasts/{copy_id}")["status"] == "scheduled"
    press(page.get_by_role("button", name="Cancel", exact=True))
    page.locator("#bc-status .b-draft").wait_for()
    copy = api.call("GET", f"/dashboard/broadcasts/{copy_id}")
    assert copy["status"] == "draft" and copy["scheduled_at"] is None, copy

    # A failed broadcast says why in words, the code after them (not "Failed: domain_not_verified").
    with psycopg2.connect(fresh_dsn) as conn, conn.cursor() as cur:
        cur.execute("UPDATE broadcasts SET status = 'failed', failure = 'domain_not_verified' WHERE id = %s",
                    (copy_id,))
    page.reload()
    page.get_by_role("heading", name="Spring launch (copy)").wait_for()
    said = page.locator("main").get_by_role("alert").text_content()
    assert said == "The sending domain is not verified (domain_not_verified).", said
