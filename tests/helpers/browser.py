"""
The browser tests' common parts: Debian's headless Chromium (Playwright's Python client, nothing
downloaded), the real daemon under twistd with its output kept, and ``drive``, which runs a walk
through the pages in a new page and, when it fails, keeps a screenshot, the page's errors, its
console and the node's log.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import weakref
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from tests.helpers.daemon import ROOT, free_port, twistd, wait_until_listening
from tests.helpers.polling import until

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


PASSWORD = "correct horse battery"


def screenshots_wanted() -> bool:
    """Whether the walks keep a screenshot of every page they check, for a person to look at
    (``MAILSVC_SCREENSHOTS``, on unless 0; scripts/test's whole run turns it off, and
    ``MAILSVC_UPDATE_SCREENSHOTS=1``, which copies some to docs/images/, turns it on). A failed walk
    keeps its screenshot either way."""
    return os.environ.get("MAILSVC_SCREENSHOTS", "1") != "0" or bool(os.environ.get("MAILSVC_UPDATE_SCREENSHOTS"))


def keep_screenshot(page, path: Path) -> None:
    """A screenshot of the whole page at ``path``, when ``screenshots_wanted``."""
    if screenshots_wanted():
        page.screenshot(path=str(path), full_page=True)


def output_dir(name: str) -> Path:
    """Where a browser test keeps its screenshots: ``test-output/<name>`` (or ``$MAILSVC_TEST_OUTPUT/<name>``)."""
    return Path(os.environ.get("MAILSVC_TEST_OUTPUT", ROOT / "test-output")) / name


class Daemon:
    """``twistd mailsvc`` with its output gathered on a thread (nothing blocks on a full pipe)."""

    def __init__(self, state: Path, dsn: str, **env: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.lines: list[str] = []
        self.process = twistd(
            state, self.port, MAILSVC_DATABASE_DSN=dsn, MAILSVC_NODE_PROCESSES="1",
            MAILSVC_DASHBOARD_FIRST_USER="owner@example.com", MAILSVC_SECURITY_ALLOW_PRIVATE_TARGETS="true",
            # Nothing answers there: DNS lookups fail fast instead of leaving loopback.
            MAILSVC_DNS_SERVERS=f"127.0.0.1:{free_port()}", **env,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)

    def wait_for(self, pattern: str, seconds: float = 30) -> re.Match:
        """The first match of ``pattern`` in the node's output."""
        def found():
            return next(filter(None, (re.search(pattern, line) for line in list(self.lines))), None)
        return until(found, seconds, lambda: f"{pattern!r} in the log: {''.join(self.lines)[-3000:]}")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def browser():
    """Chromium, launched once for a module's tests: each walk has a context of its own (``drive``)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=['--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1', "--no-sandbox"],
        )
        try:
            yield launched
        finally:
            launched.close()


#: The requests each page of ``drive`` has sent and not yet seen answered (or failed).
_IN_FLIGHT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: Two animation frames: by the second, what a resize, a colour scheme or a new page changed is
#: laid out and painted, and the page's own listeners (matchMedia, its fetches' answers) have run.
FRAMES = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"


def watch(page) -> None:
    """Counts ``page``'s requests in flight, for ``settled``."""
    _IN_FLIGHT[page] = 0

    def sent(_):
        _IN_FLIGHT[page] += 1

    def ended(_):
        _IN_FLIGHT[page] -= 1

    page.on("request", sent)
    page.on("requestfinished", ended)
    page.on("requestfailed", ended)


def settled(page, seconds: float = 10) -> None:
    """
    Until the page shows what it asked for: none of its requests in flight (when ``watch``
    counts them) across two animation frames, instead of a fixed pause that a loaded machine
    may outlast or that a quiet one wastes.
    """
    def quiet() -> bool:
        if _IN_FLIGHT.get(page, 0):
            return False
        page.evaluate(FRAMES)
        return not _IN_FLIGHT.get(page, 0)

    until(quiet, seconds, lambda: f"{page.url}: {_IN_FLIGHT.get(page)} requests still in flight", interval=0.02,
          pause=page.wait_for_timeout)


def go(page, hash_: str, heading: str) -> None:
    page.goto(page.url.split("#")[0] + hash_)
    page.get_by_role("heading", level=1, name=heading).wait_for()


def set_first_password(page, daemon) -> None:
    """The first user's link: a password chosen, signed in on the overview."""
    page.goto(daemon.wait_for(r"sets a password at (\S+)").group(1))
    page.get_by_label("New password").fill(PASSWORD)
    page.get_by_label("Repeat it").fill(PASSWORD)
    page.get_by_role("button", name="Set password and sign in").click()
    page.get_by_role("heading", name="Overview").wait_for()


def api_key_of(page) -> str:
    """A full-access key made through the dashboard's own API (CSRF token from /me)."""
    return page.evaluate("""async () => {
        const me = await (await fetch("/me")).json();
        const made = await fetch("/dashboard/api-keys", {method: "POST", body: JSON.stringify({name: "checks"}),
            headers: {"Content-Type": "application/json", "X-CSRF-Token": me.csrf_token}});
        return (await made.json()).token;
    }""")


@attrs.define
class Seen:
    """What a page showed besides its content: the dialogs' messages, script errors, console lines."""

    dialogs: list[str] = attrs.Factory(list)
    errors: list[str] = attrs.Factory(list)
    console: list[str] = attrs.Factory(list)


def drive(browser, node, name: str, walk: Callable, *, output: Path, viewport=(1400, 900),
          accept_dialogs: bool = True, permissions: tuple[str, ...] = (), seen: Seen | None = None) -> Seen:
    """
    Runs ``walk(page, context)`` in a new page of a new context; on failure keeps
    ``<output>/<name>-failure.png`` and prints the page's URL, errors, console and the node's log.
    A page's script error fails the walk. Dialogs are accepted, or dismissed; their messages are
    kept in ``seen`` (give one for a walk that looks at it midway), which is returned.
    """
    seen = Seen() if seen is None else seen
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    if permissions:
        context.grant_permissions(list(permissions), origin=node.url)
    page = context.new_page()
    watch(page)

    def dialog(d):
        seen.dialogs.append(d.message)
        d.accept() if accept_dialogs else d.dismiss()

    page.on("dialog", dialog)
    page.on("pageerror", lambda e: seen.errors.append(str(e)))
    page.on("console", lambda m: seen.console.append(m.text))
    try:
        walk(page, context)
    except Exception:
        output.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(output / f"{name}-failure.png"), full_page=True)
        print("URL", page.url, "\nPAGE ERRORS", seen.errors, "\nCONSOLE", seen.console[-30:],
              "\nLOG", "".join(node.lines)[-3000:])
        raise
    finally:
        context.close()
    assert not seen.errors, seen.errors
    return seen


@pytest.fixture
def daemon(tmp_path, fresh_dsn):
    """A node of the dashboard's browser walks: its own state directory on a fresh database."""
    tmp_path.chmod(0o755)
    running = Daemon(tmp_path / "state", fresh_dsn)
    try:
        wait_until_listening(running.url, running.process)
        yield running
    finally:
        running.stop()
