"""Domain endpoints: main ``/domains`` (COMPAT.md §3 shapes) and native ``/v1/domains``."""

from __future__ import annotations

from mailsvc import timefmt
from mailsvc.app.apikeys import Caller
from mailsvc.app.domains import Domains, DomainView
from mailsvc.domain.errors import Invalid, NotFound
from mailsvc.http.body import read_json
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, NATIVE, Reply, Router
from mailsvc.ids import parse_uuid

CAPABILITIES = {"sending": "enabled", "receiving": "disabled"}


def _domain_id(text: str):
    domain_id = parse_uuid(text)
    if domain_id is None:
        raise NotFound("Domain")
    return domain_id


def _item(row: dict) -> dict:
    """A list item: no ``object``, no ``records`` (COMPAT.md §3)."""
    return {
        "id": str(row["id"]),
        "name": row["name"],
        "status": row["status"],
        "created_at": timefmt.resource(row["created_at"]),
        "region": row["region"],
        "open_tracking": False,
        "click_tracking": False,
        "tls": row["tls"],
        "capabilities": dict(CAPABILITIES),
    }


def _record(record, status: str) -> dict:
    out = {
        "record": record.record,
        "name": record.name,
        "type": record.type,
        "ttl": "Auto",
        "status": status,
        "value": record.value,
    }
    if record.priority is not None:
        out["priority"] = record.priority
    return out


def _full(view: DomainView) -> dict:
    return {**_item(view.row), "records": [_record(r, status) for r, status in view.records]}


def install(router: Router, domains: Domains) -> None:
    @router.route("/domains", "POST", access=FULL)
    async def create(request, caller: Caller):
        view = await domains.create(caller.tenant.id, read_json(request))
        return Reply(201, _full(view))

    @router.route("/domains", "GET", access=FULL)
    async def list_domains(request, caller: Caller):
        rows, has_more = await domains.list(caller.tenant.id, page_of(request.args, None))
        return envelope([_item(row) for row in rows], has_more)

    @router.route("/domains/<domain_id>", "GET", access=FULL)
    async def get(request, caller: Caller, domain_id: str):
        return {"object": "domain", **_full(await domains.get(caller.tenant.id, _domain_id(domain_id)))}

    @router.route("/domains/<domain_id>", "PATCH", access=FULL)
    async def update(request, caller: Caller, domain_id: str):
        row = await domains.update(caller.tenant.id, _domain_id(domain_id), read_json(request))
        return {"object": "domain", "id": str(row["id"])}

    @router.route("/domains/<domain_id>", "DELETE", access=FULL)
    async def delete(request, caller: Caller, domain_id: str):
        parsed = _domain_id(domain_id)
        await domains.delete(caller.tenant.id, parsed)
        return {"object": "domain", "id": str(parsed), "deleted": True}

    @router.route("/domains/<domain_id>/verify", "POST", access=FULL)
    async def verify(request, caller: Caller, domain_id: str):
        row = await domains.verify(caller.tenant.id, _domain_id(domain_id))
        return {"object": "domain", "id": str(row["id"])}

    @router.route("/domains/<domain_id>/dns-provider/cloudflare", "POST", access=FULL)
    async def setup_cloudflare(request, caller: Caller, domain_id: str):
        parsed = _domain_id(domain_id)
        token = read_json(request).get("api_token")
        if not isinstance(token, str) or not token.strip():
            raise Invalid("api_token", "api_token is required and must be a non-empty string")
        return await domains.setup_cloudflare(caller.tenant.id, parsed, token.strip())

    @router.route("/v1/domains", "POST", access=FULL, surface=NATIVE)
    async def native_create(request, caller: Caller):
        view = await domains.create(caller.tenant.id, read_json(request))
        return Reply(201, {"object": "domain", **_full(view)})

    @router.route("/v1/domains", "GET", access=FULL, surface=NATIVE)
    async def native_list(request, caller: Caller):
        rows, has_more = await domains.list(caller.tenant.id, page_of(request.args, None))
        return envelope([{"object": "domain", **_item(row)} for row in rows], has_more)

    @router.route("/v1/domains/<domain_id>", "GET", access=FULL, surface=NATIVE)
    async def native_get(request, caller: Caller, domain_id: str):
        return {"object": "domain", **_full(await domains.get(caller.tenant.id, _domain_id(domain_id)))}

    @router.route("/v1/domains/<domain_id>", "DELETE", access=FULL, surface=NATIVE)
    async def native_delete(request, caller: Caller, domain_id: str):
        await domains.delete(caller.tenant.id, _domain_id(domain_id))
        return Reply(204)

    @router.route("/v1/domains/<domain_id>/verify", "POST", access=FULL, surface=NATIVE)
    async def native_verify(request, caller: Caller, domain_id: str):
        row = await domains.verify(caller.tenant.id, _domain_id(domain_id))
        return Reply(202, {"object": "domain", "id": str(row["id"]), "status": row["status"]})
