"""The GCRA statements of the store decide and record as ``mailsvc.domain.gcra.Gcra`` does."""

import uuid

import pytest
import pytest_twisted as pt

from mailsvc.domain.gcra import Gcra
from mailsvc.store import api_rate, throttles

#: (rate, arrivals as (time, count)): bursts, the rate, idle spells, arrivals out of order.
TABLES = [
    (Gcra.of(6.0, 10), [(0, 1)] * 12 + [(6, 1), (6, 1), (60, 1), (200, 1)]),
    (Gcra.of(0.1, 20), [(0, 5), (0, 10), (0, 6), (0.5, 5), (0.55, 1), (10, 20), (10, 1)]),
    (Gcra(0.02, 1.95), [(1000.0, 40), (1000.01, 40), (1000.5, 30), (1000.5, 2), (999.0, 1)]),
    (Gcra.per_second(3, 1), [(t / 7, 1) for t in range(40)]),
]


def same(seen, expected) -> bool:
    """The same decisions, and the same times but for float rounding."""
    return [ok for ok, _ in seen] == [ok for ok, _ in expected] and \
        [tat for _, tat in seen] == pytest.approx([tat for _, tat in expected])


def python_arrivals(rate: Gcra, arrivals):
    tat, seen = None, []
    for now, count in arrivals:
        ok = rate.conforms(tat, now, count)
        if ok:
            tat = rate.counted(tat, now, count)
        seen.append((ok, tat))
    return seen


@pytest.mark.parametrize(("rate", "arrivals"), TABLES)
@pt.ensureDeferred
async def test_the_api_rate_row_is_the_gcra(db, rate, arrivals):
    tenant = uuid.uuid4()
    seen = []
    for now, count in arrivals:
        if count == 1:
            ok = await api_rate.take(db, tenant, now, rate)
        else:
            ok = await api_rate.lease(db, tenant, now, count, rate)
        seen.append((ok, await api_rate.theoretical_arrival(db, tenant)))
    assert same(seen, python_arrivals(rate, arrivals))


@pytest.mark.parametrize(("rate", "arrivals"), [(r, a) for r, a in TABLES if all(c == 1 for _, c in a)])
@pt.ensureDeferred
async def test_the_throttle_row_is_the_gcra(db, rate, arrivals):
    seen = []
    for now, _ in arrivals:
        refused_at = await throttles.reserve(db, "client:192.0.2.1", now, rate)
        row = await db.fetchone("SELECT tat FROM login_throttle WHERE key = %s", ("client:192.0.2.1",))
        seen.append((refused_at is None, row["tat"]))
        if refused_at is not None:
            assert refused_at == row["tat"]  # a refusal answers the row's time, unchanged
    assert same(seen, python_arrivals(rate, arrivals))
    await throttles.give_back(db, "client:192.0.2.1", rate)
    row = await db.fetchone("SELECT tat FROM login_throttle WHERE key = %s", ("client:192.0.2.1",))
    assert row["tat"] == pytest.approx(seen[-1][1] - rate.interval)
