"""The one GCRA (``mailsvc.domain.gcra``) and the paces built on it."""

import pytest

from mailsvc.app.accounts import WAITLIST
from mailsvc.domain.delivery import AccountPace
from mailsvc.domain.gcra import Gcra
from mailsvc.domain.webhooks import HostPace


def admitted(rate: Gcra, arrivals: list[float]) -> list[bool]:
    tat = None
    seen = []
    for at in arrivals:
        ok, tat = rate.take(tat, at)
        seen.append(ok)
    return seen


@pytest.mark.parametrize(
    ("arrivals", "allowed"),
    [
        # The waitlist's: a burst of 10 at once, then one every 6 s.
        ([0] * 11, [True] * 10 + [False]),
        ([0] * 10 + [6, 6], [True] * 11 + [False]),
        ([0] * 10 + [60] * 11, [True] * 20 + [False]),
        ([6 * i for i in range(30)], [True] * 30),  # at the rate, for ever
        (list(range(13)), [True] * 11 + [False, True]),  # one a second: only the rate
    ],
)
def test_a_burst_then_the_rate(arrivals, allowed):
    assert admitted(WAITLIST.rate, arrivals) == allowed


def test_a_refused_arrival_counts_nothing_and_says_how_long_to_wait():
    rate = Gcra.of(6.0, 10)
    tat = None
    for _ in range(10):
        _, tat = rate.take(tat, 0)
    assert tat == 60
    assert rate.take(tat, 0) == (False, 60)
    assert rate.wait(tat, 0) == 6 and rate.retry_after(tat, 0) == 6
    assert rate.wait(tat, 5.5) == 0.5 and rate.retry_after(tat, 5.5) == 1  # whole seconds, at least 1
    assert rate.wait(tat, 6) == 0 and rate.take(tat, 6) == (True, 66)
    assert rate.wait(None, 0) == 0 and rate.retry_after(None, 0) == 1


def test_many_at_once_conform_only_together():
    rate = Gcra(0.1, 1.0)
    assert rate.conforms(None, 0, 10)
    assert not rate.conforms(None, 0, 11)
    assert rate.counted(None, 0, 10) == pytest.approx(1.0)
    assert rate.counted(5.0, 0, 2) == pytest.approx(5.2)  # ahead of now: counted from its tat


@pytest.mark.parametrize(("tat", "now"), [(None, 0), (0.0, 0), (0.5, 0), (1.0, 0), (3.0, 0), (1.25, 1), (9.0, 10)])
def test_how_many_may_arrive_at_once_is_the_most_that_conform_together(tat, now):
    rate = Gcra(0.25, 1.0)  # exact in binary: four at once from quiet
    most = max((n for n in range(10) if rate.conforms(tat, now, n)), default=0)
    assert rate.admitted(tat, now, 10) == most
    assert rate.admitted(tat, now, 2) == min(2, most)
    assert rate.admitted(tat, now, 0) == 0


def test_how_many_may_arrive_at_once_counts_a_rounded_window_whole():
    rate = Gcra.per_second(7, 7)  # an interval of 1/7 is not exact in binary
    assert rate.admitted(None, 100.0, 10) == 7
    assert rate.admitted(rate.counted(None, 100.0, 7), 100.0 + 1 / 7, 10) == 1


def test_per_second_and_of_are_the_same_rate():
    assert Gcra.per_second(4, 8) == Gcra.of(0.25, 8) == Gcra(0.25, 2.0)


def test_a_webhook_hosts_pace_is_the_gcra():
    pace, rate, tat = HostPace(rate=2, burst=3), Gcra.per_second(2, 3), None
    for now in (0, 0, 0, 0, 0.4, 0.5, 0.5, 3, 3, 3, 3):
        assert pace.wait(now) == pytest.approx(rate.wait(tat, now))
        if pace.wait(now) == 0:
            pace.start(now)
            tat = rate.counted(tat, now)
        assert pace.tat == tat
    assert pace.wait(3) == pytest.approx(0.5)
    assert not pace.idle(3) and pace.idle(5)


@pytest.mark.parametrize(("rate", "burst"), [(7, 7), (10, 10), (3, 3), (0.5, 1), (1000, 1000)])
def test_a_delivery_pace_starts_one_seconds_worth_then_one_per_interval(rate, burst):
    now = 1_000.0
    count, tat, next_start = AccountPace(rate, now).admit(now, 10_000)
    assert count == burst
    assert next_start == pytest.approx(now + 1 / rate)
    # One interval later exactly one more may start, and the remainder waits again.
    later = now + 1 / rate
    count, _, _ = AccountPace(rate, tat).admit(later, 10_000)
    assert count == 1


def test_a_delivery_pace_admits_no_more_than_asked_and_stays_put_when_none_are():
    count, tat, _ = AccountPace(7, 0.0).admit(100.0, 3)
    assert (count, tat) == (3, pytest.approx(100.0 + 3 / 7))
    count, tat_after, _ = AccountPace(7, tat).admit(100.0, 0)
    assert (count, tat_after) == (0, tat)
