"""What becomes of each recipient when its email is accepted or released (no I/O)."""

from datetime import UTC, datetime, timedelta

import pytest

from mailsvc.domain.delivery import first_event, first_last_event, first_status, first_times

NOW = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(("origin", "scheduled", "status"), [
    (None, False, "queued"),  # capture mode too: it is signed and stops at the door
    (None, True, "scheduled"),
    ("hard_bounce", False, "suppressed"),
    ("manual", True, "suppressed"),
])
def test_first_status(origin, scheduled, status):
    assert first_status(origin, scheduled) == status


@pytest.mark.parametrize(("live", "scheduled", "last_event"), [
    (True, False, "sent"),
    (True, True, "scheduled"),
    (False, False, "suppressed"),
    (False, True, "suppressed"),
])
def test_first_last_event(live, scheduled, last_event):
    assert first_last_event(live, scheduled) == last_event


def test_only_queued_mail_falls_due_and_is_retried_for_72_hours():
    assert first_times("queued", NOW) == (NOW, NOW + timedelta(hours=72))
    for status in ("scheduled", "suppressed", "delivered"):
        assert first_times(status, NOW) == (None, None)


def test_first_events():
    base = {"email_id": "e1", "created_at": "2026-11-22T09:00:00.000Z", "to": ["ann@example.com"]}
    assert first_event("suppressed", base, "d1", "gone@example.com", "complaint") == ("email.suppressed", {
        **base, "delivery_id": "d1", "recipient": "gone@example.com", "reason": "complaint"})
    assert first_event("queued", base, "d3", "ann@example.com", None) is None
    assert first_event("scheduled", base, "d4", "ann@example.com", None) is None
