"""
Rows of contacts, of their account's property types and of segment membership. A contact is
named by its id or by its address in normal form, always within one account.

``unsubscribed`` is read, never stored: it is whether the contact's address is on the
account's suppression list (the same normal form on both sides), joined in every read, so a
contact and the list cannot disagree, whichever side was written and however concurrently.

Every write here takes a fixed number of statements whatever the number of contacts: the
batch of 1,000 rows costs what one row costs. ``upsert`` writes the contacts, their events and
their memberships in one statement (docs/decisions.md, "Contacts, segments and audiences").
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import orjson
from psycopg2.extras import Json

from mailsvc.domain.paging import Page
from mailsvc.ids import uuid7
from mailsvc.store import events
from mailsvc.store.database import Database, Transaction
from mailsvc.store.paging import clause

#: Columns of a contact as the API shows it (``c`` the contact, ``s`` its suppression record).
COLUMNS = (
    "c.id, c.email, c.first_name, c.last_name, c.properties, c.created_at, c.updated_at,"
    " (s.id IS NOT NULL) AS unsubscribed"
)
LIST_COLUMNS = "c.id, c.email, c.first_name, c.last_name, c.created_at, (s.id IS NOT NULL) AS unsubscribed"
_JOIN = "LEFT JOIN suppressions s ON s.tenant_id = c.tenant_id AND s.email = c.email"


def _where(key: uuid.UUID | str) -> str:
    return "c.id = %s" if isinstance(key, uuid.UUID) else "c.email = %s"


async def get(db: Database | Transaction, tenant_id: uuid.UUID, key: uuid.UUID | str) -> dict | None:
    """The contact with this id or (normal-form) address in the account."""
    return await db.fetchone(
        f"SELECT {COLUMNS} FROM contacts c {_JOIN} WHERE c.tenant_id = %s AND {_where(key)}",
        (tenant_id, key),
    )


async def lock(txn: Transaction, tenant_id: uuid.UUID, emails: Sequence[str] = (),
               key: uuid.UUID | str | None = None) -> list[dict]:
    """
    The account's contacts with these addresses (or this key), locked, in one lock order.
    Addresses are looked up one by one in the address index (in address order): a plain
    ``email = ANY(...)`` was planned as a scan of the whole account while an import grew it
    faster than its statistics (18 ms for 1,000 addresses among 60,000, growing with the account).
    """
    columns = "c.id, c.email, c.first_name, c.last_name, c.properties, c.created_at"
    if key is not None:
        return await txn.fetchall(
            f"SELECT {columns} FROM contacts c WHERE c.tenant_id = %s AND {_where(key)} FOR UPDATE",
            (tenant_id, key))
    return await txn.fetchall(
        f"SELECT {columns} FROM unnest(%s::text[]) AS e (email),"
        " LATERAL (SELECT * FROM contacts c WHERE c.tenant_id = %s AND c.email = e.email FOR UPDATE) c",
        (sorted(set(emails)), tenant_id),
    )


async def property_types(db: Database | Transaction, tenant_id: uuid.UUID, keys: Iterable[str]) -> dict[str, str]:
    keys = sorted(set(keys))
    if not keys:
        return {}
    rows = await db.fetchall(
        "SELECT key, type FROM contact_property_types WHERE tenant_id = %s AND key = ANY(%s::text[])",
        (tenant_id, keys),
    )
    return {row["key"]: row["type"] for row in rows}


async def claim_types(txn: Transaction, tenant_id: uuid.UUID, types: dict[str, str]) -> dict[str, str]:
    """
    Give each key its type unless it has one already; the type each key has now (a concurrent
    writer that gave a key first keeps its type: this waits for it, then reads it).
    """
    if not types:
        return {}
    keys = sorted(types)
    rows = await txn.fetchall(
        "INSERT INTO contact_property_types (tenant_id, key, type)"
        " SELECT %s, k, t FROM unnest(%s::text[], %s::text[]) AS new (k, t) ORDER BY k"
        " ON CONFLICT (tenant_id, key) DO UPDATE SET type = contact_property_types.type"
        " RETURNING key, type",
        (tenant_id, keys, [types[k] for k in keys]),
    )
    return {row["key"]: row["type"] for row in rows}


#: ``data`` of a ``contact.*`` event (``mailsvc.domain.contacts.event_data``) built in SQL from
#: ``c``, a contact as written, and ``s``, its suppression record: the upsert writes its events.
_EVENT_DATA = (
    "jsonb_build_object('id', c.id::text, 'email', c.email, 'first_name', coalesce(c.first_name, ''),"
    " 'last_name', coalesce(c.last_name, ''), 'unsubscribed', s.id IS NOT NULL,"
    " 'created_at', to_char(c.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'),"
    " 'updated_at', to_char(c.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'))"
)


def _dumps(value: Any) -> str:
    """JSON text of plain values: a batch's 1,000 rows take json.dumps ~2.4 ms, orjson ~0.2 ms."""
    return orjson.dumps(value).decode("utf-8")


async def upsert(txn: Transaction, clock, tenant_id: uuid.UUID, rows: list[dict],
                 now: datetime) -> dict[str, uuid.UUID]:
    """
    Write whole contacts (``id``, ``email``, ``first_name``, ``last_name``, ``properties``,
    ``segments``): new addresses are inserted with their ``id``, known ones keep theirs and take
    the values; each joins its ``segments`` (the account's, held by the caller) and gets its
    ``contact.created`` or ``contact.updated`` event as it now reads, its ``unsubscribed`` from
    the suppression list as this statement finds it (write the list first). One statement and
    one round trip for all, however many rows; the id of each address (its row's, unless a
    concurrent writer inserted the address first: only those come back from the server).
    """
    if not rows:
        return {}
    given = [{**r, "id": str(r["id"]), "segments": [str(s) for s in r.get("segments", ())],
              "event": str(uuid7(clock.seconds()))} for r in rows]  # event ids in the rows' order
    given.sort(key=lambda r: r["email"])  # one lock order for every writer
    written = await txn.fetchall(
        "WITH r AS (SELECT * FROM jsonb_to_recordset(%(rows)s) AS r (id uuid, email text, first_name text,"
        " last_name text, properties jsonb, segments uuid[], event uuid)),"
        " c AS (INSERT INTO contacts (id, tenant_id, email, first_name, last_name, properties, created_at, updated_at)"
        " SELECT r.id, %(tenant)s, r.email, r.first_name, r.last_name, r.properties, %(now)s, %(now)s FROM r"
        " ON CONFLICT (tenant_id, email) DO UPDATE SET first_name = excluded.first_name,"
        " last_name = excluded.last_name, properties = excluded.properties, updated_at = excluded.updated_at"
        " RETURNING id, email, first_name, last_name, created_at, updated_at, (xmax = 0) AS inserted),"
        # The event types the account's enabled webhooks take: an event none of them takes is
        # written handed over already, not left for the dispatcher to rewrite (docs/decisions.md,
        # "Webhooks": the fan-out).
        " h AS (SELECT coalesce(array_agg(t), '{}') AS types FROM webhooks w, unnest(w.events) AS t"
        " WHERE w.tenant_id = %(tenant)s AND w.status = 'enabled' AND w.created_at <= %(now)s),"
        " e AS (INSERT INTO events (id, tenant_id, type, data, created_at, fanned_out)"
        " SELECT v.id, %(tenant)s, v.type, v.data, %(now)s, NOT (v.type = ANY (h.types)) FROM h,"
        " (SELECT r.event AS id, CASE WHEN c.inserted THEN 'contact.created' ELSE 'contact.updated' END AS type,"
        f" {_EVENT_DATA} AS data"
        " FROM c JOIN r ON r.email = c.email"
        " LEFT JOIN suppressions s ON s.tenant_id = %(tenant)s AND s.email = c.email) v),"
        " m AS (INSERT INTO segment_contacts (segment_id, contact_id, created_at)"
        " SELECT g.id, c.id, %(now)s FROM c JOIN r ON r.email = c.email, unnest(r.segments) AS g (id)"
        " ORDER BY g.id, c.id ON CONFLICT DO NOTHING)"
        # Always one row: whether a webhook takes these events; then each address another writer
        # inserted since the caller read it (only those have another id).
        " SELECT (SELECT types && ARRAY['contact.created', 'contact.updated'] FROM h) AS fan_out, x.email, x.id"
        " FROM (SELECT 1) AS one LEFT JOIN"
        " (SELECT c.email, c.id FROM c JOIN r ON r.email = c.email WHERE c.id <> r.id) x ON true",
        {"rows": Json(given, dumps=_dumps), "tenant": tenant_id, "now": now},
    )
    if written[0]["fan_out"]:
        txn.notify(events.CHANNEL)
    written = [row for row in written if row["email"] is not None]
    return {**{r["email"]: r["id"] for r in rows}, **{row["email"]: row["id"] for row in written}}


async def delete(txn: Transaction, tenant_id: uuid.UUID, key: uuid.UUID | str) -> dict | None:
    """Remove the contact (and, by cascade, its memberships); the row removed, with its
    ``unsubscribed`` as it was."""
    return await txn.fetchone(
        f"WITH gone AS (DELETE FROM contacts c WHERE c.tenant_id = %s AND {_where(key)}"
        " RETURNING c.id, c.tenant_id, c.email, c.first_name, c.last_name, c.properties, c.created_at, c.updated_at)"
        f" SELECT {COLUMNS} FROM gone c {_JOIN}",
        (tenant_id, key),
    )


async def touch(txn: Transaction, tenant_id: uuid.UUID, emails: list[str], now: datetime) -> list[dict]:
    """
    Mark the account's contacts with these addresses as changed now (their ``unsubscribed``
    moved with the suppression list); those there are, as the API shows them.
    """
    if not emails:
        return []
    return await txn.fetchall(
        "WITH changed AS (UPDATE contacts c SET updated_at = %s"
        " WHERE c.tenant_id = %s AND c.email = ANY(%s::text[])"
        " RETURNING c.id, c.tenant_id, c.email, c.first_name, c.last_name, c.properties, c.created_at, c.updated_at)"
        f" SELECT {COLUMNS} FROM changed c {_JOIN}",
        (now, tenant_id, sorted(set(emails))),
    )


async def page(db: Database, tenant_id: uuid.UUID, page: Page, prefix: str | None = None,
               segment_id: uuid.UUID | None = None) -> tuple[list[dict], bool]:
    """
    A newest-first page of the account's contacts, those of one segment, and/or those whose
    address, first or last name starts with ``prefix`` (a LIKE pattern, lower case).
    """
    where, order, params = clause(page, "c.id")
    conditions: list[str] = ["c.tenant_id = %s"]
    values: list[object] = [tenant_id]
    source = "contacts c"
    if segment_id is not None:
        source = "segment_contacts m JOIN contacts c ON c.id = m.contact_id"
        conditions.append("m.segment_id = %s")
        values.append(segment_id)
        where, order, params = clause(page, "m.contact_id")
        if page.after is not None or page.before is not None:
            # The cursor bounds both sides of the join: PostgreSQL does not carry an inequality
            # across ``c.id = m.contact_id``, and a merge join then walked the account's
            # contacts from the newest down to the cursor (160 ms at 400,000 contacts down).
            bound, _, bound_params = clause(page, "c.id")
            conditions.append(bound)
            values.append(bound_params[0])
    if prefix is not None:
        conditions.append(
            "(c.email LIKE %s OR lower(c.first_name) LIKE %s OR lower(c.last_name) LIKE %s)")
        values += [prefix] * 3
    rows = await db.fetchall(
        f"SELECT {LIST_COLUMNS} FROM {source} {_JOIN}"
        f" WHERE {' AND '.join(conditions)} AND {where} {order}",
        [*values, *params],
    )
    return page.finish(rows)


# Membership


async def segments_of_account(db: Database | Transaction, tenant_id: uuid.UUID,
                              ids: Iterable[uuid.UUID], lock: bool = False) -> set[uuid.UUID]:
    """Which of these segment ids are the account's (held against deletion with ``lock``)."""
    ids = sorted(set(ids))
    if not ids:
        return set()
    rows = await db.fetchall(
        "SELECT id FROM segments WHERE tenant_id = %s AND id = ANY(%s::uuid[]) ORDER BY id"
        + (" FOR KEY SHARE" if lock else ""),
        (tenant_id, ids),
    )
    return {row["id"] for row in rows}


async def add_members(txn: Transaction, pairs: list[tuple[uuid.UUID, uuid.UUID]], now: datetime) -> int:
    """Put each ``(segment_id, contact_id)`` in place (one already there stays as it was)."""
    if not pairs:
        return 0
    pairs = sorted(set(pairs))
    return await txn.execute(
        "INSERT INTO segment_contacts (segment_id, contact_id, created_at)"
        " SELECT s, c, %s FROM unnest(%s::uuid[], %s::uuid[]) AS p (s, c)"
        " ON CONFLICT DO NOTHING",
        (now, [s for s, _ in pairs], [c for _, c in pairs]),
    )


async def remove_member(txn: Transaction, segment_id: uuid.UUID, contact_id: uuid.UUID) -> bool:
    removed = await txn.execute(
        "DELETE FROM segment_contacts WHERE segment_id = %s AND contact_id = %s", (segment_id, contact_id))
    return removed > 0


async def segments_of_contact(db: Database, contact_id: uuid.UUID, page: Page) -> tuple[list[dict], bool]:
    where, order, params = clause(page, "g.id")
    rows = await db.fetchall(
        "SELECT g.id, g.name, g.created_at FROM segment_contacts m JOIN segments g ON g.id = m.segment_id"
        f" WHERE m.contact_id = %s AND {where} {order}",
        [contact_id, *params],
    )
    return page.finish(rows)


def stored_properties(value: Any) -> dict:
    return dict(value or {})
