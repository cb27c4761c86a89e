"""
``mailsvc.store.contacts.upsert`` on the real database: the contacts, their ``contact.*``
events and their memberships are written by one statement (one round trip, whatever the
number of rows), and each event's ``data`` is what ``event_data`` makes of the contact as it
then reads; an event no webhook of the account takes is written handed over already.
"""

import uuid
from datetime import UTC, datetime

import pytest_twisted as pt
from twisted.internet import reactor

from mailsvc.domain.contacts import event_data
from mailsvc.ids import uuid7
from mailsvc.store import contacts as rows
from mailsvc.store import suppressions


class Counted:
    """A transaction that counts the statements sent through it."""

    def __init__(self, txn):
        self._txn = txn
        self.statements = 0
        self.notified: str | None = None

    async def fetchall(self, sql, args=None):
        self.statements += 1
        return await self._txn.fetchall(sql, args)

    async def execute(self, sql, args=None):
        self.statements += 1
        return await self._txn.execute(sql, args)

    def notify(self, channel, payload=""):
        self.notified = channel
        self._txn.notify(channel, payload)


@pt.ensureDeferred
async def test_one_statement_writes_contacts_events_and_memberships(api):
    db = api.parts.db
    tenant, key = await api.tenant()
    tenant_id = uuid.UUID(tenant["id"])
    segments = []
    for name in ("a", "b"):
        code, segment, _ = await api.json("POST", "/segments", key, json={"name": name})
        assert code == 201, segment
        segments.append(uuid.UUID(segment["id"]))
    code, ann, _ = await api.json("POST", "/contacts", key, json={"email": "ann@example.com", "first_name": "A"})
    assert code == 201, ann
    await db.run("suppress", suppressions.add_many, reactor, tenant_id, ["bob@example.com"], "complaint")
    before = {row["id"] for row in await db.fetchall("SELECT id FROM events")}

    now = datetime(2026, 11, 26, 12, 0, 0, 123456, tzinfo=UTC)
    written = [  # in the order the events are to be, not by address
        {"id": uuid7(reactor.seconds()), "email": "carl@example.com", "first_name": None, "last_name": "Cee",
         "properties": {"n": 1}, "segments": set(segments)},
        {"id": uuid7(reactor.seconds()), "email": "ann@example.com", "first_name": "Ann", "last_name": None,
         "properties": {}, "segments": {segments[0]}},
        {"id": uuid7(reactor.seconds()), "email": "bob@example.com", "first_name": "Bob", "last_name": "Bee",
         "properties": {}, "segments": set()},
    ]
    counted = []

    async def write(txn):
        counted.append(Counted(txn))
        return await rows.upsert(counted[0], reactor, tenant_id, written, now)

    ids = await db.run("upsert", write)
    assert counted[0].statements == 1
    assert ids["ann@example.com"] == uuid.UUID(ann["id"])  # a known address keeps its id
    assert ids["carl@example.com"] == written[0]["id"] and ids["bob@example.com"] == written[2]["id"]

    events = [row for row in await db.fetchall("SELECT id, type, data, created_at FROM events ORDER BY id")
              if row["id"] not in before]
    assert [(e["type"], e["data"]["email"]) for e in events] == [
        ("contact.created", "carl@example.com"), ("contact.updated", "ann@example.com"),
        ("contact.created", "bob@example.com")]
    for event in events:
        contact = await rows.get(db, tenant_id, event["data"]["email"])
        assert event["data"] == event_data(contact)
        assert event["created_at"] == now
    assert [e["data"]["unsubscribed"] for e in events] == [False, False, True]
    assert events[1]["data"]["first_name"] == "Ann" and events[1]["data"]["last_name"] == ""

    members = await db.fetchall("SELECT segment_id, contact_id FROM segment_contacts ORDER BY 1, 2")
    assert {(m["segment_id"], m["contact_id"]) for m in members} == {
        (segments[0], ids["carl@example.com"]), (segments[1], ids["carl@example.com"]),
        (segments[0], ids["ann@example.com"])}


@pt.ensureDeferred
async def test_lock_finds_the_known_addresses_among_many_unknown(api):
    db = api.parts.db
    tenant, key = await api.tenant()
    tenant_id = uuid.UUID(tenant["id"])
    for email in ("b@example.com", "d@example.com"):
        code, _, _ = await api.json("POST", "/contacts", key, json={"email": email})
        assert code == 201
    wanted = [f"x{n}@example.com" for n in range(300)] + ["d@example.com", "b@example.com", "b@example.com"]
    found = await db.run("lock", rows.lock, tenant_id, wanted)
    assert [row["email"] for row in found] == ["b@example.com", "d@example.com"]  # in lock (address) order
    (by_key,) = await db.run("lock", rows.lock, tenant_id, key="d@example.com")
    assert by_key["email"] == "d@example.com"


@pt.ensureDeferred
async def test_events_no_webhook_takes_are_written_fanned_out(api):
    """The account's enabled webhooks that existed at the write decide: an event none of them
    takes is written ``fanned_out`` and the dispatcher is not woken; one they take is left for
    its fan-out, and the dispatcher woken."""
    db = api.parts.db
    tenant, key = await api.tenant()
    tenant_id = uuid.UUID(tenant["id"])
    code, _, _ = await api.json("POST", "/contacts", key, json={"email": "ann@example.com"})
    assert code == 201
    now = datetime.now(UTC)

    async def upsert(emails: list[str]) -> str | None:
        counted = []

        async def write(txn):
            counted.append(Counted(txn))
            return await rows.upsert(counted[0], reactor, tenant_id, [
                {"id": uuid7(reactor.seconds()), "email": email, "first_name": None, "last_name": None,
                 "properties": {}, "segments": set()} for email in emails], now)

        await db.run("upsert", write)
        return counted[0].notified

    async def hook(events: list[str], status: str, created_at: datetime) -> None:
        await db.execute(
            "INSERT INTO webhooks (id, tenant_id, endpoint, events, status, secret, created_at, updated_at)"
            " VALUES (%s, %s, 'https://hooks.example.com/', %s, %s, '\\x00', %s, %s)",
            (uuid.uuid4(), tenant_id, events, status, created_at, created_at))

    async def fanned() -> list[tuple[str, str, bool]]:
        found = await db.fetchall(
            "SELECT type, data ->> 'email' AS email, fanned_out FROM events"
            " WHERE tenant_id = %s AND type LIKE 'contact.%%' ORDER BY id", (tenant_id,))
        return [(row["type"], row["email"], row["fanned_out"]) for row in found]

    assert await fanned() == [("contact.created", "ann@example.com", True)]  # no webhook at all
    await hook(["contact.created", "contact.updated"], "disabled", now)
    await hook(["contact.updated"], "enabled", datetime.fromtimestamp(now.timestamp() + 1, UTC))  # made later
    await hook(["contact.deleted"], "enabled", now)
    assert await upsert(["ann@example.com", "bob@example.com"]) is None
    assert (await fanned())[1:] == [("contact.updated", "ann@example.com", True),
                                    ("contact.created", "bob@example.com", True)]

    await hook(["contact.created"], "enabled", now)
    assert await upsert(["ann@example.com", "carl@example.com"]) == "events"
    assert (await fanned())[3:] == [("contact.updated", "ann@example.com", True),
                                    ("contact.created", "carl@example.com", False)]
