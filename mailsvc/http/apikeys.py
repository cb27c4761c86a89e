"""API key endpoints: main ``/api-keys`` and native ``/v1/api-keys``."""

from __future__ import annotations

from mailsvc import timefmt
from mailsvc.app.apikeys import Caller, KeyRing
from mailsvc.domain.apikeys import key_name, new_key
from mailsvc.domain.errors import NotFound
from mailsvc.http.body import read_json
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, NATIVE, Reply, Router
from mailsvc.ids import parse_uuid


def _key_id(text: str):
    key_id = parse_uuid(text)
    if key_id is None:
        raise NotFound("API key")
    return key_id


def _listed(row: dict) -> dict:
    return {
        "id": str(row["id"]),
        "name": row["name"],
        "created_at": timefmt.resource(row["created_at"]),
        "last_used_at": timefmt.resource(row["last_used_at"]),
    }


def _native(row: dict) -> dict:
    return {
        "object": "api_key",
        **_listed(row),
        "permission": row["permission"],
        "domain_id": str(row["domain_id"]) if row["domain_id"] else None,
    }


def install(router: Router, keys: KeyRing) -> None:
    @router.route("/api-keys", "POST", access=FULL)
    async def create(request, caller: Caller):
        row, token = await keys.create(caller.tenant.id, new_key(read_json(request)))
        return {"object": "api_key", "id": str(row["id"]), "token": str(token)}

    @router.route("/api-keys", "GET", access=FULL)
    async def list_keys(request, caller: Caller):
        rows, has_more = await keys.list(caller.tenant.id, page_of(request.args, None))
        return envelope([_listed(row) for row in rows], has_more)

    @router.route("/api-keys/<key_id>", "PATCH", access=FULL)
    async def rename(request, caller: Caller, key_id: str):
        name = key_name(read_json(request).get("name"))
        row = await keys.rename(caller.tenant.id, _key_id(key_id), name)
        return {"object": "api_key", "id": str(row["id"])}

    @router.route("/api-keys/<key_id>", "DELETE", access=FULL)
    async def delete(request, caller: Caller, key_id: str):
        parsed = _key_id(key_id)
        await keys.revoke(caller.tenant.id, parsed)
        return {"object": "api_key", "id": str(parsed), "deleted": True}

    @router.route("/v1/api-keys", "POST", access=FULL, surface=NATIVE)
    async def native_create(request, caller: Caller):
        row, token = await keys.create(caller.tenant.id, new_key(read_json(request)))
        return Reply(201, {**_native(row), "token": str(token)})

    @router.route("/v1/api-keys", "GET", access=FULL, surface=NATIVE)
    async def native_list(request, caller: Caller):
        rows, has_more = await keys.list(caller.tenant.id, page_of(request.args, None))
        return envelope([_native(row) for row in rows], has_more)

    @router.route("/v1/api-keys/<key_id>", "DELETE", access=FULL, surface=NATIVE)
    async def native_delete(request, caller: Caller, key_id: str):
        await keys.revoke(caller.tenant.id, _key_id(key_id))
        return Reply(204)
