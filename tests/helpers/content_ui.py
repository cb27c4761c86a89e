"""The content pages' rig: the daemon relaying all mail to an SMTP sink on loopback (a thread of its own),
the session a signed-in page has (for set-up from Python), and screenshots (with MAILSVC_UPDATE_SCREENSHOTS=1
also into docs/images)."""

from __future__ import annotations

import os
import re
import shutil
import socketserver
import threading
import time
from pathlib import Path

import pytest
import requests

from tests.helpers.browser import Daemon, output_dir, screenshots_wanted
from tests.helpers.daemon import ROOT, free_port, twistd, wait_until_listening

OUTPUT = output_dir("content")
DOCS_IMAGES = ROOT / "docs" / "images"


class Sink(socketserver.ThreadingTCPServer):
    """
    A minimal SMTP server on loopback keeping every message (the daemon relays to it); its
    answer to every RCPT is ``rcpt_reply`` (a 4xx keeps all mail deferred in the queue).
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, rcpt_reply: bytes = b"250 ok"):
        self.rcpt_reply = rcpt_reply
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
                if self.server.rcpt_reply.startswith(b"2"):
                    rcpts.append(re.search(rb"<([^>]*)>", line).group(1).decode())
                self.wfile.write(self.server.rcpt_reply + b"\r\n")
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
    """The whole page, or only ``part`` (a locator) of it (``screenshots_wanted``)."""
    if not screenshots_wanted():
        return
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
