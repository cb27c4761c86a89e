"""
Broadcasts: main ``/broadcasts`` (docs/contract/main-api.md, "Resources": create
answers 200) and native ``/v1/broadcasts``, which answers a write with the whole
broadcast and a delete with 204. ``POST /broadcasts/{id}/preview`` (absent from the hosted
API) renders the message for a contact, for the UI.
"""

from __future__ import annotations

from mailsvc.app.apikeys import Caller
from mailsvc.app.broadcasts import Broadcasts
from mailsvc.http.baseurl import PublicUrl
from mailsvc.http.body import read_json
from mailsvc.http.context import context_of
from mailsvc.http.errors import NATIVE
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, TEMPLATE_BODY_LIMIT, Reply, route


class BroadcastsResource:
    def __init__(self, broadcasts: Broadcasts, public_url: str = ""):
        self._broadcasts = broadcasts
        #: The unsubscribe links' base (``http.public_url``, else where the sender reached this service).
        self._public_url = PublicUrl(public_url)

    async def _written(self, request, caller: Caller, row: dict, main: dict | None = None) -> Reply:
        if context_of(request).surface == NATIVE:
            return Reply(200, await self._broadcasts.get(caller.tenant.id, str(row["id"])))
        return Reply(200, main if main is not None else {"object": "broadcast", "id": str(row["id"])})

    @route("POST", "/broadcasts", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT,
           multi_line=("html", "text"))
    async def create(self, request, caller: Caller):
        row = await self._broadcasts.create(caller.tenant, read_json(request), self._public_url.of(request))
        return await self._written(request, caller, row)

    @route("GET", "/broadcasts", access=FULL, native=True)
    async def list(self, request, caller: Caller):
        items, has_more = await self._broadcasts.list(caller.tenant.id, page_of(request.args, None))
        return envelope(items, has_more)

    @route("GET", "/broadcasts/<broadcast_id>", access=FULL, native=True)
    async def retrieve(self, request, caller: Caller, broadcast_id: str):
        return await self._broadcasts.get(caller.tenant.id, broadcast_id)

    @route("PATCH", "/broadcasts/<broadcast_id>", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT,
           multi_line=("html", "text"))
    async def update(self, request, caller: Caller, broadcast_id: str):
        row = await self._broadcasts.update(caller.tenant.id, broadcast_id, read_json(request))
        return await self._written(request, caller, row)

    @route("DELETE", "/broadcasts/<broadcast_id>", access=FULL, native=True)
    async def delete(self, request, caller: Caller, broadcast_id: str):
        gone = await self._broadcasts.delete(caller.tenant.id, broadcast_id)
        if context_of(request).surface == NATIVE:
            return Reply(204)
        return {"object": "broadcast", "id": str(gone), "deleted": True}

    @route("POST", "/broadcasts/<broadcast_id>/send", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT)
    async def send(self, request, caller: Caller, broadcast_id: str):
        row = await self._broadcasts.send(caller.tenant.id, broadcast_id, read_json(request),
                                          self._public_url.of(request))
        return await self._written(request, caller, row, {"id": str(row["id"])})

    @route("POST", "/broadcasts/<broadcast_id>/cancel", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT)
    async def cancel(self, request, caller: Caller, broadcast_id: str):
        row = await self._broadcasts.cancel(caller.tenant.id, broadcast_id)
        return await self._written(request, caller, row)

    @route("POST", "/broadcasts/<broadcast_id>/duplicate", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT)
    async def duplicate(self, request, caller: Caller, broadcast_id: str):
        row = await self._broadcasts.duplicate(caller.tenant.id, broadcast_id)
        return await self._written(request, caller, row)

    @route("POST", "/broadcasts/<broadcast_id>/preview", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT)
    async def preview(self, request, caller: Caller, broadcast_id: str):
        return await self._broadcasts.preview(caller.tenant.id, broadcast_id, read_json(request))
