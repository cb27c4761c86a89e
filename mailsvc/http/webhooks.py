"""Webhook endpoints: main ``/webhooks`` (COMPAT.md §5) and native ``/v1/webhooks``."""

from __future__ import annotations

from mailsvc import timefmt
from mailsvc.app.apikeys import Caller
from mailsvc.app.webhooks import WebhookRegistry
from mailsvc.domain.errors import NotFound
from mailsvc.domain.webhooks import MAIN_NAMING, NATIVE_NAMING, named, new_webhook, webhook_change
from mailsvc.http.body import read_json
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, NATIVE, Reply, Router
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


def install(router: Router, registry: WebhookRegistry) -> None:
    @router.route("/webhooks", "POST", access=FULL)
    async def create(request, caller: Caller):
        row, secret = await registry.create(caller.tenant.id, new_webhook(read_json(request)))
        return Reply(201, {"object": "webhook", **_listed(row), "signing_secret": secret})

    @router.route("/webhooks", "GET", access=FULL)
    async def list_webhooks(request, caller: Caller):
        found, has_more = await registry.list(caller.tenant.id, page_of(request.args, None))
        return envelope([_listed(row) for row in found], has_more)

    @router.route("/webhooks/<webhook_id>", "GET", access=FULL)
    async def retrieve(request, caller: Caller, webhook_id: str):
        row, secret = await registry.get(caller.tenant.id, _webhook_id(webhook_id))
        return {"object": "webhook", **_listed(row), "signing_secret": secret}

    @router.route("/webhooks/<webhook_id>", "PATCH", access=FULL)
    async def update(request, caller: Caller, webhook_id: str):
        parsed = _webhook_id(webhook_id)
        row = await registry.update(caller.tenant.id, parsed, webhook_change(read_json(request)))
        return {"object": "webhook", "id": str(row["id"])}

    @router.route("/webhooks/<webhook_id>", "DELETE", access=FULL)
    async def delete(request, caller: Caller, webhook_id: str):
        parsed = _webhook_id(webhook_id)
        await registry.delete(caller.tenant.id, parsed)
        return {"object": "webhook", "id": str(parsed), "deleted": True}

    @router.route("/webhooks/<webhook_id>/signing-secret/rotate", "POST", access=FULL)
    async def rotate(request, caller: Caller, webhook_id: str):
        parsed = _webhook_id(webhook_id)
        secret = await registry.rotate(caller.tenant.id, parsed)
        return {"object": "webhook", "id": str(parsed), "signing_secret": secret}

    @router.route("/v1/webhooks", "POST", access=FULL, surface=NATIVE)
    async def native_create(request, caller: Caller):
        row, secret = await registry.create(caller.tenant.id, new_webhook(read_json(request), NATIVE_NAMING))
        return Reply(201, {**_native(row), "signing_secret": secret})

    @router.route("/v1/webhooks", "GET", access=FULL, surface=NATIVE)
    async def native_list(request, caller: Caller):
        found, has_more = await registry.list(caller.tenant.id, page_of(request.args, None))
        return envelope([_native(row) for row in found], has_more)

    @router.route("/v1/webhooks/<webhook_id>", "DELETE", access=FULL, surface=NATIVE)
    async def native_delete(request, caller: Caller, webhook_id: str):
        await registry.delete(caller.tenant.id, _webhook_id(webhook_id))
        return Reply(204)
