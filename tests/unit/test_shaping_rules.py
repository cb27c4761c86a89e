"""
Adaptive per-destination shaping, the rules as tables: which replies throttle, halving,
slow capped recovery, providers' starting limits. Shared limits and a 421 storm:
tests/integration/test_shaping.py.
"""

import pytest
from twisted.internet import defer, task

from mailsvc.delivery.shaping import Shaper, TooLateForSlot, destination_of
from mailsvc.domain.shaping import Limits, default_for, is_throttling, recovered, throttled

FALLBACK = Limits(10, 0)


@pytest.mark.parametrize(("code", "enhanced", "text", "throttling"), [
    (421, "4.7.0", "Too many connections", True),
    (421, "", "closing", True),
    (451, "4.7.28", "rate limited, try again later", True),
    (450, "4.7.0", "too many messages from your IP", True),
    (451, "4.7.1", "greylisted, try again later", False),
    (452, "4.2.2", "mailbox full", False),
    (550, "5.7.1", "rate limit", False),
    (250, "2.0.0", "ok", False),
])
def test_which_replies_throttle(code, enhanced, text, throttling):
    assert is_throttling(code, enhanced, text) is throttling


@pytest.mark.parametrize(("before", "after"), [
    (Limits(10, 50), Limits(5, 25)),
    (Limits(1, 0.3), Limits(1, 0.2)),
    (Limits(3, 1), Limits(1, 0.5)),
    (Limits(10, 0), Limits(5, 50)),  # no rate limit yet: from 100/s
])
def test_throttling_halves(before, after):
    assert throttled(before) == after


@pytest.mark.parametrize(("limits", "ceiling", "after"), [
    (Limits(1, 1), Limits(10, 50), Limits(2, 1.25)),
    (Limits(10, 45), Limits(10, 50), Limits(10, 50)),
    (Limits(5, 50), Limits(10, 0), Limits(6, 62.5)),
    (Limits(5, 90), Limits(10, 0), Limits(6, 0)),  # past 100/s: unlimited again
])
def test_recovery_is_slow_and_capped(limits, ceiling, after):
    assert recovered(limits, ceiling) == after


@pytest.mark.parametrize(("host", "expected"), [
    ("aspmx.l.google.com", Limits(10, 20)),
    ("x.mail.protection.outlook.com", Limits(8, 10)),
    ("mta7.am0.yahoodns.net", Limits(5, 5)),
    ("mx.example.net", FALLBACK),
])
def test_known_providers_start_with_their_limits(host, expected):
    defaults = {"google.com": Limits(10, 20), "outlook.com": Limits(8, 15), "protection.outlook.com": Limits(8, 10),
                "yahoodns.net": Limits(5, 5)}
    assert default_for(host, defaults, FALLBACK) == expected


def test_destinations_are_registered_domains():
    assert destination_of("aspmx.l.google.com") == "google.com"
    assert destination_of("MX.Example.NET.") == "example.net"





def test_waiters_past_their_deadline_give_their_slots_back_without_nesting():
    """Woken at once, 2,000 waiters whose next start is past their deadline each give the slot
    back as they wake; each used to wake the next from inside its own call, 2,000 calls deep."""
    clock = task.Clock()
    clock.advance(100)
    shaper = Shaper(clock, None, "node-a", Limits(1, 0.01))  # one at a time, one start each 100 s
    held = defer.ensureDeferred(shaper.acquire("mx.example.net", deadline=1000))
    assert held.called  # the slot, and the next start at 200
    waiting = [defer.ensureDeferred(shaper.acquire("mx.example.net", deadline=150)) for _ in range(2000)]
    late = []
    for d in waiting:
        d.addErrback(lambda f: late.append(f.trap(TooLateForSlot)))
    clock.advance(10)
    shaper.release("mx.example.net")
    assert len(late) == 2000
    # Nothing was lost on the way: the slot is free, and the next start keeps its pace.
    after = defer.ensureDeferred(shaper.acquire("mx.example.net", deadline=1000))
    clock.advance(89)
    assert not after.called
    clock.advance(1)
    assert after.result == "example.net"
