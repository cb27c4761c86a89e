"""
Writing events into the outbox. Every state change that users hear about calls ``record``
inside the transaction that makes the change, so an event exists exactly when its change does.
"""

from __future__ import annotations

import uuid

from psycopg2.extras import Json

from mailsvc import timefmt
from mailsvc.ids import uuid7
from mailsvc.store.database import Transaction

#: NOTIFY channel raised after a transaction that recorded events commits.
CHANNEL = "events"

#: Every event type that the service sends (docs/webhooks.md, "Event names").
SENT_TYPES = (
    "email.sent", "email.delivered", "email.delivery_delayed", "email.bounced",
    "email.complained", "email.failed", "email.suppressed", "domain.updated",
    "contact.created", "contact.updated", "contact.deleted",
)
#: Accepted as webhook subscriptions but never sent (docs/webhooks.md, "Event names").
SILENT_TYPES = (
    "email.opened", "email.clicked", "email.received", "email.scheduled",
    "domain.created", "domain.deleted",
)


async def record(txn: Transaction, clock, tenant_id: uuid.UUID, type: str, data: dict) -> uuid.UUID:
    """Add one event to the outbox within ``txn``; listeners are woken after commit."""
    (event_id,) = await record_many(txn, clock, [(tenant_id, type, data)])
    return event_id


#: The columns ``rows`` gives values for, for an ``INSERT INTO events`` of one's own.
COLUMNS = "id, tenant_id, type, data, created_at"


def rows(clock, entries: list[tuple[uuid.UUID, str, dict]]) -> tuple[str, list]:
    """
    ``("(%s, …), (%s, …)", parameters)``: the rows of ``entries`` (``(tenant_id, type, data)``),
    ids in order, for an ``INSERT INTO events (COLUMNS) VALUES`` that the caller runs, and whose
    transaction must then NOTIFY ``CHANNEL`` (as ``record_many`` does).
    """
    now = timefmt.from_seconds(clock.seconds())
    parameters: list = []
    for tenant_id, type, data in entries:
        if type not in SENT_TYPES:
            raise ValueError(f"unknown event type {type!r}")
        parameters += (uuid7(clock.seconds()), tenant_id, type, Json(data), now)
    return ", ".join(["(%s, %s, %s, %s, %s)"] * len(entries)), parameters


#: The SQL types of ``COLUMNS``.
TYPES = ("uuid", "uuid", "text", "jsonb", "timestamptz")


def values(clock, entries: list[tuple[uuid.UUID, str, dict]]) -> list[tuple]:
    """The rows of ``entries`` as ``rows`` gives them, each a tuple of values (JSON as text), for
    ``store.accept.columnar``."""
    now = timefmt.from_seconds(clock.seconds())
    out = []
    for tenant_id, type, data in entries:
        if type not in SENT_TYPES:
            raise ValueError(f"unknown event type {type!r}")
        out.append((uuid7(clock.seconds()), tenant_id, type, Json(data).dumps(data), now))
    return out


async def record_many(txn: Transaction, clock, entries: list[tuple[uuid.UUID, str, dict]]) -> list[uuid.UUID]:
    """``record`` for many ``(tenant_id, type, data)`` entries in one statement; their ids."""
    if not entries:
        return []
    values, parameters = rows(clock, entries)
    await txn.execute(f"INSERT INTO events ({COLUMNS}) VALUES {values}", parameters)
    txn.notify(CHANNEL)
    return parameters[::5]
