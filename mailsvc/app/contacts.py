"""
Contacts: the account's people, unique by address (the suppression list's normal form), with
typed properties and segment membership, kept in step with the suppression list. Every write
is one transaction that records its ``contact.*`` event and, for ``unsubscribed``, writes the
list: ``true`` adds an ``unsubscribe`` record, ``false`` in a PATCH removes an ``unsubscribe``
or ``manual`` one (``hard_bounce`` and ``complaint`` are refused), a create never removes one.
Creates, batch rows and PATCHes share ``_save``, whose statements do not grow with the rows;
rows of one batch with the same address apply in order (docs/decisions.md, "Contacts, segments
and audiences").
"""

from __future__ import annotations

import builtins
import uuid
from datetime import datetime
from typing import Any

import attrs

from mailsvc import timefmt
from mailsvc.domain.contacts import (
    CONTACT,
    SEGMENT,
    ContactWrite,
    batch_rows,
    check_count,
    check_types,
    contact_key,
    contact_write,
    event_data,
    search_prefix,
    segment_id_of,
    shown_properties,
)
from mailsvc.domain.errors import DomainError, Invalid, NotFound
from mailsvc.domain.paging import Page
from mailsvc.ids import uuid7
from mailsvc.store import contacts as rows
from mailsvc.store import events
from mailsvc.store import suppressions as suppression_rows
from mailsvc.store.database import Database, Transaction

#: Origins a contact's ``unsubscribed: false`` may lift; the others are evidence, not a wish.
LIFTED_BY_CONTACT = ("unsubscribe", "manual")


def _address(write: ContactWrite) -> str:
    """The address a create or a batch row names (contact_write requires it of them)."""
    if write.email is None:
        raise AssertionError("a contact saved without its address")
    return write.email


@attrs.define
class _State:
    """A contact as the rows of one write leave it."""

    id: uuid.UUID
    email: str
    first_name: str | None
    last_name: str | None
    properties: dict
    unsubscribed: bool | None = None
    segments: set = attrs.Factory(set)
    saved: bool = False


@attrs.frozen
class Saved:
    """What a write did: the id of each saved row by its index, the error of each refused one."""

    ids: dict[int, uuid.UUID]
    errors: dict[int, DomainError]


class Contacts:
    def __init__(self, clock, db: Database):
        self._clock = clock
        self._db = db

    def _now(self) -> datetime:
        return timefmt.from_seconds(self._clock.seconds())

    # Writes

    async def create(self, tenant_id: uuid.UUID, body: dict, segment_id: uuid.UUID | None = None) -> uuid.UUID:
        """Upsert by address; the contact's id. ``segment_id`` (an audience path's) is added too."""
        write = contact_write(body, creating=True)
        saved = await self._db.run("create contact", self._save, tenant_id, [(0, write)], segment_id)
        if saved.errors:
            raise saved.errors[0]
        return saved.ids[0]

    async def batch(self, tenant_id: uuid.UUID, body: dict) -> tuple[list[dict], list[dict]]:
        """``POST /contacts/batch``: ``data`` (``{index, id}``) and ``errors`` (``{index, message}``)."""
        given, segment_id = batch_rows(body)
        writes, refused = [], {}
        for index, row in enumerate(given):
            try:
                writes.append((index, contact_write(row, creating=True, field=f"contacts[{index}]")))
            except DomainError as e:
                refused[index] = e
        saved = await self._db.run("save contacts", self._save, tenant_id, writes, segment_id, batch=True)
        refused.update(saved.errors)
        data = [{"index": i, "id": str(contact_id)} for i, contact_id in sorted(saved.ids.items())]
        errors = [{"index": i, "message": e.message} for i, e in sorted(refused.items())]
        return data, errors

    async def _save(self, txn: Transaction, tenant_id: uuid.UUID, writes: list[tuple[int, ContactWrite]],
                    extra_segment: uuid.UUID | None, batch: bool = False) -> Saved:
        now = self._now()
        # What is saved names its address (a PATCH of a contact by id is read into one first).
        emails = {index: _address(w) for index, w in writes}
        existing = {row["email"]: row for row in await rows.lock(txn, tenant_id, sorted(set(emails.values())))}
        keys = {key for _, w in writes for key in w.properties.set}
        known = await rows.property_types(txn, tenant_id, keys)
        wanted = {s for _, w in writes for s in w.segments} | ({extra_segment} if extra_segment else set())
        segments = await rows.segments_of_account(txn, tenant_id, wanted, lock=True)
        if extra_segment is not None and extra_segment not in segments:
            raise Invalid("segment_id", f"segment_id: no segment `{extra_segment}` in this account")

        states: dict[str, _State] = {}
        first_types: dict[str, str] = {}
        ids: dict[int, str] = {}
        errors: dict[int, DomainError] = {}
        for index, write in writes:
            prefix = f"contacts[{index}]." if batch else ""
            email = emails[index]
            state = states.get(email)
            if state is None:
                old = existing.get(email)
                state = states[email] = _State(
                    id=old["id"] if old else uuid7(self._clock.seconds()), email=email,
                    first_name=old["first_name"] if old else None, last_name=old["last_name"] if old else None,
                    properties=dict(old["properties"]) if old else {})
            try:
                missing = [s for s in write.segments if s not in segments]
                if missing:
                    raise Invalid(f"{prefix}segments", f"{prefix}segments: no segment `{missing[0]}` in this account")
                check_types(write.properties, {**first_types, **known}, f"{prefix}properties")
                check_count(state.properties, write.properties, f"{prefix}properties")
            except DomainError as e:
                errors[index] = e
                continue
            for key, kind in write.properties.types().items():
                first_types.setdefault(key, kind)
            _apply(state, write)
            state.segments |= set(write.segments) | ({extra_segment} if extra_segment else set())
            ids[index] = email

        await self._claim_types(txn, tenant_id, {k: t for k, t in first_types.items() if k not in known})
        touched = [state for state in states.values() if state.saved]
        # The list first: the upsert's events read each contact's ``unsubscribed`` from it.
        unsubscribing = [state.email for state in touched if state.unsubscribed]
        if unsubscribing:
            await suppression_rows.add_many(txn, self._clock, tenant_id, unsubscribing, "unsubscribe")
        by_email = await rows.upsert(txn, self._clock, tenant_id, [_row(state) for state in touched], now)
        return Saved({index: by_email[email] for index, email in ids.items()}, errors)

    async def _claim_types(self, txn: Transaction, tenant_id: uuid.UUID, types: dict[str, str]) -> None:
        claimed = await rows.claim_types(txn, tenant_id, types)
        for key, kind in types.items():
            if claimed.get(key, kind) != kind:  # another write gave the key its type first
                raise Invalid(f"properties.{key}", f"properties.{key} must be a {claimed[key]} (the key's type),"
                              f" not a {kind}")

    async def update(self, tenant_id: uuid.UUID, key: str, body: dict) -> uuid.UUID:
        write = contact_write(body, creating=False)
        parsed = contact_key(key)
        now = self._now()

        async def change(txn: Transaction) -> uuid.UUID:
            found = await rows.lock(txn, tenant_id, key=parsed)
            if not found:
                raise NotFound(CONTACT)
            old = found[0]
            known = await rows.property_types(txn, tenant_id, write.properties.set)
            check_types(write.properties, known)
            check_count(old["properties"], write.properties)
            await self._claim_types(txn, tenant_id, {k: t for k, t in write.properties.types().items()
                                                     if k not in known})
            state = _State(old["id"], old["email"], old["first_name"], old["last_name"], dict(old["properties"]))
            _apply(state, write)
            # The list first: the upsert's event reads the contact's ``unsubscribed`` from it.
            if write.unsubscribed is True:
                await suppression_rows.add(txn, self._clock, tenant_id, old["email"], "unsubscribe")
            elif write.unsubscribed is False:
                record = await suppression_rows.get(txn, tenant_id, old["email"])
                if record is not None and record["origin"] not in LIFTED_BY_CONTACT:
                    raise Invalid("unsubscribed", (
                        f"unsubscribed: the address is suppressed after a {record['origin'].replace('_', ' ')};"
                        " remove it from the suppression list (DELETE /suppressions) to write to it again"))
                if record is not None:
                    await suppression_rows.delete(txn, tenant_id, record["id"])
            await rows.upsert(txn, self._clock, tenant_id, [_row(state)], now)
            return old["id"]

        return await self._db.run("update contact", change)

    async def delete(self, tenant_id: uuid.UUID, key: str) -> dict:
        """Remove the contact and its memberships (its suppression record, if any, stays)."""
        parsed = contact_key(key)

        async def remove(txn: Transaction) -> dict:
            row = await rows.delete(txn, tenant_id, parsed)
            if row is None:
                raise NotFound(CONTACT)
            await events.record(txn, self._clock, tenant_id, "contact.deleted", event_data(row))
            return row

        return await self._db.run("delete contact", remove)

    # Reads

    async def get(self, tenant_id: uuid.UUID, key: str) -> dict:
        row = await rows.get(self._db, tenant_id, contact_key(key))
        if row is None:
            raise NotFound(CONTACT)
        return row

    async def list(self, tenant_id: uuid.UUID, page: Page, q: str | None = None,
                   segment_id: str | None = None, kind: str = SEGMENT) -> tuple[builtins.list[dict], bool]:
        """A page of the account's contacts (of one segment; matching ``q``)."""
        prefix = search_prefix(q)
        parsed = None
        if segment_id is not None:
            parsed = segment_id_of(segment_id, kind)
            if not await rows.segments_of_account(self._db, tenant_id, [parsed]):
                raise NotFound(kind)
        return await rows.page(self._db, tenant_id, page, prefix, parsed)

    # Membership

    async def _member_parts(self, txn, tenant_id: uuid.UUID, key: str, segment_id: str) -> tuple[dict, uuid.UUID]:
        contact = await rows.get(txn, tenant_id, contact_key(key))
        if contact is None:
            raise NotFound(CONTACT)
        parsed = segment_id_of(segment_id)
        if not await rows.segments_of_account(txn, tenant_id, [parsed], lock=True):
            raise NotFound(SEGMENT)
        return contact, parsed

    async def join(self, tenant_id: uuid.UUID, key: str, segment_id: str) -> tuple[uuid.UUID, uuid.UUID]:
        """Put the contact in the segment (already there: nothing changes); (contact id, segment id)."""
        async def add(txn: Transaction):
            contact, parsed = await self._member_parts(txn, tenant_id, key, segment_id)
            await rows.add_members(txn, [(parsed, contact["id"])], self._now())
            return contact["id"], parsed

        return await self._db.run("add contact to segment", add)

    async def leave(self, tenant_id: uuid.UUID, key: str, segment_id: str) -> tuple[uuid.UUID, uuid.UUID]:
        """Take the contact out of the segment; NotFound when it was not in it."""
        async def remove(txn: Transaction):
            contact, parsed = await self._member_parts(txn, tenant_id, key, segment_id)
            if not await rows.remove_member(txn, parsed, contact["id"]):
                raise NotFound("Contact in segment")
            return contact["id"], parsed

        return await self._db.run("remove contact from segment", remove)

    async def segments(self, tenant_id: uuid.UUID, key: str, page: Page) -> tuple[builtins.list[dict], bool]:
        contact = await self.get(tenant_id, key)
        return await rows.segments_of_contact(self._db, contact["id"], page)


def _apply(state: _State, write: ContactWrite) -> None:
    """A valid write on the contact as it stands: names given, properties merged (null
    deletes), ``unsubscribed`` when given."""
    if "first_name" in write.names:
        state.first_name = write.names["first_name"]
    if "last_name" in write.names:
        state.last_name = write.names["last_name"]
    state.properties.update(write.properties.set)
    for key in write.properties.unset:
        state.properties.pop(key, None)
    if write.unsubscribed is not None:
        state.unsubscribed = write.unsubscribed
    state.saved = True


def _row(state: _State) -> dict[str, Any]:
    return {"id": state.id, "email": state.email, "first_name": state.first_name, "last_name": state.last_name,
            "properties": state.properties, "segments": state.segments}


def resource(row: dict, object_name: str = "contact") -> dict:
    """A contact as ``GET /contacts/{key}`` shows it."""
    return {
        "object": object_name,
        "id": str(row["id"]),
        "email": row["email"],
        "first_name": row["first_name"] or "",
        "last_name": row["last_name"] or "",
        "created_at": timefmt.resource(row["created_at"]),
        "unsubscribed": bool(row["unsubscribed"]),
        "properties": shown_properties(row["properties"] or {}),
    }


def list_item(row: dict) -> dict:
    """A contact in a list; like ``resource``, a name never set is ``""`` (a string is never null)."""
    return {
        "id": str(row["id"]),
        "email": row["email"],
        "first_name": row["first_name"] or "",
        "last_name": row["last_name"] or "",
        "created_at": timefmt.resource(row["created_at"]),
        "unsubscribed": bool(row["unsubscribed"]),
    }
