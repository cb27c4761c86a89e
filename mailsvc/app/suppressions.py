"""
The account's do-not-send list, as every part that sends mail or learns about a recipient
uses it. Nothing here is cached: each call reads or writes PostgreSQL, so an address removed
on one node is deliverable on every node at once, and one added is refused at once.

For the sending paths (``POST /emails``, batch, SMTP, scheduled mail at release time,
broadcasts): just before the accepting statement (or in the releasing transaction), call
``suppressed_for(db_or_txn, {tenant_id: recipients})`` once for all recipients (of all the
accounts at hand); each address it returns is skipped (an ``email.suppressed`` event with
``recipient`` and ``reason`` = its origin, not counted against quotas).

For the MTA: in the transaction that records a hard bounce or a complaint, call
``add(txn, clock, tenant_id, recipient, "hard_bounce" | "complaint", source_id=email_id)``.

Addresses are bare (``local@domain``, no display name) and may be in any case or spelling of
the domain; they are compared in their normal form (``normal_form``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from mailsvc import timefmt
from mailsvc.domain.errors import Invalid
from mailsvc.domain.suppression import ORIGINS, ORIGINS_BY_STRENGTH, normal_form, stronger
from mailsvc.ids import parse_uuid, uuid7
from mailsvc.store import suppressions as rows
from mailsvc.store.database import Database, Transaction
from mailsvc.store.paging import Page

__all__ = [
    "ORIGINS", "ORIGINS_BY_STRENGTH", "normal_form", "stronger", "suppressed_for", "add",
    "add_many", "remove", "remove_many", "get", "list_page", "record",
]


def _normal_or_none(address: str) -> str | None:
    try:
        return normal_form(address)
    except Invalid:
        return None


async def suppressed_for(
    db_or_txn: Database | Transaction, addresses: Mapping[uuid.UUID, Iterable[str]]
) -> dict[uuid.UUID, dict[str, str]]:
    """
    Which of each account's ``addresses`` are suppressed: by account, each such address,
    exactly as given, mapped to its record's origin (accounts with none are left out). One
    query for all; none when no address is given. An address with no valid normal form
    cannot be on the list and is never returned.
    """
    given = {(tenant_id, address): _normal_or_none(address)
             for tenant_id, some in addresses.items() for address in some}
    wanted = sorted({(tenant_id, normal) for (tenant_id, _), normal in given.items() if normal is not None})
    if not wanted:
        return {}
    origins = await rows.origins_of(db_or_txn, wanted)
    found: dict[uuid.UUID, dict[str, str]] = {}
    for (tenant_id, address), normal in given.items():
        origin = origins.get((tenant_id, normal)) if normal is not None else None
        if origin is not None:
            found.setdefault(tenant_id, {})[address] = origin
    return found


async def add_many(
    txn: Transaction,
    clock,
    tenant_id: uuid.UUID,
    addresses: Iterable[str],
    origin: str,
    source_id: uuid.UUID | str | None = None,
) -> list[dict]:
    """
    Put every address on the list within ``txn``. An address already there keeps its record
    (id, created_at); it takes ``origin`` and ``source_id`` only if ``origin`` is stronger
    (ORIGINS_BY_STRENGTH). Returns one row per distinct address, in the order given: ``id``,
    ``email`` (normal form), ``origin``, ``source_id``, ``created_at``. Raises Invalid for an
    address that is no valid e-mail address.
    """
    if origin not in ORIGINS:
        raise ValueError(f"unknown suppression origin {origin!r}")
    normals = list(dict.fromkeys(normal_form(address) for address in addresses))
    if not normals:
        return []
    now = clock.seconds()
    entries = [(uuid7(now), normal) for normal in normals]
    by_email = await rows.upsert(txn, tenant_id, entries, origin, source_id, timefmt.from_seconds(now))
    return [by_email[normal] for normal in normals]


async def add(
    txn: Transaction,
    clock,
    tenant_id: uuid.UUID,
    address: str,
    origin: str,
    source_id: uuid.UUID | str | None = None,
) -> dict:
    """``add_many`` for one address: its record, new or kept."""
    (row,) = await add_many(txn, clock, tenant_id, [address], origin, source_id)
    return row


def _key(id_or_address: str | uuid.UUID) -> uuid.UUID | str | None:
    """A suppression id, an address in normal form, or None when it can name no record."""
    if isinstance(id_or_address, uuid.UUID):
        return id_or_address
    return parse_uuid(id_or_address) or _normal_or_none(id_or_address)


async def get(
    db_or_txn: Database | Transaction, tenant_id: uuid.UUID, id_or_address: str | uuid.UUID
) -> dict | None:
    """The record named by its id or its address (any spelling), or None."""
    key = _key(id_or_address)
    return await rows.get(db_or_txn, tenant_id, key) if key is not None else None


async def remove(
    db_or_txn: Database | Transaction, tenant_id: uuid.UUID, id_or_address: str | uuid.UUID
) -> dict | None:
    """Take the record named by its id or address off the list; the removed row, or None."""
    key = _key(id_or_address)
    return await rows.delete(db_or_txn, tenant_id, key) if key is not None else None


async def remove_many(
    db_or_txn: Database | Transaction,
    tenant_id: uuid.UUID,
    addresses: Iterable[str] = (),
    ids: Iterable[uuid.UUID] = (),
) -> list[dict]:
    """Take these addresses and ids off the list; the rows removed (absent ones are skipped)."""
    normals = [normal for normal in map(_normal_or_none, addresses) if normal is not None]
    ids = list(ids)
    if not normals and not ids:
        return []
    removed = await rows.delete_many(db_or_txn, tenant_id, normals, ids)
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
