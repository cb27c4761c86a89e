"""
Two-factor sign-in in a real headless Chromium against the real daemon: the first user sets up
an authenticator on the Security page (the key shown as text), is shown ten recovery codes once,
sees this session in the session list, signs out and signs in again with the password and then a
code. Screenshots go to ``test-output/two-factor/``.
"""

from __future__ import annotations

import base64
import time

import pytest

from mailsvc.domain import totp
from tests.helpers.browser import (
    PASSWORD,
    drive,
    go,
    keep_screenshot,
    output_dir,
    set_first_password,
)

pytestmark = pytest.mark.slow

OUTPUT = output_dir("two-factor")


def code(secret: bytes, steps_ahead: int = 0) -> str:
    return totp.code_at(secret, totp.step_of(time.time()) + steps_ahead)


def walk(page, context, daemon):
    OUTPUT.mkdir(parents=True, exist_ok=True)
    set_first_password(page, daemon)
    page.get_by_role("link", name="Security").click()
    page.get_by_role("heading", level=1, name="Security").wait_for()
    page.get_by_role("button", name="Set up an authenticator").click()
    shown = page.locator("#two-factor dl.pairs code").first
    shown.wait_for()
    typed = shown.inner_text().replace(" ", "")
    assert len(typed) == 32 and "otpauth://totp/" in page.locator("#two-factor").inner_text()
    assert page.get_by_role("button", name="Set up an authenticator").count() == 0
    page.set_viewport_size({"width": 375, "height": 740})
    page.wait_for_timeout(150)
    keep_screenshot(page, OUTPUT / "enrol-375.png")
    assert page.evaluate("document.documentElement.scrollWidth") <= 380
    page.set_viewport_size({"width": 1400, "height": 900})
    keep_screenshot(page, OUTPUT / "enrol.png")
    secret = base64.b32decode(typed + "=" * (-len(typed) % 8))
    page.get_by_label("Code").fill(code(secret))
    page.get_by_role("button", name="Turn on").click()
    page.get_by_role("heading", name="Two-factor sign-in is on").wait_for()
    assert page.locator("ul.codes li").count() == 10
    keep_screenshot(page, OUTPUT / "recovery-codes.png")
    page.get_by_role("button", name="Done").click()
    page.get_by_text("10 recovery codes left").wait_for()
    page.get_by_text("this session").wait_for()
    for width, height in ((1280, 800), (375, 740)):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(150)
        keep_screenshot(page, OUTPUT / f"security-{width}.png")
    page.set_viewport_size({"width": 1400, "height": 900})

    # Signing in again: the password, then a code.
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("E-mail address").fill("owner@example.com")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", level=1, name="Two-factor sign-in").wait_for()
    assert "mailsvc_session" not in {c["name"] for c in context.cookies()}
    keep_screenshot(page, OUTPUT / "second-step.png")
    page.get_by_label("Code").fill(code(secret, 1))  # this step's code was used by the set-up
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", level=1, name="Overview").wait_for()
    go(page, "#/security", "Security")


def test_the_first_user_sets_up_two_factor_and_signs_in_with_a_code(daemon, browser):
    drive(browser, daemon, "two-factor", lambda page, context: walk(page, context, daemon), output=OUTPUT)
