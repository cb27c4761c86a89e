"""
README's "The first minute", in a real headless Chromium against a
node started as scripts/serve starts it (a development start on the embedded store, on a fresh
state directory): the set-password link and the key file the output names, a send through the
official Python SDK from the test sender to ``delivered@resend.dev``, the e-mail delivered in the
E-mails list and in the Inbox with DKIM pass (simulated); then ``bounced@`` and ``complained@``
with their webhooks, signed, verified by ``svix``, received over HTTPS on loopback. With
``MAILSVC_UPDATE_SCREENSHOTS=1`` the Inbox's list and a message at 1,280 px go to docs/images/.
"""

from __future__ import annotations

import http.server
import json
import re
import ssl
import threading
from datetime import datetime

import pytest
import requests
import resend
import svix.webhooks

from tests.helpers.browser import PASSWORD, Daemon, drive, go, output_dir
from tests.helpers.content_ui import shoot
from tests.helpers.daemon import wait_until_listening
from tests.helpers.outside import ThrowawayCA
from tests.helpers.polling import until

pytestmark = pytest.mark.slow

HTML = """<!doctype html><html><head><meta name="color-scheme" content="light dark"><style>
body { font-family: sans-serif; margin: 0; padding: 24px; background: #ffffff; color: #1d2939; }
.card { max-width: 560px; margin: 0 auto; border: 1px solid #d0d5dd; border-radius: 8px; padding: 24px; }
a.cta { display: inline-block; background: #3b5bdb; color: #fff; padding: 10px 18px; border-radius: 6px;
  text-decoration: none; }
@media (prefers-color-scheme: dark) {
  body { background: #16181d; color: #e6e9ef; } .card { border-color: #3a3f4b; }
}
</style></head><body><div class="card"><h1>Welcome aboard</h1>
<p>Your account is ready. This message went through the queue, was signed and stopped at the node's door.</p>
<p><a class="cta" href="https://example.org/start">Get started</a></p></div></body></html>"""
TEXT = "Welcome aboard\n\nYour account is ready.\n\nGet started: https://example.org/start\n"


class HookReceiver:
    """An HTTPS endpoint on 127.0.0.1 keeping every request's headers and body."""

    def __init__(self, ca: ThrowawayCA, directory):
        self.requests: list[tuple[dict, bytes]] = []
        received = self.requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (the stdlib's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        pem = directory / "hooks.pem"
        pem.write_bytes(ca.server_pem("127.0.0.1"))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(pem))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def events(self) -> list[tuple[dict, bytes, dict]]:
        """(headers, body, payload) of each request, in the order they came."""
        return [(headers, body, json.loads(body)) for headers, body in list(self.requests)]


@pytest.fixture
def hooks(state):  # noqa: F811 (the fixture)
    ca = ThrowawayCA()
    state.parent.joinpath("ca.pem").write_bytes(ca.pem)
    running = HookReceiver(ca, state.parent)
    yield running
    running.stop()


@pytest.fixture
def node(state, hooks):  # noqa: F811 (the fixture)
    # What scripts/serve sets (a development start), on the embedded store: no database.dsn.
    running = Daemon(state, "", MAILSVC_DASHBOARD_FIRST_KEY_FILE="true",
                     MAILSVC_SECURITY_CA_FILE=str(state.parent / "ca.pem"))
    try:
        wait_until_listening(running.url, running.process, seconds=90)
        yield running
    finally:
        running.stop()


def test_the_first_minute(node, state, hooks, browser):  # noqa: F811 (fixtures)
    drive(browser, node, "first-minute", lambda page, context: first_minute(page, node, state, hooks),
          output=output_dir("first-minute"))


def first_minute(page, node, state, hooks):  # noqa: F811 (the fixture)
    # The output's last lines: the set-password link, then the key's file.
    link = node.wait_for(r"sets a password at (\S+)").group(1)
    key_file = node.wait_for(r'API key of the first account \("first key \(scripts/serve\)", revocable\) is in (\S+)')
    assert key_file.group(1) == str(state / "api-key")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(link)
    page.get_by_label("New password").fill(PASSWORD)
    page.get_by_label("Repeat it").fill(PASSWORD)
    page.get_by_role("button", name="Set password and sign in").click()
    page.get_by_role("heading", name="Overview").wait_for()

    # An empty Inbox says what to send to see something.
    go(page, "#/inbox", "Inbox")
    snippet = page.locator("#first-email pre").text_content()
    assert '"from": "onboarding@resend.dev"' in snippet and '"to": "delivered@resend.dev"' in snippet

    # The README's send, with the key from the file.
    resend.api_url = node.url
    resend.api_key = (state / "api-key").read_text().strip()
    hook = resend.Webhooks.create({"endpoint": hooks.url,
                                   "events": ["email.delivered", "email.bounced", "email.complained"]})
    sent = resend.Emails.send({"from": "onboarding@resend.dev", "to": "delivered@resend.dev",
                               "subject": "Welcome aboard", "html": HTML, "text": TEXT})
    until(lambda: resend.Emails.get(sent["id"])["last_event"] == "delivered", 20, "the e-mail delivered")

    # The same e-mail in the dashboard: the E-mails list, then the Inbox.
    go(page, "#/emails", "E-mails")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name="Welcome aboard"))
    assert "delivered" in row.text_content() and "delivered@resend.dev" in row.text_content()
    row.get_by_role("link", name="Welcome aboard").click()
    page.get_by_role("heading", level=1, name="Welcome aboard").wait_for()
    assert [e.text_content() for e in page.locator("ol.timeline .badge").all()] == ["sent", "delivered"]
    go(page, "#/inbox", "Inbox")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name="Welcome aboard"))
    assert re.search(r"onboarding@resend\.dev.*delivered@resend\.dev.*delivered.*simulated", row.text_content())
    shoot(page, "inbox-1280", "dashboard-inbox-1280.png")

    row.get_by_role("link", name="Welcome aboard").click()
    page.get_by_role("heading", level=1, name=re.compile("^Welcome aboard")).wait_for()
    dkim = page.locator("#checks tbody tr").filter(has_text="DKIM")
    assert dkim.count() == 1 and re.search(r"resend\.dev\s*pass simulated\s*simulated: the signature verifies with this"
                                           r" node's test key", dkim.text_content()), dkim.text_content()
    assert "never against resend.dev's DNS" in page.locator("#checks p.note").text_content()
    source = page.locator("pre.source").text_content()
    assert source.startswith("DKIM-Signature:") or "\nDKIM-Signature:" in source
    assert page.locator("pre.text").text_content().startswith("Welcome aboard")
    frame = page.frame_locator("iframe.mailframe")
    frame.get_by_role("heading", name="Welcome aboard").wait_for()
    # The whole page in the viewport: Chromium paints a frame of its own process only where it is seen.
    page.set_viewport_size({"width": 1280, "height": page.evaluate("document.documentElement.scrollHeight")})
    page.wait_for_timeout(300)
    shoot(page, "inbox-message-1280", "dashboard-inbox-message-1280.png")
    page.set_viewport_size({"width": 1280, "height": 800})
    # Phone width and dark: the frame is 375 px wide, and the message's dark style applies.
    page.get_by_role("button", name="Phone width").click()
    page.get_by_role("button", name="Dark").click()
    assert page.get_by_role("button", name="Dark").get_attribute("aria-pressed") == "true"
    assert round(page.locator("iframe.mailframe").bounding_box()["width"]) == 375
    # (told to the frame's own process a moment later)
    until(lambda: frame.locator("body").evaluate("(body) => getComputedStyle(body).backgroundColor")
          == "rgb(22, 24, 29)", 5, "the message's dark colours")
    shoot(page, "inbox-message-phone-dark", part=page.locator("div.framebox"))
    # On a phone the page is no wider than the screen (its tables scroll in their own box).
    page.set_viewport_size({"width": 375, "height": 740})
    page.wait_for_timeout(150)
    assert page.evaluate("document.documentElement.scrollWidth") <= 380
    page.set_viewport_size({"width": 1280, "height": 800})

    # Bounced and complained: their webhooks arrive signed and verify with svix.
    bounced = resend.Emails.send({"from": "onboarding@resend.dev", "to": "bounced@resend.dev",
                                  "subject": "Bounce test", "text": "A bounce."})
    complained = resend.Emails.send({"from": "onboarding@resend.dev", "to": "complained@resend.dev",
                                     "subject": "Complaint test", "text": "A complaint."})
    def told(email_id):
        return [(headers, body, p) for headers, body, p in hooks.events() if p["data"].get("email_id") == email_id]

    until(lambda: told(bounced["id"]) and told(complained["id"])[1:], 30, "the bounced and complained webhooks")
    # bounced@ ends with email.bounced; complained@ is delivered, then complained (README). Webhooks
    # promise no arrival order (docs/webhooks.md, "Order"): every worker sends, so the two may
    # arrive either way round; each payload's created_at puts them in the order they happened.
    assert [p["type"] for _, _, p in told(bounced["id"])] == ["email.bounced"]
    arrived = [p for _, _, p in told(complained["id"])]
    assert sorted(p["type"] for p in arrived) == ["email.complained", "email.delivered"]
    happened = sorted(arrived, key=lambda p: datetime.fromisoformat(p["created_at"].replace("Z", "+00:00")))
    assert [p["type"] for p in happened] == ["email.delivered", "email.complained"]
    verifier = svix.webhooks.Webhook(hook["signing_secret"])
    for headers, body, _ in told(bounced["id"]) + told(complained["id"]):
        verifier.verify(body, {k: headers[k] for k in ("svix-id", "svix-timestamp", "svix-signature")})  # or raises
    assert resend.Emails.get(bounced["id"])["last_event"] == "bounced"
    assert resend.Emails.get(complained["id"])["last_event"] == "complained"
    # Both leave that exact address suppressed, and nothing else.
    listed = requests.get(node.url + "/suppressions", headers={"Authorization": f"Bearer {resend.api_key}"}, timeout=10)
    assert sorted(s["email"] for s in listed.json()["data"]) == ["bounced@resend.dev", "complained@resend.dev"]
