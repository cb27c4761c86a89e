"""
The account's do-not-send list, as every part that sends mail or learns about a recipient
uses it. Nothing here is cached: each call reads or writes PostgreSQL, so an address removed
on one node is deliverable on every node at once, and one added is refused at once.

The sending paths and the MTA read and write the list through ``mailsvc.store.suppressions``
(``suppressed_for``, ``add``, ``add_many``), inside their own statements; this module is what
the API and the unsubscribe links do with it.

Addresses are bare (``local@domain``, no display name) and may be in any case or spelling of
the domain; they are compared in their normal form (``normal_form``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from mailsvc import timefmt
from mailsvc.ids import parse_uuid
from mailsvc.store import suppressions as rows
from mailsvc.store.database import Database, Transaction
from mailsvc.store.paging import Page

__all__ = ["get", "list_page", "record", "remove", "remove_many"]


def _key(id_or_address: str | uuid.UUID) -> uuid.UUID | str | None:
    """A suppression id, an address in normal form, or None when it can name no record."""
    if isinstance(id_or_address, uuid.UUID):
        return id_or_address
    return parse_uuid(id_or_address) or rows.normal_or_none(id_or_address)


async def get(
    db_or_txn: Database | Transaction, tenant_id: uuid.UUID, id_or_address: str | uuid.UUID
) -> dict | None:
    """The record named by its id or its address (any spelling), or None."""
    key = _key(id_or_address)
    return await rows.get(db_or_txn, tenant_id, key) if key is not None else None


async def _in_transaction(db_or_txn: Database | Transaction, desc: str, fn, *args):
    if isinstance(db_or_txn, Transaction):
        return await fn(db_or_txn, *args)
    return await db_or_txn.run(desc, fn, *args)


async def remove(
    db_or_txn: Database | Transaction, tenant_id: uuid.UUID, id_or_address: str | uuid.UUID, *, clock
) -> dict | None:
    """
    Take the record named by its id or address off the list; the removed row, or None. A
    contact with the address is no longer ``unsubscribed`` (its ``contact.updated`` is recorded
    in the same transaction, on ``clock``).
    """
    key = _key(id_or_address)
    if key is None:
        return None
    return await _in_transaction(db_or_txn, "remove suppression", rows.delete, clock, tenant_id, key)


async def remove_many(
    db_or_txn: Database | Transaction,
    tenant_id: uuid.UUID,
    addresses: Iterable[str] = (),
    ids: Iterable[uuid.UUID] = (),
    *,
    clock,
) -> list[dict]:
    """Take these addresses and ids off the list; the rows removed (absent ones are skipped)."""
    normals = [normal for normal in map(rows.normal_or_none, addresses) if normal is not None]
    ids = list(ids)
    if not normals and not ids:
        return []
    removed = await _in_transaction(
        db_or_txn, "remove suppressions", rows.delete_many, clock, tenant_id, normals, ids)
    # In the order asked for, whichever key named the record.
    order = {key: i for i, key in enumerate([*normals, *ids])}
    return sorted(removed, key=lambda row: order.get(row["email"], order.get(row["id"], 0)))


async def list_page(
    db: Database, tenant_id: uuid.UUID, page: Page, origin: str | None = None
) -> tuple[list[dict], bool]:
    """A newest-first page of the list, of one origin or all."""
    return await rows.page(db, tenant_id, page, origin)


def record(row: dict) -> dict:
    """A row as the API shows it."""
    return {
        "id": str(row["id"]),
        "email": row["email"],
        "origin": row["origin"],
        "source_id": str(row["source_id"]) if row["source_id"] is not None else None,
        "created_at": timefmt.resource(row["created_at"]),
    }
