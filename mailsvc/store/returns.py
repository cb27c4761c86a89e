"""
The return path's reads: whether a host is one of our return-path hosts (asked for every
RCPT on the unauthenticated inbound port) and which deliveries a report can be about. Each is
one indexed look-up (migration 0008): a peer must not be able to make us scan a table.

A delivery row here is {id, email_id, tenant_id, recipient, status, own_message}, where
``own_message`` says it was sent as a message of its own (and so in a transaction of its own):
stored as its own by an older version, or built as its own (the broadcast stream).
"""

from __future__ import annotations

import uuid

from mailsvc.store.database import Database

_DELIVERY = (
    "d.id, d.email_id, d.tenant_id, d.recipient, d.status,"
    " d.message IS NOT NULL OR (e.message IS NULL AND e.stream = 'broadcast') AS own_message"
)

#: Backed by ``domains_return_path_host``; the expression must stay as the index writes it.
RETURN_PATH_HOST = "SELECT 1 AS found FROM domains WHERE return_path || '.' || name = %s LIMIT 1"

#: Every delivery of the email that delivery ``%s`` belongs to (by primary key, then ``deliveries_email``).
DELIVERIES_OF_THE_EMAIL_OF = (
    f"SELECT {_DELIVERY} FROM deliveries named JOIN emails e ON e.id = named.email_id"
    " JOIN deliveries d ON d.email_id = named.email_id WHERE named.id = %s ORDER BY d.id"
)

#: The deliveries of the email with a Message-ID, sent from the domain of a return-path host
#: (``domains_return_path_host``, then ``emails_message_id``): another domain's mail is never found.
DELIVERIES_BY_MESSAGE_ID = (
    f"SELECT {_DELIVERY} FROM domains dom JOIN emails e ON e.domain_id = dom.id AND e.message_id = %s"
    " JOIN deliveries d ON d.email_id = e.id WHERE dom.return_path || '.' || dom.name = %s ORDER BY d.id"
)


#: Of the deliveries ``%s`` (ids as text) of the emails ``%s`` (ids as text), those that left
#: through the smarthost: their ``email.delivered`` says ``transport: relay`` (``events_email``).
RELAYED = (
    "SELECT DISTINCT data->>'delivery_id' AS id FROM events WHERE data ? 'email_id'"
    " AND data->>'email_id' = ANY(%s) AND data->>'delivery_id' = ANY(%s)"
    " AND type = 'email.delivered' AND data->>'transport' = 'relay'"
)


async def is_return_path_host(db: Database, host: str) -> bool:
    return await db.fetchone(RETURN_PATH_HOST, (host,), desc="return path host") is not None


async def deliveries_of_the_email_of(db: Database, delivery_id: uuid.UUID) -> list[dict]:
    """The email's deliveries (the named one among them); none when it no longer exists."""
    return await db.fetchall(DELIVERIES_OF_THE_EMAIL_OF, (delivery_id,), desc="deliveries of a reported email")


async def deliveries_by_message_id(db: Database, return_path_host: str, message_id: str) -> list[dict]:
    return await db.fetchall(DELIVERIES_BY_MESSAGE_ID, (message_id, return_path_host),
                             desc="deliveries of a reported Message-ID")


async def relayed(db: Database, deliveries: list[tuple[uuid.UUID, uuid.UUID]]) -> set[uuid.UUID]:
    """Of the (email id, delivery id) pairs, the deliveries that left through the smarthost."""
    emails, ids = sorted({str(e) for e, _ in deliveries}), sorted({str(d) for _, d in deliveries})
    rows = await db.fetchall(RELAYED, (emails, ids), desc="deliveries that left through the relay")
    return {uuid.UUID(r["id"]) for r in rows}
