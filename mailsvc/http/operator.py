"""
The operator API (``/admin/v1``, the operator token): this node, the tenants, the adaptive
shaping's destinations, and the metrics. The tenant's own usage (``/v1/usage``), the waitlist
and ``/healthz`` have their own modules.
"""

from __future__ import annotations

from mailsvc import timefmt
from mailsvc.app.accounts import Accounts
from mailsvc.app.audit import AuditLog
from mailsvc.app.operator import Destinations
from mailsvc.domain.tenant import Tenant
from mailsvc.http.body import read_json
from mailsvc.http.errors import NATIVE, not_found, validation
from mailsvc.http.operation import INT, NULLABLE_STR, NUMBER, STR, UUID, Operation, obj
from mailsvc.http.router import OPERATOR, Operator, Reply, route
from mailsvc.http.schemas import TENANT, TENANT_FIELDS, USAGE
from mailsvc.metrics import CONTENT_TYPE, Metrics

DESTINATION_DEFAULT = obj(("object", "pattern", "concurrency", "rate_per_sec"),
                          object={"const": "destination_default"}, pattern=STR, concurrency=INT, rate_per_sec=NUMBER)


def tenant_json(tenant: Tenant) -> dict:
    return {
        "object": "tenant",
        "id": str(tenant.id),
        "name": tenant.name,
        "plan": tenant.plan,
        "sandbox": tenant.sandbox,
        "status": tenant.status,
        "status_reason": tenant.status_reason,
        "daily_quota": tenant.daily_quota,
        "monthly_quota": tenant.monthly_quota,
        "max_domains": tenant.max_domains,
        "send_rate_per_sec": tenant.send_rate_per_sec,
        "api_rate_per_sec": tenant.api_rate_per_sec,
        "delivery_mode": tenant.delivery_mode,
        "created_at": timefmt.resource(tenant.created_at),
        "updated_at": timefmt.resource(tenant.updated_at),
    }


def _epoch(seconds: float | None) -> str | None:
    return None if seconds is None else timefmt.iso(timefmt.from_seconds(seconds))


class OperatorResource:
    def __init__(self, accounts: Accounts, destinations: Destinations, metrics: Metrics,
                 audit_log: AuditLog, node_info: dict | None = None):
        self._accounts = accounts
        self._audit_log = audit_log
        self._destinations = destinations
        self._metrics = metrics
        self._node_info = node_info if node_info is not None else {}

    @route("GET", "/admin/v1", access=OPERATOR, surface=NATIVE,
           op=Operation("This node: version, roles, the onion address when published",
                        responses={200: obj(("object", "version", "roles", "onion"), object={"const": "node"},
                                            version=STR, roles={"type": "array", "items": STR}, onion=NULLABLE_STR)}))
    async def node(self, request, _):
        """This node: its version and roles, and its onion address once published (tor.onion)."""
        return {"object": "node", **self._node_info}

    @route("GET", "/metrics", access=OPERATOR, surface=NATIVE,
           op=Operation("Prometheus metrics", responses={200: None}, content_type="text/plain"))
    async def render_metrics(self, request, _):
        return Reply(200, self._metrics.render(), CONTENT_TYPE.encode("ascii"))

    # -- tenants ---------------------------------------------------------------------------

    @route("POST", "/admin/v1/tenants", access=OPERATOR, surface=NATIVE,
           op=Operation("Create a tenant and its first API key",
                        obj(("name",), id=UUID, **TENANT_FIELDS),
                        {201: {**TENANT, "required": [*TENANT["required"], "api_key"]}}, errors=(409,)))
    async def create_tenant(self, request, operator: Operator):
        """Audited: it hands out a full-access key."""
        tenant, key, token = await self._accounts.create_tenant(
            read_json(request), audit=self._audit_log.entry(operator.name, "tenant.create"))
        api_key = {"object": "api_key", "id": str(key["id"]), "name": key["name"],
                   "permission": key["permission"], "token": str(token)}
        return Reply(201, {**tenant_json(tenant), "api_key": api_key})

    @route("GET", "/admin/v1/tenants/<tenant_id>", access=OPERATOR, surface=NATIVE,
           op=Operation("Retrieve a tenant", responses={200: TENANT}))
    async def get_tenant(self, request, _, tenant_id: str):
        return tenant_json(await self._accounts.tenant(tenant_id))

    @route("PATCH", "/admin/v1/tenants/<tenant_id>", access=OPERATOR, surface=NATIVE,
           op=Operation("Update a tenant", obj(**TENANT_FIELDS), {200: TENANT}))
    async def update_tenant(self, request, operator: Operator, tenant_id: str):
        """Audited (a suspension and its reason above all): who changed which fields to what."""
        body = read_json(request)
        tenant = await self._accounts.update_tenant(
            tenant_id, body, self._audit_log.entry(operator.name, "tenant.update", changes=body))
        return tenant_json(tenant)

    @route("GET", "/admin/v1/tenants/<tenant_id>/usage", access=OPERATOR, surface=NATIVE,
           op=Operation("A tenant's usage against its quotas", responses={200: USAGE}))
    async def tenant_usage(self, request, _, tenant_id: str):
        return await self._accounts.usage(await self._accounts.tenant(tenant_id))

    # -- adaptive shaping ----------------------------------------------------------------

    @route("GET", "/admin/v1/destinations", access=OPERATOR, surface=NATIVE,
           op=Operation(
               "Adaptive shaping: the current limits of every throttled destination, and the starting limits",
               responses={200: obj(("object", "source", "data", "defaults"), object={"const": "list"}, source=STR,
                            data={"type": "array", "items": obj(
                                ("object", "destination", "concurrency", "rate_per_sec", "throttled_at", "changed_at"),
                                object={"const": "destination"}, destination=STR, concurrency=INT, rate_per_sec=NUMBER,
                                throttled_at=NULLABLE_STR, changed_at=NULLABLE_STR)},
                            defaults={"type": "array", "items": DESTINATION_DEFAULT})}))
    async def destinations(self, request, _):
        """The current limits of every throttled destination, and the operator's starting limits."""
        rows = await self._destinations.limits()
        defaults = await self._destinations.defaults()
        return {
            "object": "list",
            "source": self._destinations.source,
            "data": [{"object": "destination", "destination": r["destination"], "concurrency": r["concurrency"],
                      "rate_per_sec": round(r["rate_per_sec"], 3),
                      "throttled_at": _epoch(r["throttled_at"]), "changed_at": _epoch(r["changed_at"])}
                     for r in rows],
            "defaults": [{"object": "destination_default", "pattern": r["pattern"], "concurrency": r["concurrency"],
                          "rate_per_sec": r["rate_per_sec"]} for r in defaults],
        }

    @route("PUT", "/admin/v1/destinations/defaults/<pattern>", access=OPERATOR, surface=NATIVE,
           op=Operation(
               "Set the starting limits of a host name or domain suffix",
               obj(("concurrency", "rate_per_sec"), concurrency={"type": "integer", "minimum": 1, "maximum": 1000},
                   rate_per_sec={"type": "number", "exclusiveMinimum": 0, "maximum": 100000}),
               {200: DESTINATION_DEFAULT}))
    async def set_destination_default(self, request, operator: Operator, pattern: str):
        pattern = pattern.strip().lower().rstrip(".")
        if not pattern or len(pattern) > 253 or any(c.isspace() or c in "/*" for c in pattern):
            raise validation("pattern: a host name or a domain suffix", "pattern")
        body = read_json(request)
        concurrency, rate = body.get("concurrency"), body.get("rate_per_sec")
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or not 1 <= concurrency <= 1000:
            raise validation("concurrency: an integer from 1 to 1000", "concurrency")
        if not isinstance(rate, int | float) or isinstance(rate, bool) or not 0 < rate <= 100000:
            raise validation("rate_per_sec: a number over 0, at most 100000", "rate_per_sec")
        await self._destinations.set_default(pattern, concurrency, float(rate), self._audit_log.entry(
            operator.name, "destination_default.set", pattern=pattern, concurrency=concurrency,
            rate_per_sec=float(rate)))
        return {"object": "destination_default", "pattern": pattern, "concurrency": concurrency,
                "rate_per_sec": float(rate)}

    @route("DELETE", "/admin/v1/destinations/defaults/<pattern>", access=OPERATOR, surface=NATIVE,
           op=Operation(
               "Remove a destination's starting limits",
               responses={200: obj(("object", "pattern", "deleted"), object={"const": "destination_default"},
                                   pattern=STR, deleted={"const": True})}))
    async def delete_destination_default(self, request, operator: Operator, pattern: str):
        pattern = pattern.strip().lower()
        if not await self._destinations.delete_default(
                pattern, self._audit_log.entry(operator.name, "destination_default.delete", pattern=pattern)):
            raise not_found("destination default")
        return {"object": "destination_default", "pattern": pattern, "deleted": True}

    @route("DELETE", "/admin/v1/destinations/<destination>", access=OPERATOR, surface=NATIVE,
           op=Operation(
               "Reset a destination's limits to the starting ones",
               responses={200: obj(("object", "destination", "deleted"), object={"const": "destination"},
                                   destination=STR, deleted={"const": True})}))
    async def reset_destination(self, request, operator: Operator, destination: str):
        """Back to the starting limits (every node reads it within 15 s)."""
        destination = destination.strip().lower()
        if not await self._destinations.reset(
                destination, self._audit_log.entry(operator.name, "destination.reset", destination=destination)):
            raise not_found("destination")
        return {"object": "destination", "destination": destination, "deleted": True}
