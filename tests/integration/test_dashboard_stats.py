"""
The overview's figures (``GET /dashboard/stats``): a period of 7, 30 or 90 days, and beside it
the reputation guard's lines as the guard judges the account (mailsvc/domain/delivery.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest_twisted as pt

from mailsvc.domain.delivery import BOUNCE_RATE_LIMIT, BOUNCE_RATE_MINIMUM, COMPLAINT_RATE_MINIMUM, GUARD_DAYS
from tests.helpers.dashboard import signed_in
from tests.helpers.sending import BODY


async def _outcomes(api, tenant_id: str, ago: int, delivered: int, bounced: int, complained: int = 0) -> None:
    """A day's outcomes ``ago`` days before today (UTC), as the delivery worker counts them."""
    day = datetime.now(UTC).date() - timedelta(days=ago)
    await api.parts.db.execute(
        "INSERT INTO delivery_stats (tenant_id, day, delivered, bounced, complained) VALUES (%s, %s, %s, %s, %s)"
        " ON CONFLICT (tenant_id, day) DO UPDATE SET delivered = delivery_stats.delivered + excluded.delivered,"
        " bounced = delivery_stats.bounced + excluded.bounced,"
        " complained = delivery_stats.complained + excluded.complained",
        (tenant_id, day, delivered, bounced, complained))


@pt.ensureDeferred
async def test_ninety_days_reach_back_past_a_month(api):
    tenant, key, session = await signed_in(api)
    await _outcomes(api, tenant["id"], 80, 40, 2)
    today = datetime.now(UTC).date()
    code, stats, _ = await session.json("GET", "/dashboard/stats?days=90")
    assert code == 200 and len(stats["days"]) == 90
    assert stats["days"][0]["day"] == (today - timedelta(days=89)).isoformat()
    assert stats["days"][-1]["day"] == today.isoformat()
    (old,) = (d for d in stats["days"] if d["delivered"])
    assert old == {"day": (today - timedelta(days=80)).isoformat(), "sent": 0, "delivered": 40, "bounced": 2,
                   "complained": 0}
    code, month, _ = await session.json("GET", "/dashboard/stats?days=30")
    assert code == 200 and not any(d["delivered"] for d in month["days"])
    code, refused, _ = await session.json("GET", "/dashboard/stats?days=60")
    assert code == 422 and refused["name"] == "validation_error", refused


@pt.ensureDeferred
async def test_ninety_days_of_one_sending_domain(api):
    tenant, key, session = await signed_in(api)
    code, created, _ = await api.json("POST", "/domains", key, json={"name": "acme.example.com"})
    await api.parts.db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (created["id"],))
    code, sent, _ = await api.json("POST", "/emails", key, json=BODY)
    assert code == 200, sent
    code, stats, _ = await session.json("GET", "/dashboard/stats?days=90&domain=acme.example.com")
    assert code == 200 and len(stats["days"]) == 90 and stats["days"][-1]["sent"] == 1
    code, other, _ = await session.json("GET", "/dashboard/stats?days=90&domain=other.example.com")
    assert code == 200 and sum(d["sent"] for d in other["days"]) == 0


@pt.ensureDeferred
async def test_the_guard_lines_are_the_guards_own_figures(api):
    """Only the guard's window counts (its last day ago is out), bounces of the messages judged
    (delivered or bounced), complaints of those delivered; a line applies past its minimum."""
    tenant, key, session = await signed_in(api)
    await _outcomes(api, tenant["id"], GUARD_DAYS, 0, 500)  # just outside the window
    await _outcomes(api, tenant["id"], 3, 190, 6, 1)
    code, stats, _ = await session.json("GET", "/dashboard/stats?days=7")
    assert code == 200
    bounce, complaint = stats["guard"]["bounce"], stats["guard"]["complaint"]
    assert stats["guard"]["days"] == GUARD_DAYS
    assert bounce == {"count": 6, "judged": 196, "rate": 6 / 196, "limit": BOUNCE_RATE_LIMIT,
                      "minimum": BOUNCE_RATE_MINIMUM, "counts": False, "over": False}
    assert complaint["count"] == 1 and complaint["judged"] == 190 and complaint["minimum"] == COMPLAINT_RATE_MINIMUM
    assert not complaint["counts"] and not complaint["over"]
    await _outcomes(api, tenant["id"], 0, 0, 3)
    code, stats, _ = await session.json("GET", "/dashboard/stats?days=7&domain=acme.example.com")
    bounce = stats["guard"]["bounce"]  # the account's, whatever domain the days are narrowed to
    assert (bounce["count"], bounce["judged"], bounce["counts"], bounce["over"]) == (9, 199, False, False)
    await _outcomes(api, tenant["id"], 0, 0, 1)
    code, stats, _ = await session.json("GET", "/dashboard/stats")
    assert stats["guard"]["bounce"]["counts"] and stats["guard"]["bounce"]["over"]  # 10 of 200: 5 %
    _, _, other = await signed_in(api, "second@example.com")
    code, fresh, _ = await other.json("GET", "/dashboard/stats")
    assert fresh["guard"]["bounce"]["rate"] is None and fresh["guard"]["bounce"]["judged"] == 0
