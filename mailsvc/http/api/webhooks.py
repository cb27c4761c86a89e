"""Webhooks: main ``/webhooks`` (docs/webhooks.md) and native ``/v1/webhooks`` (native event names)."""

from __future__ import annotations

from mailsvc import timefmt
from mailsvc.app.apikeys import Caller
from mailsvc.app.webhooks import WebhookRegistry
from mailsvc.domain.errors import NotFound
from mailsvc.domain.webhooks import MAIN_NAMING, NATIVE_NAMING, named, new_webhook, webhook_change
from mailsvc.http.body import read_json
from mailsvc.http.context import context_of
from mailsvc.http.errors import NATIVE
from mailsvc.http.operation import PAGE, RESOURCE, STR, UUID, Operation, listing, obj
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, Reply, route
from mailsvc.ids import parse_uuid


def _webhook_id(text: str):
    webhook_id = parse_uuid(text)
    if webhook_id is None:
        raise NotFound("Webhook")
    return webhook_id


def _listed(row: dict, naming: str = MAIN_NAMING) -> dict:
    return {
        "id": str(row["id"]),
        "endpoint": row["endpoint"],
        "events": named(row["events"], naming),
        "status": row["status"],
        "created_at": timefmt.resource(row["created_at"]),
    }


def _native(row: dict) -> dict:
    return {"object": "webhook", **_listed(row, NATIVE_NAMING)}


class WebhooksResource:
    def __init__(self, registry: WebhookRegistry):
        self._registry = registry

    @route("POST", "/webhooks", access=FULL, native=True,
           op=Operation("Create a webhook", obj(("endpoint", "events"), endpoint=STR,
                                                events={"type": "array", "items": STR}),
                        {201: obj(("id", "signing_secret"), id=UUID, signing_secret=STR)}))
    async def create(self, request, caller: Caller):
        native = context_of(request).surface == NATIVE
        asked = new_webhook(read_json(request), NATIVE_NAMING) if native else new_webhook(read_json(request))
        row, secret = await self._registry.create(caller.tenant.id, asked)
        shown = _native(row) if native else {"object": "webhook", **_listed(row)}
        return Reply(201, {**shown, "signing_secret": secret})

    @route("GET", "/webhooks", access=FULL, native=True,
           op=Operation("List webhooks", responses={200: listing()}, query=PAGE))
    async def list(self, request, caller: Caller):
        found, has_more = await self._registry.list(caller.tenant.id, page_of(request.args, None))
        shown = _native if context_of(request).surface == NATIVE else _listed
        return envelope([shown(row) for row in found], has_more)

    @route("GET", "/webhooks/<webhook_id>", access=FULL,
           op=Operation("Retrieve a webhook", responses={200: obj(("id",), id=UUID)}))
    async def retrieve(self, request, caller: Caller, webhook_id: str):
        row, secret = await self._registry.get(caller.tenant.id, _webhook_id(webhook_id))
        return {"object": "webhook", **_listed(row), "signing_secret": secret}

    @route("PATCH", "/webhooks/<webhook_id>", access=FULL,
           op=Operation("Update a webhook", obj(endpoint=STR, events={"type": "array", "items": STR},
                                                status={"enum": ["enabled", "disabled"]}),
                        {200: RESOURCE}))
    async def update(self, request, caller: Caller, webhook_id: str):
        parsed = _webhook_id(webhook_id)
        row = await self._registry.update(caller.tenant.id, parsed, webhook_change(read_json(request)))
        return {"object": "webhook", "id": str(row["id"])}

    @route("DELETE", "/webhooks/<webhook_id>", access=FULL, native=True,
           op=Operation("Delete a webhook", responses={200: RESOURCE}, native_responses={204: None}))
    async def delete(self, request, caller: Caller, webhook_id: str):
        parsed = _webhook_id(webhook_id)
        await self._registry.delete(caller.tenant.id, parsed)
        if context_of(request).surface == NATIVE:
            return Reply(204)
        return {"object": "webhook", "id": str(parsed), "deleted": True}

    @route("POST", "/webhooks/<webhook_id>/signing-secret/rotate", access=FULL,
           op=Operation("Rotate a webhook's signing secret"))
    async def rotate(self, request, caller: Caller, webhook_id: str):
        parsed = _webhook_id(webhook_id)
        secret = await self._registry.rotate(caller.tenant.id, parsed)
        return {"object": "webhook", "id": str(parsed), "signing_secret": secret}
