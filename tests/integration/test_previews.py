"""The dashboard's previews are kept in PostgreSQL: any process serves them, to their account only."""

from __future__ import annotations

import pytest_twisted as pt
from twisted.internet import reactor, task

from mailsvc.store import previews
from mailsvc.store.database import Database
from tests.helpers.tenants import new_tenant


async def _tenant(db, name):
    clock = task.Clock()
    clock.advance(1_800_000_000)
    return (await new_tenant(clock, db, name=name)).id


@pt.ensureDeferred
async def test_a_preview_kept_by_one_process_is_served_by_another_to_its_account_only(db, fresh_dsn):
    mine, other = await _tenant(db, "mine"), await _tenant(db, "other")
    await previews.keep(db, "t1", mine, b"<p>hello</p>", 600, 50)
    second = Database(reactor, fresh_dsn, 1)  # another worker's own pool
    await second.start()
    try:
        assert await previews.get(second, "t1", mine) == b"<p>hello</p>"
        assert await previews.get(second, "t1", other) is None
        assert await previews.get(second, "nope", mine) is None
    finally:
        second.stop()


@pt.ensureDeferred
async def test_expired_previews_and_an_accounts_oldest_beyond_its_cap_are_dropped(db):
    mine = await _tenant(db, "mine")
    await previews.keep(db, "old", mine, b"x", 0, 50)
    await db.execute("UPDATE ui_previews SET expires_at = now() - interval '1 second' WHERE token = 'old'")
    assert await previews.get(db, "old", mine) is None
    for n in range(4):
        await previews.keep(db, f"p{n}", mine, b"x", 600 + n, 3)
    rows = await db.fetchall("SELECT token FROM ui_previews ORDER BY token")
    assert [r["token"] for r in rows] == ["p1", "p2", "p3"]  # "old" expired, "p0" the oldest beyond 3
