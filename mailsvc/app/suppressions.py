"""
The account's do-not-send list as the API, the unsubscribe links and the MTA (hard bounces,
complaints) write it; the sending paths read it through ``store.suppressions.suppressed_for``.
Nothing is cached, so a change on one node holds on every node at once. Contacts follow the
list: a change that flips a contact's ``unsubscribed`` also marks the contact changed and
records its ``contact.updated``, in the same transaction. Addresses are bare
(``local@domain``) and compared in their normal form (``normal_form``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from mailsvc import timefmt
from mailsvc.domain.contacts import event_data
from mailsvc.domain.paging import Page
from mailsvc.domain.testaddresses import SUPPRESSED_REASON, TestAddresses
from mailsvc.ids import parse_uuid
from mailsvc.store import contacts as contact_rows
from mailsvc.store import events
from mailsvc.store import suppressions as rows
from mailsvc.store.database import Database, Transaction

__all__ = ["Suppressions", "add", "add_many", "get", "list_page", "record", "remove", "remove_many",
           "with_test_addresses"]


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


async def _contacts_follow(txn: Transaction, clock, tenant_id: uuid.UUID, emails: list[str]) -> None:
    """The account's contacts with these addresses changed ``unsubscribed``: mark them, and
    record one ``contact.updated`` each."""
    if not emails:
        return
    changed = await contact_rows.touch(txn, tenant_id, emails, timefmt.from_seconds(clock.seconds()))
    await events.record_many(txn, clock, [(tenant_id, "contact.updated", event_data(row)) for row in changed])


async def add_many(
    txn: Transaction,
    clock,
    tenant_id: uuid.UUID,
    addresses: Iterable[str],
    origin: str,
    source_id: uuid.UUID | str | None = None,
) -> list[dict]:
    """Put every address on the list (``store.suppressions.add_many``: its rows, in the order
    given); the contacts with an address new to it become unsubscribed."""
    added = await rows.add_many(txn, clock, tenant_id, addresses, origin, source_id)
    await _contacts_follow(txn, clock, tenant_id, [row["email"] for row in added if row["inserted"]])
    return added


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


async def _delete(txn: Transaction, clock, tenant_id: uuid.UUID, key: uuid.UUID | str) -> dict | None:
    row = await rows.delete(txn, tenant_id, key)
    if row is not None:
        await _contacts_follow(txn, clock, tenant_id, [row["email"]])
    return row


async def _delete_many(txn: Transaction, clock, tenant_id: uuid.UUID, emails: list[str],
                       ids: list[uuid.UUID]) -> list[dict]:
    removed = await rows.delete_many(txn, tenant_id, emails, ids)
    await _contacts_follow(txn, clock, tenant_id, [row["email"] for row in removed])
    return removed


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
    return await _in_transaction(db_or_txn, "remove suppression", _delete, clock, tenant_id, key)


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
        db_or_txn, "remove suppressions", _delete_many, clock, tenant_id, normals, ids)
    # In the order asked for, whichever key named the record.
    order = {key: i for i, key in enumerate([*normals, *ids])}
    return sorted(removed, key=lambda row: order.get(row["email"], order.get(row["id"], 0)))


async def list_page(
    db: Database, tenant_id: uuid.UUID, page: Page, origin: str | None = None
) -> tuple[list[dict], bool]:
    """A newest-first page of the list, of one origin or all."""
    return await rows.page(db, tenant_id, page, origin)


class Suppressions:
    """The list as the API reads and changes it, each write in its own transaction."""

    def __init__(self, clock, db: Database):
        self._clock = clock
        self._db = db

    async def add(self, tenant_id: uuid.UUID, address: str) -> dict:
        """Put the address on the list by hand (``manual``); its record, new or kept."""
        return await self._db.run("add_suppression", add, self._clock, tenant_id, address, "manual")

    async def add_many(self, tenant_id: uuid.UUID, addresses: Iterable[str]) -> list[dict]:
        return await self._db.run("add_suppressions", add_many, self._clock, tenant_id, addresses, "manual")

    async def get(self, tenant_id: uuid.UUID, id_or_address: str) -> dict | None:
        return await get(self._db, tenant_id, id_or_address)

    async def page(self, tenant_id: uuid.UUID, page: Page, origin: str | None = None) -> tuple[list[dict], bool]:
        return await list_page(self._db, tenant_id, page, origin)

    async def remove(self, tenant_id: uuid.UUID, id_or_address: str) -> dict | None:
        return await remove(self._db, tenant_id, id_or_address, clock=self._clock)

    async def remove_many(self, tenant_id: uuid.UUID, addresses: Iterable[str],
                          ids: Iterable[uuid.UUID]) -> list[dict]:
        return await remove_many(self._db, tenant_id, addresses, ids, clock=self._clock)


def record(row: dict) -> dict:
    """A row as the API shows it."""
    return {
        "id": str(row["id"]),
        "email": row["email"],
        "origin": row["origin"],
        "source_id": str(row["source_id"]) if row["source_id"] is not None else None,
        "created_at": timefmt.resource(row["created_at"]),
    }


def with_test_addresses(suppressed_for, tests: TestAddresses):
    """
    ``suppressed_for`` (what the sending paths read the list with) where a ``suppressed@``
    test address is also suppressed, as if on the list (``manual``): the accept path gives it
    its ``email.suppressed`` like any listed address. An address that is on the list keeps the
    list's origin (a ``bounced@`` that bounced before is ``hard_bounce``).
    """

    async def suppressed(db_or_txn, addresses):
        found = await suppressed_for(db_or_txn, addresses)
        for tenant_id, some in addresses.items():
            for address in some:
                if tests.outcome(address) == "suppressed":
                    found.setdefault(tenant_id, {}).setdefault(address, SUPPRESSED_REASON)
        return found

    return suppressed
