"""Domains: main ``/domains`` (docs/contract/main-api.md, "Resources") and native ``/v1/domains``."""

from __future__ import annotations

from mailsvc import timefmt
from mailsvc.app.apikeys import Caller
from mailsvc.app.dnssetup import CloudflareSetup
from mailsvc.app.domains import Domains, DomainView
from mailsvc.domain.errors import Invalid, NotFound
from mailsvc.http.body import read_json
from mailsvc.http.context import context_of
from mailsvc.http.errors import NATIVE
from mailsvc.http.operation import BOOL, DELETED, PAGE, RESOURCE, STR, UUID, Operation, listing, obj
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, Reply, route
from mailsvc.http.schemas import DMARC
from mailsvc.ids import parse_uuid

CAPABILITIES = {"sending": "enabled", "receiving": "disabled"}


def _domain_id(text: str):
    domain_id = parse_uuid(text)
    if domain_id is None:
        raise NotFound("Domain")
    return domain_id


def _item(row: dict) -> dict:
    """A list item: no ``object``, no ``records`` (docs/contract/main-api.md, "Resources")."""
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


class DomainsResource:
    def __init__(self, domains: Domains, setup_cloudflare: CloudflareSetup):
        self._domains = domains
        self._setup_cloudflare = setup_cloudflare

    @route("POST", "/domains", access=FULL, native=True,
           op=Operation("Add a sending domain", obj(("name",), name=STR, custom_return_path=STR, region=STR),
                        {201: obj(("id", "name", "status", "records"), id=UUID, name=STR, status=STR,
                                  records={"type": "array"})}))
    async def create(self, request, caller: Caller):
        view = await self._domains.create(caller.tenant.id, read_json(request), caller.actor)
        if context_of(request).surface == NATIVE:
            return Reply(201, {"object": "domain", **_full(view)})
        return Reply(201, _full(view))

    @route("GET", "/domains", access=FULL, native=True,
           op=Operation("List domains", responses={200: listing()}, query=PAGE))
    async def list(self, request, caller: Caller):
        rows, has_more = await self._domains.list(caller.tenant.id, page_of(request.args, None))
        if context_of(request).surface == NATIVE:
            return envelope([{"object": "domain", **_item(row)} for row in rows], has_more)
        return envelope([_item(row) for row in rows], has_more)

    @route("GET", "/domains/<domain_id>", access=FULL, native=True,
           op=Operation("Retrieve a domain", responses={200: obj(("id", "name", "status"))}))
    async def get(self, request, caller: Caller, domain_id: str):
        return {"object": "domain", **_full(await self._domains.get(caller.tenant.id, _domain_id(domain_id)))}

    @route("PATCH", "/domains/<domain_id>", access=FULL,
           op=Operation("Update a domain", obj(tls={"enum": ["opportunistic", "enforced"]},
                                               click_tracking=BOOL, open_tracking=BOOL), {200: RESOURCE}))
    async def update(self, request, caller: Caller, domain_id: str):
        row = await self._domains.update(caller.tenant.id, _domain_id(domain_id), read_json(request))
        return {"object": "domain", "id": str(row["id"])}

    @route("DELETE", "/domains/<domain_id>", access=FULL, native=True,
           op=Operation("Delete a domain", responses={200: DELETED}, native_responses={204: None}))
    async def delete(self, request, caller: Caller, domain_id: str):
        parsed = _domain_id(domain_id)
        await self._domains.delete(caller.tenant.id, parsed, caller.actor)
        if context_of(request).surface == NATIVE:
            return Reply(204)
        return {"object": "domain", "id": str(parsed), "deleted": True}

    @route("GET", "/domains/<domain_id>/dmarc", access=FULL, native=True,
           op=Operation("What receivers' DMARC aggregate reports say of the domain's mail",
                        responses={200: DMARC}, query=(("days", {"type": "integer", "minimum": 1,
                                                          "maximum": 366}),)))
    async def dmarc(self, request, caller: Caller, domain_id: str):
        """An extension of the main surface: DMARC aggregate reports read back."""
        raw = (request.args.get(b"days") or [b"30"])[0]
        if not raw.isdigit() or not 1 <= int(raw) <= 366:
            raise Invalid("days", "days must be a number of days from 1 to 366")
        return await self._domains.dmarc(caller.tenant.id, _domain_id(domain_id), int(raw))

    @route("POST", "/domains/<domain_id>/verify", access=FULL, native=True,
           op=Operation("Check a domain's DNS now", responses={200: RESOURCE}, native_responses={202: RESOURCE}))
    async def verify(self, request, caller: Caller, domain_id: str):
        row = await self._domains.verify(caller.tenant.id, _domain_id(domain_id), caller.actor)
        if context_of(request).surface == NATIVE:
            return Reply(202, {"object": "domain", "id": str(row["id"]), "status": row["status"]})
        return {"object": "domain", "id": str(row["id"])}

    @route("POST", "/domains/<domain_id>/dns-provider/cloudflare", access=FULL,
           op=Operation(
               "Write the domain's records into a Cloudflare zone", obj(("api_token",), api_token=STR),
               {200: obj(("object", "zone", "records"), object={"const": "dns_setup"}, zone=STR,
                         records={"type": "array"})}, errors=(502,)))
    async def setup_cloudflare(self, request, caller: Caller, domain_id: str):
        parsed = _domain_id(domain_id)
        token = read_json(request).get("api_token")
        if not isinstance(token, str) or not token.strip():
            raise Invalid("api_token", "api_token is required and must be a non-empty string")
        return await self._setup_cloudflare(caller.tenant.id, parsed, token.strip())
