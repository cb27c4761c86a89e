"""
The overview in a real headless Chromium against the real daemon, an account with a quarter of
mail behind it: the 90-day period, the chart's y-axis, a day's figures in the readout on hover,
on a tap and by the arrow keys, the days as a table on demand, and the reputation guard's lines
in words; axe finds nothing wrong with it (the table open). Screenshots at 375 and 1,280 px,
light and dark, go to ``test-output/overview/``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg2
import pytest

from tests.helpers.browser import drive, go, keep_screenshot, output_dir, set_first_password
from tests.helpers.pagechecks import AXE, violations

pytestmark = pytest.mark.slow

OUTPUT = output_dir("overview")


def quarter(dsn: str) -> list[dict]:
    """90 days of mail for the daemon's one account: the usage counters and the delivery
    outcomes, as acceptance and the delivery worker count them; the days, oldest first."""
    today = datetime.now(UTC).date()
    days = []
    for ago in range(89, -1, -1):
        sent = 40 + (ago * 37) % 160
        bounced, complained = (ago * 7) % 5, 1 if ago % 30 == 4 else 0
        days.append({"day": today - timedelta(days=ago), "sent": sent, "delivered": sent - bounced,
                     "bounced": bounced, "complained": complained})
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("SELECT id FROM tenants")
        ((tenant,),) = cur.fetchall()
        for d in days:
            cur.execute("INSERT INTO usage (tenant_id, period, count) VALUES (%s, %s, %s)",
                        (tenant, f"day:{d['day']:%Y-%m-%d}", d["sent"]))
            cur.execute("INSERT INTO delivery_stats (tenant_id, day, delivered, bounced, complained)"
                        " VALUES (%s, %s, %s, %s, %s)",
                        (tenant, d["day"], d["delivered"], d["bounced"], d["complained"]))
    return days


def test_a_quarter_at_a_glance(daemon, browser, fresh_dsn):
    assert AXE.is_file(), "run scripts/test once: it installs tests/node (axe-core)"

    def walk(page, context):
        set_first_password(page, daemon)
        days = quarter(fresh_dsn)
        go(page, "#/?days=90", "Overview")
        assert page.locator("div.card.stat", has_text="sent (90 days)").locator(".stat-value").text_content() \
            == f"{sum(d['sent'] for d in days):,}"
        ticks = page.locator("svg.chart.days text.tick[text-anchor=end]").all_text_contents()
        assert ticks[0] == "0" and len(ticks) >= 3, ticks
        readout = page.locator("p.readout")
        assert readout.text_content().endswith(f"{days[-1]['sent']} sent, {days[-1]['delivered']} delivered,"
                                               f" {days[-1]['bounced']} bounced, {days[-1]['complained']} complained")
        page.locator("svg.chart.days g.day").nth(0).hover()
        assert readout.text_content().startswith(f"{days[0]['day'].day} ")
        page.locator("svg.chart.days g.day").nth(45).click()
        assert f"{days[45]['sent']} sent" in readout.text_content()
        page.locator("div.chart-box").focus()
        page.keyboard.press("ArrowRight")
        assert f"{days[46]['sent']} sent" in readout.text_content()
        page.keyboard.press("End")
        assert readout.text_content().startswith(f"{days[-1]['day'].day} ")
        table = page.locator("details.days-table")
        assert not table.locator("table").is_visible()
        table.locator("summary").click()
        assert table.locator("tbody tr").count() == 90
        assert table.locator("tbody tr").first.locator("th").text_content() == days[0]["day"].isoformat()
        found = violations(page, "#/?days=90, its table open")
        assert not found, "\n".join(found)
        page.set_viewport_size({"width": 1280, "height": 900})
        page.emulate_media(color_scheme="light")
        table.locator("summary").click()
        week = days[-7:]
        judged = sum(d["delivered"] + d["bounced"] for d in week)
        bounces = page.locator("div.guard-line").first
        share = sum(d["bounced"] for d in week) / judged
        headline = bounces.locator(".guard-headline").text_content()
        assert headline.startswith(f"Bounces {round(100 * share, 1):g} % of 4 %"), headline
        assert f"of {judged:,} messages judged" in bounces.locator(".guard-detail").text_content()
        complaints = page.locator("div.guard-line").nth(1)
        assert complaints.locator(".guard-headline").text_content().startswith("Complaints")
        OUTPUT.mkdir(parents=True, exist_ok=True)
        for days_ in (90, 7):
            go(page, f"#/?days={days_}", "Overview")
            for scheme in ("light", "dark"):
                page.emulate_media(color_scheme=scheme)
                for width in (375, 1280):
                    page.set_viewport_size({"width": width, "height": 900})
                    page.wait_for_timeout(150)
                    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth"), (days_, scheme, width)
                    keep_screenshot(page, OUTPUT / f"overview-{days_}-{width}-{scheme}.png")

    drive(browser, daemon, "overview", walk, output=OUTPUT, viewport=(1280, 900))
