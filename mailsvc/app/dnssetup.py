"""
A sending domain's DNS provider set-up: its records written into the tenant's Cloudflare zone
(each record created, updated or left as it is, as ``domain.dnsplan`` decides), then a check.
"""

from __future__ import annotations

import math
import uuid

from mailsvc.app.domains import Domains
from mailsvc.dnsprov.cloudflare import Cloudflare, ProviderError, Unavailable
from mailsvc.domain import dnsplan
from mailsvc.domain.domains import registered_domain
from mailsvc.domain.errors import DnsProviderFailed, RateLimited
from mailsvc.store import domains as store
from mailsvc.store.database import Database

#: DNS set-ups per minute per account (docs/contract/main-api.md, "Limits").
SETUPS_PER_MINUTE = 10


class CloudflareSetup:
    def __init__(self, clock, db: Database, domains: Domains, cloudflare: Cloudflare, spf_include: str):
        self._clock = clock
        self._db = db
        self._domains = domains
        self._cloudflare = cloudflare
        self._spf_include = spf_include

    async def __call__(self, tenant_id: uuid.UUID, domain_id: uuid.UUID, token: str) -> dict:
        """Write the domain's records into its Cloudflare zone, then plan a check."""
        try:
            return await self._setup(tenant_id, domain_id, token)
        except ProviderError as e:
            raise DnsProviderFailed(e.name, e.message, unavailable=isinstance(e, Unavailable)) from None

    async def _setup(self, tenant_id: uuid.UUID, domain_id: uuid.UUID, token: str) -> dict:
        view = await self._domains.get(tenant_id, domain_id)
        wait = await self._db.run(
            "take_dns_setup", store.take_setup, tenant_id, self._clock.seconds(), SETUPS_PER_MINUTE, 60
        )
        if wait is not None:
            raise RateLimited(f"Too many DNS set-ups: at most {SETUPS_PER_MINUTE} a minute.", max(1, math.ceil(wait)))
        name = view.row["name"]
        records, dkim_keys = self._domains.records(view.row, await store.keys_of(self._db, domain_id))

        session = self._cloudflare.session(token)
        await session.verify_token()
        zone_id, zone_name = await session.find_zone(_zones_around(name))
        existing = {}
        for fqdn in dict.fromkeys(r.fqdn(name) for r in records):
            existing[fqdn] = await session.records(zone_id, fqdn)
        steps = dnsplan.plan(name, records, dkim_keys, existing, self._spf_include)
        for step in steps:
            if step.action == "created":
                await session.create(zone_id, step.type, step.name, step.content, step.priority)
            elif step.action == "updated":
                assert step.record_id is not None  # an update names the record it replaces
                await session.update(zone_id, step.record_id, step.content)
        await self._domains.verify(tenant_id, domain_id)
        return {"object": "dns_setup", "zone": zone_name, "records": [s.as_dict() for s in steps]}


def _zones_around(name: str) -> list[str]:
    """``name`` and its parents down to the registered domain: where its zone may start."""
    top = registered_domain(name)
    labels = name.split(".")
    candidates = [".".join(labels[i:]) for i in range(len(labels))]
    return candidates[: candidates.index(top) + 1] if top in candidates else [name]
