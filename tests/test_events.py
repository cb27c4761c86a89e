"""The events outbox."""

import pytest
import pytest_twisted as pt
from twisted.internet import task

from mailsvc import events
from mailsvc.accounts import Accounts
from mailsvc.apikeys import KeyRing


@pt.ensureDeferred
async def test_event_is_written_with_its_change_or_not_at_all(db):
    clock = task.Clock()
    clock.advance(1_800_000_000)
    tenant, _, _ = await Accounts(clock, db, KeyRing(clock, db, b"k" * 32, "re", 10), 10).create_tenant(
        {"name": "t"}
    )

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
