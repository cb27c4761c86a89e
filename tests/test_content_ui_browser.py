"""
The content pages (issue 21) in Debian's headless Chromium against the real daemon, PostgreSQL and
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
import os
import re
import shutil
import socketserver
import threading
import time
from pathlib import Path

import psycopg2
import pytest
import requests

from tests.helpers.daemon import ROOT, free_port, twistd, wait_until_listening
from tests.test_dashboard_browser import CHROMIUM, PASSWORD, Daemon, browser, go  # noqa: F401 (fixture)

OUTPUT = Path(os.environ.get("MAILSVC_TEST_OUTPUT", ROOT / "test-output")) / "content"
DOCS_IMAGES = ROOT / "docs" / "images"
CONTACTS = 2000


class Sink(socketserver.ThreadingTCPServer):
    """A minimal SMTP server on loopback keeping every message (the daemon relays to it)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        self.messages: list[tuple[list[str], bytes]] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _SinkHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server_address[1]


class _SinkHandler(socketserver.StreamRequestHandler):
    def handle(self):
        self.wfile.write(b"220 sink ESMTP\r\n")
        rcpts: list[str] = []
        while True:
            line = self.rfile.readline()
            if not line:
                return
            verb = line[:4].upper()
            if verb in (b"EHLO", b"HELO"):
                self.wfile.write(b"250-sink\r\n250-8BITMIME\r\n250 PIPELINING\r\n")
            elif verb == b"MAIL":
                rcpts = []
                self.wfile.write(b"250 ok\r\n")
            elif verb == b"RCPT":
                rcpts.append(re.search(rb"<([^>]*)>", line).group(1).decode())
                self.wfile.write(b"250 ok\r\n")
            elif verb == b"DATA":
                self.wfile.write(b"354 go\r\n")
                chunks = []
                while True:
                    data = self.rfile.readline()
                    if data in (b".\r\n", b""):
                        break
                    chunks.append(data[1:] if data.startswith(b"..") else data)
                with self.server.lock:
                    self.server.messages.append((rcpts, b"".join(chunks)))
                self.wfile.write(b"250 kept\r\n")
            elif verb == b"QUIT":
                self.wfile.write(b"221 bye\r\n")
                return
            else:
                self.wfile.write(b"250 ok\r\n")


class ContentDaemon(Daemon):
    def __init__(self, state: Path, dsn: str, sink_port: int, **env: str):  # noqa: D107 (Daemon's fields, other settings)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.lines = []
        self.process = twistd(
            state, self.port, MAILSVC_DATABASE_DSN=dsn, MAILSVC_NODE_PROCESSES="1",
            MAILSVC_DASHBOARD_FIRST_USER="owner@example.com", MAILSVC_SECURITY_ALLOW_PRIVATE_TARGETS="true",
            MAILSVC_DNS_SERVERS=f"127.0.0.1:{free_port()}",
            MAILSVC_DELIVERY_RELAY_HOST="127.0.0.1", MAILSVC_DELIVERY_RELAY_PORT=str(sink_port),
            MAILSVC_DELIVERY_RELAY_TLS="none", MAILSVC_HTTP_PUBLIC_URL=f"http://127.0.0.1:{self.port}", **env,
        )
        threading.Thread(target=self._read, daemon=True).start()


@pytest.fixture
def sink():
    server = Sink()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def daemon_settings() -> dict[str, str]:
    """A module's own settings for its daemon (``MAILSVC_*``): a module overrides this fixture."""
    return {}


@pytest.fixture
def daemon(tmp_path, fresh_dsn, sink, daemon_settings):
    tmp_path.chmod(0o755)
    running = ContentDaemon(tmp_path / "state", fresh_dsn, sink.port, **daemon_settings)
    try:
        wait_until_listening(running.url, running.process)
        yield running
    finally:
        running.stop()


def shoot(page, name: str, docs: str | None = None, part=None) -> None:
    """The whole page, or only ``part`` (a locator) of it."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    path = OUTPUT / f"{name}.png"
    if part is None:
        page.screenshot(path=str(path), full_page=True)
    else:
        part.screenshot(path=str(path))
    if docs and os.environ.get("MAILSVC_UPDATE_SCREENSHOTS"):
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, DOCS_IMAGES / docs)


class Session:
    """The signed-in browser's session, used from Python for set-up (cookie + CSRF token)."""

    def __init__(self, base: str, context):
        self.base = base
        self.http = requests.Session()
        for c in context.cookies():
            self.http.cookies.set(c["name"], c["value"])
        self.csrf = self.http.get(base + "/me").json()["csrf_token"]

    def call(self, method: str, path: str, body=None):
        for _ in range(5):
            response = self.http.request(method, self.base + path, json=body, headers={"X-CSRF-Token": self.csrf})
            if response.status_code != 429 or response.json().get("name") != "rate_limit_exceeded":
                break
            # The session shares the account's API rate with the pages' own requests: wait as told.
            time.sleep(int(response.headers["Retry-After"]))
        assert response.status_code < 300, (path, response.status_code, response.text)
        return response.json() if response.text else None


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


def until(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def drive(browser, node, name: str, walk) -> None:  # noqa: F811 (the browser fixture)
    """Runs ``walk(page, context)`` in a new page; on failure a screenshot, the page's errors and the log."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors, console = [], []
    page.on("dialog", lambda d: d.accept())
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: console.append(m.text))
    try:
        walk(page, context)
    except Exception:
        OUTPUT.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT / f"{name}-failure.png"), full_page=True)
        print("URL", page.url, "\nPAGE ERRORS", errors, "\nCONSOLE", console[-30:],
              "\nLOG", "".join(node.lines)[-3000:])
        raise
    finally:
        context.close()
    assert not errors, errors


@pytest.mark.slow
def test_content_pages(daemon, browser, sink, fresh_dsn):  # noqa: F811 (the browser fixture)
    drive(browser, daemon, "content", lambda page, context: walk(page, context, daemon, sink, fresh_dsn))


def walk(page, context, daemon, sink, fresh_dsn):
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

    # The builder: eight block types, a two-column row, mouse and keyboard.
    go(page, "#/builder", "Builder")
    blocks = page.locator("#blocks > ol > li.block")
    add_type = page.get_by_label("Block type", exact=True)
    for kind in ("heading", "text", "button", "divider", "list", "quote", "columns", "footer"):
        add_type.select_option(kind)
        page.get_by_role("button", name="Add block", exact=True).click()
    assert blocks.count() == 8
    # Inside the columns: an image on the left, a text on the right.
    columns = page.locator("li.block[data-type=columns] .column")
    columns.nth(0).get_by_label("Block type for this column").select_option("image")
    columns.nth(0).get_by_role("button", name="Add to column").click()
    columns = page.locator("li.block[data-type=columns] .column")
    columns.nth(1).get_by_label("Block type for this column").select_option("code")
    columns.nth(1).get_by_role("button", name="Add to column").click()
    # Edit the heading's text with the keyboard.
    heading = page.locator("#blocks > ol > li.block[data-type=heading]").get_by_label("Heading text")
    heading.fill("Spring news")
    heading.press("Tab")
    # Keyboard move: the footer (last) goes up one with Alt+ArrowUp, then back down.
    footer = page.locator("#blocks > ol > li.block[data-type=footer]")
    footer.focus()
    page.keyboard.press("Alt+ArrowUp")
    assert blocks.nth(6).get_attribute("data-type") == "footer"
    page.keyboard.press("Alt+ArrowDown")
    assert blocks.nth(7).get_attribute("data-type") == "footer"
    # Drag and drop: the quote onto the text (before it).
    top = "#blocks > ol > li.block"
    transfer = page.evaluate_handle("new DataTransfer()")
    page.locator(f"{top}[data-type=quote] .handle").dispatch_event("dragstart", {"dataTransfer": transfer})
    target = page.locator(f"{top}[data-type=text] .blockhead strong")
    target.dispatch_event("dragover", {"dataTransfer": transfer})
    target.dispatch_event("drop", {"dataTransfer": transfer})
    order = [blocks.nth(i).get_attribute("data-type") for i in range(blocks.count())]
    assert order == ["heading", "quote", "text", "button", "divider", "list", "columns", "footer"], order
    # Remove then undo, redo, undo.
    page.get_by_role("button", name="Remove divider").click()
    assert blocks.count() == 7
    page.get_by_role("button", name="Undo").click()
    assert blocks.count() == 8
    # The theme: a brand colour.
    page.locator("input[name=brand_color]").fill("#7c3aed")
    page.locator("input[name=brand_color]").dispatch_event("change")
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
    page.get_by_role("button", name="Save as template").click()
    template_id = until(lambda: page.locator("#save-status").get_attribute("data-template-id"), 10, "the save")

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
    assert page.get_by_role("button", name="Cancel").is_disabled()
    shoot(page, "broadcast-sent")

    # Schedule a copy in words, then cancel it from the UI.
    press(page.get_by_role("button", name="Duplicate"))
    page.get_by_role("heading", name="Spring launch (copy)").wait_for()
    page.get_by_label("Or in words").fill("in 2 days")
    press(page.get_by_role("button", name="Schedule"))
    page.locator("#scheduled").wait_for()
    copy_id = page.url.rsplit("/", 1)[1]
    assert api.call("GET", f"/dashboard/broadcasts/{copy_id}")["status"] == "scheduled"
    press(page.get_by_role("button", name="Cancel"))
    page.locator("#bc-status .b-draft").wait_for()
    copy = api.call("GET", f"/dashboard/broadcasts/{copy_id}")
    assert copy["status"] == "draft" and copy["scheduled_at"] is None, copy
