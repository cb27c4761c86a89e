"""
Segments: named sets of the account's contacts. The legacy ``/audiences`` paths
show the same rows (same ids), named "Audience" in their errors. Deleting a segment removes
its memberships, never its contacts.
"""

from __future__ import annotations

import uuid

from mailsvc import timefmt
from mailsvc.domain.contacts import SEGMENT, segment_id_of, segment_name
from mailsvc.domain.errors import NotFound
from mailsvc.domain.paging import Page
from mailsvc.ids import uuid7
from mailsvc.store import segments as rows
from mailsvc.store.database import Database


class Segments:
    def __init__(self, clock, db: Database):
        self._clock = clock
        self._db = db

    def _now(self):
        return timefmt.from_seconds(self._clock.seconds())

    async def create(self, tenant_id: uuid.UUID, body: dict) -> dict:
        name = segment_name(body.get("name"))
        return await rows.insert(self._db, uuid7(self._clock.seconds()), tenant_id, name, self._now())

    async def get(self, tenant_id: uuid.UUID, segment_id: str, kind: str = SEGMENT) -> dict:
        row = await rows.get(self._db, tenant_id, segment_id_of(segment_id, kind))
        if row is None:
            raise NotFound(kind)
        return row

    async def list(self, tenant_id: uuid.UUID, page: Page) -> tuple[list[dict], bool]:
        return await rows.page(self._db, tenant_id, page)

    async def rename(self, tenant_id: uuid.UUID, segment_id: str, body: dict, kind: str = SEGMENT) -> dict:
        parsed = segment_id_of(segment_id, kind)
        name = segment_name(body.get("name"))
        row = await rows.rename(self._db, tenant_id, parsed, name, self._now())
        if row is None:
            raise NotFound(kind)
        return row

    async def delete(self, tenant_id: uuid.UUID, segment_id: str, kind: str = SEGMENT) -> uuid.UUID:
        row = await rows.delete(self._db, tenant_id, segment_id_of(segment_id, kind))
        if row is None:
            raise NotFound(kind)
        return row["id"]


def list_item(row: dict) -> dict:
    return {"id": str(row["id"]), "name": row["name"], "created_at": timefmt.resource(row["created_at"])}


def resource(row: dict, object_name: str = "segment") -> dict:
    return {"object": object_name, **list_item(row)}
