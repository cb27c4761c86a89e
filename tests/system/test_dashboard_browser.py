"""
The web UI in a real headless Chromium (Debian's package, driven by Playwright's Python client;
nothing is downloaded), against the real daemon under twistd on the real PostgreSQL: the first
user's link, keys, domains, a send through the SDK and its events, webhooks, XSS payloads
staying inert, signing out; and the contacts page: a 1,000-row CSV import with its refused rows
told by line, search, paging, an edit, segments, and a contact name's payload inert. Screenshots
of each page at 1280 and 375 px go to ``test-output/dashboard/`` (or ``$MAILSVC_TEST_OUTPUT/dashboard``).
"""

from __future__ import annotations

import os
import re
import shutil

import psycopg2
import pytest
import requests
import resend

from tests.helpers.browser import (
    PASSWORD,
    Seen,
    api_key_of,
    drive,
    go,
    keep_screenshot,
    output_dir,
    set_first_password,
    settled,
)
from tests.helpers.daemon import ROOT

pytestmark = pytest.mark.slow

OUTPUT = output_dir("dashboard")
#: The screenshots the README shows, copied to docs/images/ with MAILSVC_UPDATE_SCREENSHOTS=1.
DOCS_IMAGES = ROOT / "docs" / "images"
DOCS_SHOTS = {"domain-1280", "domain-375", "overview-1280", "email-1280", "emails-375"}
#: Run if it ever becomes script: each sets a flag the test reads.
XSS_SUBJECT = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
XSS_HTML = '<p>Hello</p><script>parent.__xss=3</script><img src=x onerror="parent.__xss=4">'
XSS_ENDPOINT = 'https://127.0.0.1:9/"><img/src=x/onerror=window.__xss=5><script>window.__xss=6</script>'


def shoot(page, name: str) -> None:
    """The page as it is at 1280 px and at 375 px wide."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    for width, height in ((1280, 800), (375, 740)):
        page.set_viewport_size({"width": width, "height": height})
        settled(page)
        if page.locator("iframe").count():  # another process paints it: no frame of the page's tells when
            page.wait_for_timeout(150)
        # Nothing wider than the phone's screen (tables scroll inside their own box).
        if width == 375:
            overflow = page.evaluate("document.documentElement.scrollWidth")
            assert overflow <= 380, f"{name}: {overflow} px wide at 375 px"
        shot = OUTPUT / f"{name}-{width}.png"
        keep_screenshot(page, shot)
        if shot.stem in DOCS_SHOTS and os.environ.get("MAILSVC_UPDATE_SCREENSHOTS"):
            shutil.copy(shot, DOCS_IMAGES / f"dashboard-{shot.name}")
    page.set_viewport_size({"width": 1280, "height": 800})


def records_keep_their_columns(page) -> None:
    """At 1,280 and 375 px, every cell of the domain's records table is wider than a few
    characters, and the type and statuses stay on one line (no "T / X / T" column)."""
    for width in (1280, 375):
        page.set_viewport_size({"width": width, "height": 800})
        settled(page)
        cells = page.evaluate("""[...document.querySelectorAll('.records tbody tr')].map((row) =>
            [...row.cells].map((cell) => Math.round(cell.getBoundingClientRect().width)))""")
        assert cells and all(len(row) == 5 for row in cells), cells
        assert min(min(row) for row in cells) >= 56, (width, cells)
        lines = page.evaluate("""[...document.querySelectorAll('.records td.kind, .records .badge')].map((node) => {
            const text = document.createRange();
            text.selectNodeContents(node);
            return new Set([...text.getClientRects()].map((line) => Math.round(line.top))).size;
        })""")
        assert lines and max(lines) == 1, (width, lines)
    page.set_viewport_size({"width": 1280, "height": 800})


def empty_states_say_what_to_do(page, daemon) -> None:
    """A new account's lists: what to do next, not "Nothing yet."."""
    go(page, "#/emails", "E-mails")
    snippet = page.locator("#first-email pre").text_content()
    assert f'resend.api_url = "{daemon.url}"' in snippet
    assert '"from": "onboarding@resend.dev"' in snippet and '"to": "delivered@resend.dev"' in snippet
    assert page.get_by_role("link", name="API keys").count() >= 2  # the navigation's and the snippet's
    shoot(page, "emails-empty")
    go(page, "#/domains", "Domains")
    page.get_by_role("cell", name=re.compile(r"^No domain yet: add a domain \(New domain\)")).wait_for()
    go(page, "#/webhooks", "Webhooks")
    page.get_by_role("cell", name=re.compile(r"^No webhook yet\. A webhook tells your application what")).wait_for()
    for hash_, heading in (("#/api-keys", "API keys"), ("#/suppressions", "Suppressions"),
                           ("#/contacts", "Contacts and segments")):
        go(page, hash_, heading)
        assert "Nothing yet" not in page.locator("main").text_content(), hash_


def chart_fills_its_card(page) -> None:
    """The overview's chart is as wide as its card, and today's send is a bar one can see."""
    go(page, "#/", "Overview")
    chart, card = page.evaluate("""(() => {
        const chart = document.querySelector('svg.chart.days');
        const card = chart.parentElement;
        const pad = parseFloat(getComputedStyle(card).paddingLeft) + parseFloat(getComputedStyle(card).paddingRight);
        return [chart.getBoundingClientRect().width, card.clientWidth - pad];
    })()""")
    assert abs(chart - card) <= 2, (chart, card)
    bars = page.evaluate("""[...document.querySelectorAll('svg.chart.days rect.bar-sent')].map((bar) =>
        [bar.getBoundingClientRect().width, bar.getBoundingClientRect().height])""")
    assert len(bars) == 1 and bars[0][0] >= 8 and bars[0][1] >= 3, bars


def test_the_dashboard_end_to_end(daemon, browser, fresh_dsn):
    link = daemon.wait_for(r"sets a password at (\S+)").group(1)
    assert link.startswith(daemon.url + "/ui/#/set-password/")
    seen = Seen()
    drive(browser, daemon, "dashboard",
          lambda page, context: walk_through(page, context, daemon, fresh_dsn, link, seen.dialogs, seen.errors),
          output=OUTPUT, viewport=(1280, 800), accept_dialogs=False,
          permissions=("clipboard-read", "clipboard-write"), seen=seen)
    console = seen.console
    # No inline script or style of the UI was refused: it needs none (the e-mail's own, in its
    # sandboxed preview, are refused on purpose).
    assert not [m for m in console if "Content Security Policy" in m and "/html" not in m
                and "/x'" not in m], console


def walk_through(page, context, daemon, fresh_dsn, link, dialogs, errors):

    # The first user's link: choose a password, land signed in.
    page.goto(link)
    shoot(page, "set-password")
    page.get_by_label("New password").fill(PASSWORD)
    page.get_by_label("Repeat it").fill(PASSWORD)
    page.get_by_role("button", name="Set password and sign in").click()
    page.get_by_role("heading", name="Overview").wait_for()
    cookie = next(c for c in context.cookies() if c["name"] == "mailsvc_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax" and cookie["path"] == "/"
    assert page.evaluate("document.cookie") == ""  # the session is out of the page's reach

    # Sign out and in again with the keyboard only.
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("heading", name="Sign in to mailsvc").wait_for()
    shoot(page, "sign-in")
    page.get_by_label("E-mail address").focus()
    page.keyboard.type("owner@example.com")
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Sign in"
    me_reads = []
    page.on("request", lambda r: me_reads.append(r.url) if r.url.endswith("/me") else None)
    page.keyboard.press("Enter")
    page.get_by_role("heading", name="Overview").wait_for()

    # A new account's pages say what to do next.
    empty_states_say_what_to_do(page, daemon)

    # An error is told in words, its code after them.
    go(page, "#/domains", "Domains")
    page.get_by_label("Domain name").fill("not a domain")
    page.get_by_role("button", name="Add domain").click()
    said = page.get_by_role("alert").text_content()
    assert re.fullmatch(r"[A-Za-z].* \(validation_error\)", said) and "422" not in said, said

    # dom.js sets no link or source that is not http(s), mailto or the page's own.
    refused = page.evaluate("""(async () => {
        const { h } = await import("/ui/dom.js");
        return ["javascript:alert(1)", "data:text/html,x", " JAVASCRIPT:alert(1)", "#/emails",
                "https://example.com/", "/ui/"].map((href) => h("a", { href }).getAttribute("href"));
    })()""")
    assert refused == [None, None, None, "#/emails", "https://example.com/", "/ui/"]

    # A key: created, shown once, copied.
    go(page, "#/api-keys", "API keys")
    page.get_by_role("button", name="New key").click()  # the list first: the account's first key is in it
    page.get_by_label("Name", exact=True).fill("Production")
    page.get_by_role("button", name="Create", exact=True).click()
    token = page.locator("#new-token code").text_content()
    assert token.startswith("re_")
    page.get_by_role("button", name=re.compile("^Copy key")).click()
    assert page.evaluate("navigator.clipboard.readText()") == token
    shoot(page, "api-keys")

    # A domain and its records.
    go(page, "#/domains", "Domains")
    page.get_by_label("Domain name").fill("acme.example.com")
    page.get_by_role("button", name="Add domain").click()
    page.get_by_role("heading", name=re.compile("acme.example.com")).wait_for()
    records = page.locator("td.value code")
    assert records.count() >= 4
    assert page.get_by_role("button", name=re.compile("^Copy value")).count() == records.count()
    page.get_by_role("button", name=re.compile("^Copy value")).first.click()
    assert page.evaluate("navigator.clipboard.readText()") == records.first.text_content()
    # The live lookup answered: nothing answers DNS here, so each record's lookup failed.
    page.locator("td[aria-live] .b-temporary").first.wait_for()
    records_keep_their_columns(page)
    shoot(page, "domain")

    # The domain verified (DNS is not what this test is about) and mail captured: a send
    # through the SDK with the copied key, then its page and its events.
    with psycopg2.connect(fresh_dsn) as conn, conn.cursor() as cur:
        cur.execute("UPDATE domains SET status = 'verified'")
        cur.execute("UPDATE tenants SET delivery_mode = 'capture'")
    resend.api_url, resend.api_key = daemon.url, token
    sent = resend.Emails.send({"from": "Acme <news@acme.example.com>", "to": ["ann@example.com"],
                               "subject": XSS_SUBJECT, "html": XSS_HTML, "text": "Hello Ann"})
    go(page, "#/emails", "E-mails")
    page.get_by_role("link", name=XSS_SUBJECT).wait_for()  # shown as text, not markup
    page.get_by_label("Search subject, sender or recipient").fill("onerror")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url(re.compile(r"#/emails\?q=onerror"))
    page.get_by_role("link", name=XSS_SUBJECT).click()
    page.get_by_role("heading", level=1, name=XSS_SUBJECT).wait_for()
    page.get_by_text("delivered", exact=True).first.wait_for()
    timeline = page.locator("ol.timeline li").all_text_contents()
    assert [t.split()[0] for t in timeline] == ["sent", "delivered"]
    assert page.locator("pre.text").text_content() == "Hello Ann"
    frame = page.locator("iframe.preview")
    assert frame.get_attribute("sandbox") == ""
    page.frame_locator("iframe.preview").get_by_text("Hello").wait_for()
    assert sent["id"] in page.url
    shoot(page, "email")
    # A subject with a right-to-left override reads as it was written, the override shown as its
    # escape in the list and on the e-mail's page (web/display.js).
    resend.Emails.send({"from": "Acme <news@acme.example.com>", "to": ["ann@example.com"],
                        "subject": "Invoice \u202efdp.exe", "text": "Hello Ann"})
    go(page, "#/emails", "E-mails")
    page.get_by_role("link", name="Invoice \\u202efdp.exe").click()
    page.get_by_role("heading", level=1, name="Invoice \\u202efdp.exe").wait_for()

    # A webhook whose URL carries markup.
    go(page, "#/webhooks", "Webhooks")
    page.get_by_label("Endpoint URL").fill(XSS_ENDPOINT)
    page.get_by_role("button", name="Create webhook").click()
    page.get_by_role("heading", name="Webhook", exact=True).wait_for()
    assert page.locator("dd code").first.text_content() == XSS_ENDPOINT
    page.get_by_role("button", name="Disable").click()
    page.get_by_role("button", name="Enable").wait_for()
    shoot(page, "webhook")
    go(page, "#/webhooks", "Webhooks")
    page.get_by_role("link", name=XSS_ENDPOINT).wait_for()

    chart_fills_its_card(page)
    # The session was read once, at sign-in: navigating does not ask for it again.
    assert len(me_reads) == 1, me_reads

    # The other pages render, at both widths.
    for hash_, heading, name in (("#/", "Overview", "overview"), ("#/suppressions", "Suppressions", "suppressions"),
                                 ("#/contacts", "Contacts and segments", "contacts"),
                                 ("#/settings", "Settings", "settings"), ("#/domains", "Domains", "domains"),
                                 ("#/emails", "E-mails", "emails")):
        go(page, hash_, heading)
        shoot(page, name)
    go(page, "#/suppressions", "Suppressions")
    page.get_by_label("E-mail address").fill("gone@example.com")
    page.get_by_role("button", name="Suppress").click()
    page.get_by_role("cell", name=re.compile(r"^gone@example\.com")).wait_for()

    # Every field has a label, focus is visible, and no payload ran.
    unlabelled = page.evaluate("""[...document.querySelectorAll('input, select')]
        .filter(e => !e.labels.length && !e.getAttribute('aria-label')).map(e => e.name)""")
    assert unlabelled == []
    page.keyboard.press("Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"
    assert page.evaluate("window.__xss") is None and dialogs == [] and errors == []

    # Signed out, the back button shows nothing private.
    go(page, "#/emails", "E-mails")
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("heading", name="Sign in to mailsvc").wait_for()
    page.go_back()
    page.get_by_role("heading", name="Sign in to mailsvc").wait_for()
    body = page.locator("body").text_content()
    assert "onerror" not in body and "owner@example.com" not in body and "acme.example.com" not in body
    assert requests.get(daemon.url + "/me", timeout=5).status_code == 401


XSS_NAME = '<img src=x onerror="window.__xss=7"><script>window.__xss=8</script>'
ROWS = 1000


def contacts_csv() -> tuple[bytes, dict[int, str]]:
    """
    A 1,000-row CSV (plus its header) and the line of each bad row with the start of its error.
    Row 3's city holds a line break, so from row 4 on a row's line is its index + 3, not + 2.
    """
    lines = ["email,first_name,last_name,unsubscribed,age:number,city"]
    bad = {}

    def line_of(index: int) -> int:
        return index + 2 + (index > 3)

    for i in range(ROWS):
        email, first, last, unsub = f"person{i:04d}@example.com", f"First{i}", "Lee", ""
        age, city = str(20 + i % 50), "Oslo"
        if i == 3:
            city = '"Port\nTown, ""the"" harbour"'
        if i == 5:
            first, last = XSS_NAME.replace('"', '""'), ""
            first = f'"{first}"'
        if i == 7:
            unsub = "yes"
        if i == 10:
            email, bad[line_of(i)] = "not an address", "email"
        if i == 500:
            age, bad[line_of(i)] = "old", "properties.age"
        if i == 700:
            city, bad[line_of(i)] = "Oslo,extra", "7 fields"
        if i == 998:
            unsub, bad[line_of(i)] = "maybe", "unsubscribed"
        if i == 999:
            first, bad[line_of(i)] = "x" * 201, "first_name"
        lines.append(",".join([email, first, last, unsub, age, city]))
    return ("\r\n".join(lines) + "\r\n").encode(), bad


def segment_row(page, name: str):
    return page.locator("tr", has=page.get_by_label(f"New name for segment {name}"))


def test_contacts_import_search_edit_and_segments(daemon, browser, fresh_dsn):
    seen = drive(browser, daemon, "contacts", lambda page, context: contacts_walk(page, daemon, fresh_dsn),
                 output=OUTPUT, viewport=(1280, 800), accept_dialogs=False)
    dialogs, errors, console = seen.dialogs, seen.errors, seen.console
    # The payload in a contact's name stayed text: no dialog, no error, no script ran.
    assert dialogs == [] and errors == []
    assert not [m for m in console if "Content Security Policy" in m], console


def contacts_walk(page, daemon, fresh_dsn):
    set_first_password(page, daemon)
    # The session shares the account's API rate limit (10/s by default) with the test's own
    # checks through the API, which would meet 429 mid-test (the page's own calls wait it out).
    with psycopg2.connect(fresh_dsn) as conn, conn.cursor() as cur:
        cur.execute("UPDATE tenants SET api_rate_per_sec = 1000")
    key = api_key_of(page)
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {key}"

    def api_get(path: str) -> dict:
        response = api.get(daemon.url + path, timeout=10)
        assert response.status_code == 200, response.text
        return response.json()

    # Two segments, one renamed. With none yet the form is open; with one, the page opens on its
    # lists and "New segment" opens the form.
    go(page, "#/contacts", "Contacts and segments")
    page.get_by_label("New segment name").fill("Newsletter")
    page.get_by_role("button", name="Create segment").click()
    page.get_by_label("New name for segment Newsletter").wait_for()
    assert not page.get_by_label("New segment name").is_visible()
    page.get_by_role("button", name="New segment").click()
    assert page.evaluate("document.activeElement.name") == "name"
    page.get_by_label("New segment name").fill("VIP")
    page.get_by_role("button", name="Create segment").click()
    page.get_by_label("New name for segment VIP").wait_for()
    page.get_by_label("New name for segment VIP").fill("Very important")
    segment_row(page, "VIP").get_by_role("button", name="Rename").click()
    page.get_by_label("New name for segment Very important").wait_for()
    segments = {s["name"]: s["id"] for s in api_get("/segments")["data"]}
    assert set(segments) == {"Newsletter", "Very important"}

    # The import: 1,000 rows in one call, into the newsletter; the bad rows told by their line.
    body, bad = contacts_csv()
    page.get_by_label("CSV file").set_input_files({"name": "contacts.csv", "mimeType": "text/csv", "buffer": body})
    page.get_by_label("Add them to a segment").select_option(label="Newsletter")
    page.get_by_role("button", name="Import", exact=True).click()
    page.get_by_text(re.compile(r"^Import finished: 995 rows saved, 5 refused\.$")).wait_for(timeout=60_000)
    progress = page.get_by_label("Import progress")
    assert progress.get_attribute("value") == progress.get_attribute("max") == "1000"
    shown = [[cell.strip() for cell in row.locator("td").all_text_contents()]
             for row in page.locator("#import-errors tbody tr").all()]
    assert [int(line) for line, _, _ in shown] == sorted(bad)
    for line, _, message in shown:
        assert message.startswith(bad[int(line)]), (line, message)
    assert shown[0][1] == "not an address"
    shoot(page, "contacts-import")

    # The good rows are stored, in the segment; the 8th is unsubscribed; row 3 kept its line break.
    stored = api_get("/contacts")["data"]
    assert len(stored) == 995
    expected = {f"person{i:04d}@example.com" for i in range(ROWS)} - {
        f"person{i:04d}@example.com" for i in (10, 500, 700, 998, 999)}
    assert {c["email"] for c in stored} == expected
    assert len(api_get(f"/segments/{segments['Newsletter']}/contacts")["data"]) == 995
    assert api_get("/contacts/person0007@example.com")["unsubscribed"] is True
    third = api_get("/contacts/person0003@example.com")
    assert third["properties"] == {"age": {"value": 23, "type": "number"},
                                   "city": {"value": 'Port\nTown, "the" harbour', "type": "string"}}
    assert api_get("/contacts/person0005@example.com")["first_name"] == XSS_NAME

    # Paging: 50 a page, newest first.
    listed = page.locator("#contact-list tbody tr")
    page.reload()
    page.get_by_role("heading", level=1, name="Contacts and segments").wait_for()
    first_page = listed.locator("a").all_text_contents()
    assert len(first_page) == 50
    page.get_by_role("link", name="Older →").click()
    page.get_by_role("link", name="← Newer").wait_for()
    assert listed.count() == 50 and not set(listed.locator("a").all_text_contents()) & set(first_page)

    # Search: a prefix of a name, the payload included, shown as text.
    go(page, "#/contacts", "Contacts and segments")
    page.get_by_label("Search address, first or last name").fill("<img")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url(re.compile(r"#/contacts\?q=%3Cimg"))
    page.get_by_role("cell", name=XSS_NAME, exact=True).wait_for()
    assert listed.count() == 1
    shoot(page, "contacts")
    page.get_by_label("Search address, first or last name").fill("person0042")
    page.get_by_role("button", name="Search").click()
    page.get_by_role("link", name="person0042@example.com").click()

    # Edit one: names, a new typed property, a segment more.
    page.get_by_role("heading", level=1, name="person0042@example.com").wait_for()
    page.get_by_role("cell", name="Newsletter", exact=True).wait_for()
    page.get_by_label("First name").fill(XSS_NAME)
    page.get_by_label("Last name").fill("Edited")
    page.get_by_label("Value of city").fill("Bergen")
    page.get_by_label("Name", exact=True).fill("vip")
    page.get_by_label("Type").select_option("boolean")
    page.get_by_label("Value", exact=True).fill("true")
    page.get_by_role("button", name="Save").click()
    page.get_by_label("Value of vip").wait_for()
    page.get_by_label("Add to segment").select_option(label="Very important")
    page.get_by_role("button", name="Add", exact=True).click()
    page.get_by_role("button", name="Remove from Very important").wait_for()
    shoot(page, "contact")
    edited = api_get("/contacts/person0042@example.com")
    assert (edited["first_name"], edited["last_name"], edited["unsubscribed"]) == (XSS_NAME, "Edited", False)
    assert edited["properties"] == {"age": {"value": 62, "type": "number"},
                                    "city": {"value": "Bergen", "type": "string"},
                                    "vip": {"value": True, "type": "boolean"}}
    assert {s["name"] for s in api_get("/contacts/person0042@example.com/segments")["data"]} == {
        "Newsletter", "Very important"}

    # The segment's members; then the segment goes and its contacts stay.
    go(page, "#/contacts", "Contacts and segments")
    page.get_by_role("link", name="Members of Very important").click()
    page.get_by_role("cell", name=f"{XSS_NAME} Edited").wait_for()
    assert listed.locator("a").all_text_contents() == ["person0042@example.com"]
    segment_row(page, "Very important").get_by_role("button", name="Delete").click()
    page.wait_for_url(re.compile(r"#/contacts$"))  # its filtered list is left for the whole one
    page.get_by_label("New name for segment Very important").wait_for(state="detached")
    page.get_by_label("New name for segment Newsletter").wait_for()
    assert api_get("/contacts/person0042@example.com")["id"]

    # Every field labelled, and the payloads (a CSV name, an edited name) ran nowhere.
    unlabelled = page.evaluate("""[...document.querySelectorAll('input, select')]
        .filter(e => !e.labels.length && !e.getAttribute('aria-label')).map(e => e.name)""")
    assert unlabelled == []
    assert page.evaluate("window.__xss") is None


def test_removing_a_member_offers_to_revoke_the_keys_they_made(daemon, browser):
    drive(browser, daemon, "remove-member", lambda page, context: remove_member(page, browser, daemon),
          output=OUTPUT, viewport=(1280, 800), accept_dialogs=False)


def remove_member(page, browser, daemon):
    set_first_password(page, daemon)
    invited = page.evaluate("""async () => {
        const me = await (await fetch("/me")).json();
        const made = await fetch("/dashboard/users", {method: "POST",
            body: JSON.stringify({email: "mia@example.com"}),
            headers: {"Content-Type": "application/json", "X-CSRF-Token": me.csrf_token}});
        return (await made.json()).set_password_url;
    }""")
    # Mia, in a browser of her own, sets her password and makes a full-access key.
    mia_context = browser.new_context()
    mia = mia_context.new_page()
    mia.goto(invited)
    mia.get_by_label("New password").fill(PASSWORD)
    mia.get_by_label("Repeat it").fill(PASSWORD)
    mia.get_by_role("button", name="Set password and sign in").click()
    mia.get_by_role("heading", name="Overview").wait_for()
    token = api_key_of(mia)
    mia_context.close()
    assert requests.get(daemon.url + "/domains", headers={"Authorization": f"Bearer {token}"},
                        timeout=5).status_code == 200

    # The owner sees who made it, and removing Mia asks about it.
    go(page, "#/api-keys", "API keys")
    row = page.locator("tr", has=page.get_by_label("New name for checks"))
    assert row.locator("td").nth(1).text_content() == "mia@example.com"
    go(page, "#/settings", "Settings")
    page.locator("tr", has=page.get_by_role("cell", name="mia@example.com")).get_by_role(
        "button", name="Remove").click()
    dialog = page.get_by_role("dialog", name="Remove mia@example.com?")
    dialog.wait_for()
    assert dialog.locator("li strong").all_text_contents() == ["checks"]
    shoot(page, "remove-member")
    dialog.get_by_role("button", name="Cancel").click()
    dialog.wait_for(state="detached")
    assert page.get_by_role("cell", name="mia@example.com").count() == 1
    page.locator("tr", has=page.get_by_role("cell", name="mia@example.com")).get_by_role(
        "button", name="Remove").click()
    page.get_by_role("dialog").get_by_role("button", name="Remove and revoke the keys").click()
    page.get_by_role("cell", name="mia@example.com").wait_for(state="detached")
    assert requests.get(daemon.url + "/domains", headers={"Authorization": f"Bearer {token}"},
                        timeout=5).status_code == 403
