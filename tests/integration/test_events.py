"""The events outbox."""

import pytest
import pytest_twisted as pt
from twisted.internet import task

from mailsvc.store import events
from tests.helpers.tenants import new_tenant


@pt.ensureDeferred
async def test_event_is_written_with_its_change_or_not_at_all(db):
    clock = task.Clock()
    clock.advance(1_800_000_000)
    tenant = await new_tenant(clock, db)

    async def change(txn, fail):
        await events.record(txn, clock, tenant.id, "domain.updated", {"status": "pending"})
        if fail:
            raise RuntimeError("rolled back")

    await db.run("ok", change, False)
    with pytest.raises(RuntimeError):
        await db.run("fails", change, True)
    rows = await db.fetchall("SELECT type, data FROM events")
    assert rows == [{"type": "domain.updated", "data": {"status": "pending"}}]

    async def unknown(txn):
        await events.record(txn, clock, tenant.id, "email.teleported", {})

    with pytest.raises(ValueError):
        await db.run("unknown", unknown)


def test_dns_server_spellings():
    from mailsvc.dns.resolver import parse_server

    assert parse_server("127.0.0.1:5353") == ("127.0.0.1", 5353)
    assert parse_server("127.0.0.1") == ("127.0.0.1", 53)
    assert parse_server("[::1]:5353") == ("::1", 5353)
    assert parse_server("::1") == ("::1", 53)


def test_ids_increase_within_one_millisecond():
    from mailsvc.ids import uuid7

    ids = [uuid7(1_800_000_000.0005) for _ in range(5000)]
    assert ids == sorted(ids) and len(set(ids)) == 5000
    assert all(i.version == 7 for i in ids)
    assert uuid7(1_800_000_001) > ids[-1]
