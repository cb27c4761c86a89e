"""
Deliverability in the dashboard in Debian's headless Chromium against the real daemon,
PostgreSQL and SpamAssassin's spamd (tests/helpers/spamd.py): a DMARC aggregate report (Google's zip,
tests/samples/dmarc) arrives by SMTP at the daemon's own return-path listener for the account's
verified domain, and the domain page's card shows its sources and counts; a template's preview
shows the spam score, the threshold and the rules that hit.
"""

from __future__ import annotations

import re
import smtplib

import psycopg2
import pytest
import requests

from tests.helpers.browser import Daemon, api_key_of, drive, go, output_dir, set_first_password
from tests.helpers.daemon import free_port, wait_until_listening
from tests.helpers.dmarc import report_message, xml, zipped
from tests.helpers.spam import SPAMMY
from tests.helpers.spamd import spamd  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow

OUTPUT = output_dir("dashboard")


@pytest.fixture
def daemon(tmp_path, fresh_dsn, spamd):  # noqa: F811 (the fixture imported above)
    tmp_path.chmod(0o755)
    inbound = free_port()
    running = Daemon(tmp_path / "state", fresh_dsn, MAILSVC_SPAM_SPAMD=spamd,
                     MAILSVC_SMTP_INBOUND=f"tcp:{inbound}:interface=127.0.0.1")
    running.inbound = inbound
    try:
        wait_until_listening(running.url, running.process)
        yield running
    finally:
        running.stop()


def test_the_dmarc_card_and_the_spam_score(daemon, browser, fresh_dsn):  # noqa: F811
    drive(browser, daemon, "deliverability", lambda page, context: walk(page, daemon, fresh_dsn),
          output=OUTPUT, viewport=(1280, 800), accept_dialogs=False)


def walk(page, daemon, fresh_dsn):
    set_first_password(page, daemon)
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {api_key_of(page)}"

    # A verified domain of the account (DNS is not what this test is about).
    made = api.post(daemon.url + "/domains", json={"name": "acme.example.com"}, timeout=10)
    assert made.status_code in (200, 201), made.text
    domain = api.get(f"{daemon.url}/domains/{made.json()['id']}", timeout=10).json()
    with psycopg2.connect(fresh_dsn) as conn, conn.cursor() as cur:
        cur.execute("UPDATE domains SET status = 'verified'")
    dmarc = next(r["value"] for r in domain["records"] if r["record"] == "DMARC")
    rua = re.search(r"rua=mailto:([^;]+);", dmarc).group(1)

    # Google's aggregate report arrives at the daemon's return-path listener.
    report = report_message("noreply-dmarc-support@google.com", zipped("google.com!acme.zip", xml("google.xml")),
                            "google.com!acme.example.com!1!2.zip", "application/zip")
    with smtplib.SMTP("127.0.0.1", daemon.inbound, timeout=10) as client:
        assert client.sendmail("g@google.com", [rua], report) == {}

    # The domain page's card: the report's sources, their counts and its reporter.
    go(page, f"#/domains/{domain['id']}", re.compile("acme.example.com"))
    card = page.locator("#dmarc")
    card.locator("table").wait_for()
    good = card.locator("tr", has=page.locator("code", has_text="192.0.2.10"))
    bad = card.locator("tr", has=page.locator("code", has_text="198.51.100.7"))
    assert good.locator("td").nth(2).text_content() == "40" and "google.com" in good.text_content()
    assert bad.locator("td").nth(2).text_content() == "10" and bad.locator("td").nth(3).text_content() == "0 %"
    assert card.locator("tr.day td").nth(2).text_content() == "50"

    # A template's preview: the score, the threshold and a rule that hit, beside it.
    template = api.post(daemon.url + "/templates", json={
        "name": "Spammy", "subject": "Win", "html": f"<p>{SPAMMY}</p>"}, timeout=10)
    assert template.status_code in (200, 201), template.text
    go(page, f"#/templates/{template.json()['id']}", "Spammy")
    page.get_by_role("button", name="Preview with these values").click()
    score = page.locator("#preview-spam")
    score.get_by_text(re.compile(r"^Spam score [\d.]+ / [\d.]+$")).wait_for()
    assert "likely spam" in score.text_content()
    assert score.locator("code", has_text=re.compile("^GTUBE$")).count() == 1
