"""What becomes of each recipient when its email is accepted or released (no I/O)."""

from datetime import UTC, datetime, timedelta

import pytest

from mailsvc.domain.delivery import fair_shares, first_event, first_last_event, first_status, first_times

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


@pytest.mark.parametrize(("wanted", "room", "shares"), [
    ([10000, 1], 200, [199, 1]),          # a backlog leaves the room another account does not use
    ([10000, 10000], 200, [100, 100]),
    ([2, 10000, 5], 200, [2, 193, 5]),
    ([1] * 5, 3, [1, 1, 1, 0, 0]),        # more accounts than room: the oldest due first, one each
    ([3, 3], 200, [3, 3]),
    ([], 200, []),
    ([7, 7, 7], 10, [4, 3, 3]),
])
def test_a_claim_shares_its_room_between_accounts(wanted, room, shares):
    assert fair_shares(wanted, room) == shares
    assert sum(shares) == min(room, sum(wanted))
