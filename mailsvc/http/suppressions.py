"""
Suppression endpoints: main ``/suppressions`` (shapes of COMPAT.md §11, origins of the SPEC)
and native ``/v1/suppressions``. A path names a record by its id or by its address, which
may be percent-encoded (``%2F`` included, hence the ``path`` converter).
"""

from __future__ import annotations

from mailsvc.app import suppressions
from mailsvc.app.apikeys import Caller
from mailsvc.domain.errors import NotFound
from mailsvc.domain.suppression import batch_addresses, normal_form, origin_filter, removal
from mailsvc.http.body import read_json
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, NATIVE, Reply, Router
from mailsvc.store.database import Database

KIND = "Suppression"


def _full(row: dict) -> dict:
    return {"object": "suppression", **suppressions.record(row)}


def _origin(request) -> str | None:
    values = request.args.get(b"origin")
    return origin_filter(values[0].decode("utf-8", "replace") if values else None)


def install(router: Router, clock, db: Database) -> None:
    async def add_one(caller: Caller, request) -> dict:
        address = normal_form(read_json(request).get("email"))
        return await db.run(
            "add_suppression", suppressions.add, clock, caller.tenant.id, address, "manual"
        )

    async def listed(caller: Caller, request) -> tuple[list[dict], bool]:
        page = page_of(request.args, None)
        return await suppressions.list_page(db, caller.tenant.id, page, _origin(request))

    async def removed(caller: Caller, key: str) -> dict:
        row = await suppressions.remove(db, caller.tenant.id, key)
        if row is None:
            raise NotFound(KIND)
        return row

    @router.route("/suppressions", "POST", access=FULL)
    async def create(request, caller: Caller):
        row = await add_one(caller, request)
        return Reply(201, {"object": "suppression", "id": str(row["id"])})

    @router.route("/suppressions", "GET", access=FULL)
    async def list_suppressions(request, caller: Caller):
        found, has_more = await listed(caller, request)
        return envelope([suppressions.record(row) for row in found], has_more)

    @router.route("/suppressions/<path:key>", "GET", access=FULL)
    async def retrieve(request, caller: Caller, key: str):
        row = await suppressions.get(db, caller.tenant.id, key)
        if row is None:
            raise NotFound(KIND)
        return _full(row)

    @router.route("/suppressions/<path:key>", "DELETE", access=FULL)
    async def delete(request, caller: Caller, key: str):
        row = await removed(caller, key)
        return {"object": "suppression", "id": str(row["id"]), "deleted": True}

    @router.route("/suppressions/batch/add", "POST", access=FULL)
    async def batch_add(request, caller: Caller):
        addresses = batch_addresses(read_json(request).get("emails"))
        added = await db.run(
            "add_suppressions", suppressions.add_many, clock, caller.tenant.id, addresses, "manual"
        )
        return Reply(201, {"data": [{"object": "suppression", "id": str(row["id"])} for row in added]})

    @router.route("/suppressions/batch/remove", "POST", access=FULL)
    async def batch_remove(request, caller: Caller):
        addresses, ids = removal(read_json(request))
        gone = await suppressions.remove_many(db, caller.tenant.id, addresses, ids)
        return {"data": [{"object": "suppression", "id": str(row["id"]), "deleted": True} for row in gone]}

    @router.route("/v1/suppressions", "POST", access=FULL, surface=NATIVE)
    async def native_create(request, caller: Caller):
        return Reply(201, _full(await add_one(caller, request)))

    @router.route("/v1/suppressions", "GET", access=FULL, surface=NATIVE)
    async def native_list(request, caller: Caller):
        found, has_more = await listed(caller, request)
        return envelope([_full(row) for row in found], has_more)

    @router.route("/v1/suppressions/<path:key>", "DELETE", access=FULL, surface=NATIVE)
    async def native_delete(request, caller: Caller, key: str):
        await removed(caller, key)
        return Reply(204)
