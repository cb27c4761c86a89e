"""
Suppressions: main ``/suppressions`` (docs/contract/main-api.md, "Resources")
and native ``/v1/suppressions``. A path names a record by its id or by its address, which
may be percent-encoded (``%2F`` included, hence the ``path`` converter).
"""

from __future__ import annotations

from mailsvc.app.apikeys import Caller
from mailsvc.app.suppressions import Suppressions, record
from mailsvc.domain.errors import NotFound
from mailsvc.domain.suppression import batch_addresses, normal_form, origin_filter, removal
from mailsvc.http.body import read_json
from mailsvc.http.context import context_of
from mailsvc.http.errors import NATIVE
from mailsvc.http.operation import DELETED, PAGE, RESOURCE, STR, UUID, Operation, listing, obj
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, Reply, route

KIND = "Suppression"


def _full(row: dict) -> dict:
    return {"object": "suppression", **record(row)}


def _origin(request) -> str | None:
    values = request.args.get(b"origin")
    return origin_filter(values[0].decode("utf-8", "replace") if values else None)


class SuppressionsResource:
    def __init__(self, suppressions: Suppressions):
        self._suppressions = suppressions

    @route("POST", "/suppressions", access=FULL, native=True,
           op=Operation("Add a suppression", obj(email=STR, reason=STR), {201: RESOURCE}))
    async def create(self, request, caller: Caller):
        address = normal_form(read_json(request).get("email"))
        row = await self._suppressions.add(caller.tenant.id, address)
        if context_of(request).surface == NATIVE:
            return Reply(201, _full(row))
        return Reply(201, {"object": "suppression", "id": str(row["id"])})

    @route("GET", "/suppressions", access=FULL, native=True,
           op=Operation("List suppressions", responses={200: listing()}, query=(*PAGE, ("origin", STR))))
    async def list(self, request, caller: Caller):
        page = page_of(request.args, None)
        found, has_more = await self._suppressions.page(caller.tenant.id, page, _origin(request))
        shown = _full if context_of(request).surface == NATIVE else record
        return envelope([shown(row) for row in found], has_more)

    @route("GET", "/suppressions/<path:key>", access=FULL, op=Operation("Retrieve a suppression (id or address)"))
    async def retrieve(self, request, caller: Caller, key: str):
        row = await self._suppressions.get(caller.tenant.id, key)
        if row is None:
            raise NotFound(KIND)
        return _full(row)

    @route("DELETE", "/suppressions/<path:key>", access=FULL, native=True,
           op=Operation("Remove a suppression (id or address)", responses={200: DELETED},
                        native_responses={204: None}))
    async def delete(self, request, caller: Caller, key: str):
        row = await self._suppressions.remove(caller.tenant.id, key)
        if row is None:
            raise NotFound(KIND)
        if context_of(request).surface == NATIVE:
            return Reply(204)
        return {"object": "suppression", "id": str(row["id"]), "deleted": True}

    @route("POST", "/suppressions/batch/add", access=FULL,
           op=Operation("Add suppressions", obj(("emails",), emails={"type": "array", "items": STR}),
                        {201: obj(("data",), data={"type": "array"})}))
    async def batch_add(self, request, caller: Caller):
        addresses = batch_addresses(read_json(request).get("emails"))
        added = await self._suppressions.add_many(caller.tenant.id, addresses)
        return Reply(201, {"data": [{"object": "suppression", "id": str(row["id"])} for row in added]})

    @route("POST", "/suppressions/batch/remove", access=FULL,
           op=Operation("Remove suppressions (by address or by id)",
                        obj(emails={"type": "array", "items": STR},
                            ids={"type": "array", "items": UUID}),
                        {200: obj(("data",), data={"type": "array"})}))
    async def batch_remove(self, request, caller: Caller):
        addresses, ids = removal(read_json(request))
        gone = await self._suppressions.remove_many(caller.tenant.id, addresses, ids)
        return {"data": [{"object": "suppression", "id": str(row["id"]), "deleted": True} for row in gone]}
