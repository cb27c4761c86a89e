"""The delivery policy of an account and destination (no I/O)."""

import random
import uuid

import attrs
import pytest

from mailsvc.domain import policy
from mailsvc.domain.delivery import Reputation
from mailsvc.domain.policy import Holds, resolve

ACCOUNT = uuid.UUID("00000000-0000-7000-8000-000000000001")


@attrs.frozen
class Account:
    status: str = "active"
    status_reason: str | None = None
    send_rate_per_sec: float = 10
    delivery_mode: str = "direct"
    id: uuid.UUID = ACCOUNT


HOLDS = Holds.of([("tenant", str(uuid.UUID(int=7)), "account review"), ("destination", "slow.example", "blocklisted")])


@pytest.mark.parametrize(("account", "destination", "holds", "verdict", "reason", "message"), [
    (Account(), "x.example", Holds(), policy.SEND, None, None),
    (Account(), None, HOLDS, policy.SEND, None, None),
    (Account(status="paused"), None, Holds(), policy.PAUSE, "tenant_paused",
     "Sending is paused for this account. Contact support to resume."),
    (Account(status="paused", status_reason="reputation guard: bounce rate"), None, Holds(), policy.PAUSE,
     "tenant_paused", "Sending is paused for this account: reputation guard: bounce rate. Contact support to resume."),
    (Account(status="suspended"), "x.example", Holds(), policy.SUSPEND, "tenant_suspended",
     "This account is suspended and cannot send email."),
    # The account's status comes before any hold.
    (Account(status="paused"), "slow.example", HOLDS, policy.PAUSE, "tenant_paused",
     "Sending is paused for this account. Contact support to resume."),
    (Account(id=uuid.UUID(int=7)), "x.example", HOLDS, policy.HOLD, "account review", None),
    (Account(id=uuid.UUID(int=7)), "slow.example", HOLDS, policy.HOLD, "account review", None),
    (Account(), "slow.example", HOLDS, policy.HOLD, "blocklisted", None),
    (Account(), "SLOW.example", HOLDS, policy.HOLD, "blocklisted", None),
    (Account(), "fast.example", HOLDS, policy.SEND, None, None),
])
def test_admission(account, destination, holds, verdict, reason, message):
    admitted = resolve(account, destination, holds=holds).admission
    assert (admitted.verdict, admitted.reason, admitted.message) == (verdict, reason, message)
    assert admitted.sends == (verdict == policy.SEND)


@pytest.mark.parametrize(("status", "failure"), [
    ("active", None), ("paused", None), ("suspended", "account_suspended"),
])
def test_only_a_suspended_account_s_mail_fails(status, failure):
    assert resolve(Account(status=status)).admission.failure == failure


def test_only_active_accounts_are_claimed():
    assert policy.CLAIMABLE_STATUSES == ("active",)


@pytest.mark.parametrize(("mode", "sending_tls", "relay", "capture", "tls"), [
    ("direct", None, False, False, "opportunistic"),
    ("direct", "enforced", False, False, "enforced"),
    ("relay", "opportunistic", True, False, "opportunistic"),
    ("capture", None, False, True, "opportunistic"),
])
def test_the_path(mode, sending_tls, relay, capture, tls):
    path = resolve(Account(delivery_mode=mode, send_rate_per_sec=25), "x.example", sending_tls=sending_tls)
    assert (path.relay, path.capture, path.tls) == (relay, capture, tls)
    assert path.pace_per_sec == 25
    assert path.recipients_per_transaction == policy.RECIPIENTS_PER_TRANSACTION == 50
    assert path.retry == policy.RETRY


@pytest.mark.parametrize(("attempt", "low", "high"), [
    (1, 48, 72), (2, 96, 144), (3, 192, 288), (7, 3072, 4608), (8, 5760, 8640), (30, 5760, 8640),
])
def test_retry_waits_double_up_to_the_cap_with_jitter(attempt, low, high):
    rng = random.Random(attempt)
    for _ in range(50):
        assert low <= policy.RETRY.delay(attempt, rng) <= high


@pytest.mark.parametrize(("now", "until", "due"), [
    (1000.0, 1000.0, None),  # the window is over
    (1000.0, 2000.0, 1060.0),
    (1000.0, 1030.0, 1030.0),  # the last attempt falls on the window's end
])
def test_next_attempt(now, until, due):
    schedule = policy.RetrySchedule(jitter=0)
    assert schedule.next_attempt(now, 1, until) == due


@pytest.mark.parametrize(("reputation", "paused"), [
    (Reputation(1000, 10, 0), False),
    (Reputation(150, 49, 0), False),  # too few to judge
    (Reputation(192, 9, 0), True),
    (Reputation(5000, 0, 6), True),
    (Reputation(900, 0, 5), False),
])
def test_reputation_pause(reputation, paused):
    reason = policy.reputation_pause(reputation)
    assert (reason is not None) == paused
    if paused:
        assert reason.startswith("reputation guard: ") and reason.endswith(reputation.breach())


@pytest.mark.parametrize(("reputation", "bounce", "complaint"), [
    (Reputation(0, 0, 0), (None, False, False), (None, False, False)),
    (Reputation(150, 49, 0), (49 / 199, False, False), (0.0, False, False)),  # over 4 %, too few judged
    (Reputation(192, 8, 0), (0.04, True, False), (0.0, False, False)),  # at the line, not over it
    (Reputation(192, 9, 0), (9 / 201, True, True), (0.0, False, False)),
    (Reputation(5000, 0, 6), (0.0, True, False), (6 / 5000, True, True)),
])
def test_the_guards_lines_are_what_it_pauses_by(reputation, bounce, complaint):
    """Each line's rate, whether enough were judged for it, whether it is over: the guard pauses
    exactly when one is over (the overview shows these lines)."""
    lines = reputation.lines()
    assert tuple(lines["bounce"][k] for k in ("rate", "counts", "over")) == bounce
    assert tuple(lines["complaint"][k] for k in ("rate", "counts", "over")) == complaint
    assert lines["bounce"]["judged"] == reputation.delivered + reputation.bounced
    assert lines["complaint"]["judged"] == reputation.delivered
    assert (reputation.breach() is not None) == (lines["bounce"]["over"] or lines["complaint"]["over"])
