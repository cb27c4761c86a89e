"""
The operator console in a real headless Chromium against the real daemon: an
operator made over the operator API chooses a password from its link, searches a tenant,
suspends it with a reason and resumes it, sees a queue of mail deferred by a relay answering
451, holds and releases that destination, finds those actions in the audit log under its
address, and exports the waitlist as CSV. Screenshots go to ``test-output/console/``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import psycopg2
import pytest
import requests

from tests.helpers.browser import drive, keep_screenshot, output_dir
from tests.helpers.content_ui import Sink, daemon, daemon_settings  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow

OUTPUT = output_dir("console")
PASSWORD = "operator horse battery"
OPERATOR = "ops@example.com"
#: A tenant's name that would read "Acme Corp" backwards past its override, and hides a space.
HOSTILE_NAME = "Acme\u202eproC\u200b emcA"


@pytest.fixture
def sink():
    # Every mail stays deferred; the reply holds what would clear a terminal's screen.
    server = Sink(rcpt_reply=b"451 4.7.1 greylisted\x1b[2J, try again later")
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def operator_api(node, token: str):
    def call(method: str, path: str, body=None, key: str | None = None, expect: int = 200):
        response = requests.request(method, node.url + path, json=body,
                                    headers={"Authorization": f"Bearer {key or token}"})
        assert response.status_code == expect, (path, response.status_code, response.text)
        return response.json()
    return call


def deferred_queue(node, fresh_dsn, call) -> dict:
    """Tenant "Acme Corp" with two messages to slow.example, deferred by the relay; "Zed Ltd" beside it."""
    acme = call("POST", "/admin/v1/tenants", {"name": "Acme Corp"}, expect=201)
    call("POST", "/admin/v1/tenants", {"name": "Zed Ltd"}, expect=201)
    call("POST", "/admin/v1/tenants", {"name": HOSTILE_NAME}, expect=201)
    key = acme["api_key"]["token"]
    call("POST", "/domains", {"name": "acme.example.com"}, key=key, expect=201)
    with psycopg2.connect(fresh_dsn) as conn, conn.cursor() as cur:
        cur.execute("UPDATE domains SET status = 'verified'")
        cur.execute("UPDATE tenants SET plan = 'scale', delivery_mode = 'relay', sandbox = false,"
                    " daily_quota = 100000, monthly_quota = 1000000, api_rate_per_sec = 1000")
    call("POST", "/emails", {"from": "News <news@acme.example.com>", "to": ["ann@slow.example", "bob@slow.example"],
                             "subject": "Hello", "html": "<p>Hello</p>"}, key=key, expect=200)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with psycopg2.connect(fresh_dsn) as conn, conn.cursor() as cur:
            cur.execute("SELECT status FROM deliveries")
            states = [row[0] for row in cur.fetchall()]
        if states == ["deferred", "deferred"]:
            return acme
        time.sleep(0.25)
    raise AssertionError(f"the deliveries were not deferred: {states} {''.join(node.lines)[-2000:]}")


def test_an_operator_runs_the_day_from_the_console(daemon, browser, sink, fresh_dsn, tmp_path):  # noqa: F811
    call = operator_api(daemon, (tmp_path / "state" / "operator-token").read_text().strip())
    deferred_queue(daemon, fresh_dsn, call)
    requests.post(daemon.url + "/public/waitlist", json={"email": "early@example.org"}).raise_for_status()
    link = call("POST", "/admin/v1/operators", {"email": OPERATOR, "name": "Olga"}, expect=201)["set_password_url"]
    assert link.startswith(daemon.url + "/console/#/set-password/")
    drive(browser, daemon, "console", lambda page, context: walk(page, context, link), output=OUTPUT)


def heading(page, name: str) -> None:
    page.get_by_role("heading", level=1, name=name).wait_for()


def walk(page, context, link):
    csp = []
    page.on("console", lambda m: csp.append(m.text) if "Content Security Policy" in m.text else None)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page.goto(link)
    page.get_by_label("New password").fill(PASSWORD)
    page.get_by_label("Repeat it").fill(PASSWORD)
    page.get_by_role("button", name="Set password and sign in").click()
    heading(page, "Tenants")
    cookies = {c["name"]: c for c in context.cookies()}
    assert set(cookies) == {"mailsvc_operator"}, cookies
    assert cookies["mailsvc_operator"]["httpOnly"] and cookies["mailsvc_operator"]["sameSite"] == "Strict"
    # The console's cookie opens nothing of the dashboard.
    assert page.evaluate("async () => (await fetch('/me')).status") == 401

    # Tenants: search, suspend with a reason, resume.
    page.get_by_label("Name contains").fill("acme")
    page.get_by_role("button", name="Search").click()
    page.get_by_role("link", name="Acme Corp").wait_for()
    assert page.get_by_role("link", name="Zed Ltd").count() == 0
    # What a tenant named itself is shown with its override and zero-width space as escapes.
    page.get_by_role("link", name="Acme\\u202eproC\\u200b emcA").wait_for()
    assert "\u202e" not in page.locator("main").inner_text()
    keep_screenshot(page, OUTPUT / "tenants.png")
    page.get_by_role("link", name="Acme Corp").click()
    heading(page, "Acme Corp")
    page.get_by_text("Recipients today").wait_for()
    page.get_by_label("Reason").fill("abuse report 7")
    page.get_by_role("button", name="Suspend").click()
    page.get_by_role("button", name="Resume").wait_for()
    assert "abuse report 7" in page.locator("#status-reason").inner_text()
    keep_screenshot(page, OUTPUT / "tenant-suspended.png")
    page.get_by_role("button", name="Resume").click()
    page.get_by_role("button", name="Suspend").wait_for()

    # The queue: the deferred mail by destination; hold that destination, then release it.
    page.get_by_role("link", name="Queue").click()
    heading(page, "Queue")
    destinations = page.get_by_role("region", name="By destination")
    row = destinations.get_by_role("row").filter(has_text="slow.example")
    row.wait_for()
    assert "451" in row.inner_text() and "2 deferred" in row.inner_text()
    assert "greylisted\\x1b[2J, try again" in row.inner_text() and "\x1b" not in row.inner_text()
    page.get_by_role("button", name="Hold slow.example").click()
    page.get_by_label("Reason").fill("blocklisted at the receiver")
    page.get_by_role("button", name="Confirm: hold 2").click()
    page.get_by_text("Hold: 2 touched.").wait_for()
    held = page.get_by_role("row").filter(has_text="blocklisted at the receiver")
    held.filter(has_text="operator:" + OPERATOR).wait_for()
    keep_screenshot(page, OUTPUT / "queue-held.png")
    # On a phone: the navigation behind its button, nothing wider than the screen but the tables' boxes.
    page.set_viewport_size({"width": 375, "height": 740})
    page.get_by_role("button", name="Menu").click()
    page.get_by_role("link", name="Audit log").wait_for()
    keep_screenshot(page, OUTPUT / "queue-375.png")
    assert page.evaluate("document.documentElement.scrollWidth") <= 380
    page.get_by_role("button", name="Menu").click()
    page.set_viewport_size({"width": 1400, "height": 900})
    page.get_by_role("button", name="Release destination slow.example").click()
    page.get_by_role("button", name="Confirm: release 2").click()
    page.get_by_text("Release: 2 touched.").wait_for()
    page.get_by_text("No standing hold.").wait_for()

    # The audit log: every action, under the operator's address.
    page.get_by_role("link", name="Audit log").click()
    heading(page, "Audit log")
    rows = page.get_by_role("row").filter(has_text="operator:" + OPERATOR)
    rows.first.wait_for()
    actions = [re.search(r"(queue\.\w+|tenant\.update)", r).group(1) for r in rows.all_inner_texts()]
    assert actions == ["queue.release", "queue.hold", "tenant.update", "tenant.update"], actions
    keep_screenshot(page, OUTPUT / "audit.png")
    # Filtered by the kind of actor: the console's operators, then the dashboard's users (none).
    page.get_by_label("Who").select_option("operator")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r"#/audit\?actor_kind=operator$"))
    page.wait_for_function("(who) => { const rows = [...document.querySelectorAll('tbody tr')];"
                           " return rows.length > 0 && rows.every((r) => r.textContent.includes(who)); }",
                           arg="operator:" + OPERATOR)
    page.get_by_label("Who").select_option("user")
    page.get_by_role("button", name="Filter").click()
    page.get_by_text("Nothing yet.").wait_for()

    # The waitlist and its CSV.
    page.get_by_role("link", name="Waitlist").click()
    heading(page, "Waitlist")
    page.get_by_role("cell", name="early@example.org").wait_for()
    with page.expect_download() as download:
        page.get_by_role("link", name=re.compile("Export CSV")).click()
    csv = Path(download.value.path()).read_text()
    assert csv.splitlines()[0] == "id,email,created_at" and "early@example.org" in csv, csv

    page.get_by_role("button", name="Sign out").click()
    heading(page, "Operator sign-in")
    assert not csp, csp
