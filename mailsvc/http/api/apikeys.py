"""
API keys: main ``/api-keys`` and native ``/v1/api-keys``. A dashboard session (the same
handlers under ``/dashboard``) also sees who made each key (``created_by``): the main API's
list items keep the fields its SDKs know.
"""

from __future__ import annotations

from mailsvc import timefmt
from mailsvc.app.apikeys import Caller, KeyRing
from mailsvc.domain.apikeys import key_name, made_by, new_key
from mailsvc.domain.errors import NotFound
from mailsvc.http.body import read_json
from mailsvc.http.context import context_of
from mailsvc.http.errors import NATIVE
from mailsvc.http.operation import DELETED, PAGE, RESOURCE, STR, UUID, Operation, listing, obj
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, Reply, route
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


def _creator(row: dict) -> dict | None:
    """Who made a key: ``{"type": "operator" | "api"}``, or a user (``user_id`` null once removed); None: unknown."""
    if row["created_by"] is None:
        return None
    if row["created_by"] != "user":
        return {"type": row["created_by"]}
    user_id = row["created_by_user_id"]
    return {"type": "user", "user_id": str(user_id) if user_id else None, "email": row["created_by_email"]}


def _native(row: dict) -> dict:
    return {
        "object": "api_key",
        **_listed(row),
        "permission": row["permission"],
        "domain_id": str(row["domain_id"]) if row["domain_id"] else None,
    }


class ApiKeysResource:
    def __init__(self, keys: KeyRing):
        self._keys = keys

    @route("POST", "/api-keys", access=FULL, native=True,
           op=Operation("Create an API key", obj(("name",), name=STR, permission=STR, domain_id=UUID),
                        {200: obj(("id", "token"), id=UUID, token=STR)},
                        {201: obj(("id", "token"), id=UUID, token=STR)}))
    async def create(self, request, caller: Caller):
        row, token = await self._keys.create(caller.tenant.id, new_key(read_json(request)), made_by(caller.user_id),
                                             caller.actor)
        if context_of(request).surface == NATIVE:
            return Reply(201, {**_native(row), "token": str(token)})
        return {"object": "api_key", "id": str(row["id"]), "token": str(token)}

    @route("GET", "/api-keys", access=FULL, native=True,
           op=Operation("List API keys", responses={200: listing()}, query=PAGE))
    async def list(self, request, caller: Caller):
        rows, has_more = await self._keys.list(caller.tenant.id, page_of(request.args, None))
        shown = _native if context_of(request).surface == NATIVE else _listed
        if caller.session_id is not None:
            return envelope([{**shown(row), "created_by": _creator(row)} for row in rows], has_more)
        return envelope([shown(row) for row in rows], has_more)

    @route("PATCH", "/api-keys/<key_id>", access=FULL,
           op=Operation("Rename an API key", obj(("name",), name=STR), {200: RESOURCE}))
    async def rename(self, request, caller: Caller, key_id: str):
        name = key_name(read_json(request).get("name"))
        row = await self._keys.rename(caller.tenant.id, _key_id(key_id), name)
        return {"object": "api_key", "id": str(row["id"])}

    @route("DELETE", "/api-keys/<key_id>", access=FULL, native=True,
           op=Operation("Revoke an API key", responses={200: DELETED}, native_responses={204: None}))
    async def delete(self, request, caller: Caller, key_id: str):
        parsed = _key_id(key_id)
        await self._keys.revoke(caller.tenant.id, parsed, caller.actor)
        if context_of(request).surface == NATIVE:
            return Reply(204)
        return {"object": "api_key", "id": str(parsed), "deleted": True}
